//! Taking the requests posted without the engine (`qp::posts`): each
//! input, timer and verb that reads a QP's queues first takes what its
//! posters queued, in the order they queued it.

use std::sync::Arc;

use super::Endpoint;
use crate::qp::SendWqe;
use crate::qp::posts::{PostedSend, QpPoster, SrqPoster};
use crate::verbs::{QpState, VerbsError, WcOpcode, WcStatus, WorkCompletion};

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
            match q.state {
                // The post raced a modify_qp to Reset, which came first.
                QpState::Reset => posts.release_recv(),
                QpState::Err => {
                    posts.release_recv();
                    if let Some(cq) = self.cqs.get_mut(&q.init.recv_cq) {
                        cq.push(WorkCompletion::flushed(wr.wr_id, WcOpcode::Recv, qpn));
                    }
                    flushed = true;
                }
                _ => q.rq.push_back(wr),
            }
        }
        while let Some(PostedSend { wr, len }) = posts.sends.pop() {
            let wqe = SendWqe {
                wr,
                len,
                first_psn: q.req.next_psn,
                npkts: 0,
                started: false,
                done: false,
                status: WcStatus::Success,
                read_received: 0,
                origin: None,
            };
            match q.state {
                QpState::Reset | QpState::Init | QpState::Rtr => posts.release_send(),
                QpState::Err => {
                    posts.release_send();
                    if let Some(cq) = self.cqs.get_mut(&q.init.send_cq) {
                        cq.push(WorkCompletion::flushed(wqe.wr.wr_id, wqe.wc_opcode(), qpn));
                    }
                    flushed = true;
                }
                _ => q.sq.push_back(wqe),
            }
        }
        self.touched(qpn);
        if flushed {
            self.raise_events(qpn);
        }
    }
}
