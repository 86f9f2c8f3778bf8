//! The RC responder: checks the PSN of each request and executes it (SEND
//! into a posted receive, RDMA WRITE into registered memory; READs and
//! atomics in [`super::replies`], which also queues the ACKs and NAKs).
//! Duplicates are re-acknowledged, a duplicate READ or atomic answered only
//! from the record of what was served ([`super::resources`]); a gap is NAKed
//! once. UC and UD receive in [`super::unreliable`], with the same SEND and
//! WRITE execution.
//!
//! Receive WQEs come from the QP's own receive queue, or from its shared
//! receive queue when it has one ([`take_recv`]); the rest is the same.

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use ferroce_wire::aeth::{NakCode, Syndrome};
use ferroce_wire::opcode::Kind;
use ferroce_wire::{Psn, TransportPacket};

use super::Qp;
use super::replies::{
    atomic, atomic_write, duplicate_atomic, duplicate_empty, duplicate_read, flush, owe_ack,
    read_request,
};
pub(crate) use super::unreliable::Arrival;
use super::unreliable::{uc_receive, ud_receive};
use crate::cq::Cq;
use crate::mr::{MrTable, RemoteAccess};
use crate::srq::Srq;
use crate::stats::Stats;
use crate::tables::Tables;
use crate::verbs::{
    Access, QpState, QpType, QueuedRecv, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

/// What executing one request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Done; acknowledge if asked.
    Ok,
    /// No receive posted: RNR NAK, PSN not consumed.
    Rnr,
    /// Fatal for the QP: NAK with this code.
    Nak(NakCode),
    /// READ: responses queued (they acknowledge).
    Responded,
    /// A READ or atomic beyond the responder resources while all their
    /// responses are still owed: dropped unexecuted, PSN not consumed (the
    /// requester sends it again).
    OverDepth,
}

/// The syndrome of every ACK the responder sends: it does no end-to-end
/// flow control, so the credit count is the "invalid" code, 31, which tells
/// the requester not to limit itself by credits (rxe's AETH_ACK_UNLIMITED).
pub(super) const ACK: Syndrome = Syndrome::Ack {
    credits: NO_CREDIT_COUNT,
};

/// The AETH credit count meaning "no credit count".
const NO_CREDIT_COUNT: u8 = 31;

/// MSNs count the messages completed, modulo 2^24 (the AETH's 24 bits).
pub(super) fn next_msn(msn: u32) -> u32 {
    (msn + 1) & MSN_MASK
}

/// The bits of an MSN.
const MSN_MASK: u32 = 0xff_ffff;

/// The receive WQE for a message that needs one: from the QP's SRQ when
/// it has one (which may raise the SRQ's limit event), else from its own
/// receive queue.
pub(super) fn take_recv(qp: &mut Qp, srqs: &mut HashMap<u32, Srq>) -> Option<QueuedRecv> {
    match qp.init.srq {
        Some(h) => srqs.get_mut(&h)?.take(),
        None => qp.rq.pop_front(),
    }
}

/// Whether [`take_recv`] would find a WQE.
fn has_recv(qp: &Qp, srqs: &HashMap<u32, Srq>) -> bool {
    match qp.init.srq {
        Some(h) => srqs.get(&h).is_some_and(|s| !s.wqes.is_empty()),
        None => !qp.rq.is_empty(),
    }
}

/// Puts back, at the front, a WQE taken for a message that was dropped.
pub(crate) fn give_back(qp: &mut Qp, srqs: &mut HashMap<u32, Srq>, wr: QueuedRecv) {
    match qp.init.srq {
        Some(h) => {
            if let Some(srq) = srqs.get_mut(&h) {
                srq.give_back(wr);
            }
        }
        None => qp.rq.push_front(wr),
    }
}

/// A multicast copy for this UD QP, attached to `group`.
pub(crate) fn on_multicast(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    from: IpAddr,
    grh: Option<&crate::endpoint::Grh>,
    group: IpAddr,
    t: &mut Tables<'_>,
) {
    let arrival = Arrival {
        from,
        to: Some(group),
        ecn: crate::transmit::Ecn::NotEct,
        v1_grh: grh,
    };
    ud_receive(qp, pkt, &arrival, t)
}

/// A request packet for this QP.
pub(crate) fn on_request(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    arrival: &Arrival<'_>,
    t: &mut Tables<'_>,
) {
    match qp.init.qp_type {
        QpType::Ud => return ud_receive(qp, pkt, arrival, t),
        QpType::Uc => return uc_receive(qp, pkt, t),
        QpType::Rc | QpType::XrcTgt => {}
        QpType::XrcIni | QpType::Rd => {
            // Requests to an initiator are dropped before they get here,
            // and an RD QP's go to the EE context their RDETH names.
            t.stats.rx_unexpected += 1;
            return;
        }
    }
    let psn = pkt.bth().psn();
    let d = psn.distance(qp.resp.epsn);
    if d < 0 {
        t.stats.rx_duplicate += 1;
        duplicate(qp, pkt, psn, t.mrs, t.stats);
        return;
    }
    if d > 0 {
        t.stats.rx_out_of_sequence += 1;
        if !qp.resp.nak_sent {
            qp.resp.nak_sent = true;
            let epsn = qp.resp.epsn;
            tracing::debug!(qpn = %crate::log::Qpn(qp.qpn), expected = %epsn, "NAK sent: PSN sequence error");
            owe_ack(qp, epsn, Syndrome::Nak(NakCode::PsnSequenceError), t.stats);
        }
        return;
    }
    let outcome = match bind_xrc_srq(qp, pkt, t).and_then(|()| check_rd(qp, pkt, t)) {
        Ok(()) => execute(qp, pkt, psn, t),
        Err(code) => Outcome::Nak(code),
    };
    qp.resp.nak_sent = false;
    match outcome {
        Outcome::Ok => {
            qp.resp.epsn = psn + 1;
            if pkt.bth().ack_req() {
                owe_ack(qp, psn, ACK, t.stats);
            }
        }
        Outcome::Responded => {}
        Outcome::OverDepth => t.stats.rx_over_depth += 1,
        Outcome::Rnr => {
            t.stats.rnr_naks_sent += 1;
            let timer = qp.cfg.min_rnr_timer;
            tracing::debug!(qpn = %crate::log::Qpn(qp.qpn), %psn, timer, "RNR NAK sent: no receive posted");
            owe_ack(qp, psn, Syndrome::RnrNak { timer }, t.stats);
        }
        Outcome::Nak(code) => {
            owe_ack(qp, psn, Syndrome::Nak(code), t.stats);
            crate::log::state_change(
                qp.qpn,
                qp.state,
                QpState::Err,
                crate::log::Why::NakSent(code),
            );
            qp.state = QpState::Err;
            super::completer::flush(qp, t.cqs);
        }
    }
}

/// An XRC target takes the request at the expected PSN into the XRC SRQ
/// its XRCETH names: that SRQ's PD (for memory), its WQEs and its CQ
/// become the QP's for the request. The SRQ must exist, be an XRC SRQ of
/// the target's domain, and be the one the message began with; else the
/// request is refused as invalid (IBA A14 gives the target no other way to
/// answer). Other QPs take every request as they are.
fn bind_xrc_srq(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    t: &mut Tables<'_>,
) -> Result<(), NakCode> {
    if qp.init.qp_type != QpType::XrcTgt {
        return Ok(());
    }
    let srqn = pkt.xrceth().map(|x| x.value());
    let xrc = srqn
        .and_then(|n| t.srqs.get(&n))
        .and_then(|s| Some((s.pd, s.xrc?)));
    let open = qp.resp.recv.is_some() || qp.resp.write.is_some();
    let (srqn, (pd, xrc)) = match (srqn, xrc) {
        (Some(n), Some(found)) if Some(found.1.xrcd) == qp.xrcd => (n, found),
        _ => {
            t.stats.rx_bad_xrc_srq += 1;
            tracing::debug!(qpn = %crate::log::Qpn(qp.qpn), srqn, "NAK: XRCETH names no XRC SRQ of the target's domain");
            return Err(NakCode::InvalidRequest);
        }
    };
    if open && qp.init.srq != Some(srqn) {
        t.stats.rx_bad_xrc_srq += 1;
        return Err(NakCode::InvalidRequest);
    }
    qp.init.pd = pd;
    qp.init.srq = Some(srqn);
    qp.init.recv_cq = xrc.cq;
    Ok(())
}

/// An EE context takes the request at the expected PSN for the RD QP it
/// was bound to (`endpoint::rd`): one of its domain, ready, with the
/// DETH's Q_Key, and the same for every packet of a message. Else NAK
/// invalid RD request. Other QPs take every request as they are.
fn check_rd(qp: &Qp, pkt: &TransportPacket<&[u8]>, t: &mut Tables<'_>) -> Result<(), NakCode> {
    let Some(e) = qp.eec() else { return Ok(()) };
    let dest = e.bound.and_then(|b| b.dest);
    let qkey = pkt.deth().map(|d| d.qkey());
    let ok = dest.is_some_and(|d| d.qpn == pkt.bth().dest_qp()) && qkey == Some(qp.cfg.qkey);
    if !ok {
        t.stats.rx_bad_rd += 1;
        tracing::debug!(eec = %crate::log::Qpn(qp.qpn), dest_qp = %crate::log::Qpn(pkt.bth().dest_qp()), "NAK: invalid RD request (no such RD QP of the domain, or another Q_Key)");
        return Err(NakCode::InvalidRdRequest);
    }
    Ok(())
}

fn duplicate(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
    stats: &mut Stats,
) {
    match pkt.info().kind {
        Kind::ReadRequest => duplicate_read(qp, pkt, psn, mrs, stats),
        Kind::Atomic => duplicate_atomic(qp, psn, stats),
        Kind::AtomicWrite | Kind::Flush => duplicate_empty(qp, psn, stats),
        _ => {
            let last = qp.resp.epsn - 1;
            owe_ack(qp, last, ACK, stats);
        }
    }
}

fn execute(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, psn: Psn, t: &mut Tables<'_>) -> Outcome {
    match pkt.info().kind {
        Kind::Send => send(qp, pkt, t),
        Kind::Write => write(qp, pkt, t),
        Kind::ReadRequest => read_request(qp, pkt, psn, t.mrs),
        Kind::Atomic => atomic(qp, pkt, psn, t.mrs),
        Kind::AtomicWrite => atomic_write(qp, pkt, psn, t.mrs),
        Kind::Flush => flush(qp, pkt, psn, t.mrs),
        _ => Outcome::Nak(NakCode::InvalidRequest),
    }
}

pub(super) fn send(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, t: &mut Tables<'_>) -> Outcome {
    let position = pkt.info().position;
    if position.starts() != qp.resp.recv.is_none() {
        // A FIRST while a message is open, or a MIDDLE/LAST with none.
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    if qp.resp.recv.is_none() {
        match take_recv(qp, t.srqs) {
            Some(wr) => {
                if let Err(why) = check_recv(qp, t, &wr) {
                    return recv_fault(qp, t, &wr, &why);
                }
                qp.resp.recv = Some((wr, 0));
            }
            None => return Outcome::Rnr,
        }
    }
    let Some((wr, filled)) = qp.resp.recv.as_mut() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    let data = pkt.payload();
    let copied = t.mrs.scatter(&wr.sg, *filled, data);
    if copied.is_err() {
        let wr = wr.clone();
        qp.resp.recv = None;
        // Its region deregistered since the message began, or the buffer
        // too small for it.
        if let Err(why) = check_recv(qp, t, &wr) {
            return recv_fault(qp, t, &wr, &why);
        }
        complete_recv(
            qp,
            t.cqs,
            &wr,
            WcStatus::LocLenErr,
            WcOpcode::Recv,
            0,
            None,
            None,
            false,
        );
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    *filled += data.len() as u64;
    if position.ends() {
        let Some((wr, len)) = qp.resp.recv.take() else {
            return Outcome::Ok;
        };
        let inv = pkt.ieth();
        if let Some(rkey) = inv
            && let Err(why) = t.mrs.invalidate(qp.init.pd, rkey, Some(qp.qpn))
        {
            tracing::debug!(
                qpn = %crate::log::Qpn(qp.qpn),
                rkey = %format_args!("{rkey:#x}"),
                reason = why,
                "SEND with invalidate refused"
            );
            complete_recv(
                qp,
                t.cqs,
                &wr,
                WcStatus::LocProtErr,
                WcOpcode::Recv,
                0,
                None,
                None,
                false,
            );
            return Outcome::Nak(NakCode::InvalidRequest);
        }
        qp.resp.msn = next_msn(qp.resp.msn);
        complete_recv(
            qp,
            t.cqs,
            &wr,
            WcStatus::Success,
            WcOpcode::Recv,
            len as u32,
            pkt.imm(),
            inv,
            pkt.bth().solicited(),
        );
    }
    Outcome::Ok
}

/// The local checks of a receive request about to take a message: its
/// scatter/gather list against the PD it was posted in (the SRQ's, when the
/// QP has one), writable. The same checks as at post, made again because a
/// region may have been deregistered since, or, with
/// [`crate::verbs::LocalErrors::Completion`], not made at post at all.
pub(super) fn check_recv(qp: &Qp, t: &Tables<'_>, wr: &QueuedRecv) -> Result<(), VerbsError> {
    let pd = match qp.init.srq {
        Some(h) => t.srqs.get(&h).map_or(qp.init.pd, |s| s.pd),
        None => qp.init.pd,
    };
    t.mrs.check_sg(pd, &wr.sg, true)
}

/// A receive request that fails its local checks: it completes with a
/// local protection error (IBA 11.6.2) and the responder answers with a
/// NAK, remote operational error, which moves the QP to the error state
/// (IBA's class A responder error; the requester's request completes with
/// REM_OP_ERR). rxe NAKs the same but completes the receive with
/// LOC_QP_OP_ERR ("malformed WQE").
pub(super) fn recv_fault(
    qp: &mut Qp,
    t: &mut Tables<'_>,
    wr: &QueuedRecv,
    why: &VerbsError,
) -> Outcome {
    tracing::debug!(
        qpn = %crate::log::Qpn(qp.qpn),
        wr_id = wr.wr_id,
        reason = %why,
        "receive request fails: local protection error"
    );
    complete_recv(
        qp,
        t.cqs,
        wr,
        WcStatus::LocProtErr,
        WcOpcode::Recv,
        0,
        None,
        None,
        false,
    );
    Outcome::Nak(NakCode::RemoteOperationalError)
}

pub(super) fn write(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, t: &mut Tables<'_>) -> Outcome {
    let (position, with_imm) = (pkt.info().position, pkt.info().consumes_recv);
    if with_imm && !has_recv(qp, t.srqs) {
        return Outcome::Rnr;
    }
    let (lkey, off, left) = if position.starts() {
        if qp.resp.write.is_some() {
            return Outcome::Nak(NakCode::InvalidRequest);
        }
        let Some(reth) = pkt.reth() else {
            return Outcome::Nak(NakCode::InvalidRequest);
        };
        let len = reth.dma_len();
        match remote_target(qp, t.mrs, reth.rkey(), reth.va(), len, Access::REMOTE_WRITE) {
            Ok((lkey, off)) => (lkey, off, len as usize),
            Err(code) => return Outcome::Nak(code),
        }
    } else {
        let Some(target) = qp.resp.write else {
            return Outcome::Nak(NakCode::InvalidRequest);
        };
        target
    };
    let data = pkt.payload();
    if data.len() > left || (position.ends() && data.len() != left) {
        // More (or less) than the RETH announced.
        qp.resp.write = None;
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    // A region deregistered mid-message takes the rest of it nowhere.
    // (The range was checked against the region when the message began.)
    if let Some(region) = t.mrs.region(lkey) {
        let _ = region.write(off as u64, data);
    }
    if position.starts() {
        qp.resp.write_len = left as u32;
    }
    qp.resp.write = Some((lkey, off + data.len(), left - data.len()));
    if position.ends() {
        qp.resp.write = None;
        qp.resp.msn = next_msn(qp.resp.msn);
        if with_imm && let Some(wr) = take_recv(qp, t.srqs) {
            let imm = pkt.imm();
            // byte_len is the WRITE's length (it was 0 here before).
            let len = qp.resp.write_len;
            complete_recv(
                qp,
                t.cqs,
                &wr,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                len,
                imm,
                None,
                pkt.bth().solicited(),
            );
        }
    }
    Outcome::Ok
}

/// Where an RDMA READ or WRITE of `len` bytes at `va` under `rkey` lands,
/// as (lkey, offset), or the NAK code refusing it. The QP must allow the
/// access either way; a zero-length one is not checked further: IBA C9-88
/// says the responder shall not validate its R_Key or virtual address (rxe
/// skips them too). It touches no byte, so the region it names,
/// [`NO_REGION`], is never read or written.
pub(super) fn remote_target(
    qp: &Qp,
    mrs: &MrTable,
    rkey: u32,
    va: u64,
    len: u32,
    need: Access,
) -> Result<(u32, usize), NakCode> {
    if !qp.cfg.access.contains(need) {
        return Err(NakCode::RemoteAccessError);
    }
    if len == 0 {
        return Ok((NO_REGION, 0));
    }
    mrs.remote(qp.access_as(), rkey, va, u64::from(len), need)
        .map_err(|_: RemoteAccess| NakCode::RemoteAccessError)
}

/// The lkey of a zero-length access's target: any value will do, since
/// zero bytes are copied at offset 0 (a missing region reads as nothing).
const NO_REGION: u32 = 0;

#[allow(clippy::too_many_arguments)]
pub(super) fn complete_recv(
    qp: &Qp,
    cqs: &mut HashMap<u32, Cq>,
    wr: &QueuedRecv,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    imm: Option<u32>,
    invalidated_rkey: Option<u32>,
    solicited: bool,
) {
    if let Some(cq) = cqs.get_mut(&qp.init.recv_cq) {
        cq.push_solicited(
            WorkCompletion {
                wr_id: wr.wr_id,
                status,
                opcode,
                // An EE context completes on the RD QP the message was for,
                // from the RD QP that sent it.
                qpn: qp.access_as().1,
                byte_len,
                imm,
                invalidated_rkey,
                src_qp: qp
                    .eec()
                    .and_then(|e| e.bound)
                    .map_or(qp.cfg.dest_qpn, |b| b.src_qp),
                network: None,
            },
            solicited,
        );
    }
}
