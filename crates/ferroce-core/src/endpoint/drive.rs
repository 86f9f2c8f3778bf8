//! The endpoint's sans-IO loop: packets in ([`Endpoint::handle_datagram`]),
//! packets out ([`Endpoint::poll_transmit`]) and time
//! ([`Endpoint::poll_timeout`], [`Endpoint::handle_timeout`]), and the books
//! they keep: which QPs may send (the active queue, the QPs waiting for the
//! in-flight cap), the packets in flight and the timer heap.

use std::net::IpAddr;

use ferroce_wire::{Opcode, TransportPacket};

use super::congestion::{paced_until, rate_limited, request_sent};
use super::{BURST, Ecn, Endpoint, GSI_QPN, MAX_IN_FLIGHT, PacketKind, Transmit};
use crate::log;
use crate::qp::{completer, replies, requester, responder};
use crate::tables::Tables;
use crate::time::Instant;
use crate::transmit::NotSent;
use crate::verbs::{QpType, RoceMode};

/// The 40-byte GRH of a received RoCE v1 packet, as on the wire.
pub type Grh = [u8; 40];

impl Endpoint {
    /// A received transport packet (BTH through ICRC, ICRC already checked)
    /// from `from`, not ECN-marked. Malformed or unexpected packets are
    /// dropped and counted.
    pub fn handle_datagram(&mut self, now: Instant, from: IpAddr, data: &[u8]) {
        self.handle_packet(now, from, None, None, Ecn::NotEct, data, false);
    }

    /// As [`Self::handle_datagram`], with the ECN field of the IP header
    /// it came in: a packet marked [`Ecn::Ce`] makes its QP answer with a
    /// CNP (see [`crate::cc`]).
    pub fn handle_datagram_ecn(&mut self, now: Instant, from: IpAddr, ecn: Ecn, data: &[u8]) {
        self.handle_packet(now, from, None, None, ecn, data, false);
    }

    /// A received RoCE v1 packet: as [`Self::handle_datagram`], with the
    /// GRH it came with (`from` is its SGID as an IP address, IPv4 for an
    /// IPv4-mapped GID). A UD receive gets that GRH as it is; the ECN bits
    /// of its traffic class count as an IP header's.
    pub fn handle_v1_packet(&mut self, now: Instant, from: IpAddr, grh: &Grh, data: &[u8]) {
        // Version (4 bits), then the traffic class across bytes 0 and 1.
        let traffic_class = (grh[0] << 4) | (grh[1] >> 4);
        let ecn = Ecn::from_traffic_class(traffic_class);
        self.handle_packet(now, from, None, Some(grh), ecn, data, false);
    }

    /// A packet in; `to` is its destination when it came to a multicast
    /// address (RoCE v2), else the GRH's (RoCE v1) or ours; `own`: a
    /// multicast packet this device sent, looped back to it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_packet(
        &mut self,
        now: Instant,
        from: IpAddr,
        to: Option<IpAddr>,
        grh: Option<&Grh>,
        ecn: Ecn,
        data: &[u8],
        own: bool,
    ) {
        // A request posted before the packet came is queued for it.
        self.absorb_posts();
        let _rx = log::rx_span(from, data).entered();
        let before = log::drops_before(&self.stats);
        self.stats.rx_packets += 1;
        if !self.take_multicast(from, to, grh, data, own) {
            self.receive(now, from, grh, ecn, data);
        }
        log::drops_since(before, &self.stats);
    }

    /// Takes a packet; `grh` is a RoCE v1 packet's.
    pub(super) fn receive(
        &mut self,
        now: Instant,
        from: IpAddr,
        grh: Option<&Grh>,
        ecn: Ecn,
        data: &[u8],
    ) {
        let Ok(pkt) = TransportPacket::new_checked(data) else {
            self.stats.rx_malformed += 1;
            return;
        };
        let dqpn = pkt.bth().dest_qp();
        if dqpn == GSI_QPN {
            let roce = if grh.is_some() {
                RoceMode::V1
            } else {
                RoceMode::V2
            };
            self.gsi.receive(&pkt, from, roce);
            return;
        }
        // RD's packets go to the EE context their RDETH names; the BTH's
        // QP is the RD QP behind it (see `rd`).
        let rd = pkt.info().transport == ferroce_wire::Transport::Rd;
        let target = match (rd, pkt.rdeth()) {
            (false, _) => dqpn,
            (true, Some(eec)) => eec.value(),
            (true, None) => {
                self.stats.rx_malformed += 1;
                return;
            }
        };
        if rd && self.qps.get(&target).is_none_or(|q| q.eec().is_none()) {
            self.stats.rx_unknown_qp += 1;
            return;
        }
        if pkt.bth().opcode() == Opcode::RD_RESYNC {
            // ferroce neither sends nor serves RESYNC (`rd`).
            self.stats.rx_unexpected += 1;
            return;
        }
        let Some(q) = self.qps.get_mut(&target) else {
            self.stats.rx_unknown_qp += 1;
            return;
        };
        if !q.receiving() {
            self.stats.rx_wrong_state += 1;
            return;
        }
        if pkt.bth().opcode() == Opcode::CNP {
            self.on_cnp(now, from, target, pkt.bth().pkey());
            return;
        }
        let info = pkt.info();
        // An XRC initiator takes responses only, a target requests only.
        let wrong_half = match q.init.qp_type {
            QpType::XrcIni => !info.response,
            QpType::XrcTgt => info.response,
            _ => false,
        };
        if info.transport != q.transport() || wrong_half {
            self.stats.rx_unexpected += 1;
            return;
        }
        if !q.takes_from(from) {
            self.stats.rx_wrong_source += 1;
            return;
        }
        let roce = if grh.is_some() {
            RoceMode::V1
        } else {
            RoceMode::V2
        };
        if !q.takes_version(roce) {
            self.stats.rx_wrong_roce += 1;
            return;
        }
        // The BTH key check of IBA's header validation, as rxe's: a packet of another
        // partition is dropped whatever it carries.
        if !crate::qp::pkey_matches(pkt.bth().pkey(), q.pkey()) {
            self.stats.rx_bad_pkey += 1;
            return;
        }
        if ecn == Ecn::Ce {
            self.on_ce(now, target);
        }
        if rd && !pkt.info().response {
            self.rd_bind(target, &pkt);
        }
        let Some(q) = self.qps.get_mut(&target) else {
            return;
        };
        let mut tables = Tables {
            mrs: &mut self.mrs,
            cqs: &mut self.cqs,
            srqs: &mut self.srqs,
            stats: &mut self.stats,
        };
        if pkt.info().response {
            completer::on_response(q, &pkt, &mut tables, now);
        } else {
            let arrival = responder::Arrival {
                from,
                to: self.local_addr,
                ecn,
                v1_grh: grh,
            };
            responder::on_request(q, &pkt, &arrival, &mut tables);
        }
        self.touched(target);
        self.raise_events(target);
        if rd {
            self.rd_wake(target);
        }
    }

    /// Whether a packet from `from` for QP `dest_qp` could be taken at all:
    /// it is for QP1 (any source: MADs come from anyone), or the QP exists,
    /// receives in its state, and (connected QPs) `from` is its peer: the
    /// same rules as [`Self::handle_datagram`], which checks more. A cheap filter for the I/O layer to run before the ICRC
    /// check, so that garbage costs a table lookup; [`Self::handle_datagram`]
    /// checks the same and more.
    pub fn accepts(&self, from: IpAddr, dest_qp: u32) -> bool {
        dest_qp == GSI_QPN
            || self
                .qps
                .get(&dest_qp)
                .is_some_and(|q| q.receiving() && q.takes_from(from))
    }

    /// Whether a packet for QP `dest_qp` could be taken from someone: QP1,
    /// or a QP that exists and receives in its state. For an I/O layer
    /// that must filter before it knows the sender's address (the raw
    /// backend has the frame's MAC only then); [`Self::handle_datagram`]
    /// checks the sender after.
    pub fn accepts_qp(&self, dest_qp: u32) -> bool {
        dest_qp == GSI_QPN || self.qps.get(&dest_qp).is_some_and(|q| q.receiving())
    }

    /// The next packet to send, if any: the active QPs take turns, one
    /// packet each; a QP's responses go before its new requests. While the
    /// endpoint has [`MAX_IN_FLIGHT`] packets in flight, requests wait
    /// (responses do not): many QPs at their full window would otherwise
    /// overrun the peer's receive buffer, and the losses cost a timeout
    /// each.
    ///
    /// CNPs go first of all. With ECN on (the default), packets whose path
    /// leaves the ECN bits clear leave ECT(0).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.absorb_posts();
        let mut t = self.next_cnp().or_else(|| self.next_transmit(now))?;
        self.mark_ecn(&mut t);
        Some(t)
    }

    fn next_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if let Some(t) = self.gsi.next_transmit(&mut self.pool) {
            self.stats.tx_packets += 1;
            return Some(t);
        }
        // Below the cap, QPs that waited for it go first, as many as the
        // room can take a burst from (not all of them: with 1,000 QPs
        // waiting, moving every one back and forth each time a packet's
        // worth of room appeared made the round O(QPs)). Only between
        // bursts, so that the QP at the front keeps its run of packets.
        if self.in_flight < MAX_IN_FLIGHT && !self.capped.is_empty() && self.burst == 0 {
            let room = (MAX_IN_FLIGHT - self.in_flight).div_ceil(u64::from(BURST));
            let n = (room as usize).min(self.capped.len());
            for qpn in self.capped.drain(..n).rev() {
                self.active.push_front(qpn);
            }
        }
        while let Some(qpn) = self.active.pop_front() {
            if self
                .qps
                .get(&qpn)
                .is_some_and(|q| q.init.qp_type == QpType::Rd)
            {
                // An RD QP sends through its EE contexts (`rd`).
                self.rd_hand_off(qpn);
                self.burst = 0;
                continue;
            }
            let capped = self.in_flight >= MAX_IN_FLIGHT;
            let Some(q) = self.qps.get_mut(&qpn) else {
                self.burst = 0;
                continue; // destroyed
            };
            let mut t = replies::next_response(q, &self.mrs, &mut self.pool);
            if t.is_none()
                && requester::has_work(q)
                && let Some(at) = paced_until(q, now)
            {
                // Held to DCQCN's rate: woken by its timer at `at`.
                q.cc.release_at = Some(at);
                q.scheduled = false;
                self.burst = 0;
                self.recount(qpn);
                continue;
            }
            if t.is_none() && capped {
                if !requester::has_work(q) {
                    q.scheduled = false;
                    self.burst = 0;
                    continue;
                }
                // One more packet, asking for an ACK, if the last ones did
                // not: a QP stopped mid-message would otherwise hold its
                // packets in flight (and others waiting) until a timeout.
                if requester::owes_ack_request(q) {
                    t = requester::next_packet(q, &mut self.mrs, &mut self.pool, now, true);
                }
                if t.is_none() {
                    self.capped.push_back(qpn);
                    self.burst = 0;
                    continue;
                }
            }
            if t.is_none() {
                // A paced QP asks for an ACK with every request: stopped
                // between releases, it would otherwise hold unacknowledged
                // packets until the retransmission timeout.
                let ask_ack = rate_limited(q);
                t = requester::next_packet(q, &mut self.mrs, &mut self.pool, now, ask_ack);
            }
            if let Some(Ok(t)) = &t
                && t.kind == PacketKind::Request
            {
                request_sent(q, now, t.data.len());
            }
            let Some(t) = t else {
                q.scheduled = false;
                self.burst = 0;
                if requester::stopped_at_fault(q) || q.sq.front().is_some_and(|w| w.done) {
                    // Reported now if nothing is outstanding before it, else
                    // when the responses to what is arrive. (A local
                    // operation with nothing before it is done at once.)
                    completer::complete_done(q, &mut self.cqs);
                    self.recount(qpn);
                    self.raise_events(qpn);
                    self.rd_wake(qpn);
                }
                continue;
            };
            let rc = q.init.qp_type.is_reliable();
            if !rc {
                completer::complete_done(q, &mut self.cqs);
            }
            // A QP keeps its turn for a burst of packets (a 64 KiB message
            // at MTU 4096), so that the I/O layer sees runs of one flow it
            // can send as one GSO train, then goes to the back.
            if self.burst + 1 < BURST {
                self.burst += 1;
                self.active.push_front(qpn);
            } else {
                self.burst = 0;
                self.active.push_back(qpn);
            }
            if rc {
                self.recount(qpn);
            } else {
                self.raise_events(qpn);
            }
            match t {
                Ok(t) => {
                    self.stats.tx_packets += 1;
                    return Some(t);
                }
                // The QP went on as if the packet had been lost on the wire.
                Err(NotSent::Emit(_)) => self.stats.tx_emit_errors += 1,
            }
        }
        None
    }

    /// When `handle_timeout` is next due (a QP timer). (It takes `&mut
    /// self` to drop heap entries whose QP's deadline has moved, so that
    /// the answer is exact.)
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.next_timer()
    }

    fn next_timer(&mut self) -> Option<Instant> {
        while let Some((t, qpn)) = self.timers.peek() {
            let Some(q) = self.qps.get_mut(&qpn) else {
                self.timers.pop(); // destroyed
                continue;
            };
            if q.timer_filed != Some(t) {
                self.timers.pop(); // an earlier entry of this QP took its place
                continue;
            }
            if q.next_deadline() == Some(t) {
                return Some(t);
            }
            // Moved later or stopped: file the QP again.
            self.timers.pop();
            q.timer_filed = None;
            self.recount(qpn);
        }
        None
    }

    /// Runs the timers due at `now`: retransmission, the end of RNR waits,
    /// and the pacer's releases.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.absorb_posts();
        for (t, qpn) in self.timers.take_due(now) {
            let Some(q) = self.qps.get_mut(&qpn) else {
                continue; // destroyed
            };
            if q.timer_filed != Some(t) {
                continue; // an earlier entry of this QP took its place
            }
            q.timer_filed = None;
            let released = q.cc.release_at.is_some_and(|r| r <= now);
            if released {
                q.cc.release_at = None; // the pacer lets it send again
            }
            if q.next_deadline().is_some_and(|d| d <= now) {
                let _timer = log::timer_span(qpn).entered();
                completer::on_timeout(q, &mut self.cqs, &mut self.stats, now);
                self.touched(qpn);
                self.raise_events(qpn);
                self.rd_wake(qpn);
            } else if released {
                self.touched(qpn);
            } else {
                self.recount(qpn); // moved later, or stopped: file it again
            }
        }
    }

    /// After anything that may have changed QP `qpn`: its packets in
    /// flight are counted again, and it joins the QPs that may have
    /// something to send.
    pub(super) fn touched(&mut self, qpn: u32) {
        self.recount(qpn);
        if let Some(q) = self.qps.get_mut(&qpn)
            && !q.scheduled
        {
            q.scheduled = true;
            self.active.push_back(qpn);
        }
    }

    /// Brings the endpoint's books up to date with QP `qpn`: its packets
    /// in flight, and its timer in the heap.
    fn recount(&mut self, qpn: u32) {
        if let Some(q) = self.qps.get_mut(&qpn) {
            let now = q.in_flight();
            self.in_flight = self.in_flight - u64::from(q.counted_in_flight) + u64::from(now);
            q.counted_in_flight = now;
            self.timers.file(qpn, q.next_deadline(), &mut q.timer_filed);
        }
    }
}
