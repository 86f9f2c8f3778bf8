//! The requester: turns the send queue into request packets, one at a time,
//! segmenting at the path MTU and numbering with PSNs. It sends within a
//! window and the initiator-depth limit; going back to retransmit is the
//! completer's decision (see [`rewind`]).

use ferroce_wire::atomic_eth::AtomicEthRepr;
use ferroce_wire::deth::DethRepr;
use ferroce_wire::opcode::Position;
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, Psn, Transport, TransportRepr};

use super::{Qp, SendWqe};
use crate::mr::CopyFault;
use crate::mr::MrTable;
use crate::time::{Instant, local_ack_timeout};
use crate::transmit::{BufPool, NotSent, Transmit};
use crate::verbs::{QpState, QpType, SendOp, VerbsError, WcStatus};

/// At most this many PSNs in flight past the oldest unacknowledged one
/// (rxe's RXE_MAX_UNACKED_PSNS).
pub(crate) const WINDOW: u32 = 128;

/// Ask for an ACK at least this often inside long messages, so the window
/// keeps moving (rxe's RXE_MAX_PKT_PER_ACK).
pub(crate) const PACKETS_PER_ACK: u32 = 64;

/// Whether the send queue holds something not yet (or no longer) sent.
pub(crate) fn has_work(qp: &Qp) -> bool {
    qp.req.wqe < qp.sq.len()
}

/// Whether packets were sent since the last one that asked for an ACK:
/// if the QP stops sending now, those are acknowledged only by a timeout.
pub(crate) fn owes_ack_request(qp: &Qp) -> bool {
    qp.req.since_ack_req > 0
}

/// The next request packet of this QP, if it may send one now; with
/// `ask_ack`, it asks for an ACK whatever its place in the message.
pub(crate) fn next_packet(
    qp: &mut Qp,
    mrs: &mut MrTable,
    pool: &mut BufPool,
    now: Instant,
    ask_ack: bool,
) -> Option<Result<Transmit, NotSent>> {
    super::local_ops::run(qp, mrs);
    let mrs = &*mrs;
    let idx = qp.req.wqe;
    let wqe = qp.sq.get(idx)?;
    if wqe.done {
        return None; // failed as it was to start: see `local_fault`
    }
    // SQD drains: the messages already begun are finished and retransmitted
    // (they used to stall there until the retry count ran out), and none is
    // begun.
    let may_send = match qp.state {
        QpState::Rts => true,
        QpState::Sqd => wqe.started,
        _ => false,
    };
    if !may_send || qp.comp.rnr_until.is_some() {
        return None;
    }
    if !wqe.started && !may_start(qp, idx) {
        return None;
    }
    if qp.init.qp_type.is_reliable() {
        let oldest = qp
            .sq
            .iter()
            .find(|w| w.started && !w.done)
            .map(|w| unacknowledged_from(qp, w));
        if let Some(oldest) = oldest
            && qp.req.next_psn.distance(oldest) >= WINDOW as i32
        {
            return None;
        }
    }
    if !qp.sq[idx].started {
        if let Err(why) = check_local(qp, idx, mrs) {
            local_fault(qp, idx, &why);
            return None;
        }
        let npkts = match qp.sq[idx].wr.op {
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } | SendOp::Flush { .. } => 1,
            _ => qp.packets_for(qp.sq[idx].len),
        };
        let w = &mut qp.sq[idx];
        w.first_psn = qp.req.next_psn;
        w.npkts = npkts;
        w.started = true;
        qp.req.offset = 0;
    }
    let t = build(qp, idx, mrs, pool, ask_ack);
    if qp.init.qp_type.is_reliable() && qp.comp.retransmit_at.is_none() {
        qp.comp.retransmit_at = local_ack_timeout(qp.cfg.timeout).map(|d| now.after(d));
    }
    t
}

/// Whether the requester stopped at a request that failed its local checks
/// (see [`local_fault`]): the completer is to report it once the requests
/// before it are complete.
pub(crate) fn stopped_at_fault(qp: &Qp) -> bool {
    qp.sq.get(qp.req.wqe).is_some_and(|w| w.done)
}

/// The local checks of a request about to start: its scatter/gather list
/// against the QP's PD, as at post (the same checks, made again because a
/// region may have been deregistered since, or, with
/// [`crate::verbs::LocalErrors::Completion`], not made at post at all).
fn check_local(qp: &Qp, idx: usize, mrs: &MrTable) -> Result<(), VerbsError> {
    let wr = &qp.sq[idx].wr;
    if wr.inline.is_some() {
        return Ok(()); // its data was copied at post
    }
    mrs.check_sg(qp.init.pd, &wr.sg, wr.op.writes_local())
}

/// Request `idx` fails with a local protection error (IBA 11.6.2): it is
/// done, with that status, and the requester stops at it. The completer
/// reports it in order, after the requests before it, and moves the QP to
/// the error state, flushing the rest (as `completer::complete_done` does
/// for any failed request). rxe reports an unknown lkey this way as
/// LOC_QP_OP_ERR, a range outside the region as LOC_PROT_ERR; IBA names
/// both a local protection error.
fn local_fault(qp: &mut Qp, idx: usize, why: &dyn std::fmt::Display) {
    let next_psn = qp.req.next_psn;
    let w = &mut qp.sq[idx];
    tracing::debug!(
        qpn = %crate::log::Qpn(qp.qpn),
        wr_id = w.wr.wr_id,
        reason = %why,
        "send request fails: local protection error"
    );
    w.done = true;
    w.status = WcStatus::LocProtErr;
    if !w.started {
        // No PSN used: its "last PSN" is the one before the next, so that
        // completing it leaves the requester's PSN where it is.
        w.first_psn = next_psn - 1;
        w.npkts = 0;
    }
    qp.req.wqe = idx;
    qp.req.offset = 0;
}

/// The oldest unacknowledged PSN of `w`, the oldest unfinished WQE: inside
/// a long message, the ACKs it asked for move it forward; inside a READ, the
/// responses received do. (Without the READ case, a READ that had to be
/// resumed more than WINDOW packets in could never send its request again,
/// and failed with RETRY_EXC_ERR.)
fn unacknowledged_from(qp: &Qp, w: &SendWqe) -> Psn {
    let mtu = qp.cfg.mtu.bytes() as u64;
    match (w.wr.op, qp.comp.acked) {
        (SendOp::Read { .. }, _) => w.first_psn + (w.read_received / mtu) as u32,
        (_, Some(a)) if (a + 1).distance(w.first_psn) > 0 => a + 1,
        _ => w.first_psn,
    }
}

/// Fence and initiator depth: may WQE `idx` start now?
pub(super) fn may_start(qp: &Qp, idx: usize) -> bool {
    let wqe = &qp.sq[idx];
    if !wqe.wr.fence && !wqe.uses_rd_atomic() {
        return true;
    }
    let outstanding = qp
        .sq
        .iter()
        .take(idx)
        .filter(|w| w.started && !w.done && w.uses_rd_atomic())
        .count();
    if wqe.wr.fence && outstanding > 0 {
        return false;
    }
    !(wqe.uses_rd_atomic() && outstanding >= usize::from(qp.cfg.max_rd_atomic.max(1)))
}

/// Builds the packet at the requester's position and advances it.
fn build(
    qp: &mut Qp,
    idx: usize,
    mrs: &MrTable,
    pool: &mut BufPool,
    ask_ack: bool,
) -> Option<Result<Transmit, NotSent>> {
    let mtu = qp.cfg.mtu.bytes() as u64;
    let (op, len, first_psn, npkts, solicited) = {
        let w = &qp.sq[idx];
        (w.wr.op, w.len, w.first_psn, w.npkts, w.wr.solicited)
    };
    let qp_type = qp.init.qp_type;
    let offset = qp.req.offset;
    let psn = first_psn + (offset / mtu) as u32;
    let seg = (len - offset.min(len)).min(mtu);
    let single = len <= mtu;
    let pos = match (offset == 0, offset + seg >= len) {
        _ if single => Position::Only,
        (true, _) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    };
    let transport = qp.transport();
    let (rc_opcode, reth) = match op {
        SendOp::Read { remote } => {
            // After a lost response the READ resumes where the responses
            // stopped: the rest of the data, from the missing PSN
            // (IBA 9.7.5.1.4 lets the responder serve such a request).
            let mut t = super::transport_repr(Opcode::RC_RDMA_READ_REQUEST, psn, 0, 0);
            t.bth.ack_req = true;
            t.reth = Some(RethRepr {
                va: remote.addr() + offset,
                rkey: remote.rkey(),
                dma_len: (len - offset) as u32,
            });
            qp.req.next_psn = first_psn + npkts;
            finish_wqe(qp, idx);
            return transmit(qp, idx, t, mrs, pool, 0);
        }
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => {
            let t = atomic_repr(
                Opcode::RC_COMPARE_SWAP,
                first_psn,
                remote.addr(),
                remote.rkey(),
                swap,
                compare,
            );
            qp.req.next_psn = first_psn + 1;
            finish_wqe(qp, idx);
            return transmit(qp, idx, t, mrs, pool, 0);
        }
        SendOp::FetchAdd { remote, add } => {
            let t = atomic_repr(
                Opcode::RC_FETCH_ADD,
                first_psn,
                remote.addr(),
                remote.rkey(),
                add,
                0,
            );
            qp.req.next_psn = first_psn + 1;
            finish_wqe(qp, idx);
            return transmit(qp, idx, t, mrs, pool, 0);
        }
        SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => {
            let opcode = match (pos, op) {
                (Position::First, _) => Opcode::RC_SEND_FIRST,
                (Position::Middle, _) => Opcode::RC_SEND_MIDDLE,
                (Position::Last, SendOp::SendWithImm(_)) => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
                (Position::Last, SendOp::SendWithInv(_)) => Opcode::RC_SEND_LAST_WITH_INVALIDATE,
                (Position::Last, _) => Opcode::RC_SEND_LAST,
                (Position::Only, SendOp::SendWithImm(_)) => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
                (Position::Only, SendOp::SendWithInv(_)) => Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
                (Position::Only, _) => Opcode::RC_SEND_ONLY,
            };
            (opcode, None)
        }
        SendOp::Flush { remote, to, level } => {
            // FETH and RETH, no payload (IBA 1.5 oA19-2), asking for its
            // answer.
            let mut t = super::transport_repr(Opcode::RC_FLUSH, first_psn, 0, 0);
            t.bth.ack_req = true;
            t.feth = Some(to.bits() | level.bits());
            t.reth = Some(RethRepr {
                va: remote.addr(),
                rkey: remote.rkey(),
                dma_len: remote.len() as u32,
            });
            qp.req.next_psn = first_psn + 1;
            finish_wqe(qp, idx);
            return transmit(qp, idx, t, mrs, pool, 0);
        }
        SendOp::AtomicWrite { remote } => {
            // One packet: RETH and the 8 bytes, always asking for its
            // answer (rxe sets AckReq on every last packet).
            let mut t = super::transport_repr(Opcode::RC_ATOMIC_WRITE, first_psn, 0, 8);
            t.bth.ack_req = true;
            t.reth = Some(RethRepr {
                va: remote.addr(),
                rkey: remote.rkey(),
                dma_len: 8,
            });
            qp.req.next_psn = first_psn + 1;
            finish_wqe(qp, idx);
            return transmit(qp, idx, t, mrs, pool, 0);
        }
        // Carried out by `local_ops` before any packet is built.
        SendOp::BindMw { .. } | SendOp::LocalInv(_) => return None,
        SendOp::Write { remote } | SendOp::WriteWithImm { remote, .. } => {
            let imm = matches!(op, SendOp::WriteWithImm { .. });
            let opcode = match pos {
                Position::First => Opcode::RC_RDMA_WRITE_FIRST,
                Position::Middle => Opcode::RC_RDMA_WRITE_MIDDLE,
                Position::Last if imm => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
                Position::Last => Opcode::RC_RDMA_WRITE_LAST,
                Position::Only if imm => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
                Position::Only => Opcode::RC_RDMA_WRITE_ONLY,
            };
            let reth = pos.starts().then_some(RethRepr {
                va: remote.addr(),
                rkey: remote.rkey(),
                dma_len: len as u32,
            });
            (opcode, reth)
        }
    };
    // The same operation in the QP's transport (UC and UD share RC's low
    // five bits).
    let opcode = rc_opcode.in_transport(transport);
    let mut t = super::transport_repr(opcode, psn, 0, seg as usize);
    t.reth = reth;
    match op {
        SendOp::SendWithImm(imm) | SendOp::WriteWithImm { imm, .. } if pos.ends() => {
            t.imm = Some(imm);
        }
        SendOp::SendWithInv(rkey) if pos.ends() => {
            t.ieth = Some(rkey);
        }
        _ => {}
    }
    t.bth.solicited = solicited && pos.ends();
    qp.req.since_ack_req += 1;
    t.bth.ack_req =
        qp_type.is_reliable() && (pos.ends() || qp.req.since_ack_req >= PACKETS_PER_ACK || ask_ack);
    if t.bth.ack_req {
        qp.req.since_ack_req = 0;
    }
    qp.req.next_psn = psn + 1;
    qp.req.offset = offset + seg;
    if qp.req.offset >= len {
        finish_wqe(qp, idx);
    }
    transmit(qp, idx, t, mrs, pool, offset)
}

/// The requester is done sending WQE `idx`; UC and UD need no response, so
/// the message is complete once sent.
fn finish_wqe(qp: &mut Qp, idx: usize) {
    qp.req.wqe = idx + 1;
    qp.req.offset = 0;
    if !qp.init.qp_type.is_reliable() {
        qp.sq[idx].done = true;
    }
}

/// An atomic request: one packet, one PSN.
fn atomic_repr(
    op: Opcode,
    psn: Psn,
    va: u64,
    rkey: u32,
    swap_add: u64,
    compare: u64,
) -> TransportRepr {
    let mut t = super::transport_repr(op, psn, 0, 0);
    t.bth.ack_req = true;
    t.atomic_eth = Some(AtomicEthRepr {
        va,
        rkey,
        swap_add,
        compare,
    });
    t
}

/// The packet `t` of WQE `idx`, addressed, with its payload (if any)
/// gathered from byte `offset` of the message straight into the packet. A
/// region deregistered in the middle of the message (or before a packet of
/// it is sent again) fails the WQE with LOC_PROT_ERR, and the packet is not
/// sent: `None`, as for a request that fails before it starts.
fn transmit(
    qp: &mut Qp,
    idx: usize,
    mut t: TransportRepr,
    mrs: &MrTable,
    pool: &mut BufPool,
    offset: u64,
) -> Option<Result<Transmit, NotSent>> {
    let wr = &qp.sq[idx].wr;
    let path = match (qp.init.qp_type, wr.ud) {
        (QpType::Ud, Some(ud)) => ud.path,
        _ => qp.path(),
    };
    if qp.init.qp_type == QpType::Ud {
        if let Some(ud) = wr.ud {
            t.deth = Some(DethRepr {
                // A Q_Key with the high bit set means the QP's own (IBA
                // C10-15); it used to be sent as is, and dropped by the peer.
                qkey: if ud.qkey & 0x8000_0000 != 0 {
                    qp.cfg.qkey
                } else {
                    ud.qkey
                },
                src_qp: qp.qpn,
            });
            t.bth.dest_qp = ud.qpn;
        }
    } else {
        t.bth.dest_qp = qp.cfg.dest_qpn;
    }
    if qp.init.qp_type == QpType::XrcIni {
        // READs and atomics were built with RC's opcodes; every request
        // names the target's SRQ (post_send made sure there is one).
        t.bth.opcode = t.bth.opcode.in_transport(Transport::Xrc);
        t.xrceth = wr.remote_srqn;
    }
    if let (Some(dest), Some((src_qp, _))) = (wr.rd, qp.sq[idx].origin) {
        // An EE context's request: to the RD QP the request names, through
        // the peer's EEC, from the RD QP that posted it.
        t.bth.opcode = t.bth.opcode.in_transport(Transport::Rd);
        t.bth.dest_qp = dest.qpn;
        t.rdeth = Some(qp.cfg.dest_qpn);
        t.deth = Some(DethRepr {
            qkey: dest.qkey,
            src_qp,
        });
    }
    let mut copied = Ok(());
    let packet = Transmit::build(pool, path, &t, |out| {
        copied = match &wr.inline {
            Some(data) => {
                let s = offset as usize;
                data.get(s..s + out.len())
                    .map(|d| out.copy_from_slice(d))
                    .ok_or(CopyFault)
            }
            None => mrs.gather(&wr.sg, offset, out),
        };
    });
    let packet = match packet {
        Ok(p) => p,
        Err(e) => return Some(Err(NotSent::Emit(e))),
    };
    match copied {
        Ok(()) => Some(Ok(packet)),
        Err(CopyFault) => {
            pool.give(packet.data);
            match check_local(qp, idx, mrs) {
                Err(why) => local_fault(qp, idx, &why),
                Ok(()) => local_fault(qp, idx, &"a region of it is gone"),
            }
            None
        }
    }
}

/// Goes back to retransmit from `psn` (go-back-N): the requester resumes at
/// the WQE that holds it, at the packet it names.
pub(crate) fn rewind(qp: &mut Qp, psn: Psn) {
    let mtu = qp.cfg.mtu.bytes() as u64;
    for (i, w) in qp.sq.iter_mut().enumerate() {
        if !w.started || w.done {
            continue;
        }
        if psn.distance(w.last_psn()) > 0 {
            continue; // `psn` is past this message
        }
        let mut k = psn.distance(w.first_psn).max(0) as u64;
        qp.req.wqe = i;
        match w.wr.op {
            SendOp::Read { .. } => {
                // Resume after the responses already received, wherever
                // `psn` points: what arrived is placed, in order, and asking
                // for it again only costs. (Sent back to its first PSN by an
                // implied NAK, a half-received READ used to start over:
                // the responses to the resume already on their way then
                // looked like a gap, which asked for everything once more.
                // Against rxe with 16 READs of 8 packets outstanding, 3%
                // loss and 10% reordering, that stormed until RETRY_EXC_ERR
                // with nothing completed.)
                k = w.read_received / mtu;
            }
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => k = 0,
            _ => {}
        }
        qp.req.offset = k * mtu;
        qp.req.next_psn = w.first_psn + k as u32;
        tracing::debug!(qpn = %crate::log::Qpn(qp.qpn), psn = %qp.req.next_psn, "go-back-N: resending from PSN");
        return;
    }
}
