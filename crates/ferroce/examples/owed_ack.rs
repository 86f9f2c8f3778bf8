//! How long a peer waits for the ACK of its last SEND when the receiving
//! application stops polling right after the SEND's completion, as one
//! that goes off to work on the message does.
//!
//! The receiver polls its CQ in a tight loop until the SEND arrives, then
//! (in the second phase) does no verbs call for 2 ms; the sender times its
//! SEND's completion, which waits for the receiver's ACK. The first phase,
//! where the receiver goes on polling, is the baseline. The receiver's
//! driver thread must send what the application's last round left owed
//! within its bound (`OWED_BOUND`, 80 µs), not when the application polls
//! again. Two contexts in one process on loopback (the sender's and the
//! receiver's addresses, 127.0.0.1 and 127.0.0.2 by default; UDP port 4791
//! on each).
//!
//! `cargo run --release -p ferroce --example owed_ack [ROUNDS [SENDER
//! RECEIVER]]` (ROUNDS 200 by default). `ferroce bench --progress-only`
//! reads its two lines.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, QpInitAttr, QpType, RecvWr, SendWr, WcStatus,
    WorkCompletion,
};

#[path = "shared/args.rs"]
mod args;

/// How long the receiver spins before each SEND comes: a polling loop
/// the driver stands back for.
const SPIN_BEFORE: Duration = Duration::from_micros(500);
/// How long the receiver does no verbs call after a SEND, in the second
/// phase.
const AWAY: Duration = Duration::from_millis(2);

/// Polls `cq` in a tight loop for one completion.
fn spin(cq: &CompletionQueue) -> WorkCompletion {
    let t0 = Instant::now();
    let mut wc = [WorkCompletion::default()];
    loop {
        if cq.poll_into(&mut wc).expect("poll") == 1 {
            assert_eq!(wc[0].status, WcStatus::Success, "{:?}", wc[0]);
            return wc[0];
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no completion");
    }
}

fn report(what: &str, mut t: Vec<Duration>) {
    t.sort();
    let at = |q: f64| t[((t.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "{what:<36} {:>4} SENDs  p50 {:>7.1} us  p99 {:>7.1} us  max {:>7.1} us",
        t.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

fn main() -> Result<(), ferroce::Error> {
    let (rounds, a_ip, b_ip) = args::count_and_addrs(200, "ROUNDS");
    let (a, b) = (Context::open(a_ip)?, Context::open(b_ip)?);
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (a.create_cq(16)?, b.create_cq(16)?);
    let src = pa.reg_mr(64, Access::LOCAL_WRITE)?;
    let dst = pb.reg_mr(64, Access::LOCAL_WRITE)?;
    let qa = pa.create_qp(&QpInitAttr::new(QpType::Rc, &ca, &ca))?;
    let qb = pb.create_qp(&QpInitAttr::new(QpType::Rc, &cb, &cb))?;
    let opts = ConnectOptions::default();
    qa.connect(&qb.endpoint(), &opts)?;
    qb.connect(&qa.endpoint(), &opts)?;

    for (what, away) in [
        ("receiver goes on polling", Duration::ZERO),
        ("receiver stops polling for 2 ms", AWAY),
    ] {
        let ready = Barrier::new(2);
        let done = AtomicBool::new(false);
        let times = std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..rounds {
                    qb.post_recv(RecvWr::new(0, &[dst.sge(0, 8)]))
                        .expect("post_recv");
                    ready.wait();
                    spin(&cb);
                    if away.is_zero() {
                        // Polls on until the sender has its completion.
                        while !done.swap(false, Ordering::AcqRel) {
                            cb.poll(0).expect("poll");
                        }
                    } else {
                        std::thread::sleep(away);
                        done.store(false, Ordering::Release);
                    }
                }
            });
            let mut times = Vec::with_capacity(rounds);
            for i in 0..rounds {
                ready.wait();
                std::thread::sleep(SPIN_BEFORE);
                let t0 = Instant::now();
                qa.post_send(SendWr::send(i as u64, &[src.sge(0, 8)]))
                    .expect("post_send");
                spin(&ca);
                times.push(t0.elapsed());
                done.store(true, Ordering::Release);
            }
            times
        });
        report(what, times);
    }
    Ok(())
}
