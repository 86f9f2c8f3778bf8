//! The latency tools' traffic, on QP 0, as perftest 4.5 runs it:
//!
//! * ib_write_lat: a ping-pong of RDMA WRITEs, the **server first**. Each
//!   side writes `size` bytes into the other's slot; the last byte carries
//!   the write's number (mod 256) and the rest is zero (perftest zeroes its
//!   buffer for this test only). A side knows the peer's write has landed
//!   when that last byte changes, so the whole message must be placed in
//!   order. Every write is signaled and waited for before the next one.
//!   Nothing is exchanged afterwards: the tool exits.
//! * ib_send_lat: a ping-pong of SENDs, the **client first**; both sides
//!   post their receives before the last sync. perftest sends the same
//!   (random) bytes every time.
//! * ib_read_lat / ib_atomic_lat: the client posts one READ (or atomic) at
//!   a time and waits for it; the server only closes the exchange, which it
//!   does at once, so it waits there for the client's end.
//!
//! Latency is the time between consecutive posts, halved for the two
//! ping-pongs (perftest's one-way figure).

use std::io::Read;
use std::net::Shutdown;
use std::time::{Duration, Instant};

use ferroce::{RecvWr, SendOp, SendWr, WcOpcode};

use super::super::lat::{report, wait};
use super::super::setup::{STALL, Stall};
use super::super::{AtomicType, Test};
use super::Ctx;
use super::bandwidth::AtomicCheck;
use super::exchange::{Link, Wire, close};
use crate::error::Error;

pub(super) fn run(w: &mut Wire, c: &Ctx<'_>) -> Result<bool, Error> {
    match c.p.test {
        Test::Write => {
            // The sync after RTR.
            w.hand_shake(&c.key)?;
            let posts = write_lat(c)?;
            finish(c, &posts, true);
            linger(w);
        }
        Test::Send => {
            let mut rx = Receives::new(c)?;
            // The receives are posted.
            w.hand_shake(&c.key)?;
            let posts = send_lat(c, &mut rx)?;
            finish(c, &posts, true);
            close(w, &c.key)?;
        }
        Test::Read | Test::Atomic => {
            w.hand_shake(&c.key)?;
            if c.server {
                close(w, &c.key)?;
                if c.p.test == Test::Atomic {
                    check_atomic_target(c)?;
                }
            } else {
                let posts = request_lat(c)?;
                finish(c, &posts, false);
                close(w, &c.key)?;
            }
        }
    }
    Ok(true)
}

/// Prints the report from the post times.
fn finish(c: &Ctx<'_>, posts: &[Instant], one_way: bool) {
    let mut samples: Vec<Duration> = posts.windows(2).map(|p| p[1] - p[0]).collect();
    report(c.p, &mut samples, one_way);
}

/// ib_write_lat ends without a word. Keep the device up (our last ACK may
/// still be on its way, and the peer may retransmit into us) until the
/// peer has closed the connection, or for at most a few seconds.
fn linger(w: &mut Wire) {
    let Link::Tcp(s) = &mut w.link else {
        return;
    };
    let _ = s.shutdown(Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut b = [0u8; 64];
    while matches!(s.read(&mut b), Ok(n) if n > 0) {}
}

fn ferr(e: ferroce::Error) -> String {
    e.to_string()
}

fn write_lat(c: &Ctx<'_>) -> Result<Vec<Instant>, Error> {
    let (side, p) = (c.side, c.p);
    let qp = &side.qps[0];
    let size = p.size;
    let src = c.lay.source() as usize;
    side.mr.write(src as u64, &vec![0u8; size]).map_err(ferr)?;
    let mut posts = crate::cmd::limits::samples(p.iters)?;
    for i in 1..=u64::from(p.iters) {
        if !c.server {
            arrival(c, i)?;
        }
        side.mr
            .write((src + size - 1) as u64, &[i as u8])
            .map_err(ferr)?;
        let remote = c.peer_slot(0).and_then(|r| r.at(0, size as u64));
        let local = side.mr.sge(src as u64, size as u32);
        posts.push(Instant::now());
        qp.post_send(SendWr::write(i, &[local], remote.map_err(ferr)?))
            .map_err(ferr)?;
        wait(side)?;
        if c.server {
            arrival(c, i)?;
        }
    }
    eprintln!(
        " data check: {} writes arrived in order, zeros ending in their number",
        p.iters
    );
    Ok(posts)
}

/// Waits for the peer's write number `i` in our slot: its last byte is
/// `i` mod 256, every other byte zero.
fn arrival(c: &Ctx<'_>, i: u64) -> Result<(), Error> {
    let (at, size) = (c.lay.target(0), c.p.size);
    let mut stall = Stall::new();
    let mut spins = 0u32;
    loop {
        // The number byte first; the rest only once it has come.
        let mut last = [0u8; 1];
        c.side
            .mr
            .read(at + size as u64 - 1, &mut last)
            .map_err(ferr)?;
        let seen = match last[0] == i as u8 {
            true => {
                let mut rest = vec![0u8; size - 1];
                c.side.mr.read(at, &mut rest).map_err(ferr)?;
                Some(rest.iter().all(|&x| x == 0))
            }
            false => None,
        };
        match seen {
            Some(true) => return Ok(()),
            Some(false) => {
                return Err(format!(
                    "data check: the peer's write {i} has non-zero bytes before its number"
                )
                .into());
            }
            None => {}
        }
        if stall.expired() {
            return Err(format!(
                "the peer's write {i} did not arrive in {} s",
                STALL.as_secs()
            )
            .into());
        }
        // Move the engine on ourselves; give the CPU away now and then
        // (on two cores the peer and our driver need it too).
        c.side.cq.poll(0).map_err(ferr)?;
        spins += 1;
        if spins.is_multiple_of(64) {
            std::thread::yield_now();
        }
    }
}

/// Our posted receives for ib_send_lat, and what the peer's messages
/// must look like.
struct Receives {
    posted: u64,
    first: Option<Vec<u8>>,
    sends_done: u64,
}

impl Receives {
    fn new(c: &Ctx<'_>) -> Result<Self, Error> {
        let mut r = Self {
            posted: 0,
            first: None,
            sends_done: 0,
        };
        for _ in 0..c.p.tx_depth.clamp(1, 64).min(c.p.iters) {
            r.post(c)?;
        }
        Ok(r)
    }

    fn post(&mut self, c: &Ctx<'_>) -> Result<(), Error> {
        let sge = c.side.mr.sge(c.lay.target(0), c.p.size as u32);
        c.side.qps[0]
            .post_recv(RecvWr::new(self.posted, &[sge]))
            .map_err(ferr)?;
        self.posted += 1;
        Ok(())
    }

    /// Waits for the next message (counting our send completions on the
    /// way), checks it and reposts.
    fn next(&mut self, c: &Ctx<'_>, i: u64) -> Result<(), Error> {
        loop {
            let wc = wait(c.side)?;
            if wc.opcode != WcOpcode::Recv {
                self.sends_done += 1;
                continue;
            }
            if wc.byte_len as usize != c.p.size {
                return Err(format!(
                    "data check: message {i} has {} bytes, not {}",
                    wc.byte_len, c.p.size
                )
                .into());
            }
            let mut m = vec![0u8; c.p.size];
            c.side.mr.read(c.lay.target(0), &mut m).map_err(ferr)?;
            match &self.first {
                None => self.first = Some(m),
                Some(f) if *f != m => {
                    return Err(format!(
                        "data check: message {i} differs from the first (the peer sends the same bytes every time)"
                    ).into());
                }
                Some(_) => {}
            }
            if self.posted < u64::from(c.p.iters) {
                self.post(c)?;
            }
            return Ok(());
        }
    }
}

fn send_lat(c: &Ctx<'_>, rx: &mut Receives) -> Result<Vec<Instant>, Error> {
    let (side, p) = (c.side, c.p);
    let qp = &side.qps[0];
    let src = c.lay.source();
    let pattern: Vec<u8> = (0..p.size).map(|k| (k * 7 + 3) as u8).collect();
    side.mr.write(src, &pattern).map_err(ferr)?;
    let mut posts = crate::cmd::limits::samples(p.iters)?;
    for i in 1..=u64::from(p.iters) {
        if c.server {
            rx.next(c, i)?;
        }
        posts.push(Instant::now());
        qp.post_send(SendWr::send(u64::MAX, &[side.mr.sge(src, p.size as u32)]))
            .map_err(ferr)?;
        if !c.server {
            rx.next(c, i)?;
        }
    }
    while rx.sends_done < u64::from(p.iters) {
        let wc = wait(side)?;
        if wc.opcode == WcOpcode::Recv {
            return Err("a message more than the peer's iterations arrived".into());
        }
        rx.sends_done += 1;
    }
    eprintln!(
        " data check: {} messages of {} bytes, all the same bytes",
        p.iters, p.size
    );
    Ok(posts)
}

/// The client of ib_read_lat / ib_atomic_lat: one request at a time to the
/// start of the peer's slot. READs must return the same bytes every time;
/// atomics are checked as in the bandwidth test.
fn request_lat(c: &Ctx<'_>) -> Result<Vec<Instant>, Error> {
    let (side, p) = (c.side, c.p);
    let qp = &side.qps[0];
    let peer = c.peer_slot(0).map_err(ferr)?;
    let mut atomics = AtomicCheck::new(p.atomic, 1, 1);
    let mut first: Option<Vec<u8>> = None;
    let mut posts = crate::cmd::limits::samples(p.iters)?;
    for i in 1..=u64::from(p.iters) {
        let (op, local) = if p.test == Test::Atomic {
            (
                atomics.op(0, 0, peer.at(0, 8).map_err(ferr)?),
                side.mr.sge(c.lay.result(0, 0, 1), 8),
            )
        } else {
            (
                SendOp::Read {
                    remote: peer.at(0, p.size as u64).map_err(ferr)?,
                },
                side.mr.sge(c.lay.source(), p.size as u32),
            )
        };
        posts.push(Instant::now());
        qp.post_send(SendWr::new(i, op, &[local])).map_err(ferr)?;
        wait(side)?;
        let mut m = vec![0u8; local.len as usize];
        side.mr.read(local.offset, &mut m).map_err(ferr)?;
        if p.test == Test::Atomic {
            atomics.got(0, 0, u64::from_ne_bytes(m[..8].try_into().unwrap()))?;
        } else {
            match &first {
                None => first = Some(m),
                Some(f) if *f != m => {
                    return Err(format!(
                        "data check: READ {i} returned other bytes than the first"
                    )
                    .into());
                }
                Some(_) => {}
            }
        }
    }
    if p.test == Test::Atomic {
        eprintln!(" data check: {}", atomics.summary());
    } else {
        eprintln!(
            " data check: {} READs of {} bytes returned the same bytes",
            p.iters, p.size
        );
    }
    Ok(posts)
}

/// ib_atomic_lat's server, after the run: the start of our slot holds what
/// `iters` atomics leave on a zero (see `check_atomic_targets`).
fn check_atomic_target(c: &Ctx<'_>) -> Result<(), Error> {
    let mut b = [0u8; 8];
    c.side.mr.read(c.lay.target(0), &mut b).map_err(ferr)?;
    let v = u64::from_ne_bytes(b);
    let n = u64::from(c.p.iters);
    let ok = match c.p.atomic {
        AtomicType::FetchAndAdd => v == n,
        AtomicType::CmpAndSwap => v == 0 || v == n.saturating_sub(1),
    };
    if !ok {
        return Err(
            format!("data check: the atomic target holds {v}, not what {n} atomics leave").into(),
        );
    }
    eprintln!(" data check: the atomic target holds {v} after {n} atomics");
    Ok(())
}
