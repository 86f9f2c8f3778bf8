//! The verbs on an endpoint's queue pairs: create, modify and destroy a QP,
//! post to its queues, and the asynchronous events its changes raise.

use std::sync::Arc;

use super::posted::{enqueue_recv, enqueue_send};
use super::{Endpoint, FIRST_USER_QPN, check_send, windows, xrc};
use crate::qp::posts::QpPosts;
use crate::qp::{self, Qp, QpInit, SendWqe, completer, responder};
use crate::verbs::{
    AsyncEvent, LocalErrors, QpAttr, QpState, QpType, QueuedRecv, QueuedSend, RecvWr, SendOp,
    SendWr, VerbsError,
};

impl Endpoint {
    /// `ibv_create_qp`. With `init.srq`, the QP takes its receive WQEs from
    /// that SRQ (which may be in another PD) and `max_recv_wr` is ignored.
    ///
    /// An XRC initiator ([`QpType::XrcIni`]) has a send queue only: its
    /// `recv_cq`, `max_recv_wr` and `srq` are not used (an SRQ is refused).
    /// Targets are made by [`Self::create_xrc_tgt_qp`].
    pub fn create_qp(&mut self, mut init: QpInit) -> Result<u32, VerbsError> {
        xrc::check_init(&mut init)?;
        if !self.pds.contains(&init.pd) {
            return Err(VerbsError::NoSuchPd(init.pd));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.cqs.contains_key(&cq) {
                return Err(VerbsError::NoSuchCq(cq));
            }
        }
        if let Some(h) = init.srq
            && !self.srqs.contains_key(&h)
        {
            return Err(VerbsError::NoSuchSrq(h));
        }
        // max_recv_wr sizes a receive queue of the QP's own: with an SRQ
        // there is none, and it is not checked (as rxe's rxe_qp_chk_cap).
        let recv = (init.srq.is_none() && init.qp_type != QpType::XrcIni)
            .then_some(("max_recv_wr", init.max_recv_wr));
        for (what, v) in [("max_send_wr", init.max_send_wr)].into_iter().chain(recv) {
            if v == 0 || v > 1 << 15 {
                return Err(VerbsError::BadValue {
                    what,
                    value: v.into(),
                });
            }
        }
        if let Some(srq) = init.srq.and_then(|h| self.srqs.get_mut(&h)) {
            srq.users += 1;
        }
        let qpn = self.next_qpn();
        let mut qp = Qp::new(qpn, init, QpPosts::new(qpn, &init, &self.posts));
        self.ud_mtu(&mut qp);
        qp.publish();
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }

    /// The QPN the next QP gets, counted on.
    pub(super) fn next_qpn(&mut self) -> u32 {
        let qpn = self.next_qpn;
        // Past the last 24-bit QPN, back to the first user one: wrapping
        // to 0 used to hand out QP0 and then QP1, the GSI's.
        self.next_qpn = if qpn >= 0xff_ffff {
            FIRST_USER_QPN
        } else {
            qpn + 1
        };
        qpn
    }

    /// `ibv_destroy_qp`. It leaves the multicast groups it is attached
    /// to (the kernel refuses with EBUSY instead). A receive WQE it had taken from its SRQ for a
    /// message still arriving goes back to the SRQ; its events not yet
    /// polled are dropped.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        self.user_qp(qpn)?;
        let own_srq = self.rd_own_srq(qpn);
        self.destroy_any_qp(qpn)?;
        if let Some(h) = own_srq {
            self.srqs.remove(&h);
        }
        Ok(())
    }

    /// [`Self::destroy_qp`] of a QP or an EE context.
    pub(super) fn destroy_any_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        self.absorb_posts();
        let mut q = self.qps.remove(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        q.posts.close();
        self.forget_mcast(qpn);
        self.in_flight -= u64::from(q.counted_in_flight);
        if let Some(srq) = q.init.srq.and_then(|h| self.srqs.get_mut(&h)) {
            if let Some((wr, _)) = q.resp.recv.take() {
                srq.give_back(wr);
            }
            // A target (and an EE context) borrows the SRQ of each request;
            // it does not hold one.
            if q.init.qp_type != QpType::XrcTgt && q.eec().is_none() {
                srq.users -= 1;
            }
        }
        self.events.retain(|e| match *e {
            AsyncEvent::QpFatal { qpn: n } | AsyncEvent::QpLastWqeReached { qpn: n } => n != qpn,
            _ => true,
        });
        Ok(())
    }

    /// The oldest asynchronous event not yet taken (`ibv_get_async_event`,
    /// without the wait). See [`AsyncEvent`] for what raises each.
    pub fn poll_async_event(&mut self) -> Option<AsyncEvent> {
        self.events.pop_front()
    }

    /// Queues the asynchronous events the last step of `qpn` caused: its
    /// SRQ's limit crossed, one of its CQs overflowed, its entry into the
    /// error state (any entry not asked for by `modify_qp`, which reports
    /// its own).
    pub(super) fn raise_events(&mut self, qpn: u32) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if let Some(h) = q.init.srq
            && let Some(srq) = self.srqs.get_mut(&h)
            && srq.limit_reached
        {
            srq.limit_reached = false;
            self.events
                .push_back(AsyncEvent::SrqLimitReached { srq: h });
        }
        let cqs = [q.init.send_cq, q.init.recv_cq];
        let n = if cqs[0] == cqs[1] { 1 } else { 2 };
        for &cq in &cqs[..n] {
            if let Some(c) = self.cqs.get_mut(&cq)
                && c.overflowed()
                && !c.overflow_reported
            {
                c.overflow_reported = true;
                self.events.push_back(AsyncEvent::CqOverflow { cq });
            }
        }
        if q.state == QpState::Err && !q.error_reported {
            q.error_reported = true;
            self.events.push_back(AsyncEvent::QpFatal { qpn });
            if q.init.srq.is_some() {
                self.events.push_back(AsyncEvent::QpLastWqeReached { qpn });
            }
        }
    }

    /// How bad scatter/gather lists posted to QP `qpn` are reported (see
    /// [`LocalErrors`]; [`LocalErrors::Immediate`] until set). Either way a
    /// request is checked again when it executes: a region deregistered
    /// after the post fails it with `LocProtErr`.
    pub fn set_local_errors(&mut self, qpn: u32, mode: LocalErrors) -> Result<(), VerbsError> {
        let q = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        q.local_errors = mode;
        q.publish();
        Ok(())
    }

    /// The QP's current state.
    pub fn qp_state(&self, qpn: u32) -> Result<QpState, VerbsError> {
        self.qps
            .get(&qpn)
            .map(|q| q.state)
            .ok_or(VerbsError::NoSuchQp(qpn))
    }

    /// `ibv_modify_qp`: checked as ibverbs checks it (see `qp::state`).
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr) -> Result<(), VerbsError> {
        self.user_qp(qpn)?;
        self.modify_any_qp(qpn, attr)
    }

    /// A QP of the application's: not an EE context (`rd`), which has its
    /// own calls.
    fn user_qp(&self, qpn: u32) -> Result<&Qp, VerbsError> {
        self.qps
            .get(&qpn)
            .filter(|q| q.eec().is_none())
            .ok_or(VerbsError::NoSuchQp(qpn))
    }

    /// [`Self::modify_qp`] of a QP or an EE context.
    pub(super) fn modify_any_qp(&mut self, qpn: u32, attr: &QpAttr) -> Result<(), VerbsError> {
        // Posts made before this call are queued (or flushed, or dropped
        // by a Reset) in order with it.
        self.absorb_posts();
        let q = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let to = qp::state::check_modify(q.init.qp_type, q.state, attr)?;
        crate::log::state_change(qpn, q.state, to, crate::log::Why::Modify);
        let c = &mut q.cfg;
        if let Some(v) = attr.qkey {
            c.qkey = v;
        }
        if let Some(v) = attr.access {
            c.access = v;
        }
        if let Some(v) = attr.path {
            c.path = Some(v);
        }
        if let Some(v) = attr.path_mtu {
            c.mtu = v;
        }
        if let Some(v) = attr.dest_qpn {
            c.dest_qpn = v;
        }
        if let Some(v) = attr.timeout {
            c.timeout = v;
        }
        if let Some(v) = attr.retry_cnt {
            c.retry_cnt = v;
            q.comp.retry_left = v;
        }
        if let Some(v) = attr.rnr_retry {
            c.rnr_retry = v;
            q.comp.rnr_left = v;
        }
        if let Some(v) = attr.min_rnr_timer {
            c.min_rnr_timer = v;
        }
        if let Some(v) = attr.max_rd_atomic {
            c.max_rd_atomic = v;
        }
        if let Some(v) = attr.max_dest_rd_atomic {
            c.max_dest_rd_atomic = v;
        }
        if let Some(p) = attr.rq_psn {
            q.resp.epsn = p;
        }
        if let Some(p) = attr.sq_psn {
            q.req.next_psn = p;
            // Everything before the first PSN counts as acknowledged. Left
            // unset, the first NAK (say a sequence error behind an RNR NAK)
            // "acknowledged" PSN sq_psn - 1, counted that as progress and
            // gave the retry and RNR budgets an extra round.
            q.comp.acked = Some(p - 1);
        }
        match to {
            QpState::Reset => {
                // A WQE taken from the SRQ for a message still arriving
                // goes back to it (its own receive queue is discarded).
                if let Some((wr, _)) = q.resp.recv.take() {
                    responder::give_back(q, &mut self.srqs, wr);
                }
                let (init, scheduled, counted) = (q.init, q.scheduled, q.counted_in_flight);
                let (local_errors, xrcd, rd) = (q.local_errors, q.xrcd, q.rd.take());
                let block = q.block_self_mcast;
                // The discarded requests free their slots.
                q.sq.take_all();
                q.rq.take_all();
                *q = Qp::new(qpn, init, Arc::clone(&q.posts));
                q.local_errors = local_errors;
                q.xrcd = xrcd;
                q.rd = rd.map(crate::qp::rd::RdRole::reset);
                q.block_self_mcast = block;
                if init.qp_type == QpType::Ud {
                    q.cfg.mtu = self.port_mtu;
                }
                q.scheduled = scheduled;
                q.counted_in_flight = counted;
            }
            QpState::Err if q.state != QpState::Err => {
                q.state = QpState::Err;
                // An RD QP's request on an EE context is that EEC's to
                // complete (`rd`): it is not flushed twice.
                let handed = q.rd.as_ref().and_then(|r| r.qp()?.handed);
                let carried = handed.and_then(|_| q.sq.pop_front());
                completer::flush(q, &mut self.cqs);
                if let Some(w) = carried {
                    q.sq.push_front(w);
                }
                // Asked for: no QP_FATAL; an SRQ's user still reports that
                // it takes no more WQEs from it.
                q.error_reported = true;
                if q.init.srq.is_some() {
                    self.events.push_back(AsyncEvent::QpLastWqeReached { qpn });
                }
            }
            _ => q.state = to,
        }
        q.publish();
        self.touched(qpn);
        self.raise_events(qpn);
        Ok(())
    }

    /// `ibv_post_send`: checks the request and copies it (scatter list,
    /// inline data) into the send queue.
    pub fn post_send(&mut self, qpn: u32, mut wr: SendWr<'_>) -> Result<(), VerbsError> {
        // After the posts made without the lock, in order.
        self.absorb_posts();
        self.rd_send_allowed(self.user_qp(qpn)?, &wr)?;
        let q = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let qp_type = q.init.qp_type;
        xrc::send_allowed(qpn, qp_type, &wr)?;
        if matches!(q.state, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(VerbsError::WrongState {
                qpn,
                state: q.state,
                call: "post_send",
            });
        }
        let (pd, local_errors, mrs) = (q.init.pd, q.local_errors, &self.mrs);
        let len = check_send(qp_type, q.cfg.mtu, &mut wr, |sg, write| {
            if local_errors == LocalErrors::Immediate {
                mrs.check_sg(pd, sg, write)?;
            }
            Ok(())
        })?;
        if wr.op.is_local() {
            windows::check_local_op(&self.mrs, pd, local_errors, &wr, len)?;
        }
        if !q.posts.reserve_send() {
            return Err(VerbsError::QueueFull {
                qpn,
                queue: "send queue",
                depth: q.init.max_send_wr,
            });
        }
        if q.state != QpState::Err
            && let SendOp::BindMw { rkey, .. } = wr.op
        {
            self.mrs.set_posted_key(rkey);
        }
        let wqe = SendWqe::queued(QueuedSend::from(&wr), len, q.req.next_psn);
        let flushed = enqueue_send(q, &mut self.cqs, wqe);
        self.queued(qpn, flushed);
        Ok(())
    }

    /// `ibv_post_recv`; refused on a QP that takes its receives from an
    /// SRQ, as ibverbs refuses it.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr<'_>) -> Result<(), VerbsError> {
        self.absorb_posts();
        self.user_qp(qpn)?;
        if let Some(srq) = self.rd_own_srq(qpn) {
            // An RD QP's receive queue is the SRQ made for it (`rd`).
            if self.qps[&qpn].state == QpState::Reset {
                return Err(VerbsError::WrongState {
                    qpn,
                    state: QpState::Reset,
                    call: "post_recv",
                });
            }
            return self.post_srq_recv(srq, wr);
        }
        let q = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if q.init.qp_type.is_xrc() {
            return Err(VerbsError::XrcRefused {
                qpn,
                call: "post_recv",
                fix: "XRC QPs have no receive queue: post receives to the XRC SRQ the \
                      initiator's requests name (post_srq_recv)",
            });
        }
        if let Some(srq) = q.init.srq {
            return Err(VerbsError::QpHasSrq { qpn, srq });
        }
        if q.state == QpState::Reset {
            return Err(VerbsError::WrongState {
                qpn,
                state: q.state,
                call: "post_recv",
            });
        }
        if q.local_errors == LocalErrors::Immediate {
            self.mrs.check_sg(q.init.pd, wr.sg, true)?;
        }
        if !q.posts.reserve_recv() {
            return Err(VerbsError::QueueFull {
                qpn,
                queue: "receive queue",
                depth: q.init.max_recv_wr,
            });
        }
        let flushed = enqueue_recv(q, &mut self.cqs, QueuedRecv::from(&wr));
        self.queued(qpn, flushed);
        Ok(())
    }
}
