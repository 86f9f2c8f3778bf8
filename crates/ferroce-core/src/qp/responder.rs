//! The responder: checks the PSN of each request, executes it (SEND into a
//! posted receive, RDMA WRITE and READ against registered memory, atomics
//! once each), and owes the requester ACKs, NAKs, READ responses and atomic
//! ACKs, which [`next_response`] emits in PSN order.
//!
//! RC: duplicates are re-acknowledged; a duplicate READ or atomic is
//! answered only from the record of what was served ([`super::resources`]);
//! a gap is NAKed once. The responses a QP owes are bounded: at most
//! `max_dest_rd_atomic` READ or atomic responses (one per record) and
//! [`owed_limit`] entries in all.
//! UC: no responses; a gap drops the message in progress. UD: a Q_Key check
//! and one packet per message, delivered behind a 40-byte GRH.
//!
//! Receive WQEs come from the QP's own receive queue, or from its shared
//! receive queue when it has one ([`take_recv`]); the rest is the same.

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use ferroce_wire::aeth::{AethRepr, NakCode, Syndrome};
use ferroce_wire::opcode::{Kind, Position};
use ferroce_wire::{Opcode, Psn, TransportPacket};

use super::resources::{Served, ServedKind, within};
use super::{Qp, ReadJob, Response};
use crate::cq::Cq;
use crate::endpoint::{BufPool, NO_PATH, Stats, Transmit};
use crate::mr::{MrTable, RemoteAccess};
use crate::srq::Srq;
use crate::verbs::{Access, QpState, QpType, RecvWr, WcOpcode, WcStatus, WorkCompletion};

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
    /// A READ or atomic beyond the responder resources while all their
    /// responses are still owed: dropped unexecuted, PSN not consumed (the
    /// requester sends it again).
    OverDepth,
}

/// The syndrome of every ACK the responder sends: it does no end-to-end
/// flow control, so the credit count is the "invalid" code, 31, which tells
/// the requester not to limit itself by credits (rxe's AETH_ACK_UNLIMITED).
const ACK: Syndrome = Syndrome::Ack {
    credits: NO_CREDIT_COUNT,
};

/// The AETH credit count meaning "no credit count".
const NO_CREDIT_COUNT: u8 = 31;

/// MSNs count the messages completed, modulo 2^24 (the AETH's 24 bits).
fn next_msn(msn: u32) -> u32 {
    (msn + 1) & MSN_MASK
}

/// The bits of an MSN.
const MSN_MASK: u32 = 0xff_ffff;

/// The responder resources: READ and atomic requests recorded, and READ or
/// atomic responses owed at once (`max_dest_rd_atomic`, at least one).
fn depth(qp: &Qp) -> usize {
    usize::from(qp.cfg.max_dest_rd_atomic.max(1))
}

/// The most responses a QP may owe: one READ or atomic response per
/// resource, and an ACK or NAK between and after each (adjacent ACKs
/// coalesce; this bounds the NAKs that do not).
fn owed_limit(qp: &Qp) -> usize {
    2 * depth(qp) + 2
}

/// READ and atomic responses owed.
fn owed_jobs(qp: &Qp) -> usize {
    qp.resp
        .out
        .iter()
        .filter(|r| !matches!(r, Response::Ack { .. }))
        .count()
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
        duplicate(qp, pkt, psn, mrs, stats);
        return;
    }
    if d > 0 {
        stats.rx_out_of_sequence += 1;
        if !qp.resp.nak_sent {
            qp.resp.nak_sent = true;
            let epsn = qp.resp.epsn;
            owe_ack(qp, epsn, Syndrome::Nak(NakCode::PsnSequenceError), stats);
        }
        return;
    }
    qp.resp.nak_sent = false;
    match execute(qp, pkt, psn, mrs, cqs, srqs) {
        Outcome::Ok => {
            qp.resp.epsn = psn + 1;
            if pkt.bth().ack_req() {
                owe_ack(qp, psn, ACK, stats);
            }
        }
        Outcome::Responded => {}
        Outcome::OverDepth => stats.rx_over_depth += 1,
        Outcome::Rnr => {
            stats.rnr_naks_sent += 1;
            let timer = qp.cfg.min_rnr_timer;
            owe_ack(qp, psn, Syndrome::RnrNak { timer }, stats);
        }
        Outcome::Nak(code) => {
            owe_ack(qp, psn, Syndrome::Nak(code), stats);
            qp.state = QpState::Err;
            super::completer::flush(qp, cqs);
        }
    }
}

/// Queues an ACK or NAK; an ACK right behind another replaces it (ACK
/// coalescing: the newer one acknowledges everything the older did). With
/// [`owed_limit`] responses owed it is dropped: the requester's timer
/// recovers what it would have said.
fn owe_ack(qp: &mut Qp, psn: Psn, syndrome: Syndrome, stats: &mut Stats) {
    let msn = qp.resp.msn;
    let ack = Response::Ack { psn, syndrome, msn };
    if let (Some(Response::Ack { syndrome: s, .. }), Syndrome::Ack { .. }) =
        (qp.resp.out.back(), syndrome)
        && matches!(s, Syndrome::Ack { .. })
    {
        qp.resp.out.pop_back();
    }
    if qp.resp.out.len() >= owed_limit(qp) {
        stats.acks_dropped += 1;
        return;
    }
    qp.resp.out.push_back(ack);
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
        Kind::Atomic => match qp.resp.resources.atomic_at(psn) {
            Some(orig) => {
                let msn = qp.resp.msn;
                let queued = qp
                    .resp
                    .out
                    .iter()
                    .any(|r| matches!(r, Response::Atomic { psn: p, .. } if *p == psn));
                if !queued {
                    owe_job(qp, Response::Atomic { psn, orig, msn }, stats);
                }
            }
            None => stats.rx_duplicate_unserved += 1,
        },
        _ => {
            let last = qp.resp.epsn - 1;
            owe_ack(qp, last, ACK, stats);
        }
    }
}

/// IBA 9.7.5.1.4: a duplicate READ is executed again, from its own PSN
/// (a requester resuming after a lost response asks for the rest), if it
/// lies inside a READ recorded in the responder resources; a replay of a
/// READ still being answered restarts that answer instead of adding one.
fn duplicate_read(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
    stats: &mut Stats,
) {
    let served = pkt.reth().and_then(|reth| {
        let rec = qp.resp.resources.read_at(psn)?;
        let (rkey, va, len) = (reth.rkey(), reth.va(), reth.dma_len());
        if !within(&rec, psn, rkey, va, len, qp.cfg.mtu.bytes()) {
            return None;
        }
        // Checked again: the region may be gone since.
        let (lkey, offset) = remote_target(qp, mrs, rkey, va, len, Access::REMOTE_READ).ok()?;
        Some(ReadJob {
            psn,
            record: rec.psn,
            lkey,
            offset,
            len: len as usize,
            sent: 0,
            msn: qp.resp.msn,
        })
    });
    let Some(job) = served else {
        stats.rx_duplicate_unserved += 1;
        return;
    };
    let queued = qp.resp.out.iter_mut().find_map(|r| match r {
        Response::Read(j) if j.record == job.record => Some(j),
        _ => None,
    });
    match queued {
        Some(j) => *j = job,
        None => owe_job(qp, Response::Read(job), stats),
    }
}

/// Queues a READ or atomic response for a duplicate, unless as many as the
/// responder resources are already owed.
fn owe_job(qp: &mut Qp, job: Response, stats: &mut Stats) {
    if owed_jobs(qp) >= depth(qp) {
        stats.rx_duplicate_unserved += 1;
        return;
    }
    qp.resp.out.push_back(job);
}

fn execute(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
) -> Outcome {
    match pkt.info().kind {
        Kind::Send => send(qp, pkt, mrs, cqs, srqs),
        Kind::Write => write(qp, pkt, mrs, cqs, srqs),
        Kind::ReadRequest => read_request(qp, pkt, psn, mrs),
        Kind::Atomic => atomic(qp, pkt, psn, mrs),
        _ => Outcome::Nak(NakCode::InvalidRequest),
    }
}

fn send(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
) -> Outcome {
    let position = pkt.info().position;
    if position.starts() != qp.resp.recv.is_none() {
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
    if position.ends() {
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
        qp.resp.msn = next_msn(qp.resp.msn);
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
    mrs: &mut MrTable,
    cqs: &mut HashMap<u32, Cq>,
    srqs: &mut HashMap<u32, Srq>,
) -> Outcome {
    let (position, with_imm) = (pkt.info().position, pkt.info().consumes_recv);
    if with_imm && !has_recv(qp, srqs) {
        return Outcome::Rnr;
    }
    if position.starts() {
        if qp.resp.write.is_some() {
            return Outcome::Nak(NakCode::InvalidRequest);
        }
        let Some(reth) = pkt.reth() else {
            return Outcome::Nak(NakCode::InvalidRequest);
        };
        let len = reth.dma_len();
        match remote_target(qp, mrs, reth.rkey(), reth.va(), len, Access::REMOTE_WRITE) {
            Ok((lkey, off)) => {
                qp.resp.write = Some((lkey, off, len as usize));
                qp.resp.write_len = len;
            }
            Err(code) => return Outcome::Nak(code),
        }
    }
    let Some((lkey, off, left)) = qp.resp.write else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    let data = pkt.payload();
    if data.len() > left || (position.ends() && data.len() != left) {
        // More (or less) than the RETH announced.
        qp.resp.write = None;
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    if let Some(mr) = mrs.get_mut(lkey) {
        mr.buf[off..off + data.len()].copy_from_slice(data);
    }
    qp.resp.write = Some((lkey, off + data.len(), left - data.len()));
    if position.ends() {
        qp.resp.write = None;
        qp.resp.msn = next_msn(qp.resp.msn);
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

/// Where an RDMA READ or WRITE of `len` bytes at `va` under `rkey` lands,
/// as (lkey, offset), or the NAK code refusing it. The QP must allow the
/// access either way; a zero-length one is not checked further: IBA C9-88
/// says the responder shall not validate its R_Key or virtual address (rxe
/// skips them too). It touches no byte, so the region it names,
/// [`NO_REGION`], is never read or written.
fn remote_target(
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
    mrs.remote(qp.init.pd, rkey, va, u64::from(len), need)
        .map_err(|_: RemoteAccess| NakCode::RemoteAccessError)
}

/// The lkey of a zero-length access's target: any value will do, since
/// zero bytes are copied at offset 0 (a missing region reads as nothing).
const NO_REGION: u32 = 0;

fn read_request(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, psn: Psn, mrs: &MrTable) -> Outcome {
    let Some(reth) = pkt.reth() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    let (rkey, va, len) = (reth.rkey(), reth.va(), reth.dma_len());
    let (lkey, offset) = match remote_target(qp, mrs, rkey, va, len, Access::REMOTE_READ) {
        Ok(x) => x,
        Err(code) => return Outcome::Nak(code),
    };
    if owed_jobs(qp) >= depth(qp) {
        return Outcome::OverDepth;
    }
    let npkts = qp.packets_for(u64::from(len));
    qp.resp.msn = next_msn(qp.resp.msn);
    qp.resp.epsn = psn + npkts;
    let capacity = depth(qp);
    let last_psn = psn + (npkts - 1);
    let kind = ServedKind::Read {
        last_psn,
        rkey,
        va,
        len,
    };
    qp.resp.resources.record(capacity, Served { psn, kind });
    let msn = qp.resp.msn;
    qp.resp.out.push_back(Response::Read(ReadJob {
        psn,
        record: psn,
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
    if owed_jobs(qp) >= depth(qp) {
        return Outcome::OverDepth;
    }
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
    qp.resp.msn = next_msn(qp.resp.msn);
    qp.resp.epsn = psn + 1;
    let capacity = depth(qp);
    let kind = ServedKind::Atomic { orig };
    qp.resp.resources.record(capacity, Served { psn, kind });
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
    let info = pkt.info();
    if psn != qp.resp.epsn {
        // A gap: the message in progress is lost (its receive WQE is
        // reused for the next message); resynchronise on a FIRST or ONLY.
        stats.rx_out_of_sequence += 1;
        if let Some((wr, _)) = qp.resp.recv.take() {
            give_back(qp, srqs, wr);
        }
        qp.resp.write = None;
        if !info.position.starts() {
            qp.resp.epsn = psn + 1;
            return;
        }
    }
    qp.resp.epsn = psn + 1;
    let outcome = match info.kind {
        Kind::Send => send(qp, pkt, mrs, cqs, srqs),
        Kind::Write => write(qp, pkt, mrs, cqs, srqs),
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

/// The GRH ibverbs puts in front of every UD receive.
const GRH_LEN: usize = 40;

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
    // Only the version and the source address are filled in.
    const IPV4_VERSION_IHL: u8 = 0x45;
    const IPV6_VERSION: u8 = 0x60;
    let mut grh = [0u8; GRH_LEN];
    match from {
        IpAddr::V4(a) => {
            grh[20] = IPV4_VERSION_IHL;
            grh[32..36].copy_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            grh[0] = IPV6_VERSION;
            grh[8..24].copy_from_slice(&a.octets());
        }
    }
    let data = pkt.payload();
    let ok = mrs.scatter(&wr.sg, 0, &grh) && mrs.scatter(&wr.sg, GRH_LEN as u64, data);
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
            byte_len: (GRH_LEN + data.len()) as u32,
            imm: pkt.imm(),
            invalidated_rkey: None,
            src_qp: deth.src_qp(),
        });
    }
}

/// The next response packet this QP owes, if any.
pub(crate) fn next_response(qp: &mut Qp, mrs: &MrTable, pool: &mut BufPool) -> Option<Transmit> {
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
                syndrome: ACK,
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
            let (op, position) = match (first, last) {
                (true, true) => (Opcode::RC_RDMA_READ_RESPONSE_ONLY, Position::Only),
                (true, false) => (Opcode::RC_RDMA_READ_RESPONSE_FIRST, Position::First),
                (false, true) => (Opcode::RC_RDMA_READ_RESPONSE_LAST, Position::Last),
                (false, false) => (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, Position::Middle),
            };
            let psn = job.psn + (job.sent / mtu) as u32;
            let mut t = super::transport_repr(op, psn, dest, n);
            // Every READ response but a MIDDLE carries an AETH.
            if position != Position::Middle {
                t.aeth = Some(AethRepr {
                    syndrome: ACK,
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
