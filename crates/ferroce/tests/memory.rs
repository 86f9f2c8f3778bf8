//! Registered memory through the API over loopback: ranged access, views
//! and atomics, buffers registered without a copy and given back, and the
//! application scanning a region while the engine writes into it (no lock
//! between them: nothing waits, nothing is sent twice).

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
    let len = remote.len() - offset;
    SendOp::Write {
        remote: remote.remote().at(offset, len).unwrap(),
    }
}

#[test]
fn ranged_access_and_its_errors() {
    let d = dev("127.0.0.171");
    let mr = d.pd.reg_mr(4096, all()).unwrap();
    assert_eq!(mr.len(), 4096u64);
    mr.write(100, &[1, 2, 3, 4]).unwrap();
    let mut around = [0u8; 8];
    mr.volatile(98, 8).unwrap().copy_to(&mut around[..]);
    assert_eq!(around, [0, 0, 1, 2, 3, 4, 0, 0]);
    let mut out = [0u8; 4];
    mr.read(100, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4]);
    // Out of range: refused, and the message names offset, length and size.
    let e = mr.volatile(4000, 100).unwrap_err();
    assert!(matches!(e, Error::Range(_)), "{e:?}");
    let msg = e.to_string();
    for part in ["100 bytes", "offset 4000", "4096 bytes"] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
    assert!(mr.write(u64::MAX, &[0]).is_err(), "an overflowing end");
    assert!(mr.read(4096, &mut [0]).is_err());
    mr.read(4096, &mut []).unwrap(); // empty, at the end: in range
    assert!(matches!(mr.read_u64(4090), Err(Error::Range(_))));
}

/// The 8-byte accessors are atomics on the word in memory, in host byte
/// order (as a peer's FETCH_ADD sees it); an offset whose memory is not
/// 8-byte aligned is refused.
#[test]
fn u64_accessors_are_atomics_on_aligned_words() {
    let d = dev("127.0.0.170");
    let mr = d.pd.reg_mr(4096, all()).unwrap();
    let base = mr.volatile(0, 8).unwrap().ptr_guard().as_ptr() as u64;
    let at = (8 - base % 8) % 8 + 16;
    mr.write_u64(at, 40).unwrap();
    assert_eq!(mr.fetch_add_u64(at, 2).unwrap(), 40);
    assert_eq!(mr.read_u64(at).unwrap(), 42);
    let mut word = [0u8; 8];
    mr.read(at, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 42);
    let e = mr.read_u64(at + 3).unwrap_err();
    assert!(e.to_string().contains("aligned"), "{e}");
}

/// The deprecated closure accessors work on snapshots: `with_range` sees
/// the bytes as copied, `with_range_mut` and `with_bytes` copy theirs back.
#[test]
#[allow(deprecated)]
fn the_deprecated_closure_accessors_work_on_snapshots() {
    let d = dev("127.0.0.169");
    let mr = d.pd.reg_mr(64, all()).unwrap();
    mr.with_range_mut(10, 4, |b| b.copy_from_slice(&[1, 2, 3, 4]))
        .unwrap();
    let sum: u32 = mr
        .with_range(8, 8, |b| b.iter().map(|&x| u32::from(x)).sum())
        .unwrap();
    assert_eq!(sum, 10);
    let len = mr.with_bytes(|b| {
        b[63] = 9;
        b.len()
    });
    assert_eq!(len.unwrap(), 64);
    let mut last = [0u8; 1];
    mr.read(63, &mut last).unwrap();
    assert_eq!(last, [9]);
    assert!(matches!(mr.with_range(60, 8, |_| ()), Err(Error::Range(_))));
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

/// 64-bit sum of `view`'s bytes, read in place 4 KiB at a time (the way
/// an application checksums a region without copying it whole).
fn checksum(view: &ferroce::volatile::VolatileSlice<'_>) -> u64 {
    let mut chunk = [0u8; 4096];
    let mut sum = 0u64;
    for at in (0..view.len()).step_by(chunk.len()) {
        let n = view
            .subslice(at, chunk.len().min(view.len() - at))
            .unwrap()
            .copy_to(&mut chunk[..]);
        sum = chunk[..n]
            .iter()
            .fold(sum, |s, &x| s.wrapping_add(u64::from(x)));
    }
    sum
}

/// A thread scanning a 16 MiB region in a loop, through a view, while the
/// peer WRITEs into that very region and another: every WRITE completes,
/// the scans go on meanwhile, and nothing is retransmitted.
#[test]
fn scanning_a_region_while_the_peer_writes_it_holds_nothing_back() {
    const WRITES: u64 = 200;
    let (a, b) = (dev("127.0.0.174"), dev("127.0.0.175"));
    let (qa, _qb) = connect(&a, &b);
    let src = a.pd.reg_mr_with(vec![1u8; 4096], all()).unwrap();
    let other = b.pd.reg_mr(1 << 20, all()).unwrap();
    let scanned = b.pd.reg_mr(16 << 20, all()).unwrap();
    let done = AtomicBool::new(false);
    let scans_during = std::thread::scope(|s| {
        let scanner = s.spawn(|| {
            let view = scanned.volatile(0, scanned.len()).unwrap();
            let mut scans = 0u32;
            while !done.load(Ordering::SeqCst) {
                std::hint::black_box(checksum(&view));
                scans += 1;
            }
            scans
        });
        for i in 0..WRITES {
            let target = if i % 2 == 0 { &scanned } else { &other };
            let sg = [src.sge(0, 64)];
            qa.post_send(SendWr::new(i, write(target, i * 64), &sg))
                .unwrap();
            assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
        }
        done.store(true, Ordering::SeqCst);
        scanner.join().unwrap()
    });
    assert!(scans_during > 0, "no scan ran while the WRITEs did");
    // Every other WRITE landed in the scanned region, at its offset.
    let view = scanned.volatile(0, WRITES * 64).unwrap();
    assert_eq!(checksum(&view), (WRITES / 2) * 64);
    assert_eq!(a.ctx.stats().retransmits, 0, "{:?}", a.ctx.stats());
}

/// A WRITE into a region the application is viewing completes at once,
/// and the view shows its bytes.
#[test]
fn a_write_into_a_viewed_region_completes_at_once() {
    let (a, b) = (dev("127.0.0.178"), dev("127.0.0.179"));
    let (qa, _qb) = connect(&a, &b);
    let src = a.pd.reg_mr_with(vec![3u8; 4096], all()).unwrap();
    let dst = b.pd.reg_mr(1 << 20, all()).unwrap();
    let view = dst.volatile(0, 1 << 20).unwrap();
    let posted = Instant::now();
    qa.post_send(SendWr::new(1, write(&dst, 512), &[src.sge(0, 4096)]))
        .unwrap();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
    let took = posted.elapsed();
    assert!(took < Duration::from_millis(500), "took {took:?}");
    let mut back = vec![0u8; 4098];
    view.subslice(511, 4098).unwrap().copy_to(&mut back[..]);
    assert_eq!((back[0], back[1], back[4096], back[4097]), (0, 3, 3, 0));
    assert_eq!(a.ctx.stats().retransmits, 0);
}
