//! Holding responses back for a moment, so that they leave in the same
//! system call as the application's next request.
//!
//! On loopback a send costs the sender about 3-4 µs of system call, more
//! than the engine's whole work on a small message. A round of progress the
//! application runs right after receiving a request finds the ACK it owes
//! and nothing else to send; sent alone, that ACK's system call came just
//! before the application's reply, on the critical path of every
//! ping-pong (8-byte SEND latency 8 µs against about 5.5 µs with the
//! hold). Held, the ACK goes out with the reply, and in the same UDP GSO
//! train when the sizes allow.
//!
//! The contract: only the rounds of an application polling in a tight loop
//! hold (the driver says which); only batches of nothing
//! but responses are held; a hold lasts at most [`RESPONSE_HOLD`]; any
//! other round (the driver thread's, a flush) releases it. A peer that
//! waits on our ACKs while our application never posts would pay the hold
//! on every message, so after a hold that ended without a request, holds
//! are tried only once in [`HOLD_TRY_EVERY`] batches until one pays again.
//!
//! This module sits below [`crate::driver`]: the driver owns a
//! [`ResponseHold`]; nothing here knows the driver.

use std::time::Duration;

use ferroce_core::{Instant, PacketKind, Transmit};

/// The longest an application round holds responses back: about one
/// loopback round trip.
pub(crate) const RESPONSE_HOLD: Duration = Duration::from_micros(8);

/// While holds do not pay, one response batch in this many is held, to
/// find out whether the traffic has changed.
pub(crate) const HOLD_TRY_EVERY: u32 = 64;

/// Responses held back, and whether holding pays in this traffic.
#[derive(Debug)]
pub(crate) struct ResponseHold {
    held: Vec<Transmit>,
    /// When the oldest of `held` was held back.
    since: Option<Instant>,
    /// The last hold ended with a request going out with it.
    pays: bool,
    /// Response batches sent without a hold since the last try.
    since_try: u32,
}

impl Default for ResponseHold {
    fn default() -> Self {
        Self {
            held: Vec::new(),
            since: None,
            pays: true,
            since_try: 0,
        }
    }
}

impl ResponseHold {
    /// Given what a round is about to send (`out`, fresh from the engine),
    /// either takes it all into the hold (`out` is left empty) or puts
    /// everything held in front of it, to be sent now.
    pub(crate) fn apply(&mut self, out: &mut Vec<Transmit>, now: Instant, app: bool) {
        if out.is_empty() && self.held.is_empty() {
            return;
        }
        let only_responses = out.iter().all(|t| t.kind == PacketKind::Response);
        let young = self.since.is_none_or(|s| now.since(s) < RESPONSE_HOLD);
        if app && only_responses && young {
            if self.since.is_none() {
                if !self.pays && self.since_try < HOLD_TRY_EVERY {
                    self.since_try += 1;
                    return;
                }
                self.since_try = 0;
                self.since = Some(now);
            }
            self.held.append(out);
            return;
        }
        if self.since.take().is_some() {
            self.pays = !only_responses;
            // Held first: they are older (the send then puts requests
            // before responses, each flow in order).
            self.held.append(out);
            std::mem::swap(&mut self.held, out);
        }
    }

    /// Whether holding pays in this traffic: the last hold ended with a
    /// request going out with it.
    pub(crate) fn pays(&self) -> bool {
        self.pays
    }

    /// When the hold ends at the latest: a round then sends what it holds,
    /// whether or not the application polls again.
    pub(crate) fn releases_at(&self) -> Option<Instant> {
        self.since.map(|s| s.after(RESPONSE_HOLD))
    }

    /// How many packets are held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use ferroce_core::Ecn;
    use ferroce_core::verbs::Path;

    use super::*;

    const ACK: u8 = 0x11; // RC ACKNOWLEDGE
    const SEND_ONLY: u8 = 0x04; // RC SEND ONLY

    fn packet(opcode: u8) -> Transmit {
        Transmit {
            path: Path {
                remote: IpAddr::V4(Ipv4Addr::LOCALHOST),
                udp_src_port: 0xc000,
                traffic_class: 0,
                hop_limit: 64,
                roce: ferroce_core::verbs::RoceMode::V2,
            },
            kind: if opcode == ACK {
                PacketKind::Response
            } else {
                PacketKind::Request
            },
            ecn: Ecn::NotEct,
            data: vec![opcode, 0, 0, 0],
        }
    }

    fn at(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    #[test]
    fn ack_waits_for_the_next_request_and_leaves_first() {
        let mut h = ResponseHold::default();
        let mut out = vec![packet(ACK)];
        h.apply(&mut out, at(0), true);
        assert!(out.is_empty(), "an application round holds a lone ACK");
        h.apply(&mut out, at(1), true);
        assert_eq!(h.len(), 1);
        let mut out = vec![packet(SEND_ONLY)];
        h.apply(&mut out, at(2), true);
        let ops: Vec<u8> = out.iter().map(|t| t.data[0]).collect();
        assert_eq!(ops, [ACK, SEND_ONLY]);
        assert_eq!(h.len(), 0);
    }

    #[test]
    fn a_hold_ends_after_its_time_or_with_a_driver_round() {
        let mut h = ResponseHold::default();
        let mut out = vec![packet(ACK)];
        h.apply(&mut out, at(0), true);
        let mut out = Vec::new();
        h.apply(&mut out, at(8), true);
        assert_eq!(out.len(), 1, "released after RESPONSE_HOLD");

        let mut h = ResponseHold::default();
        let mut out = vec![packet(ACK)];
        h.apply(&mut out, at(0), true);
        let mut out = Vec::new();
        h.apply(&mut out, at(1), false);
        assert_eq!(out.len(), 1, "a driver round never holds");
        let mut out = vec![packet(ACK)];
        h.apply(&mut out, at(2), false);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn holds_that_do_not_pay_are_only_tried_now_and_then() {
        let mut h = ResponseHold::default();
        let mut out = vec![packet(ACK)];
        h.apply(&mut out, at(0), true);
        let mut out = Vec::new();
        h.apply(&mut out, at(10), true); // expired: did not pay
        assert_eq!(out.len(), 1);
        let mut held = 0;
        for i in 0..HOLD_TRY_EVERY + 1 {
            let mut out = vec![packet(ACK)];
            h.apply(&mut out, at(100 + u64::from(i) * 100), true);
            if out.is_empty() {
                held += 1;
                // A request joins this one: holding pays again.
                let mut out = vec![packet(SEND_ONLY)];
                h.apply(&mut out, at(101 + u64::from(i) * 100), true);
                assert_eq!(out.len(), 2);
            }
        }
        assert_eq!(held, 1, "one try in {HOLD_TRY_EVERY}");
        let mut out = vec![packet(ACK)];
        h.apply(&mut out, at(1_000_000), true);
        assert!(out.is_empty(), "paying again, holds are back");
    }
}
