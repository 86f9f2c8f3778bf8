//! Waiting without spinning, end to end over loopback sockets: the
//! blocking `CompletionQueue::wait` and `wait_into`, and completion channels (arming, the
//! descriptor's readiness as poll(2) sees it, solicited-only arms); and
//! waiting on memory, outside the library, as `ib_write_lat` does. Each
//! test uses its own 127.0.0.x pair.

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionChannel, CompletionQueue, ConnectOptions, Context, MemoryRegion, QpAttr,
    QpInitAttr, QpState, QpType, QueuePair, RecvWr, SendWr, WcOpcode, WcStatus, WorkCompletion,
};
use ferroce_io::wait::readable;

struct End {
    _ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

/// Two connected RC QPs; the second side's CQ has a completion channel.
fn pair(a: &str, b: &str) -> (End, End, CompletionChannel) {
    let ips: [IpAddr; 2] = [a.parse().unwrap(), b.parse().unwrap()];
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let ctxs = ips.map(|ip| Context::open(ip).unwrap());
    let chan = ctxs[1].create_comp_channel().unwrap();
    let cqs = [
        ctxs[0].create_cq(64).unwrap(),
        ctxs[1].create_cq_with_channel(64, &chan).unwrap(),
    ];
    let mut ends = Vec::new();
    for (ctx, cq) in ctxs.into_iter().zip(cqs) {
        let pd = ctx.alloc_pd();
        let mr = pd.reg_mr(4096, access).unwrap();
        let qp = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
            .unwrap();
        ends.push(End {
            _ctx: ctx,
            cq,
            mr,
            qp,
        });
    }
    let opts = ConnectOptions::default();
    ends[0].qp.connect(&ends[1].qp.endpoint(), &opts).unwrap();
    ends[1].qp.connect(&ends[0].qp.endpoint(), &opts).unwrap();
    let b = ends.pop().unwrap();
    (ends.pop().unwrap(), b, chan)
}

/// Posts `n` receives on `to` and sends it `n` 8-byte SENDs from `from`,
/// waiting for their send completions (so they have arrived).
fn send(from: &End, to: &End, n: u64, solicited: bool) {
    for i in 0..n {
        to.qp
            .post_recv(RecvWr::new(i, &[to.mr.sge(0, 64)]))
            .unwrap();
        let sg = [from.mr.sge(0, 8)];
        let wr = SendWr::send(i, &sg);
        from.qp
            .post_send(if solicited { wr.solicited() } else { wr })
            .unwrap();
    }
    let mut done = 0;
    while done < n {
        let wcs = from.cq.wait(16, Duration::from_secs(10)).unwrap();
        assert!(!wcs.is_empty(), "no send completion within 10 s");
        assert!(wcs.iter().all(|wc| wc.status == WcStatus::Success));
        done += wcs.len() as u64;
    }
}

#[test]
fn wait_times_out_then_returns_on_a_completion() {
    let (a, b, _chan) = pair("127.0.0.120", "127.0.0.121");
    let t = Instant::now();
    assert!(b.cq.wait(4, Duration::from_millis(50)).unwrap().is_empty());
    assert!(t.elapsed() >= Duration::from_millis(50));

    b.qp.post_recv(RecvWr::new(9, &[b.mr.sge(0, 64)])).unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            a.qp.post_send(SendWr::send(1, &[a.mr.sge(0, 8)])).unwrap();
        });
        let wcs = b.cq.wait(4, Duration::from_secs(10)).unwrap();
        assert_eq!(wcs.len(), 1);
        assert_eq!((wcs[0].wr_id, wcs[0].opcode), (9, WcOpcode::Recv));
    });
    let waited = t.elapsed();
    assert!(
        (Duration::from_millis(100)..Duration::from_secs(5)).contains(&waited),
        "waited {waited:?}"
    );
}

#[test]
fn a_notification_fires_once_per_arm_and_makes_the_fd_readable() {
    let (a, b, chan) = pair("127.0.0.122", "127.0.0.123");
    let fd = chan.as_fd();
    b.cq.req_notify(false).unwrap();
    assert!(!readable(fd, Duration::ZERO).unwrap());
    send(&a, &b, 1, false);
    assert!(readable(fd, Duration::from_secs(5)).unwrap());
    assert_eq!(chan.try_get_event(), Some(b.cq.handle()));
    assert!(!readable(fd, Duration::ZERO).unwrap(), "one event per arm");

    // Not armed again: the next completion fires nothing.
    send(&a, &b, 1, false);
    assert!(!readable(fd, Duration::from_millis(200)).unwrap());
    assert_eq!(chan.try_get_event(), None);
    assert_eq!(b.cq.poll(8).unwrap().len(), 2);

    // Armed again, the blocking get_event returns the CQ.
    b.cq.req_notify(false).unwrap();
    send(&a, &b, 1, false);
    let got = chan.get_event_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(got, Some(b.cq.handle()));
}

#[test]
fn solicited_only_ignores_an_unsolicited_send() {
    let (a, b, chan) = pair("127.0.0.124", "127.0.0.125");
    b.cq.req_notify(true).unwrap();
    send(&a, &b, 1, false);
    assert!(!readable(chan.as_fd(), Duration::from_millis(200)).unwrap());
    send(&a, &b, 1, true);
    let got = chan.get_event_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(got, Some(b.cq.handle()));
    assert_eq!(b.cq.poll(8).unwrap().len(), 2);
}

#[test]
fn wait_into_times_out_then_fills_the_buffer() {
    let (a, b, _chan) = pair("127.0.77.10", "127.0.77.11");
    let mut wcs = [WorkCompletion::default(); 4];
    let t = Instant::now();
    assert_eq!(
        b.cq.wait_into(&mut wcs, Duration::from_millis(50)).unwrap(),
        0
    );
    assert!(t.elapsed() >= Duration::from_millis(50));
    // No room: returns at once, as `wait` with `max` 0.
    let t = Instant::now();
    assert_eq!(b.cq.wait_into(&mut [], Duration::from_secs(5)).unwrap(), 0);
    assert!(t.elapsed() < Duration::from_secs(1));

    b.qp.post_recv(RecvWr::new(9, &[b.mr.sge(0, 64)])).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            a.qp.post_send(SendWr::send(1, &[a.mr.sge(0, 8)])).unwrap();
        });
        let n = b.cq.wait_into(&mut wcs, Duration::from_secs(10)).unwrap();
        assert_eq!(n, 1);
        assert_eq!((wcs[0].wr_id, wcs[0].opcode), (9, WcOpcode::Recv));
        assert_eq!(wcs[0].status, WcStatus::Success);
    });
    let n = a.cq.wait_into(&mut wcs, Duration::from_secs(10)).unwrap();
    assert_eq!((n, wcs[0].wr_id, wcs[0].opcode), (1, 1, WcOpcode::Send));
}

#[test]
fn a_send_with_immediate_delivers_it_and_solicited_fires_a_solicited_arm() {
    let (a, b, chan) = pair("127.0.77.12", "127.0.77.13");
    b.cq.req_notify(true).unwrap();
    for i in 0..2 {
        b.qp.post_recv(RecvWr::new(i, &[b.mr.sge(0, 64)])).unwrap();
    }
    let sg = [a.mr.sge(0, 8)];
    let sent = |wr: SendWr<'_>| {
        a.qp.post_send(wr).unwrap();
        let mut wcs = [WorkCompletion::default(); 1];
        let n = a.cq.wait_into(&mut wcs, Duration::from_secs(10)).unwrap();
        assert_eq!((n, wcs[0].status), (1, WcStatus::Success));
    };
    // Not solicited: the receiver has the immediate, its arm stays quiet.
    sent(SendWr::send_with_imm(1, &sg, 0xdead_beef));
    assert!(!readable(chan.as_fd(), Duration::from_millis(200)).unwrap());
    let wcs = b.cq.poll(4).unwrap();
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].imm), (0, Some(0xdead_beef)));
    assert_eq!((wcs[0].opcode, wcs[0].byte_len), (WcOpcode::Recv, 8));
    // Solicited: the arm fires.
    sent(SendWr::send_with_imm(2, &sg, 7).solicited());
    let got = chan.get_event_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(got, Some(b.cq.handle()));
    let wcs = b.cq.poll(4).unwrap();
    assert_eq!((wcs.len(), wcs[0].wr_id, wcs[0].imm), (1, 1, Some(7)));
}

#[test]
fn req_notify_without_a_channel_names_the_fix() {
    let (a, _b, _chan) = pair("127.0.0.126", "127.0.0.127");
    let e = a.cq.req_notify(false).unwrap_err();
    assert!(e.to_string().contains("create_cq_with_channel"), "{e}");
}

/// A server whose application polls once every 5 ms (and sleeps between)
/// must not pace its peer: the driver thread answers the READs meanwhile.
/// When each poll made the driver stand back, every READ waited for the
/// next poll: 100 READs took at least 500 ms.
#[test]
fn a_sleeping_poller_does_not_pace_its_peer() {
    const READS: u64 = 100;
    const NAP: Duration = Duration::from_millis(5);
    let (a, b, _chan) = pair("127.0.0.128", "127.0.0.129");
    let done = std::sync::atomic::AtomicBool::new(false);
    let elapsed = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                b.cq.poll(16).unwrap();
                std::thread::sleep(NAP);
            }
        });
        // Let the poller settle into its rhythm first.
        std::thread::sleep(NAP * 4);
        let peer = b.mr.remote().at(0, 64).unwrap();
        let t = Instant::now();
        for i in 0..READS {
            a.qp.post_send(SendWr::read(i, &[a.mr.sge(0, 64)], peer))
                .unwrap();
            let wcs = a.cq.wait(1, Duration::from_secs(10)).unwrap();
            assert_eq!(wcs.first().map(|wc| wc.status), Some(WcStatus::Success));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        t.elapsed()
    });
    let paced = NAP * READS as u32;
    assert!(
        elapsed < paced / 2,
        "{READS} READs took {elapsed:?}: paced by the peer's polls ({paced:?} if each waited one)"
    );
}

/// Round trips per run of `ib_write_lat`'s loop.
const WRITE_LAT_ROUNDS: u64 = 5_000;
/// How long a run may take: a round trip takes about 20 µs here; one that
/// waited for every nap of a driver thread standing back, up to 10 ms.
const WRITE_LAT_LIMIT: Duration = Duration::from_secs(60);

/// One side of `ib_write_lat`'s loop: wait on memory for the peer's WRITE
/// (the `first` side starts), WRITE the round's number into the peer's
/// memory, poll for that WRITE's completion.
fn write_lat_side(me: &End, peer: &End, first: bool) {
    let to = peer.mr.remote().at(0, 8).unwrap();
    let start = Instant::now();
    for i in 1..=WRITE_LAT_ROUNDS {
        if !(first && i == 1) {
            let want = if first { i - 1 } else { i };
            let mut got = [0u8; 8];
            while u64::from_ne_bytes(got) != want {
                assert!(start.elapsed() < WRITE_LAT_LIMIT, "write {want} never came");
                me.mr.read(0, &mut got).unwrap();
            }
        }
        me.mr.write(8, &i.to_ne_bytes()).unwrap();
        let sg = [me.mr.sge(8, 8)];
        me.qp.post_send(SendWr::write(i, &sg, to)).unwrap();
        let mut wc = Vec::new();
        while wc.is_empty() {
            assert!(start.elapsed() < WRITE_LAT_LIMIT, "no ACK for write {i}");
            wc = me.cq.poll(1).unwrap();
        }
        assert_eq!(wc[0].status, WcStatus::Success);
    }
}

/// Each side's driver thread delivers what arrives while its application
/// reads memory. A driver that stood back for good would stop this loop,
/// or drag it out to one nap per round trip. How fast the unmodified
/// `ib_write_lat` runs is measured by `ferroce bench` (its worst t_avg) and
/// in the README.
#[test]
fn memory_pollers_are_served_by_their_drivers() {
    for (a, b) in [
        ("127.0.0.150", "127.0.0.151"),
        ("127.0.0.152", "127.0.0.153"),
    ] {
        let (a, b, _chan) = pair(a, b);
        std::thread::scope(|s| {
            s.spawn(|| write_lat_side(&b, &a, false));
            write_lat_side(&a, &b, true);
        });
    }
}

/// Completions an API call makes itself (a QP moved to the error state
/// flushes its receives) fire an armed CQ too, and wake a blocked wait.
#[test]
fn flushed_work_requests_fire_the_arm_and_wake_a_waiter() {
    let (_a, b, chan) = pair("127.0.0.130", "127.0.0.131");
    for i in 0..2 {
        b.qp.post_recv(RecvWr::new(i, &[b.mr.sge(0, 64)])).unwrap();
    }
    b.cq.req_notify(true).unwrap();
    let t = Instant::now();
    let wcs = std::thread::scope(|s| {
        let waiter = s.spawn(|| b.cq.wait(1, Duration::from_secs(10)).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        let err = QpAttr {
            state: Some(QpState::Err),
            ..QpAttr::default()
        };
        b.qp.modify(&err).unwrap();
        waiter.join().unwrap()
    });
    assert_eq!(wcs.first().map(|wc| wc.status), Some(WcStatus::WrFlushErr));
    // An error completion fires even a solicited-only arm.
    let got = chan.get_event_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(got, Some(b.cq.handle()));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

/// Threads busy-polling and a thread blocked in `wait` share one CQ while
/// the peer's SENDs arrive: each receive completion goes to exactly one of
/// them, and each thread's are in the order the receives were posted.
#[test]
fn pollers_and_a_waiter_on_one_cq_take_each_completion_once() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const COUNT: u64 = 600;
    const BATCH: u64 = 30;
    let (a, b, _chan) = pair("127.0.0.134", "127.0.0.135");
    let taken = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(60);
    let per_thread: Vec<Vec<u64>> = std::thread::scope(|s| {
        let takers: Vec<_> = (0..3)
            .map(|i| {
                let (cq, taken, stop) = (&b.cq, &taken, &stop);
                s.spawn(move || {
                    let mut got = Vec::new();
                    let mut wcs = [WorkCompletion::default(); 4];
                    while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                        let n = if i == 0 {
                            cq.wait_into(&mut wcs, Duration::from_millis(20)).unwrap()
                        } else {
                            cq.poll_into(&mut wcs).unwrap()
                        };
                        for wc in &wcs[..n] {
                            assert_eq!(wc.status, WcStatus::Success);
                            got.push(wc.wr_id);
                        }
                        taken.fetch_add(n as u64, Ordering::AcqRel);
                    }
                    got
                })
            })
            .collect();
        // Batches the CQ (64 deep) can hold, each sent once the takers
        // have taken the one before.
        for first in (0..COUNT).step_by(BATCH as usize) {
            for i in first..first + BATCH {
                b.qp.post_recv(RecvWr::new(i, &[b.mr.sge(0, 64)])).unwrap();
                a.qp.post_send(SendWr::send(i, &[a.mr.sge(0, 8)])).unwrap();
            }
            let mut sent = 0;
            while sent < BATCH {
                let wcs = a.cq.wait(16, Duration::from_secs(10)).unwrap();
                assert!(!wcs.is_empty(), "no send completion within 10 s");
                sent += wcs.len() as u64;
            }
            while taken.load(Ordering::Acquire) < first + BATCH {
                assert!(Instant::now() < deadline, "the takers stalled");
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Release);
        takers.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for got in &per_thread {
        assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order: {got:?}");
    }
    let mut all: Vec<u64> = per_thread.into_iter().flatten().collect();
    all.sort_unstable();
    assert_eq!(all, (0..COUNT).collect::<Vec<_>>());
    assert!(!b.cq.overflowed().unwrap());
}
