//! Applications that wait by reading memory, not by calling the library:
//! the loop of `ib_write_lat`, between two devices on loopback sockets.
//! Whatever an application round does not take in (a WRITE that arrives
//! while the application reads memory) is the driver thread's to deliver.
//! A file of its own, so that no other test's threads run beside it.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, QpInitAttr, QpType, QueuePair,
    SendWr, WcStatus,
};

/// Round trips per run.
const ROUNDS: u64 = 5_000;
/// How long a run may take: a round trip takes about 20 µs here; one that
/// waited for every nap of a driver thread standing back, up to 10 ms.
const LIMIT: Duration = Duration::from_secs(60);

struct End {
    _ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

/// Two connected RC QPs on `a` and `b`.
fn pair(a: &str, b: &str) -> (End, End) {
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let ends = [a, b].map(|ip| {
        let ctx = Context::open(ip.parse::<IpAddr>().unwrap()).unwrap();
        let cq = ctx.create_cq(64).unwrap();
        let pd = ctx.alloc_pd();
        let mr = pd.reg_mr(4096, access).unwrap();
        let qp = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
            .unwrap();
        End {
            _ctx: ctx,
            cq,
            mr,
            qp,
        }
    });
    let opts = ConnectOptions::default();
    ends[0].qp.connect(&ends[1].qp.endpoint(), &opts).unwrap();
    ends[1].qp.connect(&ends[0].qp.endpoint(), &opts).unwrap();
    let [a, b] = ends;
    (a, b)
}

/// One side of `ib_write_lat`'s loop: wait on memory for the peer's WRITE
/// (the `first` side starts), WRITE the round's number into the peer's
/// memory, poll for that WRITE's completion.
fn side(me: &End, peer: &End, first: bool) {
    let to = peer.mr.remote().at(0, 8).unwrap();
    let start = Instant::now();
    for i in 1..=ROUNDS {
        if !(first && i == 1) {
            let want = if first { i - 1 } else { i };
            let mut got = [0u8; 8];
            while u64::from_ne_bytes(got) != want {
                assert!(start.elapsed() < LIMIT, "write {want} never came");
                me.mr.read(0, &mut got).unwrap();
            }
        }
        me.mr.write(8, &i.to_ne_bytes()).unwrap();
        let sg = [me.mr.sge(8, 8)];
        me.qp.post_send(SendWr::write(i, &sg, to)).unwrap();
        let mut wc = Vec::new();
        while wc.is_empty() {
            assert!(start.elapsed() < LIMIT, "no ACK for write {i}");
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
        let (a, b) = pair(a, b);
        std::thread::scope(|s| {
            s.spawn(|| side(&b, &a, false));
            side(&a, &b, true);
        });
    }
}
