//! What an application scanning its own region costs the peer writing
//! into it. A server thread checksums a 16 MiB buffer in a loop while the
//! client streams RDMA WRITEs (one at a time, 4 KiB each, spread over the
//! 16 MiB) into the server's registered region. Each round runs the WRITE
//! phase twice: once while the thread scans a plain `Vec<u8>` of the same
//! size (the scan's CPU cost alone), once while it scans the registered
//! region itself, through its volatile view, the very bytes the WRITEs land
//! in. Both scans run the same code over a `VolatileSlice`. The engine
//! holds nothing back for the scan (no lock between them), so the two
//! phases should take about as long, and no WRITE may fail.
//!
//! Two contexts in one process on loopback (the client's and the server's
//! addresses, 127.0.3.1 and 127.0.3.2 by default; UDP port 4791 on each).
//!
//! `cargo run --release -p ferroce --example region_scan [WRITES [ROUNDS
//! [CLIENT SERVER]]]` (WRITES per phase, 3000 by default; ROUNDS 9 by
//! default). Its last line sums up the rounds (`ferroce bench
//! --progress-only` reads it). It exits non-zero if a WRITE failed.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferroce::volatile::VolatileSlice;
use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, Mtu, QpInitAttr, QpType,
    QueuePair, SendOp, SendWr, WcStatus,
};

#[path = "shared/checksum.rs"]
mod shared;
use shared::checksum;

const SCANNED: u64 = 16 << 20;
const WRITE_LEN: u32 = 4096;

/// A WRITE phase: how long `writes` WRITEs took, and the status that
/// stopped it early (a peer that waited past its retry budget fails with
/// RETRY_EXC_ERR).
struct Phase {
    took: Duration,
    done: usize,
    /// The longest wait for one WRITE's completion.
    longest: Duration,
    /// The client's retransmissions during the phase.
    retransmits: u64,
    failed: Option<WcStatus>,
}

/// `writes` WRITEs posted one after the other into `dst`.
fn stream(
    qp: &QueuePair,
    cq: &CompletionQueue,
    src: &MemoryRegion,
    dst: &MemoryRegion,
    writes: usize,
) -> Phase {
    let start = Instant::now();
    let mut failed = None;
    let (mut done, mut longest) = (0, Duration::ZERO);
    for i in 0..writes as u64 {
        let offset = (i * 7919 * u64::from(WRITE_LEN)) % dst.len();
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
            assert!(t0.elapsed() < Duration::from_secs(30), "no completion");
        };
        if wc.status != WcStatus::Success {
            failed = Some(wc.status);
            break;
        }
        done += 1;
        longest = longest.max(t0.elapsed());
    }
    Phase {
        took: start.elapsed(),
        done,
        longest,
        retransmits: 0,
        failed,
    }
}

/// A WRITE phase while a thread checksums the view `view()` makes, in a
/// loop; also the scans it made and their mean time. (A view is a pointer,
/// not `Send`: the thread makes its own.)
fn phase_while_scanning<'v>(
    view: impl FnOnce() -> VolatileSlice<'v> + Send,
    write: impl FnOnce() -> Phase,
) -> (Phase, u64, Duration) {
    let stop = AtomicBool::new(false);
    let (scans, scan_ns) = (AtomicU64::new(0), AtomicU64::new(0));
    let phase = std::thread::scope(|s| {
        let scanner = s.spawn(|| {
            let view = view();
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                std::hint::black_box(checksum(&view));
                scan_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                scans.fetch_add(1, Ordering::Relaxed);
            }
        });
        let phase = write();
        stop.store(true, Ordering::Relaxed);
        scanner.join().expect("scanner");
        phase
    });
    let n = scans.load(Ordering::Relaxed);
    let mean = Duration::from_nanos(scan_ns.load(Ordering::Relaxed) / n.max(1));
    (phase, n, mean)
}

fn print(what: &str, (p, scans, mean): &(Phase, u64, Duration)) {
    let failed = p
        .failed
        .map_or(String::new(), |s| format!("  FAILED: {s:?}"));
    println!(
        "  {what:<20} {:>5} writes in {:>8.1} ms, longest {:>6.1} ms, {} retransmits; {scans:>3} scans, {:>5.1} ms each{failed}",
        p.done,
        p.took.as_secs_f64() * 1e3,
        p.longest.as_secs_f64() * 1e3,
        p.retransmits,
        mean.as_secs_f64() * 1e3,
    );
}

fn main() -> Result<(), ferroce::Error> {
    let mut args = std::env::args().skip(1);
    let writes: usize = args.next().map_or(3000, |s| s.parse().expect("WRITES"));
    let rounds: usize = args.next().map_or(9, |s| s.parse().expect("ROUNDS"));
    let a_ip: IpAddr = args
        .next()
        .map_or("127.0.3.1".into(), |s| s)
        .parse()
        .expect("CLIENT");
    let b_ip: IpAddr = args
        .next()
        .map_or("127.0.3.2".into(), |s| s)
        .parse()
        .expect("SERVER");
    let (a, b) = (Context::open(a_ip)?, Context::open(b_ip)?);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (a.create_cq(64)?, b.create_cq(64)?);
    let src = pa.reg_mr_with(vec![0x5a; WRITE_LEN as usize], access)?;
    let region = pb.reg_mr(SCANNED as usize, access)?;
    let qa = pa.create_qp(&QpInitAttr::new(QpType::Rc, &ca, &ca))?;
    let qb = pb.create_qp(&QpInitAttr::new(QpType::Rc, &cb, &cb))?;
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    qa.connect(&qb.endpoint(), &opts)?;
    qb.connect(&qa.endpoint(), &opts)?;
    let mut plain = vec![0u8; SCANNED as usize];

    let idle = stream(&qa, &ca, &src, &region, writes);
    println!(
        "idle server: {} writes in {:.1} ms, longest {:.1} ms",
        idle.done,
        idle.took.as_secs_f64() * 1e3,
        idle.longest.as_secs_f64() * 1e3
    );
    let (mut on_vec, mut on_region, mut failures) = (Vec::new(), Vec::new(), 0);
    for round in 1..=rounds {
        println!("round {round}");
        // Alternate which scan goes first, so that neither gains from order.
        for region_scan in [round % 2 == 0, round % 2 == 1] {
            let before = a.stats().retransmits;
            let mut phase = if region_scan {
                phase_while_scanning(
                    || region.volatile(0, SCANNED).expect("the whole region"),
                    || stream(&qa, &ca, &src, &region, writes),
                )
            } else {
                let plain = &mut plain;
                phase_while_scanning(
                    || VolatileSlice::from(&mut plain[..]),
                    || stream(&qa, &ca, &src, &region, writes),
                )
            };
            phase.0.retransmits = a.stats().retransmits - before;
            let what = ["scanning a Vec<u8>", "scanning the region"][usize::from(region_scan)];
            print(what, &phase);
            failures += usize::from(phase.0.failed.is_some());
            let times = if region_scan {
                &mut on_region
            } else {
                &mut on_vec
            };
            times.push(phase.0.took.as_secs_f64() * 1e3);
        }
        if failures > 0 {
            break; // the QP is in the error state: no later phase can run
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (vec_ms, region_ms) = (median(&mut on_vec), median(&mut on_region));
    println!(
        "WRITE phase, median of {} rounds: {vec_ms:.1} ms scanning a Vec, {region_ms:.1} ms scanning the region: {:.2}x; failed phases: {failures}",
        on_vec.len(),
        region_ms / vec_ms
    );
    if failures > 0 {
        std::process::exit(1);
    }
    Ok(())
}
