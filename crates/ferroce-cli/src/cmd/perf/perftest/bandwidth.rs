//! The bandwidth traffic of `--perftest` (ib_write_bw, ib_send_bw,
//! ib_read_bw, ib_atomic_bw): the client's posting loop, the SEND
//! server's receives, and the checks of what the atomics left.

use std::time::{Duration, Instant};

use ferroce::{RemoteSlice, SendOp, SendWr};

use super::super::setup::{Params, Side};
use super::super::{AtomicType, Test};
use super::Ctx;
use super::exchange::{Key, Report, Wire, close, print_report};
use crate::error::Error;

/// ib_send_bw's server side: keep receives posted until every message has
/// arrived, then close.
pub(super) fn serve_send(w: &mut Wire, side: &Side, p: &Params, key: &Key) -> Result<bool, Error> {
    println!(" RX depth        : {}", p.rx_depth);
    let elapsed = side.receive_sends(p, |_| 0, || w.hand_shake(key).map(drop))?;
    let total = u64::from(p.iters) * side.qps.len() as u64;
    print_report(&rate(p.size, total, elapsed));
    close(w, key)?;
    Ok(true)
}

/// The receives perftest's SEND server posts per QP for `iters` messages
/// (ib_send_bw prints it as "RX depth"): its default of 512, no more than
/// the iterations, made even (perftest works around a bug with odd depths).
pub(super) fn perftest_rx_depth(iters: u32) -> u32 {
    let d = iters.min(512);
    d + d % 2
}

pub(super) fn rate(size: usize, n: u64, t: Duration) -> Report {
    let secs = t.as_secs_f64().max(1e-9);
    let bw = n as f64 * size as f64 / secs / 1_048_576.0;
    Report {
        size: size as u64,
        iters: n,
        bw_peak: bw,
        bw_avg: bw,
        msg_rate: n as f64 / secs / 1e6,
    }
}

/// The client's traffic: `iters` operations per QP, up to `tx_depth`
/// outstanding (for READ and atomics, no more than the peer's out_reads),
/// at the addresses perftest uses: the start of both buffers for messages
/// over half a cycle buffer, otherwise stepping by `inc` through one cycle
/// buffer. Atomic results are checked as they arrive (see [`AtomicCheck`]).
pub(super) fn traffic(c: &Ctx<'_>) -> Result<Report, Error> {
    let (side, p, lay) = (c.side, c.p, c.lay);
    let n = side.qps.len();
    let mut cap = p.tx_depth;
    if matches!(p.test, Test::Read | Test::Atomic) {
        cap = cap.min(c.out_reads());
    }
    if p.test == Test::Atomic {
        // One result slot per outstanding atomic, and never two in flight
        // on one address (the check relies on it).
        cap = cap.min(lay.per_cycle as u32);
    }
    let cap = cap.max(1);
    let step = p.test == Test::Atomic || lay.per_cycle >= 2 && p.size as u64 <= lay.slot / 2;
    let mut atomics = AtomicCheck::new(p.atomic, n, lay.per_cycle);
    let (mut posted, mut inflight) = (vec![0u64; n], vec![0u32; n]);
    let iters = u64::from(p.iters);
    let total = iters * n as u64;
    let mut done = 0u64;
    let start = Instant::now();
    let mut last = start;
    while done < total {
        for i in 0..n {
            while inflight[i] < cap && posted[i] < iters {
                let k = posted[i];
                let slot = if step { k % lay.per_cycle } else { 0 };
                let peer = c.peer_slot(i)?;
                let (op, local) = match p.test {
                    Test::Write => (
                        SendOp::Write {
                            remote: peer.at(slot * lay.inc, p.size as u64)?,
                        },
                        side.mr.sge(lay.source(), p.size as u32),
                    ),
                    Test::Read => (
                        SendOp::Read {
                            remote: peer.at(slot * lay.inc, p.size as u64)?,
                        },
                        side.mr.sge(lay.source(), p.size as u32),
                    ),
                    Test::Atomic => (
                        atomics.op(i, slot as usize, peer.at(slot * lay.inc, 8)?),
                        side.mr
                            .sge(lay.result(i, k % u64::from(cap), u64::from(cap)), 8),
                    ),
                    Test::Send => (SendOp::Send, side.mr.sge(lay.source(), p.size as u32)),
                };
                side.qps[i].post_send(SendWr::new(k, op, &[local]))?;
                posted[i] += 1;
                inflight[i] += 1;
            }
        }
        let wcs = side.poll_ok(&mut last, || format!("{done} of {total} completed"))?;
        for wc in wcs {
            let i = side.qp_index(wc.qpn);
            inflight[i] -= 1;
            done += 1;
            if p.test == Test::Atomic {
                let k = wc.wr_id;
                let mut b = [0u8; 8];
                side.mr
                    .read(lay.result(i, k % u64::from(cap), u64::from(cap)), &mut b)?;
                atomics.got(i, (k % lay.per_cycle) as usize, u64::from_ne_bytes(b))?;
            }
        }
    }
    let elapsed = start.elapsed();
    if p.test == Test::Atomic {
        eprintln!(" data check: {}", atomics.summary());
    }
    // As perftest: iterations over all QPs.
    Ok(rate(p.size, total, elapsed))
}

/// Checks the values our atomics return, per QP and per target address.
///
/// The first atomic on an address learns its value (perftest fills its
/// buffer with random bytes): fetch-and-add adds 1, compare-and-swap
/// compares 0 and swaps 0, as perftest's own. After that the value is
/// known: each fetch-and-add must return the previous one plus 1, and
/// compare-and-swap compares with it and swaps in that plus 1, so each
/// must return exactly the value expected (a swap that did not happen, or
/// happened twice, shows up on the next one).
pub(super) struct AtomicCheck {
    pub(super) t: AtomicType,
    /// Per QP and address: the value the target holds now, once known.
    pub(super) known: Vec<Vec<Option<u64>>>,
    pub(super) checked: u64,
}

impl AtomicCheck {
    pub(super) fn new(t: AtomicType, qps: usize, addrs: u64) -> Self {
        Self {
            t,
            known: vec![vec![None; addrs as usize]; qps],
            checked: 0,
        }
    }

    pub(super) fn op(&self, qp: usize, a: usize, remote: RemoteSlice) -> SendOp {
        match (self.t, self.known[qp][a]) {
            (AtomicType::CmpAndSwap, Some(v)) => SendOp::CompareSwap {
                remote,
                compare: v,
                swap: v.wrapping_add(1),
            },
            (t, _) => super::super::bw::atomic_op(t, remote),
        }
    }

    /// Atomic on QP `qp`, address `a`, returned `orig`.
    pub(super) fn got(&mut self, qp: usize, a: usize, orig: u64) -> Result<(), Error> {
        let cell = &mut self.known[qp][a];
        if let Some(v) = *cell {
            if orig != v {
                return Err(format!(
                    "data check: an atomic on QP {qp}, address {a}, returned 0x{orig:x}, \
                     expected 0x{v:x}"
                )
                .into());
            }
            self.checked += 1;
            *cell = Some(v.wrapping_add(1));
        } else {
            // The first one: fetch-and-add moved it on, compare 0 / swap 0
            // left it alone (or swapped 0 for 0).
            *cell = Some(match self.t {
                AtomicType::FetchAndAdd => orig.wrapping_add(1),
                AtomicType::CmpAndSwap => orig,
            });
        }
        Ok(())
    }

    pub(super) fn summary(&self) -> String {
        let first: usize = self.known.iter().flatten().filter(|v| v.is_some()).count();
        format!(
            "{} atomic results as expected ({} first ones per address only read)",
            self.checked, first
        )
    }
}

/// ib_atomic_bw's server side, after the run: every target address holds
/// what the client's atomics left there. Our region starts zeroed; perftest
/// adds 1 (fetch-and-add) or compares 0 and swaps 0 (compare-and-swap:
/// nothing changes); ferroce's own client, after a first 0 / 0, swaps in
/// the value plus 1. `per_qp` is the client's iteration count per QP.
pub(super) fn check_atomic_targets(c: &Ctx<'_>, per_qp: u64) -> Result<(), Error> {
    let lay = c.lay;
    let expect = |a: u64| per_qp / lay.per_cycle + u64::from(a < per_qp % lay.per_cycle);
    // ferroce's first compare-and-swap on an address compares 0, swaps 0.
    let swaps = |a: u64| expect(a).saturating_sub(1);
    let (mut adds_ok, mut swaps_ok, mut zero) = (true, true, true);
    for i in 0..c.side.qps.len() {
        for a in 0..lay.per_cycle {
            let mut b = [0u8; 8];
            c.side.mr.read(lay.target(i) + a * lay.inc, &mut b)?;
            let v = u64::from_ne_bytes(b);
            adds_ok &= v == expect(a);
            swaps_ok &= v == swaps(a);
            zero &= v == 0;
        }
    }
    let n = c.side.qps.len() as u64 * lay.per_cycle;
    let ok = match c.p.atomic {
        AtomicType::FetchAndAdd => adds_ok,
        AtomicType::CmpAndSwap => zero || swaps_ok,
    };
    if !ok {
        return Err(format!(
            "data check: the {n} atomic targets do not hold what {} atomics per QP leave",
            per_qp
        )
        .into());
    }
    eprintln!(" data check: {n} atomic targets hold what {per_qp} atomics per QP leave");
    Ok(())
}
