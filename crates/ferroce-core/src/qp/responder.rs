//! The responder: checks the PSN of each request, executes it (SEND into a
//! posted receive, RDMA WRITE and READ against registered memory, atomics
//! once each), and owes the requester ACKs, NAKs, READ responses and atomic
//! ACKs, which [`next_response`] emits in PSN order.
//!
//! RC: duplicates are re-acknowledged, a duplicate READ is served again, a
//! duplicate atomic is answered from the replay cache; a gap is NAKed once.
//! UC: no responses; a gap drops the message in progress. UD: a Q_Key check
//! and one packet per message, delivered behind a 40-byte GRH.
//!
//! Receive WQEs come from the QP's own receive queue, or from its shared
//! receive queue when it has one ([`take_recv`]); the rest is the same.

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use ferroce_wire::aeth::{AethRepr, NakCode, Syndrome};
use ferroce_wire::{Opcode, Psn, TransportPacket};

use super::{Qp, ReadJob, Response};
use crate::cq::Cq;
use crate::endpoint::{BufPool, NO_PATH, Stats, Transmit};
use crate::mr::{MrTable, RemoteAccess};
use crate::srq::Srq;
use crate::transmit::EmitError;
use crate::verbs::{Access, QpState, QpType, RecvWr, WcOpcode, WcStatus, WorkCompletion};

/// Atomic results kept for replaying duplicates.
const ATOMIC_REPLAY: usize = 128;

/// What executing one request came to.
enum Outcome {
    /// Done; acknowledge if asked.
    Ok,
    /// No receive posted: RNR NAK, PSN not consumed.
    Rnr,
    /// Fatal for the QP: NAK with this code.
    Nak(NakCode),
    /// READ: responses queued (they acknowledge).
    Responded,
}

/// The receive WQE for a message that needs one: from the QP's SRQ when
/// it has one (which may raise the SRQ's limit event), else from its own
/// receive queue.
fn take_recv(qp: &mut Qp, srqs: &mut HashMap<u32, Srq>) -> Option<RecvWr> {
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
pub(crate) fn give_back(qp: &mut Qp, srqs: &mut HashMap<u32, Srq>, wr: RecvWr) {
    match qp.init.srq {
        Some(h) => {
            if let Some(srq) = srqs.get_mut(&h) {
                srq.give_back(wr);
            }
        }
        None => qp.rq.push_front(wr),
    }
}

/// A request packet for this QP.
pub(crate) fn on_request(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    from: IpAddr,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
    stats: &mut Stats,
) {
    match qp.init.qp_type {
        QpType::Ud => return ud_receive(qp, pkt, from, mrs, cqs, srqs, stats),
        QpType::Uc => return uc_receive(qp, pkt, mrs, cqs, srqs, stats),
        QpType::Rc => {}
    }
    let psn = pkt.bth().psn();
    let d = psn.distance(qp.resp.epsn);
    if d < 0 {
        stats.rx_duplicate += 1;
        duplicate(qp, pkt, psn, mrs);
        return;
    }
    if d > 0 {
        stats.rx_out_of_sequence += 1;
        if !qp.resp.nak_sent {
            qp.resp.nak_sent = true;
            let epsn = qp.resp.epsn;
            owe_ack(qp, epsn, Syndrome::Nak(NakCode::PsnSequenceError));
        }
        return;
    }
    qp.resp.nak_sent = false;
    match execute(qp, pkt, psn, mrs, cqs, srqs) {
        Outcome::Ok => {
            qp.resp.epsn = psn + 1;
            if pkt.bth().ack_req() {
                owe_ack(qp, psn, Syndrome::Ack { credits: 31 });
            }
        }
        Outcome::Responded => {}
        Outcome::Rnr => {
            stats.rnr_naks_sent += 1;
            let timer = qp.cfg.min_rnr_timer;
            owe_ack(qp, psn, Syndrome::RnrNak { timer });
        }
        Outcome::Nak(code) => {
            owe_ack(qp, psn, Syndrome::Nak(code));
            qp.state = QpState::Err;
            super::completer::flush(qp, cqs);
        }
    }
}

/// Queues an ACK or NAK; an ACK right behind another replaces it (ACK
/// coalescing: the newer one acknowledges everything the older did).
fn owe_ack(qp: &mut Qp, psn: Psn, syndrome: Syndrome) {
    let msn = qp.resp.msn;
    let ack = Response::Ack { psn, syndrome, msn };
    if let (Some(Response::Ack { syndrome: s, .. }), Syndrome::Ack { .. }) =
        (qp.resp.out.back(), syndrome)
        && matches!(s, Syndrome::Ack { .. })
    {
        qp.resp.out.pop_back();
    }
    qp.resp.out.push_back(ack);
}

fn duplicate(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, psn: Psn, mrs: &mut MrTable) {
    match pkt.bth().opcode().operation() {
        0x0c => {
            // IBA 9.7.5.1.4: a duplicate READ is executed again.
            let _ = read_request(qp, pkt, psn, mrs);
        }
        0x13 | 0x14 => {
            let hit = qp.resp.atomic_replay.iter().find(|(p, _)| *p == psn);
            if let Some(&(_, orig)) = hit {
                let msn = qp.resp.msn;
                qp.resp.out.push_back(Response::Atomic { psn, orig, msn });
            }
        }
        _ => {
            let last = qp.resp.epsn - 1;
            owe_ack(qp, last, Syndrome::Ack { credits: 31 });
        }
    }
}

fn execute(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
) -> Outcome {
    let op = pkt.bth().opcode().operation();
    match op {
        0x00..=0x05 | 0x16 | 0x17 => send(qp, pkt, op, mrs, cqs, srqs),
        0x06..=0x0b => write(qp, pkt, op, mrs, cqs, srqs),
        0x0c => read_request(qp, pkt, psn, mrs),
        0x13 | 0x14 => atomic(qp, pkt, psn, mrs),
        _ => Outcome::Nak(NakCode::InvalidRequest),
    }
}

fn is_first(op: u8) -> bool {
    matches!(op, 0x00 | 0x04 | 0x05 | 0x06 | 0x0a | 0x0b | 0x17)
}

fn is_last(op: u8) -> bool {
    matches!(
        op,
        0x02 | 0x03 | 0x04 | 0x05 | 0x08 | 0x09 | 0x0a | 0x0b | 0x16 | 0x17
    )
}

fn send(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    op: u8,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
) -> Outcome {
    if is_first(op) != qp.resp.recv.is_none() {
        // A FIRST while a message is open, or a MIDDLE/LAST with none.
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    if qp.resp.recv.is_none() {
        match take_recv(qp, srqs) {
            Some(wr) => qp.resp.recv = Some((wr, 0)),
            None => return Outcome::Rnr,
        }
    }
    let Some((wr, filled)) = qp.resp.recv.as_mut() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    let data = pkt.payload();
    if !mrs.scatter(&wr.sg, *filled, data) {
        let wr = wr.clone();
        qp.resp.recv = None;
        complete_recv(
            qp,
            cqs,
            &wr,
            WcStatus::LocLenErr,
            WcOpcode::Recv,
            0,
            None,
            None,
        );
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    *filled += data.len() as u64;
    if is_last(op) {
        let Some((wr, len)) = qp.resp.recv.take() else {
            return Outcome::Ok;
        };
        let inv = pkt.ieth();
        if let Some(rkey) = inv
            && !mrs.invalidate(qp.init.pd, rkey)
        {
            complete_recv(
                qp,
                cqs,
                &wr,
                WcStatus::LocProtErr,
                WcOpcode::Recv,
                0,
                None,
                None,
            );
            return Outcome::Nak(NakCode::InvalidRequest);
        }
        qp.resp.msn = (qp.resp.msn + 1) & 0xff_ffff;
        complete_recv(
            qp,
            cqs,
            &wr,
            WcStatus::Success,
            WcOpcode::Recv,
            len as u32,
            pkt.imm(),
            inv,
        );
    }
    Outcome::Ok
}

fn write(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    op: u8,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
) -> Outcome {
    let with_imm = matches!(op, 0x09 | 0x0b);
    if with_imm && !has_recv(qp, srqs) {
        return Outcome::Rnr;
    }
    if is_first(op) {
        if qp.resp.write.is_some() {
            return Outcome::Nak(NakCode::InvalidRequest);
        }
        let Some(reth) = pkt.reth() else {
            return Outcome::Nak(NakCode::InvalidRequest);
        };
        if !qp.cfg.access.contains(Access::REMOTE_WRITE) {
            return Outcome::Nak(NakCode::RemoteAccessError);
        }
        let len = u64::from(reth.dma_len());
        match mrs.remote(
            qp.init.pd,
            reth.rkey(),
            reth.va(),
            len,
            Access::REMOTE_WRITE,
        ) {
            Ok((lkey, off)) => {
                qp.resp.write = Some((lkey, off, len as usize));
                qp.resp.write_len = reth.dma_len();
            }
            Err(_) => return Outcome::Nak(NakCode::RemoteAccessError),
        }
    }
    let Some((lkey, off, left)) = qp.resp.write else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    let data = pkt.payload();
    if data.len() > left || (is_last(op) && data.len() != left) {
        // More (or less) than the RETH announced.
        qp.resp.write = None;
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    if let Some(mr) = mrs.get_mut(lkey) {
        mr.buf[off..off + data.len()].copy_from_slice(data);
    }
    qp.resp.write = Some((lkey, off + data.len(), left - data.len()));
    if is_last(op) {
        qp.resp.write = None;
        qp.resp.msn = (qp.resp.msn + 1) & 0xff_ffff;
        if with_imm && let Some(wr) = take_recv(qp, srqs) {
            let imm = pkt.imm();
            // byte_len is the WRITE's length (it was 0 here before).
            let len = qp.resp.write_len;
            complete_recv(
                qp,
                cqs,
                &wr,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                len,
                imm,
                None,
            );
        }
    }
    Outcome::Ok
}

fn read_request(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, psn: Psn, mrs: &MrTable) -> Outcome {
    let Some(reth) = pkt.reth() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    if !qp.cfg.access.contains(Access::REMOTE_READ) {
        return Outcome::Nak(NakCode::RemoteAccessError);
    }
    let len = u64::from(reth.dma_len());
    let (lkey, offset) =
        match mrs.remote(qp.init.pd, reth.rkey(), reth.va(), len, Access::REMOTE_READ) {
            Ok(x) => x,
            Err(
                RemoteAccess::BadKey
                | RemoteAccess::WrongPd
                | RemoteAccess::NotPermitted
                | RemoteAccess::OutOfBounds,
            ) => {
                return Outcome::Nak(NakCode::RemoteAccessError);
            }
        };
    let npkts = qp.packets_for(len);
    let fresh = psn == qp.resp.epsn;
    if fresh {
        qp.resp.msn = (qp.resp.msn + 1) & 0xff_ffff;
        qp.resp.epsn = psn + npkts;
    }
    let msn = qp.resp.msn;
    qp.resp.out.push_back(Response::Read(ReadJob {
        psn,
        lkey,
        offset,
        len: len as usize,
        sent: 0,
        msn,
    }));
    Outcome::Responded
}

fn atomic(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, psn: Psn, mrs: &mut MrTable) -> Outcome {
    let Some(a) = pkt.atomic_eth() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    if !qp.cfg.access.contains(Access::REMOTE_ATOMIC) {
        return Outcome::Nak(NakCode::RemoteAccessError);
    }
    if a.va() % 8 != 0 {
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    let Ok((lkey, off)) = mrs.remote(qp.init.pd, a.rkey(), a.va(), 8, Access::REMOTE_ATOMIC) else {
        return Outcome::Nak(NakCode::RemoteAccessError);
    };
    let Some(mr) = mrs.get_mut(lkey) else {
        return Outcome::Nak(NakCode::RemoteAccessError);
    };
    let cell = &mut mr.buf[off..off + 8];
    let mut b = [0u8; 8];
    b.copy_from_slice(cell);
    let orig = u64::from_ne_bytes(b);
    let new = if pkt.bth().opcode() == Opcode::RC_COMPARE_SWAP {
        if orig == a.compare() {
            a.swap_add()
        } else {
            orig
        }
    } else {
        orig.wrapping_add(a.swap_add())
    };
    cell.copy_from_slice(&new.to_ne_bytes());
    qp.resp.msn = (qp.resp.msn + 1) & 0xff_ffff;
    qp.resp.epsn = psn + 1;
    if qp.resp.atomic_replay.len() >= ATOMIC_REPLAY {
        qp.resp.atomic_replay.pop_front();
    }
    qp.resp.atomic_replay.push_back((psn, orig));
    let msn = qp.resp.msn;
    qp.resp.out.push_back(Response::Atomic { psn, orig, msn });
    Outcome::Responded
}

#[allow(clippy::too_many_arguments)]
fn complete_recv(
    qp: &Qp,
    cqs: &mut HashMap<u32, Cq>,
    wr: &RecvWr,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    imm: Option<u32>,
    invalidated_rkey: Option<u32>,
) {
    if let Some(cq) = cqs.get_mut(&qp.init.recv_cq) {
        cq.push(WorkCompletion {
            wr_id: wr.wr_id,
            status,
            opcode,
            qpn: qp.qpn,
            byte_len,
            imm,
            invalidated_rkey,
            src_qp: qp.cfg.dest_qpn,
        });
    }
}

fn uc_receive(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
    stats: &mut Stats,
) {
    let psn = pkt.bth().psn();
    let op = pkt.bth().opcode().operation();
    if psn != qp.resp.epsn {
        // A gap: the message in progress is lost (its receive WQE is
        // reused for the next message); resynchronise on a FIRST or ONLY.
        stats.rx_out_of_sequence += 1;
        if let Some((wr, _)) = qp.resp.recv.take() {
            give_back(qp, srqs, wr);
        }
        qp.resp.write = None;
        if !is_first(op) {
            qp.resp.epsn = psn + 1;
            return;
        }
    }
    qp.resp.epsn = psn + 1;
    let outcome = match op {
        0x00..=0x05 => send(qp, pkt, op, mrs, cqs, srqs),
        0x06..=0x0b => write(qp, pkt, op, mrs, cqs, srqs),
        _ => Outcome::Nak(NakCode::InvalidRequest),
    };
    if !matches!(outcome, Outcome::Ok) {
        // UC never NAKs: the message is silently dropped.
        stats.rx_unexpected += 1;
        if let Some((wr, _)) = qp.resp.recv.take() {
            give_back(qp, srqs, wr);
        }
        qp.resp.write = None;
    }
}

fn ud_receive(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    from: IpAddr,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
    stats: &mut Stats,
) {
    let Some(deth) = pkt.deth() else {
        stats.rx_malformed += 1;
        return;
    };
    // The sender has already replaced a Q_Key with the high bit set by its
    // QP's own (IBA C10-15, in the requester): compare as is.
    if deth.qkey() != qp.cfg.qkey {
        stats.rx_bad_qkey += 1;
        return;
    }
    let Some(wr) = take_recv(qp, srqs) else {
        stats.rx_unexpected += 1; // UD drops when no receive is posted
        return;
    };
    // ibverbs puts the 40-byte GRH in front of UD data: for RoCE v2 over
    // IPv4, the IPv4 header sits in its last 20 bytes.
    let mut grh = [0u8; 40];
    match from {
        IpAddr::V4(a) => {
            grh[20] = 0x45;
            grh[32..36].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            grh[0] = 0x60;
            grh[8..24].copy_from_slice(&a.octets());
        }
    }
    let data = pkt.payload();
    let ok = mrs.scatter(&wr.sg, 0, &grh) && mrs.scatter(&wr.sg, 40, data);
    let status = if ok {
        WcStatus::Success
    } else {
        WcStatus::LocLenErr
    };
    if let Some(cq) = cqs.get_mut(&qp.init.recv_cq) {
        cq.push(WorkCompletion {
            wr_id: wr.wr_id,
            status,
            opcode: WcOpcode::Recv,
            qpn: qp.qpn,
            byte_len: (40 + data.len()) as u32,
            imm: pkt.imm(),
            invalidated_rkey: None,
            src_qp: deth.src_qp(),
        });
    }
}

/// The next response packet this QP owes, if any.
pub(crate) fn next_response(
    qp: &mut Qp,
    mrs: &MrTable,
    pool: &mut BufPool,
) -> Option<Result<Transmit, EmitError>> {
    if qp.init.qp_type != QpType::Rc {
        return None;
    }
    let path = qp.cfg.path.unwrap_or(NO_PATH);
    let dest = qp.cfg.dest_qpn;
    let mtu = qp.cfg.mtu.bytes();
    let front = qp.resp.out.front_mut()?;
    let t = match front {
        Response::Ack { psn, syndrome, msn } => {
            let mut t = super::transport_repr(Opcode::RC_ACKNOWLEDGE, *psn, dest, 0);
            t.aeth = Some(AethRepr {
                syndrome: *syndrome,
                msn: *msn,
            });
            qp.resp.out.pop_front();
            t
        }
        Response::Atomic { psn, orig, msn } => {
            let mut t = super::transport_repr(Opcode::RC_ATOMIC_ACKNOWLEDGE, *psn, dest, 0);
            t.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: *msn,
            });
            t.atomic_ack = Some(*orig);
            qp.resp.out.pop_front();
            t
        }
        Response::Read(job) => {
            let n = (job.len - job.sent).min(mtu);
            let first = job.sent == 0;
            let last = job.sent + n >= job.len;
            let op = match (first, last) {
                (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
                (false, false) => Opcode(0x0e),
            };
            let psn = job.psn + (job.sent / mtu) as u32;
            let mut t = super::transport_repr(op, psn, dest, n);
            if op != Opcode(0x0e) {
                t.aeth = Some(AethRepr {
                    syndrome: Syndrome::Ack { credits: 31 },
                    msn: job.msn,
                });
            }
            let start = job.offset + job.sent;
            let src = mrs.get(job.lkey).and_then(|m| m.buf.get(start..start + n));
            job.sent += n;
            if last {
                qp.resp.out.pop_front();
            }
            // A region gone since the request was checked reads as zeros.
            return Some(Transmit::build(pool, path, &t, |out| match src {
                Some(src) => out.copy_from_slice(src),
                None => out.fill(0),
            }));
        }
    };
    Some(Transmit::build(pool, path, &t, |_| {}))
}
