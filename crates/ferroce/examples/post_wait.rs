//! How long a post call takes while the device is busy: the time of each
//! `post_send` of a stream of 64 KiB RDMA WRITEs (16 outstanding), the
//! sender polling its CQ between posts, as a bandwidth test does. A post
//! queues the request in the QP's ring; it never waits for the driver
//! thread's round of progress (which, when posts took the engine's lock,
//! it did whenever the driver was in one).
//!
//! Two contexts in one process on loopback (the sender's and the
//! receiver's addresses, 127.0.0.1 and 127.0.0.2 by default; UDP port 4791
//! on each).
//!
//! `cargo run --release -p ferroce --example post_wait [POSTS [SENDER
//! RECEIVER]]` (POSTS 20000 by default) prints the posts' time quantiles
//! and the stream's rate.

use std::time::{Duration, Instant};

use ferroce::{
    Access, ConnectOptions, Context, QpInitAttr, QpType, SendWr, WcStatus, WorkCompletion,
};

#[path = "shared/args.rs"]
mod args;

/// Bytes per WRITE.
const MSG: u32 = 64 * 1024;
/// WRITEs outstanding at once.
const DEPTH: usize = 16;

fn main() -> Result<(), ferroce::Error> {
    let (posts, a_ip, b_ip) = args::count_and_addrs(20_000, "POSTS");
    let (a, b) = (Context::open(a_ip)?, Context::open(b_ip)?);
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (a.create_cq(64)?, b.create_cq(64)?);
    let src = pa.reg_mr(MSG as usize, Access::LOCAL_WRITE)?;
    let dst = pb.reg_mr(MSG as usize, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let attr = |cq| QpInitAttr {
        max_send_wr: DEPTH as u32,
        ..QpInitAttr::new(QpType::Rc, cq, cq)
    };
    let qa = pa.create_qp(&attr(&ca))?;
    let qb = pb.create_qp(&attr(&cb))?;
    let opts = ConnectOptions::default();
    qa.connect(&qb.endpoint(), &opts)?;
    qb.connect(&qa.endpoint(), &opts)?;
    let to = dst
        .remote()
        .at(0, u64::from(MSG))
        .expect("inside the target");

    let mut times = Vec::with_capacity(posts);
    let mut wcs = [WorkCompletion::default(); DEPTH];
    let (mut outstanding, mut done) = (0usize, 0usize);
    let start = Instant::now();
    while done < posts {
        if outstanding < DEPTH && done + outstanding < posts {
            let id = (done + outstanding) as u64;
            let t0 = Instant::now();
            qa.post_send(SendWr::write(id, &[src.sge(0, MSG)], to))?;
            times.push(t0.elapsed());
            outstanding += 1;
            continue;
        }
        let n = ca.poll_into(&mut wcs)?;
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        }
        (outstanding, done) = (outstanding - n, done + n);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stalled at {done}"
        );
    }
    let secs = start.elapsed().as_secs_f64();
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "post_send of {posts} 64 KiB WRITEs: p50 {:.2} us  p99 {:.2} us  p99.9 {:.2} us  max {:.1} us  ({:.2} GB/s)",
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0),
        posts as f64 * f64::from(MSG) / secs / 1e9
    );
    Ok(())
}
