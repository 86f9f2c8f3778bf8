//! Priorities and PFC of a raw device: the tag each frame gets, the frames
//! a paused priority holds back, and the PFC frames the receive backlog
//! calls for ([`ferroce_io::raw::pfc`] keeps the state; this keeps the
//! frames and the clock).
//!
//! Contract:
//! * [`Qos::tag`] is the 802.1Q tag of a packet (see
//!   [`crate::config_raw`]).
//! * With PFC on, a packet whose priority is paused, or still has packets
//!   held before it, is held (in order, per priority) instead of queued;
//!   the other priorities go on. At most [`MAX_HELD`] a priority: past
//!   that [`Qos::hold`] refuses, and the device stops taking packets from
//!   the engine (back-pressure, as when the send ring is full): nothing is
//!   dropped. Held packets leave, oldest first, once their priority
//!   resumes ([`Qos::take_ready`], every driver round), and
//!   [`Qos::wake_in`] tells the driver when the earliest pause ends, so it
//!   sleeps until then instead of polling.
//! * With PFC on, frames leave no faster than the link speed PFC times
//!   its pauses at (a token bucket of [`BURST_BYTES`]); the rest are held
//!   until the bucket refills. On a NIC the wire does this, and it is what
//!   bounds the frames still coming after an XOFF (a receiver's headroom
//!   is link rate times reaction time). A veth takes any burst at once: a
//!   thousand held frames released after an XON overran a 256-frame ring
//!   before the receiver, descheduled for milliseconds on a loaded
//!   machine, could send its next XOFF.
//! * Packets parked while a peer's MAC is resolved (a first CM MAD) go
//!   when it is known, without waiting for a pause or the pacing: a
//!   handful, once per peer.
//! * A test knob makes the receiver slow on purpose: with
//!   `FERROCE_RAW_SLOW_RX_US=N` in the environment (read by
//!   [`crate::env`] into `RawOptions::test_slow_rx`), each receive takes at
//!   most [`SLOW_RX_FRAMES`] frames from the ring and then sleeps N µs
//!   (the driver's receive processing slowed, as by a busy CPU); frames
//!   pile up in the ring meanwhile. The PFC watch goes on during that
//!   sleep, every [`WATCH_EVERY`], as a NIC's buffer watch does while
//!   its host is busy ([`Qos::slow_rx_wait`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant as StdInstant};

use ferroce_core::Transmit;
use ferroce_io::raw::pfc::{Pfc, PfcStats, interface_mbps};
use ferroce_io::raw::qos::{PcpMap, priority_tag};
use ferroce_wire::Opcode;
use ferroce_wire::ethernet::VlanTag;
use ferroce_wire::pfc::{MacControlRepr, PRIORITIES};

use crate::config_raw::{DEFAULT_LINK_MBPS, RawOptions};

/// Packets held per paused priority at most (then back-pressure).
pub(crate) const MAX_HELD: usize = 1024;

/// Frames a slowed receive takes per call (`FERROCE_RAW_SLOW_RX_US`).
pub(crate) const SLOW_RX_FRAMES: usize = 8;

/// How often a slowed receiver looks at its backlog while it sleeps.
pub(crate) const WATCH_EVERY: Duration = Duration::from_micros(50);

/// The most bytes sent back to back at once, with PFC on (then the link
/// speed paces them).
pub(crate) const BURST_BYTES: i64 = 64 << 10;

/// Bytes a frame takes beyond its RoCE packet (Ethernet, tag, IP, UDP),
/// near enough for pacing.
const FRAME_OVERHEAD: usize = 66;

/// A packet held by a pause, with the MAC it goes to.
pub(crate) type Held = ([u8; 6], Transmit);

#[derive(Debug)]
pub(crate) struct Qos {
    map: PcpMap,
    /// The priority of CNPs (the notification point's `cnp_802p_prio`),
    /// whatever their traffic class maps to: a NIC sends them on a
    /// priority of their own so that they pass a paused RoCE priority.
    cnp_prio: u8,
    vlan: Option<u16>,
    pfc: Option<Pfc>,
    held: [VecDeque<Held>; PRIORITIES],
    epoch: StdInstant,
    /// The slow-receiver test knob (see the module docs).
    slow_rx: Option<Duration>,
    /// Packets that waited (for a pause, or for the pacing).
    pub(crate) tx_held: u64,
    /// PFC frames the send ring had no room for.
    pub(crate) tx_pfc_lost: u64,
    /// Bytes the link may still send now (PFC on; see the module docs),
    /// as of `refilled` (ns).
    tokens: i64,
    refilled: u64,
}

impl Qos {
    /// The settings of `opts` on `interface` (whose speed times pauses
    /// unless `opts.pfc` sets one; [`DEFAULT_LINK_MBPS`] if unknown).
    pub(crate) fn new(opts: &RawOptions, interface: &str, cnp_prio: u8) -> Self {
        let mbps = interface_mbps(interface).unwrap_or(DEFAULT_LINK_MBPS);
        Self {
            map: opts.pcp,
            cnp_prio: cnp_prio & 7,
            vlan: opts.vlan,
            pfc: opts.pfc.map(|cfg| Pfc::new(cfg, mbps)),
            held: Default::default(),
            epoch: StdInstant::now(),
            slow_rx: opts.test_slow_rx,
            tx_held: 0,
            tx_pfc_lost: 0,
            tokens: BURST_BYTES,
            refilled: 0,
        }
    }

    fn now(&self) -> u64 {
        nanos_since(self.epoch)
    }

    /// The 802.1Q priority of `t`: CNPs' own, else its traffic class's.
    pub(crate) fn priority(&self, t: &Transmit) -> u8 {
        if t.data.first() == Some(&Opcode::CNP.0) {
            self.cnp_prio
        } else {
            self.map.pcp(t.tos())
        }
    }

    /// The tag of `t` (none when frames go untagged).
    pub(crate) fn tag(&self, t: &Transmit) -> Option<VlanTag> {
        priority_tag(self.vlan, self.pfc.is_some(), self.priority(t))
    }

    /// Whether `t` must be held (PFC on, and its priority paused or with
    /// packets held before it).
    pub(crate) fn must_hold(&mut self, t: &Transmit) -> bool {
        let p = self.priority(t);
        // The clock is read only with PFC on: a round asks for every
        // packet, and a read is a measurable share of a small message's
        // latency.
        let Some(pfc) = &mut self.pfc else {
            return false;
        };
        let now = nanos_since(self.epoch);
        self.tokens <= 0 || !self.held[usize::from(p)].is_empty() || pfc.is_paused(p, now)
    }

    /// Refills the link's bucket for the time gone (PFC on).
    pub(crate) fn refill(&mut self) {
        let Some(pfc) = &self.pfc else { return };
        let now = self.now();
        let bytes = (now - self.refilled) as u128 * u128::from(pfc.link_mbps()) / 8_000;
        self.tokens = (self.tokens + bytes.min(BURST_BYTES as u128) as i64).min(BURST_BYTES);
        self.refilled = now;
    }

    /// A packet of `len` bytes went out (takes its bytes from the bucket
    /// with PFC on).
    pub(crate) fn sent(&mut self, len: usize) {
        if self.pfc.is_some() {
            self.tokens -= (len + FRAME_OVERHEAD) as i64;
        }
    }

    /// Holds `t` (to `mac`); false if its priority's queue is full.
    pub(crate) fn hold(&mut self, mac: [u8; 6], t: &Transmit) -> bool {
        let q = &mut self.held[usize::from(self.priority(t))];
        if q.len() >= MAX_HELD {
            return false;
        }
        q.push_back((mac, t.clone()));
        self.tx_held += 1;
        true
    }

    /// Takes the held packets of every priority that may send now, oldest
    /// first within each priority; give back what the ring did not take
    /// with [`put_back`](Self::put_back).
    pub(crate) fn take_ready(&mut self) -> Vec<Held> {
        let Some(pfc) = &mut self.pfc else {
            return Vec::new();
        };
        let now = nanos_since(self.epoch);
        let mut ready = Vec::new();
        for (p, q) in self.held.iter_mut().enumerate() {
            if !q.is_empty() && !pfc.is_paused(p as u8, now) {
                // What the bucket holds, counting the packets taken so far.
                let mut room = self.tokens
                    - ready
                        .iter()
                        .map(|(_, t): &Held| (t.data.len() + FRAME_OVERHEAD) as i64)
                        .sum::<i64>();
                while room > 0
                    && let Some(h) = q.pop_front()
                {
                    room -= (h.1.data.len() + FRAME_OVERHEAD) as i64;
                    ready.push(h);
                }
            }
        }
        ready
    }

    /// Returns packets of [`take_ready`](Self::take_ready) the ring had no
    /// room for, in their order, to the front of their priorities.
    pub(crate) fn put_back(&mut self, unsent: Vec<Held>) {
        for (mac, t) in unsent.into_iter().rev() {
            let p = self.priority(&t);
            self.held[usize::from(p)].push_front((mac, t));
        }
    }

    /// How long the driver may sleep while packets are held: until the
    /// earliest pause ends, or not at all when packets wait only for the
    /// next round's burst.
    pub(crate) fn wake_in(&self) -> Option<Duration> {
        let pfc = self.pfc.as_ref()?;
        if self.held.iter().all(VecDeque::is_empty) {
            return None;
        }
        let now = self.now();
        let runnable = self
            .held
            .iter()
            .enumerate()
            .any(|(p, q)| !q.is_empty() && !pfc.is_paused_at(p as u8, now));
        if runnable {
            // Until the bucket has room again.
            let short = u64::try_from(1 - self.tokens).unwrap_or(0);
            let mbps = u64::from(pfc.link_mbps());
            return Some(
                Duration::from_nanos(short * 8_000 / mbps)
                    .saturating_sub(Duration::from_nanos(now.saturating_sub(self.refilled))),
            );
        }
        let end = pfc.next_resume()?;
        Some(Duration::from_nanos(end.saturating_sub(now)))
    }

    /// The slow receiver's sleep of `d` (the test knob), watching the
    /// backlog every [`WATCH_EVERY`]: `watch` sends the PFC frame one
    /// calls for.
    pub(crate) fn slow_rx_wait(&mut self, d: Duration, mut watch: impl FnMut(&mut Self)) {
        let end = StdInstant::now() + d;
        loop {
            let left = end.saturating_duration_since(StdInstant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(WATCH_EVERY));
            if self.pfc.is_some() {
                watch(self);
            }
        }
    }

    /// A received MAC control frame.
    pub(crate) fn on_mac_control(&mut self, repr: &MacControlRepr) {
        let now = self.now();
        if let Some(pfc) = &mut self.pfc {
            pfc.on_frame(repr, now);
        }
    }

    /// The PFC frame `backlog` (frames waiting per priority) calls for.
    pub(crate) fn on_backlog(&mut self, backlog: &[u32; PRIORITIES]) -> Option<MacControlRepr> {
        let now = self.now();
        self.pfc.as_mut()?.observe_backlog(backlog, now)
    }

    pub(crate) fn pfc_on(&self) -> bool {
        self.pfc.is_some()
    }

    /// How many ring slots a receive may take, and the pause after it
    /// (the slow-receiver knob).
    pub(crate) fn rx_budget(&self) -> (usize, Option<Duration>) {
        match self.slow_rx {
            Some(d) => (SLOW_RX_FRAMES, Some(d)),
            None => (usize::MAX, None),
        }
    }

    /// The PFC counters (zero with PFC off).
    pub(crate) fn stats(&self) -> PfcStats {
        self.pfc
            .as_ref()
            .map_or_else(PfcStats::default, |p| p.stats(self.now()))
    }
}

/// Nanoseconds since `epoch`: the clock PFC's pauses and bucket run on.
fn nanos_since(epoch: StdInstant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

#[cfg(test)]
#[path = "pfc_tests.rs"]
mod tests;
