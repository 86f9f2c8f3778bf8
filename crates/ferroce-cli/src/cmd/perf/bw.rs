//! Bandwidth: the client keeps `tx_depth` requests in flight on every QP
//! until each has completed `iters`; the server keeps receives posted for
//! SEND and otherwise only waits (its driver thread does the work).

use std::net::TcpStream;
use std::time::{Duration, Instant};

use ferroce::{RemoteSlice, SendOp, SendWr};
use indicatif::{ProgressBar, ProgressStyle};

use super::exchange;
use super::setup::{Params, Peer, Side};
use super::{AtomicType, Test};
use crate::error::Error;

pub(super) fn serve(side: &Side, p: &Params, stream: &mut TcpStream) -> Result<bool, Error> {
    if p.test != Test::Send {
        // Our QPs are at RTR now: packets sent before this was said would
        // have been dropped, and cost the client a retransmission timeout.
        exchange::send_word(stream, "ready")?;
        exchange::wait_word(stream)?;
        return Ok(true);
    }
    let p = Params {
        rx_depth: p.tx_depth.min(p.iters),
        ..*p
    };
    side.receive_sends(&p, |k| p.slot(k), || exchange::send_word(stream, "ready"))?;
    exchange::wait_word(stream)?;
    Ok(true)
}

pub(super) fn run(
    side: &Side,
    peer: &Peer,
    p: &Params,
    stream: &mut TcpStream,
    progress: bool,
) -> Result<bool, Error> {
    // The server says "ready" once its QPs can take packets (for SEND, once
    // its receives are posted too).
    if exchange::wait_word(stream)? != "ready" {
        return Err("server did not get ready".into());
    }
    let n = side.qps.len();
    let (mut posted, mut inflight) = (vec![0u32; n], vec![0u32; n]);
    let total = u64::from(p.iters) * n as u64;
    let mut done = 0u64;
    let mut marks: Vec<(Instant, u64)> = Vec::with_capacity(256);
    // Moved once per percent; indicatif draws it on standard error only
    // when that is a terminal.
    let bar = if progress {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("  [{bar:50}] {percent:>3}%")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("## "),
    );
    let start = Instant::now();
    marks.push((start, 0));
    let mut last = start;
    // QPs that may post more: all at first, then those that just had a
    // completion (so that a poll costs the same with 1,000 QPs as with one).
    let mut ready: Vec<usize> = (0..n).collect();
    while done < total {
        for i in ready.drain(..) {
            while inflight[i] < p.tx_depth && posted[i] < p.iters {
                let off = p.slot(posted[i]);
                let local = side.mr.sge(off, p.size as u32);
                let op = match p.test {
                    Test::Send => SendOp::Send,
                    Test::Write => SendOp::Write {
                        remote: peer.region.at(off, p.size as u64)?,
                    },
                    Test::Read => SendOp::Read {
                        remote: peer.region.at(off, p.size as u64)?,
                    },
                    Test::Atomic => atomic_op(p.atomic, peer.region.at(off, 8)?),
                };
                side.qps[i].post_send(SendWr::new(i as u64, op, &[local]))?;
                posted[i] += 1;
                inflight[i] += 1;
            }
        }
        let wcs = side.poll_ok(&mut last, || format!("{done} of {total} completed"))?;
        if wcs.is_empty() {
            continue;
        }
        for wc in wcs {
            let i = side.qp_index(wc.qpn);
            inflight[i] -= 1;
            if inflight[i] + 1 == p.tx_depth {
                ready.push(i); // was full: it has room again
            }
            done += 1;
        }
        if done * 100 / total > (marks.len() as u64 - 1) {
            marks.push((last, done));
            bar.set_position(done);
        }
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    exchange::send_word(stream, "done")?;
    report(p, total, elapsed, &marks);
    Ok(true)
}

/// perftest's atomic operations: add 1, or compare 0 and swap 0.
pub(super) fn atomic_op(t: AtomicType, remote: RemoteSlice) -> SendOp {
    match t {
        AtomicType::FetchAndAdd => SendOp::FetchAdd { remote, add: 1 },
        AtomicType::CmpAndSwap => SendOp::CompareSwap {
            remote,
            compare: 0,
            swap: 0,
        },
    }
}

/// perftest's table: MB is 2^20 bytes, as perftest counts it.
fn report(p: &Params, total: u64, elapsed: Duration, marks: &[(Instant, u64)]) {
    const MB: f64 = 1_048_576.0;
    let bytes = total as f64 * p.size as f64;
    let avg = bytes / elapsed.as_secs_f64() / MB;
    // Peak: the best rate over any stretch of at least 5% of the run, in
    // messages and in time (completions come in bursts: 5% of the messages
    // could complete within microseconds of each other).
    let span = elapsed.as_secs_f64();
    let mut peak = avg;
    for (i, a) in marks.iter().enumerate() {
        for b in &marks[i + 1..] {
            let n = b.1 - a.1;
            let t = b.0.duration_since(a.0).as_secs_f64();
            if n * 20 >= total && t * 20.0 >= span && t > 0.0 {
                peak = peak.max(n as f64 * p.size as f64 / t / MB);
            }
        }
    }
    let rate = total as f64 / elapsed.as_secs_f64() / 1e6;
    print_table(p.size as u64, total, peak, avg, rate);
}

/// perftest's bandwidth table: size, iterations, peak and average MB/s
/// (MB = 2^20 bytes), message rate in Mpps.
pub(super) fn print_table(size: u64, iters: u64, peak: f64, avg: f64, mpps: f64) {
    let line = "-".repeat(87);
    println!("{line}");
    println!(
        " {:<10} {:<14} {:<18} {:<20} {:<14}",
        "#bytes", "#iterations", "BW peak[MB/sec]", "BW average[MB/sec]", "MsgRate[Mpps]"
    );
    println!(" {size:<10} {iters:<14} {peak:<18.2} {avg:<20.2} {mpps:<14.6}");
    println!("{line}");
}
