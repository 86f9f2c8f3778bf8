//! Shared receive queues: one pool of receive WQEs that any number of QPs
//! (RC, UC, UD) take from, as rxe's `rxe_srq.c` and `get_srq_wqe` in
//! `rxe_resp.c`.
//!
//! * A QP created with an SRQ has no receive queue of its own: `post_recv`
//!   on it is refused, and its responder takes each receive WQE from the
//!   SRQ when a message that needs one starts (SEND, and RDMA WRITE with
//!   immediate). An empty SRQ is handled as an empty receive queue: RNR NAK
//!   on RC, the message dropped on UC and UD.
//! * Completions go to the QP's receive CQ, with the QP's number.
//! * A QP in error flushes only the WQE it was filling; the rest stay in the
//!   SRQ for the other QPs.
//! * The limit: when a WQE is taken and fewer than the armed limit are left,
//!   the limit disarms and [`crate::verbs::AsyncEvent::SrqLimitReached`] is
//!   raised, once. It is checked when WQEs are taken, as rxe does, so arming
//!   a limit above the current count raises nothing until the next one is.
//! * An XRC SRQ (`xrc`) belongs to an XRC domain and has its own CQ: XRC
//!   target QPs of that domain deliver into it the requests whose XRCETH
//!   names its number, and its receives complete on its CQ (see
//!   `endpoint::xrc`).
//! * Posted WQEs are checked against the SRQ's protection domain (at post,
//!   or, with [`LocalErrors::Completion`], only when a QP takes one: see
//!   `qp::responder`); the QPs that use it may be in other PDs (ibverbs
//!   allows it).

use std::sync::Arc;

use crate::qp::posts::{SrqPosts, WorkQueue};

use crate::verbs::{LocalErrors, QueuedRecv};

/// Receive WQEs per SRQ: `create_srq` and `modify_srq` refuse more (the
/// same as per QP receive queue; rxe: `RXE_MAX_SRQ_WR`).
pub(crate) const MAX_SRQ_WR: u32 = 1 << 15;

/// A shared receive queue.
#[derive(Debug)]
pub(crate) struct Srq {
    pub(crate) pd: u32,
    pub(crate) max_wr: u32,
    /// The armed limit, 0 when not armed.
    pub(crate) limit: u32,
    pub(crate) wqes: WorkQueue<QueuedRecv>,
    /// What it shares with its posters (`qp::posts`).
    pub(crate) posts: Arc<SrqPosts>,
    /// The limit was crossed and the event not handed out yet.
    pub(crate) limit_reached: bool,
    /// QPs created with this SRQ (`destroy_srq` refuses while any is).
    pub(crate) users: u32,
    /// How a bad scatter/gather list in its posts is reported.
    pub(crate) local_errors: LocalErrors,
    /// An XRC SRQ's domain and completion queue (`None`: a basic SRQ).
    pub(crate) xrc: Option<XrcSrq>,
}

/// What makes an SRQ an XRC SRQ (`IBV_SRQT_XRC`): its XRC domain, whose
/// target QPs may deliver into it, and the CQ its receives complete on
/// (the target QP has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct XrcSrq {
    pub(crate) xrcd: u32,
    pub(crate) cq: u32,
}

impl Srq {
    pub(crate) fn new(pd: u32, max_wr: u32, limit: u32, posts: Arc<SrqPosts>) -> Self {
        Self {
            pd,
            max_wr,
            limit,
            wqes: WorkQueue::new(Arc::clone(&posts.used)),
            posts,
            limit_reached: false,
            users: 0,
            local_errors: LocalErrors::Immediate,
            xrc: None,
        }
    }

    /// Takes the oldest WQE for a QP; crossing the armed limit disarms it
    /// and marks the event due.
    pub(crate) fn take(&mut self) -> Option<QueuedRecv> {
        let wr = self.wqes.pop_front()?;
        if self.limit != 0 && (self.wqes.len() as u64) < u64::from(self.limit) {
            self.limit = 0;
            self.limit_reached = true;
        }
        Some(wr)
    }

    /// Gives back a WQE a QP took but did not use (a UC message dropped
    /// midway, a QP reset or destroyed while filling it): the next message,
    /// on any QP, gets it first. If the user filled the SRQ meanwhile, it
    /// holds one more than `max_wr` until that WQE is taken.
    pub(crate) fn give_back(&mut self, wr: QueuedRecv) {
        self.wqes.push_front(wr);
    }
}
