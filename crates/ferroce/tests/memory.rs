//! Registered memory through the API over loopback: ranged and read-only
//! access, buffers registered without a copy and given back, and the
//! application holding one region while the engine serves another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, Error, Mtu, ProtectionDomain, QpInitAttr,
    QpType, QueuePair, SendOp, SendWr, WcStatus, WorkCompletion,
};

fn wait(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut v = Vec::new();
    while v.len() < n {
        v.extend(cq.poll(n - v.len()).unwrap());
        assert!(Instant::now() < deadline, "only {} of {n}", v.len());
    }
    v
}

fn all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
}

struct Dev {
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
}

fn dev(ip: &str) -> Dev {
    let ctx = Context::open(ip.parse().unwrap()).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(4096).unwrap();
    Dev { ctx, pd, cq }
}

/// An RC QP on each device, connected to each other.
fn connect(a: &Dev, b: &Dev) -> (QueuePair, QueuePair) {
    let mk = |d: &Dev| {
        let mut attr = QpInitAttr::new(QpType::Rc, &d.cq, &d.cq);
        attr.max_send_wr = 1024;
        d.pd.create_qp(&attr).unwrap()
    };
    let (qa, qb) = (mk(a), mk(b));
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    qa.connect(&qb.endpoint(), &opts).unwrap();
    qb.connect(&qa.endpoint(), &opts).unwrap();
    (qa, qb)
}

/// A WRITE to `remote` from `offset` on (to the region's end).
fn write(remote: &ferroce::MemoryRegion, offset: u64) -> SendOp {
    let len = remote.len() as u64 - offset;
    SendOp::Write {
        remote: remote.remote().at(offset, len).unwrap(),
    }
}

#[test]
fn ranged_access_and_its_errors() {
    let d = dev("127.0.0.171");
    let mr = d.pd.reg_mr(4096, all()).unwrap();
    mr.with_range_mut(100, 4, |b| b.copy_from_slice(&[1, 2, 3, 4]))
        .unwrap();
    let sum: u32 = mr
        .with_range(98, 8, |b| b.iter().map(|&x| u32::from(x)).sum())
        .unwrap();
    assert_eq!(sum, 10);
    let mut out = [0u8; 4];
    mr.read(100, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4]);
    // Out of range: refused, and the message names offset, length and size.
    let e = mr.with_range(4000, 100, |_| ()).unwrap_err();
    assert!(matches!(e, Error::Range(_)), "{e:?}");
    let msg = e.to_string();
    for part in ["100 bytes", "offset 4000", "4096 bytes"] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
    assert!(mr.write(u64::MAX, &[0]).is_err(), "an overflowing end");
    assert!(mr.read(4096, &mut [0]).is_err());
    mr.read(4096, &mut []).unwrap(); // empty, at the end: in range
}

/// The caller's Vec is the region (no copy): a peer's WRITE lands in it,
/// and `into_inner` hands back the same allocation.
#[test]
fn reg_mr_with_a_vec_and_into_inner() {
    let (a, b) = (dev("127.0.0.172"), dev("127.0.0.173"));
    let (qa, _qb) = connect(&a, &b);
    let src = a.pd.reg_mr_with(vec![7u8; 8192], all()).unwrap();
    let buf = vec![0u8; 16384];
    let at = buf.as_ptr();
    let dst = b.pd.reg_mr_with(buf, all()).unwrap();
    assert_eq!(dst.len(), 16384);
    qa.post_send(SendWr::new(1, write(&dst, 1000), &[src.sge(0, 8192)]))
        .unwrap();
    let wc = wait(&a.cq, 1)[0];
    assert_eq!(wc.status, WcStatus::Success);
    let back = dst.into_inner().expect("an owned buffer");
    assert_eq!(back.as_ptr(), at, "the buffer was copied");
    assert!(back[..1000].iter().all(|&x| x == 0));
    assert!(back[1000..9192].iter().all(|&x| x == 7));
    assert!(back[9192..].iter().all(|&x| x == 0));
    // A Box works the same, and a deregistered rkey is refused.
    let boxed: Box<[u8]> = vec![9u8; 64].into_boxed_slice();
    let mr = b.pd.reg_mr_with(boxed, all()).unwrap();
    let gone = mr.remote().at(0, 8).unwrap();
    assert_eq!(&*mr.into_inner().unwrap(), &[9u8; 64]);
    let op = SendOp::Write { remote: gone };
    qa.post_send(SendWr::new(2, op, &[src.sge(0, 8)])).unwrap();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::RemAccessErr);
}

/// While the application holds one region for a long time, WRITEs into
/// another region of the same device complete: the engine is not stalled.
#[test]
fn holding_one_region_does_not_stall_another() {
    let (a, b) = (dev("127.0.0.174"), dev("127.0.0.175"));
    let (qa, _qb) = connect(&a, &b);
    let src = a.pd.reg_mr(4096, all()).unwrap();
    let target = b.pd.reg_mr(1 << 20, all()).unwrap();
    let scanned = b.pd.reg_mr(16 << 20, all()).unwrap();
    let released = AtomicBool::new(false);
    let holding = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            scanned
                .with_range(0, 16 << 20, |_| {
                    holding.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(1500));
                    released.store(true, Ordering::SeqCst);
                })
                .unwrap();
        });
        while !holding.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        for i in 0..200 {
            let sg = [src.sge(0, 64)];
            qa.post_send(SendWr::new(i, write(&target, i * 64), &sg))
                .unwrap();
            assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
        }
        assert!(
            !released.load(Ordering::SeqCst),
            "the WRITEs completed only after the other region was let go"
        );
    });
}

/// A WRITE into the region the application holds waits for it (the engine
/// sets it aside) and completes soon after the region is let go.
#[test]
fn a_write_into_a_held_region_lands_after_its_release() {
    let (a, b) = (dev("127.0.0.178"), dev("127.0.0.179"));
    let (qa, _qb) = connect(&a, &b);
    let src = a.pd.reg_mr_with(vec![3u8; 4096], all()).unwrap();
    let dst = b.pd.reg_mr(1 << 20, all()).unwrap();
    dst.with_range(0, 1 << 20, |bytes| {
        qa.post_send(SendWr::new(1, write(&dst, 512), &[src.sge(0, 4096)]))
            .unwrap();
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            assert!(a.cq.poll(1).unwrap().is_empty(), "completed while held");
        }
        assert!(bytes.iter().all(|&x| x == 0), "written while held");
    })
    .unwrap();
    let released = Instant::now();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
    let after = released.elapsed();
    assert!(after < Duration::from_millis(500), "took {after:?}");
    let mut back = vec![0u8; 4098];
    dst.read(511, &mut back).unwrap();
    assert_eq!((back[0], back[1], back[4096], back[4097]), (0, 3, 3, 0));
    assert!(b.ctx.stats().rx_deferred > 0);
}
