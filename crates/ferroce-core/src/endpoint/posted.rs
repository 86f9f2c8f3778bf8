//! Taking the requests posted without the engine (`qp::posts`): each
//! input, timer and verb that reads a QP's queues first takes what its
//! posters queued, in the order they queued it; and the checks of a send
//! request that both ways of posting make ([`check_send`]).

use std::sync::Arc;

use super::{Endpoint, MAX_MSG_SIZE, MULTICAST_QPN, multicast_group, rd};
use crate::mr::sg_len;
use rustc_hash::FxHashMap as HashMap;

use crate::cq::Cq;
use crate::qp::posts::{PostedSend, QpPoster, SrqPoster};
use crate::qp::{Qp, SendWqe};
use crate::verbs::{
    Mtu, QpState, QpType, QueuedRecv, SendOp, SendWr, Sge, VerbsError, WcOpcode, WorkCompletion,
};

/// The longest FLUSH range: a RETH's DMA length, at most 2^31 bytes (as
/// rxe checks every RETH).
const MAX_FLUSH_LEN: u32 = 1 << 31;

impl Endpoint {
    /// A handle that posts to QP `qpn` without this endpoint's lock
    /// ([`QpPoster`]): what the posts of an application thread go
    /// through while another thread drives the endpoint.
    pub fn qp_poster(&self, qpn: u32) -> Result<QpPoster, VerbsError> {
        let q = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        Ok(QpPoster(Arc::clone(&q.posts)))
    }

    /// A handle that posts to SRQ `srq` without this endpoint's lock
    /// ([`SrqPoster`]).
    pub fn srq_poster(&self, srq: u32) -> Result<SrqPoster, VerbsError> {
        let s = self.srqs.get(&srq).ok_or(VerbsError::NoSuchSrq(srq))?;
        Ok(SrqPoster(Arc::clone(&s.posts)))
    }

    /// Takes every QP's and SRQ's posts made through a [`QpPoster`] or an
    /// [`SrqPoster`] into its queues.
    pub(crate) fn absorb_posts(&mut self) {
        while let Some(qpn) = self.posts.next_ready() {
            self.absorb_qp(qpn);
        }
        while let Some(h) = self.posts.next_ready_srq() {
            // A destroyed SRQ's ring went with it.
            if let Some(s) = self.srqs.get_mut(&h) {
                s.posts.unlist();
                while let Some(wr) = s.posts.recvs.pop() {
                    s.wqes.push_back(wr);
                }
            }
        }
    }

    fn absorb_qp(&mut self, qpn: u32) {
        // A destroyed QP's rings went with it.
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        let posts = Arc::clone(&q.posts);
        posts.unlist();
        let mut flushed = false;
        while let Some(wr) = posts.recvs.pop() {
            flushed |= enqueue_recv(q, &mut self.cqs, wr);
        }
        while let Some(PostedSend { wr, len }) = posts.sends.pop() {
            let wqe = SendWqe::queued(wr, len, q.req.next_psn);
            flushed |= enqueue_send(q, &mut self.cqs, wqe);
        }
        self.queued(qpn, flushed);
    }

    /// After requests went into QP `qpn`'s queues: it may have something
    /// to send, and a flush may have completed some.
    pub(super) fn queued(&mut self, qpn: u32, flushed: bool) {
        self.touched(qpn);
        if flushed {
            self.raise_events(qpn);
        }
    }
}

/// Puts a send request whose slot is taken into `q`'s send queue, as `q`'s
/// state allows: in Err it completes at once, flushed (IBA 10.3.1, Error
/// state); in Reset, Init or RTR (a lock-free post that raced a
/// `modify_qp`, which the engine ordered first) it is dropped, as the
/// Reset would have dropped it. Either way its slot is freed. Returns
/// whether it was flushed.
pub(super) fn enqueue_send(q: &mut Qp, cqs: &mut HashMap<u32, Cq>, wqe: SendWqe) -> bool {
    match q.state {
        QpState::Reset | QpState::Init | QpState::Rtr => {
            q.posts.release_send();
            false
        }
        QpState::Err => {
            q.posts.release_send();
            if let Some(cq) = cqs.get_mut(&q.init.send_cq) {
                cq.push(WorkCompletion::flushed(
                    wqe.wr.wr_id,
                    wqe.wc_opcode(),
                    q.qpn,
                ));
            }
            true
        }
        _ => {
            q.sq.push_back(wqe);
            false
        }
    }
}

/// [`enqueue_send`] for a receive request (dropped in Reset only).
pub(super) fn enqueue_recv(q: &mut Qp, cqs: &mut HashMap<u32, Cq>, wr: QueuedRecv) -> bool {
    match q.state {
        QpState::Reset => {
            q.posts.release_recv();
            false
        }
        QpState::Err => {
            q.posts.release_recv();
            if let Some(cq) = cqs.get_mut(&q.init.recv_cq) {
                cq.push(WorkCompletion::flushed(wr.wr_id, WcOpcode::Recv, q.qpn));
            }
            true
        }
        _ => {
            q.rq.push_back(wr);
            false
        }
    }
}

/// The checks of a send request that need nothing of the QP but its
/// type and path MTU (a UD send's limit), in the order `post_send` makes
/// them; `check_sg` checks the scatter list (its flag: the request writes
/// into it) as the QP's local error mode says. Rewrites a multicast UD
/// destination's QPN. Returns the message length.
pub(crate) fn check_send(
    qp_type: QpType,
    mtu: Mtu,
    wr: &mut SendWr<'_>,
    check_sg: impl FnOnce(&[Sge], bool) -> Result<(), VerbsError>,
) -> Result<u64, VerbsError> {
    let op_name = match wr.op {
        SendOp::Send => "SEND",
        SendOp::SendWithImm(_) => "SEND_WITH_IMM",
        SendOp::SendWithInv(_) => "SEND_WITH_INV",
        SendOp::Write { .. } => "RDMA_WRITE",
        SendOp::WriteWithImm { .. } => "RDMA_WRITE_WITH_IMM",
        SendOp::Read { .. } => "RDMA_READ",
        SendOp::CompareSwap { .. } => "ATOMIC_CMP_AND_SWP",
        SendOp::FetchAdd { .. } => "ATOMIC_FETCH_AND_ADD",
        SendOp::AtomicWrite { .. } => "ATOMIC_WRITE",
        SendOp::Flush { .. } => "FLUSH",
        SendOp::BindMw { .. } => "BIND_MW",
        SendOp::LocalInv(_) => "LOCAL_INV",
    };
    let allowed = match qp_type {
        QpType::Rc => true,
        // XRC has no opcodes for ATOMIC WRITE and FLUSH (the XRC range
        // ends at 0xB7).
        QpType::XrcIni | QpType::XrcTgt => {
            !matches!(wr.op, SendOp::AtomicWrite { .. } | SendOp::Flush { .. })
        }
        QpType::Uc => matches!(
            wr.op,
            SendOp::Send
                | SendOp::SendWithImm(_)
                | SendOp::Write { .. }
                | SendOp::WriteWithImm { .. }
                | SendOp::BindMw { .. }
                | SendOp::LocalInv(_)
        ),
        QpType::Ud => matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)),
        QpType::Rd => rd::rd_op(&wr.op),
    };
    if !allowed {
        return Err(VerbsError::BadOpForQpType {
            op: op_name,
            qp_type,
        });
    }
    if qp_type == QpType::Ud && wr.ud.is_none() {
        return Err(VerbsError::BadValue {
            what: "UD send without a destination (ud)",
            value: 0,
        });
    }
    if let Some(ud) = wr.ud.as_mut()
        && multicast_group(ud.path.remote).is_some()
    {
        // Every multicast packet carries the multicast QPN.
        ud.qpn = MULTICAST_QPN;
    }
    let writes_local = wr.op.writes_local();
    if wr.inline.is_some() && writes_local {
        return Err(VerbsError::BadValue {
            what: "inline data on a READ or atomic",
            value: 0,
        });
    }
    check_sg(wr.sg, writes_local)?;
    let len = wr.inline.map_or_else(|| sg_len(wr.sg), |d| d.len() as u64);
    if let SendOp::Flush { remote, .. } = wr.op {
        if len != 0 {
            return Err(VerbsError::BadValue {
                what: "FLUSH data length (it carries none: post it with no scatter list)",
                value: len,
            });
        }
        if remote.len() > u64::from(MAX_FLUSH_LEN) {
            return Err(VerbsError::TooLong {
                len: remote.len(),
                max: u64::from(MAX_FLUSH_LEN),
            });
        }
    }
    if let SendOp::CompareSwap { remote, .. }
    | SendOp::FetchAdd { remote, .. }
    | SendOp::AtomicWrite { remote } = wr.op
    {
        if remote.addr() % 8 != 0 {
            return Err(VerbsError::Unaligned(remote.addr()));
        }
        if len != 8 {
            let what = if matches!(wr.op, SendOp::AtomicWrite { .. }) {
                "ATOMIC WRITE data length (must be 8)"
            } else {
                "atomic local buffer length (must be 8)"
            };
            return Err(VerbsError::BadValue { what, value: len });
        }
    }
    let max = if qp_type == QpType::Ud {
        mtu.bytes() as u64
    } else {
        MAX_MSG_SIZE
    };
    if len > max {
        return Err(VerbsError::TooLong { len, max });
    }
    // The message (an atomic's 8 bytes) must fit the slice of peer
    // memory it was given: the sender's own bound, before the peer's.
    if let Some(remote) = wr.op.remote().filter(|r| len > r.len()) {
        return Err(VerbsError::RemoteTooShort { len, remote });
    }
    Ok(len)
}
