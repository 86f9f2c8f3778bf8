//! Latency, as perftest's `ib_*_lat` measure it: SEND and RDMA WRITE as a
//! ping-pong between the two sides (reported one way: round trip / 2),
//! READ and atomics as a single request waited for (reported round trip).
//! Only the first QP is used.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use ferroce::{RecvWr, SendWr, WorkCompletion};

use super::Test;
use super::exchange;
use super::setup::{Params, Peer, STALL, Side, Stall};
use crate::error::Error;

/// Waits for one completion.
pub(super) fn wait(side: &Side) -> Result<WorkCompletion, Error> {
    let mut stall = Stall::new();
    let mut wc = [WorkCompletion::default()];
    loop {
        if side.cq.poll_into(&mut wc)? == 1 {
            wc[0].ok().map_err(|e| e.to_string())?;
            return Ok(wc[0]);
        }
        if stall.expired() {
            return Err(format!("no completion for {} s", STALL.as_secs()).into());
        }
    }
}

/// Waits until the region's first 8 bytes hold `want` (written by the peer).
fn wait_value(side: &Side, want: u64) -> Result<(), Error> {
    let mut stall = Stall::new();
    loop {
        let mut b = [0u8; 8];
        side.mr.read(0, &mut b)?;
        if u64::from_ne_bytes(b) == want {
            return Ok(());
        }
        if stall.expired() {
            return Err(format!("the peer's write {want} never arrived").into());
        }
        // Progress the engine while waiting (the write comes from the peer).
        side.cq.poll(0)?;
    }
}

pub(super) fn serve(
    side: &Side,
    peer: &Peer,
    p: &Params,
    stream: &mut TcpStream,
) -> Result<bool, Error> {
    let qp = &side.qps[0];
    match p.test {
        Test::Send => {
            qp.post_recv(RecvWr::new(0, &[side.mr.sge(0, p.size as u32)]))?;
            exchange::send_word(stream, "ready")?;
            for _ in 0..p.iters {
                wait(side)?; // the ping
                let sg = [side.mr.sge(0, p.size as u32)];
                qp.post_recv(RecvWr::new(0, &sg))?;
                qp.post_send(SendWr::send(0, &sg))?;
                wait(side)?; // our pong's send completion
            }
        }
        Test::Write => {
            exchange::send_word(stream, "ready")?;
            for i in 1..=u64::from(p.iters) {
                wait_value(side, i)?;
                side.mr.write(8, &i.to_ne_bytes())?;
                let len = 8.max(p.size as u32).min(side.mr.len() as u32 - 8);
                let remote = peer.region.at(0, len.into())?;
                qp.post_send(SendWr::write(0, &[side.mr.sge(8, len)], remote))?;
                wait(side)?;
            }
        }
        Test::Read | Test::Atomic => exchange::send_word(stream, "ready")?,
    }
    exchange::wait_word(stream)?;
    Ok(true)
}

pub(super) fn run(
    side: &Side,
    peer: &Peer,
    p: &Params,
    stream: &mut TcpStream,
) -> Result<bool, Error> {
    if exchange::wait_word(stream)? != "ready" {
        return Err("server did not get ready".into());
    }
    let qp = &side.qps[0];
    let mut samples = crate::cmd::limits::samples(p.iters)?;
    let size = p.size as u32;
    for i in 1..=u64::from(p.iters) {
        let t = Instant::now();
        match p.test {
            Test::Send => {
                let sg = [side.mr.sge(0, size)];
                qp.post_recv(RecvWr::new(1, &sg))?;
                qp.post_send(SendWr::send(0, &sg))?;
                // Our send completes, and their pong arrives, in either order.
                wait(side)?;
                wait(side)?;
            }
            Test::Write => {
                side.mr.write(8, &i.to_ne_bytes())?;
                let len = 8.max(size).min(side.mr.len() as u32 - 8);
                let remote = peer.region.at(0, len.into())?;
                qp.post_send(SendWr::write(0, &[side.mr.sge(8, len)], remote))?;
                wait(side)?;
                wait_value(side, i)?;
            }
            Test::Read => {
                let remote = peer.region.at(0, size.into())?;
                qp.post_send(SendWr::read(0, &[side.mr.sge(0, size)], remote))?;
                wait(side)?;
            }
            Test::Atomic => {
                let op = super::bw::atomic_op(p.atomic, peer.region.at(0, 8)?);
                qp.post_send(SendWr::new(0, op, &[side.mr.sge(0, 8)]))?;
                wait(side)?;
            }
        }
        samples.push(t.elapsed());
    }
    exchange::send_word(stream, "done")?;
    let one_way = matches!(p.test, Test::Send | Test::Write);
    report(p, &mut samples, one_way);
    Ok(true)
}

pub(super) fn report(p: &Params, samples: &mut [Duration], one_way: bool) {
    let div = if one_way { 2.0 } else { 1.0 };
    let mut us: Vec<f64> = samples
        .iter()
        .map(|d| d.as_secs_f64() * 1e6 / div)
        .collect();
    us.sort_by(f64::total_cmp);
    let n = us.len();
    if n == 0 {
        return;
    }
    let pct = |q: f64| us[((n as f64 * q) as usize).min(n - 1)];
    let avg = us.iter().sum::<f64>() / n as f64;
    let stdev = (us.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n as f64).sqrt();
    let line = "-".repeat(111);
    println!("{line}");
    println!(
        " {:<8} {:<12} {:<12} {:<12} {:<16} {:<12} {:<14} {:<18} {:<18}",
        "#bytes",
        "#iterations",
        "t_min[usec]",
        "t_max[usec]",
        "t_typical[usec]",
        "t_avg[usec]",
        "t_stdev[usec]",
        "99% percentile[usec]",
        "99.9% percentile[usec]"
    );
    println!(
        " {:<8} {:<12} {:<12.2} {:<12.2} {:<16.2} {:<12.2} {:<14.2} {:<18.2} {:<18.2}",
        p.size,
        // The iterations asked for, as perftest prints them (its latency
        // figures, like these from --perftest, come from the n-1 gaps
        // between n posts).
        p.iters,
        us[0],
        us[n - 1],
        pct(0.5),
        avg,
        stdev,
        pct(0.99),
        pct(0.999)
    );
    println!("{line}");
    if one_way {
        println!(" (one way: round trip / 2, as perftest reports SEND and WRITE latency)");
    }
}
