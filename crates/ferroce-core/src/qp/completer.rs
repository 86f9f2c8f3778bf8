//! The completer: processes ACKs, NAKs, READ responses and atomic ACKs,
//! retransmits (go-back-N) on the local ACK timeout and on NAKs, waits out
//! RNR NAKs, and completes send work requests in posting order.

use rustc_hash::FxHashMap as HashMap;

use ferroce_wire::aeth::{NakCode, Syndrome, rnr_timer_us};
use ferroce_wire::opcode::{Kind, Position};
use ferroce_wire::{Psn, TransportPacket};

use super::rd::RdRole;
use super::{Qp, SendWqe, requester};
use crate::cq::Cq;
use crate::log::{self, Why};
use crate::mr::MrTable;
use crate::stats::Stats;
use crate::tables::Tables;
use crate::time::{Instant, local_ack_timeout};
use crate::verbs::{QpState, SendOp, WcOpcode, WcStatus, WorkCompletion};
use tracing::debug;

/// A response packet for this QP.
pub(crate) fn on_response(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    t: &mut Tables<'_>,
    now: Instant,
) {
    let (mrs, cqs, stats) = (&mut *t.mrs, &mut *t.cqs, &mut *t.stats);
    if qp.state != QpState::Rts && qp.state != QpState::Sqd {
        stats.rx_wrong_state += 1;
        return;
    }
    let psn = pkt.bth().psn();
    // A response answers a request outstanding: its PSN lies between the
    // first of the oldest unfinished request and the last PSN sent. Any
    // other is stale (for requests already complete) or a ghost (for PSNs
    // never sent) and is dropped, as rxe's completer drops a response when
    // no request is outstanding. Acting on one let a stray NAK put an idle
    // QP in the error state, and a stray ACK move `acked` past PSNs not yet
    // sent.
    let oldest = qp.sq.iter().find(|w| w.started && !w.done);
    let newest = qp.sq.iter().rev().find(|w| w.started);
    let stale_before = oldest.map_or(qp.req.next_psn, |w| w.first_psn);
    let in_window = matches!(
        (oldest, newest),
        (Some(_), Some(hi)) if psn.distance(stale_before) >= 0 && psn.distance(hi.last_psn()) <= 0
    );
    if !in_window {
        if psn.distance(stale_before) < 0 {
            stats.rx_duplicate += 1;
        } else {
            stats.rx_unexpected += 1;
        }
        return;
    }
    let kind = pkt.info().kind;
    // Data into local memory first, then the acknowledgement.
    match kind {
        Kind::ReadResponse => read_response(qp, pkt, psn, mrs, stats),
        Kind::AtomicAck => atomic_ack(qp, pkt, psn, mrs, stats),
        _ => {}
    }
    if let Some(aeth) = pkt.aeth() {
        log::nak_received(qp.qpn, aeth.syndrome());
        match aeth.syndrome() {
            Syndrome::Ack { .. } => {
                if let Some(lost) = acknowledge(qp, psn, kind) {
                    stats.retransmits += 1;
                    requester::rewind(qp, lost);
                }
            }
            Syndrome::RnrNak { timer } => {
                // Like any NAK, an RNR NAK acknowledges every PSN before its
                // own (rxe's check_psn completes the WQEs it passes first).
                // Without this, when the ACK of a WRITE before the SEND was
                // lost, the WRITE failed with RNR_RETRY_EXC_ERR in its place.
                if let Some(lost) = acknowledge(qp, psn - 1, Kind::Ack) {
                    stats.retransmits += 1;
                    requester::rewind(qp, lost);
                } else {
                    rnr_nak(qp, psn, timer, now);
                }
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                // Everything before `psn` arrived; resend from `psn`, or
                // from a READ or atomic whose response was lost before it.
                let from = acknowledge(qp, psn - 1, Kind::Ack).unwrap_or(psn);
                stats.retransmits += 1;
                requester::rewind(qp, from);
            }
            Syndrome::Nak(code) => {
                let status = match code {
                    NakCode::InvalidRequest => WcStatus::RemInvReqErr,
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::InvalidRdRequest => WcStatus::RemInvRdReqErr,
                    _ => WcStatus::RemOpErr,
                };
                let _ = acknowledge(qp, psn - 1, Kind::Ack);
                fail_at(qp, psn, status, cqs);
                return;
            }
            Syndrome::Reserved { .. } => stats.rx_unexpected += 1,
        }
    }
    complete_done(qp, cqs);
    rearm(qp, now);
}

/// Marks done every send/write WQE acknowledged by `psn`, which a packet of
/// `kind` carried. A plain ACK (an ACKNOWLEDGE, not a response that carries
/// data) past an unfinished READ or atomic means its response was lost:
/// returns the PSN to resend from.
fn acknowledge(qp: &mut Qp, psn: Psn, kind: Kind) -> Option<Psn> {
    let mut progress = false;
    let mut lost_response = None;
    let mut blocked_at = None;
    for w in qp.sq.iter_mut() {
        if !w.started || w.done {
            continue;
        }
        if psn.distance(w.first_psn) < 0 {
            break;
        }
        if w.is_read_or_atomic() {
            // Its own response completes it. A plain ACK at or past it
            // means that response was lost (IBA 9.7.5.1.3, implied NAK).
            blocked_at = Some(w.first_psn);
            if kind == Kind::Ack && psn.distance(w.last_psn()) >= 0 {
                lost_response = Some(w.first_psn);
            }
            break;
        }
        if psn.distance(w.last_psn()) < 0 {
            break; // part of a multi-packet message
        }
        w.done = true;
        progress = true;
    }
    let acked_to = blocked_at.map_or(psn, |p| p - 1);
    if qp.comp.acked.is_none_or(|a| acked_to.distance(a) > 0) {
        qp.comp.acked = Some(acked_to);
        progress = true;
    }
    if progress {
        qp.comp.retry_left = qp.cfg.retry_cnt;
        qp.comp.rnr_left = qp.cfg.rnr_retry;
    }
    lost_response
}

fn read_response(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
    stats: &mut Stats,
) {
    // The answer to an ATOMIC WRITE or FLUSH: no data, its AETH
    // acknowledges it.
    if let Some(w) = qp
        .sq
        .iter_mut()
        .find(|w| w.started && !w.done && w.first_psn == psn && w.answered_empty())
    {
        if !pkt.payload().is_empty() || pkt.info().position != Position::Only {
            w.done = true;
            w.status = WcStatus::BadRespErr;
        }
        return;
    }
    let mtu = qp.cfg.mtu.bytes() as u64;
    let Some((idx, w)) = qp
        .sq
        .iter_mut()
        .enumerate()
        .find(|(_, w)| w.started && !w.done && matches!(w.wr.op, SendOp::Read { .. }))
    else {
        stats.rx_unexpected += 1;
        return;
    };
    let expected = w.first_psn + (w.read_received / mtu) as u32;
    if psn != expected {
        stats.rx_out_of_sequence += 1;
        // A gap (not a stale duplicate): ask at once for the rest, unless
        // that request is already queued or was already made from this
        // PSN. Without the last check every response of the stream after a
        // gap asked again, and each request had the responder resend the
        // whole rest: a 512-packet READ at 2% loss cost 195k packets. (rxe
        // likewise starts no second retry while one is under way.) A lost
        // request is recovered by the retransmit timer.
        let gap = psn.distance(expected) > 0;
        if gap && qp.req.wqe > idx && qp.comp.read_resumed_at != Some(expected) {
            qp.comp.read_resumed_at = Some(expected);
            stats.retransmits += 1;
            requester::rewind(qp, expected);
        }
        return;
    }
    let data = pkt.payload();
    let last = pkt.info().position.ends();
    let fits = w.read_received + data.len() as u64 <= w.len;
    let full_size = last || data.len() as u64 == mtu;
    if !(fits && full_size) {
        w.done = true;
        w.status = WcStatus::BadRespErr;
        return;
    }
    match mrs.scatter(&w.wr.sg, w.read_received, data) {
        Ok(()) => {}
        Err(_) => {
            // The response is sound; the local region is gone (deregistered
            // since the READ started): a local protection error, as rxe's.
            w.done = true;
            w.status = WcStatus::LocProtErr;
            return;
        }
    }
    w.read_received += data.len() as u64;
    if last {
        w.done = true;
        if w.read_received != w.len {
            w.status = WcStatus::BadRespErr;
        }
    }
    // Progress: the retry budget starts over.
    qp.comp.retry_left = qp.cfg.retry_cnt;
}

fn atomic_ack(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
    stats: &mut Stats,
) {
    let Some(orig) = pkt.atomic_ack_eth().map(|a| a.orig()) else {
        return;
    };
    let Some(w) = qp.sq.iter_mut().find(|w| {
        w.started
            && !w.done
            && w.first_psn == psn
            && matches!(
                w.wr.op,
                SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
            )
    }) else {
        stats.rx_duplicate += 1;
        return;
    };
    // The original value lands in local memory in host byte order, as
    // ibverbs atomics deliver it.
    match mrs.scatter(&w.wr.sg, 0, &orig.to_ne_bytes()) {
        Ok(()) => {}
        Err(_) => w.status = WcStatus::LocProtErr,
    }
    w.done = true;
}

fn rnr_nak(qp: &mut Qp, psn: Psn, timer: u8, now: Instant) {
    if qp.cfg.rnr_retry != 7 {
        if qp.comp.rnr_left == 0 {
            if let Some(w) = qp.sq.iter_mut().find(|w| w.started && !w.done) {
                w.done = true;
                w.status = WcStatus::RnrRetryExcErr;
            }
            log::state_change(
                qp.qpn,
                qp.state,
                QpState::Err,
                Why::Completion(WcStatus::RnrRetryExcErr),
            );
            qp.state = QpState::Err;
            return;
        }
        qp.comp.rnr_left -= 1;
    }
    let wait = core::time::Duration::from_micros(rnr_timer_us(timer).into());
    debug!(qpn = %log::Qpn(qp.qpn), %psn, ?wait, rnr_retries_left = qp.comp.rnr_left, "RNR wait");
    qp.comp.rnr_until = Some(now.after(wait));
    qp.comp.retransmit_at = None;
    requester::rewind(qp, psn);
}

/// A NAK other than sequence or RNR: the WQE holding `psn` fails; the QP
/// goes to the error state and the rest is flushed.
fn fail_at(qp: &mut Qp, psn: Psn, status: WcStatus, cqs: &mut HashMap<u32, Cq>) {
    if let Some(w) = qp
        .sq
        .iter_mut()
        .find(|w| w.started && !w.done && psn.distance(w.last_psn()) <= 0)
    {
        w.done = true;
        w.status = status;
    }
    complete_done(qp, cqs);
    log::state_change(qp.qpn, qp.state, QpState::Err, Why::Completion(status));
    qp.state = QpState::Err;
    flush(qp, cqs);
}

/// Completes finished WQEs from the head of the send queue, in order.
pub(crate) fn complete_done(qp: &mut Qp, cqs: &mut HashMap<u32, Cq>) {
    while qp.sq.front().is_some_and(|w| w.done) {
        let Some(w) = qp.sq.pop_front() else { break };
        if qp.req.wqe == 0 {
            // The requester was going back over this message (a rewind)
            // and all of it has now been acknowledged: it goes on after
            // it. Left at its offset, it skipped into the middle of the
            // next message, and the PSN sequence error that followed cost
            // another round trip.
            qp.req.offset = 0;
            qp.req.next_psn = w.last_psn() + 1;
        } else {
            qp.req.wqe -= 1;
        }
        let failed = w.status != WcStatus::Success;
        note_rd_done(qp, &w, w.status);
        if qp.signals(&w)
            && let Some(cq) = cqs.get_mut(&qp.init.send_cq)
        {
            cq.push(WorkCompletion {
                wr_id: w.wr.wr_id,
                status: w.status,
                opcode: w.wc_opcode(),
                // An EE context completes on the RD QP that posted it.
                qpn: w.origin.map_or(qp.qpn, |(q, _)| q),
                byte_len: match w.wr.op {
                    // rxe reports the length flushed.
                    SendOp::Flush { remote, .. } => remote.len() as u32,
                    _ => w.len as u32,
                },
                imm: None,
                invalidated_rkey: None,
                src_qp: 0,
                network: None,
            });
        }
        if failed {
            log::state_change(qp.qpn, qp.state, QpState::Err, Why::Completion(w.status));
            qp.state = QpState::Err;
            flush(qp, cqs);
            return;
        }
    }
}

/// An EE context records how the RD QP's request it carried ended, for
/// that QP to take it back (`endpoint::rd`).
fn note_rd_done(qp: &mut Qp, w: &SendWqe, status: WcStatus) {
    if let (Some((_, token)), Some(e)) = (w.origin, qp.rd.as_mut().and_then(RdRole::eec_mut)) {
        e.last = Some((token, status));
    }
}

/// Completes every queued work request with `WR_FLUSH_ERR` (QP in error).
pub(crate) fn flush(qp: &mut Qp, cqs: &mut HashMap<u32, Cq>) {
    qp.comp.retransmit_at = None;
    qp.comp.rnr_until = None;
    for w in qp.sq.take_all() {
        note_rd_done(qp, &w, WcStatus::WrFlushErr);
        if let Some(cq) = cqs.get_mut(&qp.init.send_cq) {
            let qpn = w.origin.map_or(qp.qpn, |(q, _)| q);
            cq.push(WorkCompletion::flushed(w.wr.wr_id, w.wc_opcode(), qpn));
        }
    }
    qp.req.wqe = 0;
    qp.req.offset = 0;
    // An EE context's message under way was the RD QP's receive.
    let recv_qpn = qp.access_as().1;
    let pending = qp.resp.recv.take().map(|(wr, _)| wr);
    for wr in pending.into_iter().chain(qp.rq.take_all()) {
        if let Some(cq) = cqs.get_mut(&qp.init.recv_cq) {
            cq.push(WorkCompletion::flushed(wr.wr_id, WcOpcode::Recv, recv_qpn));
        }
    }
}

/// Restarts the retransmit timer while anything is unacknowledged.
fn rearm(qp: &mut Qp, now: Instant) {
    // Armed while packets are unacknowledged: a message begun but paused
    // (the endpoint's cap on packets in flight) with all it sent
    // acknowledged has nothing to time out, and used to spend its retry
    // budget on a wait that was not a loss. The next packet it sends
    // arms the timer again.
    let outstanding = qp.sq.iter().any(|w| w.started && !w.done)
        && (qp.comp.acked.is_none() || qp.in_flight() > 0);
    qp.comp.retransmit_at = if outstanding && qp.comp.rnr_until.is_none() {
        local_ack_timeout(qp.cfg.timeout).map(|d| now.after(d))
    } else {
        None
    };
}

/// The timers of this QP at `now`.
pub(crate) fn on_timeout(qp: &mut Qp, cqs: &mut HashMap<u32, Cq>, stats: &mut Stats, now: Instant) {
    if qp.comp.rnr_until.is_some_and(|t| t <= now) {
        debug!(qpn = %log::Qpn(qp.qpn), "RNR wait over: resending");
        qp.comp.rnr_until = None;
        rearm(qp, now);
    }
    if qp.comp.retransmit_at.is_some_and(|t| t <= now) {
        let Some(head) = qp.sq.iter().find(|w| w.started && !w.done) else {
            qp.comp.retransmit_at = None;
            return;
        };
        if qp.comp.acked.is_some() && qp.in_flight() == 0 {
            qp.comp.retransmit_at = None; // paused, nothing lost
            return;
        }
        if qp.comp.retry_left == 0 {
            let psn = head.first_psn;
            fail_at(qp, psn, WcStatus::RetryExcErr, cqs);
            return;
        }
        qp.comp.retry_left -= 1;
        debug!(
            qpn = %log::Qpn(qp.qpn),
            retries_left = qp.comp.retry_left,
            "retransmission timeout"
        );
        // Resume after what was acknowledged, inside the oldest message.
        let from = match qp.comp.acked {
            Some(a)
                if (a + 1).distance(head.first_psn) > 0
                    && (a + 1).distance(head.last_psn()) <= 0
                    && !head.is_read_or_atomic() =>
            {
                a + 1
            }
            // `rewind` resumes a READ after the responses it has.
            _ if matches!(head.wr.op, SendOp::Read { .. }) => head.last_psn(),
            _ => head.first_psn,
        };
        stats.retransmits += 1;
        requester::rewind(qp, from);
        rearm(qp, now);
    }
}
