//! XRC, the extended reliable connected transport (IBA Annex A14), shaped
//! as ibverbs shapes it: XRC domains (`ibv_open_xrcd`), XRC SRQs
//! (`ibv_create_srq_ex` with `IBV_SRQT_XRC`), initiator QPs (`XRC_SEND`,
//! made by `create_qp` with [`QpType::XrcIni`]) and target QPs
//! (`XRC_RECV`, [`Endpoint::create_xrc_tgt_qp`]).
//!
//! Contract:
//! * an initiator is an RC send queue whose requests each carry the target
//!   SRQ's number in an XRCETH (`SendWr::remote_srqn`, required); it takes
//!   no receives. ATOMIC WRITE and FLUSH have no XRC opcode and are refused.
//! * a target has no PD, CQ or queue of its own: each request's XRCETH
//!   names an XRC SRQ, which must exist and be of the target's domain, else
//!   the target answers NAK Invalid Request and enters the error state (our
//!   reading of A14; a message's packets must all name the same SRQ). A
//!   SEND takes a WQE from that SRQ and completes on the SRQ's CQ with the
//!   target's QPN; WRITE, READ and atomics are checked against the SRQ's PD.
//!   ACKs, NAKs, duplicates and retransmission are RC's.
//! * SRQ numbers are the SRQ handles (24 bits: handles count up from 1).

use super::Endpoint;
use crate::qp::{Qp, QpInit};
use crate::srq::{MAX_SRQ_WR, Srq, XrcSrq};
use crate::verbs::{QpType, SendWr, VerbsError};

impl Endpoint {
    /// `ibv_open_xrcd`: a new XRC domain.
    pub fn open_xrcd(&mut self) -> u32 {
        let h = self.handle();
        self.xrcds.insert(h);
        h
    }

    /// `ibv_close_xrcd`: refused while XRC SRQs or target QPs are in it.
    pub fn close_xrcd(&mut self, xrcd: u32) -> Result<(), VerbsError> {
        if !self.xrcds.contains(&xrcd) {
            return Err(VerbsError::NoSuchXrcd(xrcd));
        }
        if self
            .srqs
            .values()
            .any(|s| s.xrc.is_some_and(|x| x.xrcd == xrcd))
        {
            return Err(VerbsError::Busy("XRC SRQs created in this XRC domain"));
        }
        if self.qps.values().any(|q| q.xrcd == Some(xrcd)) {
            return Err(VerbsError::Busy(
                "XRC target QPs created in this XRC domain",
            ));
        }
        self.xrcds.remove(&xrcd);
        Ok(())
    }

    /// `ibv_create_srq_ex` with `IBV_SRQT_XRC`: an SRQ in `pd` (whose
    /// memory the requests delivered into it may reach) and XRC domain
    /// `xrcd`, its receives completing on `cq`. Its number, for the
    /// initiators' requests, is [`Self::srq_num`].
    pub fn create_xrc_srq(
        &mut self,
        pd: u32,
        xrcd: u32,
        cq: u32,
        max_wr: u32,
        srq_limit: u32,
    ) -> Result<u32, VerbsError> {
        if !self.xrcds.contains(&xrcd) {
            return Err(VerbsError::NoSuchXrcd(xrcd));
        }
        if !self.cqs.contains_key(&cq) {
            return Err(VerbsError::NoSuchCq(cq));
        }
        if !self.pds.contains(&pd) {
            return Err(VerbsError::NoSuchPd(pd));
        }
        if max_wr == 0 || max_wr > MAX_SRQ_WR {
            let value = max_wr.into();
            return Err(VerbsError::BadValue {
                what: "srq max_wr",
                value,
            });
        }
        if srq_limit > max_wr {
            let value = srq_limit.into();
            return Err(VerbsError::BadValue {
                what: "srq_limit (above max_wr)",
                value,
            });
        }
        let h = self.handle();
        let posts = crate::qp::posts::SrqPosts::new(h, pd, max_wr, &self.posts);
        let mut srq = Srq::new(pd, max_wr, srq_limit, posts);
        srq.xrc = Some(XrcSrq { xrcd, cq });
        self.srqs.insert(h, srq);
        Ok(h)
    }

    /// `ibv_get_srq_num`: the number initiators name an XRC SRQ by.
    pub fn srq_num(&self, srq: u32) -> Result<u32, VerbsError> {
        match self.srqs.get(&srq) {
            Some(s) if s.xrc.is_some() => Ok(srq),
            Some(_) => Err(VerbsError::NotXrcSrq(srq)),
            None => Err(VerbsError::NoSuchSrq(srq)),
        }
    }

    /// `ibv_create_qp_ex` with `IBV_QPT_XRC_RECV`: a target QP in XRC
    /// domain `xrcd`. It has no send queue, receive queue, PD or CQ; take
    /// it through the states as an RC QP (RTR is enough to receive).
    pub fn create_xrc_tgt_qp(&mut self, xrcd: u32) -> Result<u32, VerbsError> {
        if !self.xrcds.contains(&xrcd) {
            return Err(VerbsError::NoSuchXrcd(xrcd));
        }
        let init = QpInit {
            pd: NO_OBJECT,
            qp_type: QpType::XrcTgt,
            send_cq: NO_OBJECT,
            recv_cq: NO_OBJECT,
            max_send_wr: 0,
            max_recv_wr: 0,
            sq_sig_all: false,
            srq: None,
        };
        let qpn = self.next_qpn();
        let mut qp = Qp::new(
            qpn,
            init,
            crate::qp::posts::QpPosts::new(qpn, &init, &self.posts),
        );
        qp.xrcd = Some(xrcd);
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }
}

/// What `create_qp` does with an XRC type: a target is refused (it has no
/// PD or CQ: `create_xrc_tgt_qp` makes it), an initiator takes no SRQ and
/// completes nothing on a receive CQ (its `recv_cq` becomes its `send_cq`).
pub(super) fn check_init(init: &mut QpInit) -> Result<(), VerbsError> {
    let what = match init.qp_type {
        QpType::XrcTgt => {
            "qp_type XrcTgt in create_qp (a target has no PD or CQ: create_xrc_tgt_qp \
             makes it in its XRC domain)"
        }
        QpType::XrcIni if init.srq.is_some() => {
            "srq on an XRC initiator (it receives nothing; its sends name the target's SRQ)"
        }
        QpType::XrcIni => {
            init.recv_cq = init.send_cq;
            return Ok(());
        }
        _ => return Ok(()),
    };
    let value = init.srq.unwrap_or_default().into();
    Err(VerbsError::BadValue { what, value })
}

/// The XRC rules of a send request: a target sends nothing of its own, an
/// initiator's requests name the target's SRQ.
pub(super) fn send_allowed(qpn: u32, qp_type: QpType, wr: &SendWr<'_>) -> Result<(), VerbsError> {
    let fix = match qp_type {
        QpType::XrcTgt => "an XRC target has no send queue: post to the initiator that reaches it",
        QpType::XrcIni if wr.remote_srqn.is_none() => {
            "an XRC initiator's request names the target's XRC SRQ: set remote_srqn \
             (wr.qp_type.xrc.remote_srqn)"
        }
        _ => return Ok(()),
    };
    Err(VerbsError::XrcRefused {
        qpn,
        call: "post_send",
        fix,
    })
}

/// The handle a target QP has for its PD and CQs until a request binds it
/// to an SRQ's: no object has it (handles start at 1).
const NO_OBJECT: u32 = 0;
