//! How long a peer waits for its ACKs while the application scans another
//! region: a client QP streams small RDMA WRITEs (one at a time) into one
//! server region and times each completion, first with the server idle,
//! then while a server thread checksums a 16 MiB region five times (2 ms
//! apart), reading it in place through its volatile view (no lock: the
//! engine goes on placing packets meanwhile). Two contexts in one process
//! on loopback (127.0.0.1 and 127.0.0.2, UDP port 4791).
//! `region_scan` measures the scan of the very region the WRITEs land in.
//!
//! `cargo run --release -p ferroce --example ack_delay [WRITES]` (at most
//! WRITES in each phase; 2000 by default).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, Mtu, QpInitAttr, QpType,
    QueuePair, SendOp, SendWr, WcStatus,
};

#[path = "shared/checksum.rs"]
mod shared;
use shared::checksum;

const SCANNED: usize = 16 << 20;
const WRITE_LEN: u32 = 64;
/// Scans the second phase lasts.
const SCANS: u64 = 5;

/// What a stream of WRITEs saw: each one's completion time, how long it
/// ran, and the failure that stopped it (a peer that waited past its retry
/// budget fails with RETRY_EXC_ERR).
struct Run {
    times: Vec<Duration>,
    took: Duration,
    failed: Option<WcStatus>,
}

/// WRITEs posted one after the other while `more()` says so.
fn stream(
    qp: &QueuePair,
    cq: &CompletionQueue,
    src: &MemoryRegion,
    dst: &MemoryRegion,
    more: impl Fn(usize) -> bool,
) -> Run {
    let start = Instant::now();
    let mut times = Vec::new();
    let mut failed = None;
    for i in 0u64.. {
        if !more(times.len()) {
            break;
        }
        let offset = (i * u64::from(WRITE_LEN)) % (1 << 20);
        let op = SendOp::Write {
            remote: dst
                .remote()
                .at(offset, u64::from(WRITE_LEN))
                .expect("inside the target"),
        };
        let t0 = Instant::now();
        qp.post_send(SendWr::new(i, op, &[src.sge(0, WRITE_LEN)]))
            .expect("post");
        let wc = loop {
            if let Some(wc) = cq.poll(1).expect("poll").pop() {
                break wc;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "no completion");
        };
        if wc.status != WcStatus::Success {
            failed = Some(wc.status);
            break;
        }
        times.push(t0.elapsed());
    }
    Run {
        times,
        took: start.elapsed(),
        failed,
    }
}

fn report(what: &str, run: Run) {
    let mut t = run.times;
    if let Some(status) = run.failed {
        println!("{what:<34} failed after {} writes: {status:?}", t.len());
    }
    if t.is_empty() {
        return;
    }
    let rate = t.len() as f64 / run.took.as_secs_f64();
    t.sort();
    let at = |q: f64| t[((t.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    let slow = t.iter().filter(|d| d.as_millis() >= 1).count();
    println!(
        "{what:<34} {:>5} writes {rate:>7.0}/s  p50 {:>7.1} us  p99 {:>8.1} us  max {:>8.1} us  >=1 ms: {slow}",
        t.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

fn main() -> Result<(), ferroce::Error> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(2000, |s| s.parse().expect("WRITES: a count"));
    let a_ip: IpAddr = "127.0.0.1".parse().unwrap();
    let b_ip: IpAddr = "127.0.0.2".parse().unwrap();
    let (a, b) = (Context::open(a_ip)?, Context::open(b_ip)?);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (a.create_cq(64)?, b.create_cq(64)?);
    let src = pa.reg_mr(4096, access)?;
    let target = pb.reg_mr(1 << 20, access)?;
    let scanned = pb.reg_mr(SCANNED, access)?;
    let qa = pa.create_qp(&QpInitAttr::new(QpType::Rc, &ca, &ca))?;
    let qb = pb.create_qp(&QpInitAttr::new(QpType::Rc, &cb, &cb))?;
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    qa.connect(&qb.endpoint(), &opts)?;
    qb.connect(&qa.endpoint(), &opts)?;

    report("server idle", stream(&qa, &ca, &src, &target, |i| i < n));

    let stop = AtomicBool::new(false);
    let (passes, scan_ns) = (AtomicU64::new(0), AtomicU64::new(0));
    let busy = std::thread::scope(|s| {
        s.spawn(|| {
            let view = scanned
                .volatile(0, scanned.len())
                .expect("the whole region");
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let sum = checksum(&view);
                std::hint::black_box(sum);
                scan_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                passes.fetch_add(1, Ordering::Relaxed);
                // A pause between passes, as an application that checks
                // its buffer now and then.
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        // As long as SCANS passes take (same for every build, so that the
        // rates compare), or up to n WRITEs.
        let t = stream(&qa, &ca, &src, &target, |i| {
            i < n && passes.load(Ordering::Relaxed) < SCANS
        });
        stop.store(true, Ordering::Relaxed);
        t
    });
    report("server scanning 16 MiB (other MR)", busy);
    let passes = passes.load(Ordering::Relaxed).max(1);
    println!(
        "{passes} scans of 16 MiB, {:.1} ms each",
        scan_ns.load(Ordering::Relaxed) as f64 / passes as f64 / 1e6
    );
    Ok(())
}
