//! The responses an RC responder owes: READ, atomic and ATOMIC WRITE requests executed
//! (and recorded in the responder resources, [`super::resources`]), their
//! duplicates answered from that record, ACKs and NAKs, all queued in PSN
//! order and bounded, and [`next_response`], which turns the queue into
//! packets.
//!
//! Bounds: at most `max_dest_rd_atomic` READ or atomic responses owed (one
//! per record), [`owed_limit`] responses in all.

use ferroce_wire::aeth::{AethRepr, NakCode, Syndrome};
use ferroce_wire::opcode::Position;
use ferroce_wire::{Opcode, Psn, TransportPacket};

use super::resources::{Served, ServedKind, within};
use super::responder::{ACK, Outcome, next_msn, remote_target};
use super::{Qp, ReadJob, Response};
use crate::mr::MrTable;
use crate::stats::Stats;
use crate::transmit::{BufPool, NotSent, Transmit};
use crate::verbs::{Access, QpType};

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

/// Queues an ACK or NAK; an ACK right behind another replaces it (ACK
/// coalescing: the newer one acknowledges everything the older did). With
/// [`owed_limit`] responses owed it is dropped: the requester's timer
/// recovers what it would have said.
pub(super) fn owe_ack(qp: &mut Qp, psn: Psn, syndrome: Syndrome, stats: &mut Stats) {
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

/// IBA 9.7.5.1.4: a duplicate READ is executed again, from its own PSN
/// (a requester resuming after a lost response asks for the rest), if it
/// lies inside a READ recorded in the responder resources; a replay of a
/// READ still being answered restarts that answer instead of adding one.
pub(super) fn duplicate_read(
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

/// A duplicate atomic: answered with the recorded original value (once
/// while that answer is queued), or dropped when there is no record.
pub(super) fn duplicate_atomic(qp: &mut Qp, psn: Psn, stats: &mut Stats) {
    let Some(orig) = qp.resp.resources.atomic_at(psn) else {
        stats.rx_duplicate_unserved += 1;
        return;
    };
    let msn = qp.resp.msn;
    answer_again(qp, Response::Atomic { psn, orig, msn }, stats);
}

/// A duplicate ATOMIC WRITE or FLUSH: answered again (once while that
/// answer is queued) if it was served, never executed twice; dropped
/// without a record.
pub(super) fn duplicate_empty(qp: &mut Qp, psn: Psn, stats: &mut Stats) {
    if !qp.resp.resources.answered_empty_at(psn) {
        stats.rx_duplicate_unserved += 1;
        return;
    }
    let msn = qp.resp.msn;
    answer_again(qp, Response::Empty { psn, msn }, stats);
}

/// Queues `answer` to a duplicate atomic, ATOMIC WRITE or FLUSH, unless
/// the same answer (its kind, at its PSN) is queued already.
fn answer_again(qp: &mut Qp, answer: Response, stats: &mut Stats) {
    let key = |r: &Response| match *r {
        Response::Atomic { psn, .. } => Some((0, psn)),
        Response::Empty { psn, .. } => Some((1, psn)),
        _ => None,
    };
    let queued = qp.resp.out.iter().any(|r| key(r) == key(&answer));
    if !queued {
        owe_job(qp, answer, stats);
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

/// A new READ request at the expected PSN: checked, recorded, answered.
pub(super) fn read_request(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
) -> Outcome {
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

/// A new atomic at the expected PSN: checked, executed once, recorded,
/// answered.
pub(super) fn atomic(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
) -> Outcome {
    let Some(a) = pkt.atomic_eth() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    if !qp.cfg.access.contains(Access::REMOTE_ATOMIC) {
        return Outcome::Nak(NakCode::RemoteAccessError);
    }
    if a.va() % 8 != 0 {
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    let Ok((lkey, off)) = mrs.remote(qp.access_as(), a.rkey(), a.va(), 8, Access::REMOTE_ATOMIC)
    else {
        return Outcome::Nak(NakCode::RemoteAccessError);
    };
    if owed_jobs(qp) >= depth(qp) {
        return Outcome::OverDepth;
    }
    let Some(region) = mrs.region(lkey) else {
        return Outcome::Nak(NakCode::RemoteAccessError);
    };
    // A real atomic on the 8 bytes in memory (in host byte order, as
    // ibverbs atomics): the application's own atomics on them, and other
    // QPs', see it whole.
    let off = off as u64;
    let done = if pkt.bth().opcode().operation() == Opcode::RC_COMPARE_SWAP.operation() {
        region.compare_swap(off, a.compare(), a.swap_add())
    } else {
        region.fetch_add(off, a.swap_add())
    };
    let Ok(orig) = done else {
        // The address is 8-byte aligned, the memory behind it is not (raw
        // memory lent at an odd address): no atomic can be had there.
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    served_once(qp, psn, ServedKind::Atomic { orig }, |msn| {
        Response::Atomic { psn, orig, msn }
    })
}

/// A one-packet request at `psn` served (an atomic, ATOMIC WRITE or
/// FLUSH): the MSN and the expected PSN move on, the request is recorded
/// as `kind` for its duplicates, and `answer` (given the new MSN) queued.
fn served_once(
    qp: &mut Qp,
    psn: Psn,
    kind: ServedKind,
    answer: impl FnOnce(u32) -> Response,
) -> Outcome {
    qp.resp.msn = next_msn(qp.resp.msn);
    qp.resp.epsn = psn + 1;
    let capacity = depth(qp);
    qp.resp.resources.record(capacity, Served { psn, kind });
    let msn = qp.resp.msn;
    qp.resp.out.push_back(answer(msn));
    Outcome::Responded
}

/// A new ATOMIC WRITE at the expected PSN (IBA 1.5; rxe's checks): its
/// RETH names 8 bytes at an 8-byte aligned address, which the payload
/// carries exactly; the region needs remote write access. Placed as one
/// atomic 8-byte store (no reader sees half of it), recorded, answered
/// with an empty READ RESPONSE.
pub(super) fn atomic_write(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    psn: Psn,
    mrs: &MrTable,
) -> Outcome {
    let Some(reth) = pkt.reth() else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    let data = pkt.payload();
    if reth.dma_len() != 8 || data.len() != 8 || reth.va() % 8 != 0 {
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    let (lkey, off) = match remote_target(qp, mrs, reth.rkey(), reth.va(), 8, Access::REMOTE_WRITE)
    {
        Ok(x) => x,
        Err(code) => return Outcome::Nak(code),
    };
    if owed_jobs(qp) >= depth(qp) {
        return Outcome::OverDepth;
    }
    let Some(region) = mrs.region(lkey) else {
        return Outcome::Nak(NakCode::RemoteAccessError);
    };
    let mut word = [0u8; 8];
    word.copy_from_slice(data);
    if region
        .store_u64(off as u64, u64::from_ne_bytes(word))
        .is_err()
    {
        // As for the atomics: memory behind the address not aligned.
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    served_once(qp, psn, ServedKind::Empty, |msn| Response::Empty {
        psn,
        msn,
    })
}

/// A new FLUSH at the expected PSN (IBA 1.5): FETH and RETH, no payload.
/// The placement type needs the matching access on the QP and the region
/// (global visibility: FLUSH_GLOBAL; persistence: FLUSH_PERSISTENT, which
/// no region of ferroce's has); the range (selectivity 0) must lie in the
/// region, or the whole region (1) is meant. Every write this responder
/// placed is in the application's memory before it answers (the copies
/// are done, and a fence orders them before the answer), which is global
/// visibility; recorded, answered with an empty READ RESPONSE.
pub(super) fn flush(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, psn: Psn, mrs: &MrTable) -> Outcome {
    let (Some(feth), Some(reth)) = (pkt.feth(), pkt.reth()) else {
        return Outcome::Nak(NakCode::InvalidRequest);
    };
    if !pkt.payload().is_empty() {
        return Outcome::Nak(NakCode::InvalidRequest);
    }
    let need = match feth & FETH_PLACEMENT {
        1 => Access::FLUSH_GLOBAL,
        2 => Access::FLUSH_PERSISTENT,
        3 => Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT,
        _ => return Outcome::Nak(NakCode::InvalidRequest),
    };
    let (rkey, va, len) = (reth.rkey(), reth.va(), reth.dma_len());
    let checked = match (feth & FETH_SELECTIVITY) >> 4 {
        0 => remote_target(qp, mrs, rkey, va, len, need).map(|_| ()),
        1 if qp.cfg.access.contains(need) => mrs
            .remote_region(qp.access_as(), rkey, need)
            .map(|_| ())
            .map_err(|_| NakCode::RemoteAccessError),
        1 => Err(NakCode::RemoteAccessError),
        _ => Err(NakCode::InvalidRequest),
    };
    if let Err(code) = checked {
        return Outcome::Nak(code);
    }
    if owed_jobs(qp) >= depth(qp) {
        return Outcome::OverDepth;
    }
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    served_once(qp, psn, ServedKind::Empty, |msn| Response::Empty {
        psn,
        msn,
    })
}

/// FETH bits 3:0, the placement type (1 global, 2 persistent).
const FETH_PLACEMENT: u32 = 0xf;
/// FETH bits 5:4, the selectivity level (0 the range, 1 the region).
const FETH_SELECTIVITY: u32 = 0x30;

/// The next response packet this QP owes, if any.
pub(crate) fn next_response(
    qp: &mut Qp,
    mrs: &MrTable,
    pool: &mut BufPool,
) -> Option<Result<Transmit, NotSent>> {
    if !matches!(qp.init.qp_type, QpType::Rc | QpType::XrcTgt) {
        return None;
    }
    let transport = qp.transport();
    let path = qp.path();
    // An EE context answers the RD QP that asked, through the peer's EEC.
    let (dest, rdeth) = match qp.eec() {
        Some(e) => (e.bound.map_or(0, |b| b.src_qp), Some(qp.cfg.dest_qpn)),
        None => (qp.cfg.dest_qpn, None),
    };
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
        Response::Empty { psn, msn } => {
            let mut t = super::transport_repr(Opcode::RC_RDMA_READ_RESPONSE_ONLY, *psn, dest, 0);
            t.aeth = Some(AethRepr {
                syndrome: ACK,
                msn: *msn,
            });
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
            let mut t = super::transport_repr(op.in_transport(transport), psn, dest, n);
            t.rdeth = rdeth;
            // Every READ response but a MIDDLE carries an AETH.
            if position != Position::Middle {
                t.aeth = Some(AethRepr {
                    syndrome: ACK,
                    msn: job.msn,
                });
            }
            let start = job.offset + job.sent;
            let region = mrs.region(job.lkey);
            job.sent += n;
            if last {
                qp.resp.out.pop_front();
            }
            // Copied from memory as it is now (whatever the application
            // does with it meanwhile); a region gone since the request was
            // checked reads as zeros.
            let built = Transmit::build(pool, path, &t, |out| {
                let copied = region.map(|r| r.read(start as u64, out));
                if !matches!(copied, Some(Ok(()))) {
                    out.fill(0);
                }
            });
            return Some(built.map_err(NotSent::Emit));
        }
    };
    // RC's answers in the QP's transport (XRC's share their low five bits).
    let mut t = t;
    t.bth.opcode = t.bth.opcode.in_transport(transport);
    t.rdeth = rdeth;
    Some(Transmit::build(pool, path, &t, |_| {}).map_err(NotSent::Emit))
}
