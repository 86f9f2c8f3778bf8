//! Reliable datagram (IBA 9.7, RD): reliable datagram domains, EE contexts
//! and RD QPs, and the two places where RD's split between them is joined
//! (see `qp::rd` for the model).
//!
//! Contract:
//! * An RD QP and the EE contexts it sends through belong to one reliable
//!   datagram domain (RDD); a send naming an EEC of another domain, or no
//!   EEC, is refused at post. An EEC is connected to one EEC of one peer
//!   (`modify_eec` with RC's attributes: path, the peer EEC's number as
//!   `dest_qpn`, PSNs, timeout, retries).
//! * Sending: an RD QP hands its oldest request to the EEC it names when
//!   that EEC carries nothing; the EEC sends it, retransmits it, and
//!   completes it on the RD QP's send CQ. An EEC's failure (retries or RNR
//!   retries exhausted, a NAK) completes the request with the error and
//!   puts the EEC and the RD QP in the error state.
//! * Receiving: a request reaches the EEC its RDETH names. At its expected
//!   PSN it is bound to the destination RD QP of its BTH, which must be an
//!   RD QP of the EEC's domain in RTR or RTS with the DETH's Q_Key; if not,
//!   the EEC answers NAK invalid RD request (and enters the error state,
//!   as RC's responder does for a NAK).
//! * ferroce does not send RESYNC (an EEC is reset through `modify_eec`
//!   after an error), and takes an incoming one as an unexpected packet.

use ferroce_wire::TransportPacket;

use super::Endpoint;
use crate::qp::rd::{Bound, BoundQp, Eec, Handed, RdQp, RdRole};
use crate::qp::{Qp, QpInit, SendWqe, completer};
use crate::verbs::{QpAttr, QpState, QpType, SendOp, SendWr, VerbsError, WcStatus};

impl Endpoint {
    /// A new reliable datagram domain.
    pub fn alloc_rdd(&mut self) -> u32 {
        let h = self.handle();
        self.rdds.insert(h);
        h
    }

    /// Refused while EE contexts or RD QPs are in it.
    pub fn dealloc_rdd(&mut self, rdd: u32) -> Result<(), VerbsError> {
        if !self.rdds.contains(&rdd) {
            return Err(VerbsError::NoSuchRdd(rdd));
        }
        if self.qps.values().any(|q| rdd_of(q) == Some(rdd)) {
            return Err(VerbsError::Busy(
                "EE contexts or RD QPs created in this reliable datagram domain",
            ));
        }
        self.rdds.remove(&rdd);
        Ok(())
    }

    /// A new EE context in `rdd`, in RESET; its number (from the QP
    /// numbers: an RDETH names it as a BTH names a QP).
    pub fn create_eec(&mut self, rdd: u32) -> Result<u32, VerbsError> {
        if !self.rdds.contains(&rdd) {
            return Err(VerbsError::NoSuchRdd(rdd));
        }
        let eecn = self.next_qpn();
        // RC's machinery with no queue of its own: PD and CQs are the RD
        // QPs' it serves (see `qp::rd`).
        let init = QpInit {
            pd: 0,
            qp_type: QpType::Rc,
            send_cq: 0,
            recv_cq: 0,
            max_send_wr: 1,
            max_recv_wr: 0,
            sq_sig_all: false,
            srq: None,
        };
        let mut eec = Qp::new(
            eecn,
            init,
            crate::qp::posts::QpPosts::new(eecn, &init, &self.posts),
        );
        eec.rd = Some(RdRole::Eec(Eec {
            rdd,
            ..Eec::default()
        }));
        self.qps.insert(eecn, eec);
        Ok(eecn)
    }

    /// Moves an EE context through its states as RC's `modify_qp` moves an
    /// RC QP, with RC's attributes (`dest_qpn`: the peer's EEC; `access`
    /// is not used: each RD QP's own applies).
    pub fn modify_eec(&mut self, eecn: u32, attr: &QpAttr) -> Result<(), VerbsError> {
        self.eec_check(eecn)?;
        self.modify_any_qp(eecn, attr)?;
        self.rd_wake(eecn);
        Ok(())
    }

    /// The EE context's state.
    pub fn eec_state(&self, eecn: u32) -> Result<QpState, VerbsError> {
        self.eec_check(eecn)?;
        Ok(self.qps[&eecn].state)
    }

    /// Refused while it carries a request.
    pub fn destroy_eec(&mut self, eecn: u32) -> Result<(), VerbsError> {
        self.eec_check(eecn)?;
        if !self.qps[&eecn].sq.is_empty() {
            return Err(VerbsError::Busy("the EE context carries a request"));
        }
        self.destroy_any_qp(eecn)
    }

    fn eec_check(&self, eecn: u32) -> Result<(), VerbsError> {
        match self.qps.get(&eecn) {
            Some(q) if q.eec().is_some() => Ok(()),
            _ => Err(VerbsError::NoSuchEec(eecn)),
        }
    }

    /// An RD QP in `rdd` (`init.qp_type` [`QpType::Rd`]). Without
    /// `init.srq`, its receive queue of `max_recv_wr` is made for it
    /// (`post_recv` posts there).
    pub fn create_rd_qp(&mut self, mut init: QpInit, rdd: u32) -> Result<u32, VerbsError> {
        if init.qp_type != QpType::Rd {
            return Err(VerbsError::BadValue {
                what: "qp_type of create_rd_qp (must be QpType::Rd)",
                value: 0,
            });
        }
        if !self.rdds.contains(&rdd) {
            return Err(VerbsError::NoSuchRdd(rdd));
        }
        let own_srq = match init.srq {
            Some(_) => None,
            None => {
                let h = self.create_srq(init.pd, init.max_recv_wr, 0)?;
                init.srq = Some(h);
                Some(h)
            }
        };
        let qpn = match self.create_qp(init) {
            Ok(q) => q,
            Err(e) => {
                if let Some(h) = own_srq {
                    self.srqs.remove(&h);
                }
                return Err(e);
            }
        };
        let q = self.qps.get_mut(&qpn).expect("just created");
        q.rd = Some(RdRole::Qp(RdQp {
            rdd,
            own_srq,
            handed: None,
        }));
        Ok(qpn)
    }

    /// The receive queue `post_recv` fills for RD QP `qpn`, if it has one
    /// of its own.
    pub(super) fn rd_own_srq(&self, qpn: u32) -> Option<u32> {
        self.qps
            .get(&qpn)
            .and_then(|q| q.rd.as_ref()?.qp()?.own_srq)
    }

    /// An RD QP's request is carried by an EEC of its domain.
    pub(super) fn rd_send_allowed(&self, q: &Qp, wr: &SendWr<'_>) -> Result<(), VerbsError> {
        let Some(rd) = q.rd.as_ref().and_then(RdRole::qp) else {
            return Ok(());
        };
        let dest = wr.rd.ok_or(VerbsError::BadValue {
            what: "RD send without a destination (SendWr::via: EE context, QP, Q_Key)",
            value: 0,
        })?;
        match self.qps.get(&dest.eec).and_then(Qp::eec) {
            None => Err(VerbsError::NoSuchEec(dest.eec)),
            Some(e) if e.rdd != rd.rdd => Err(VerbsError::BadValue {
                what: "EE context of another reliable datagram domain than the QP",
                value: dest.eec.into(),
            }),
            Some(_) => Ok(()),
        }
    }

    /// RD QP `qpn`'s turn: takes back its request an EEC has finished
    /// (failing the QP if the request failed), then hands the next one to
    /// its EEC if that EEC is free, or waits in its line.
    pub(super) fn rd_hand_off(&mut self, qpn: u32) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.scheduled = false;
        let Some(handed) = q.rd.as_ref().and_then(RdRole::qp).and_then(|r| r.handed) else {
            self.rd_hand_next(qpn);
            return;
        };
        let outcome = self.qps.get(&handed.eec).and_then(|e| {
            let carried = e.sq.iter().any(|w| w.origin == Some((qpn, handed.token)));
            match e.eec()?.last {
                Some((token, status)) if token == handed.token && !carried => Some(status),
                _ if carried => None,
                // The EEC was reset or destroyed with the request: flushed.
                _ => Some(WcStatus::WrFlushErr),
            }
        });
        let outcome = match (outcome, self.qps.contains_key(&handed.eec)) {
            (Some(s), _) => s,
            (None, true) => return, // still carried: woken when done
            (None, false) => WcStatus::WrFlushErr,
        };
        let q = self.qps.get_mut(&qpn).expect("present above");
        q.sq.pop_front();
        if let Some(r) = q.rd.as_mut().and_then(RdRole::qp_mut) {
            r.handed = None;
        }
        if outcome != WcStatus::Success {
            crate::log::state_change(
                qpn,
                q.state,
                QpState::Err,
                crate::log::Why::Completion(outcome),
            );
            q.state = QpState::Err;
            completer::flush(q, &mut self.cqs);
            self.raise_events(qpn);
            return;
        }
        self.rd_hand_next(qpn);
    }

    /// Hands RD QP `qpn`'s oldest request to its EEC, or lines up for it.
    fn rd_hand_next(&mut self, qpn: u32) {
        let Some(q) = self.qps.get(&qpn) else { return };
        if q.state != QpState::Rts {
            return;
        }
        let Some(w) = q.sq.front() else { return };
        let Some(dest) = w.wr.rd else { return };
        let (pd, send_cq, sig_all, own_qkey) =
            (q.init.pd, q.init.send_cq, q.init.sq_sig_all, q.cfg.qkey);
        let mut wr = w.wr.clone();
        if dest.qkey & 0x8000_0000 != 0 {
            // As UD (C10-15): the high bit asks for the QP's own Q_Key.
            wr.rd = Some(crate::verbs::RdDest {
                qkey: own_qkey,
                ..dest
            });
        }
        let len = w.len;
        let Some(e) = self.qps.get_mut(&dest.eec) else {
            return;
        };
        let free = e.state == QpState::Rts && e.sq.is_empty();
        let Some(role) = e.rd.as_mut().and_then(RdRole::eec_mut) else {
            return;
        };
        if !free {
            if !role.waiting.contains(&qpn) {
                role.waiting.push_back(qpn);
            }
            return;
        }
        self.rd_tokens += 1;
        let token = self.rd_tokens;
        role.serving = Some(qpn);
        e.init.pd = pd;
        e.init.send_cq = send_cq;
        e.init.sq_sig_all = sig_all;
        e.sq.push_back_uncounted(SendWqe {
            origin: Some((qpn, token)),
            ..SendWqe::queued(wr, len, e.req.next_psn)
        });
        e.req.wqe = 0;
        if let Some(r) = self
            .qps
            .get_mut(&qpn)
            .and_then(|q| q.rd.as_mut())
            .and_then(RdRole::qp_mut)
        {
            r.handed = Some(Handed {
                eec: dest.eec,
                token,
            });
        }
        self.touched(dest.eec);
    }

    /// After EEC `eecn` moved: if it carries nothing now, the RD QP it
    /// served and those waiting for it get their turn.
    pub(super) fn rd_wake(&mut self, eecn: u32) {
        let Some(e) = self.qps.get_mut(&eecn) else {
            return;
        };
        if !e.sq.is_empty() {
            return;
        }
        let Some(role) = e.rd.as_mut().and_then(RdRole::eec_mut) else {
            return;
        };
        let serving = role.serving.take();
        let waiting: Vec<u32> = role.waiting.drain(..).collect();
        // The QP it served takes its request back now: a failure shows on
        // that QP at once, with the completion.
        if let Some(qpn) = serving {
            self.rd_hand_off(qpn);
        }
        for qpn in waiting {
            self.touched(qpn);
        }
    }

    /// Binds EEC `eecn` to the destination RD QP of `pkt`, a request at
    /// the EEC's expected PSN with no message of it under way; other
    /// packets keep the binding they have.
    pub(super) fn rd_bind(&mut self, eecn: u32, pkt: &TransportPacket<&[u8]>) {
        let dqpn = pkt.bth().dest_qp();
        let src_qp = pkt.deth().map_or(0, |d| d.src_qp());
        let Some(e) = self.qps.get(&eecn) else { return };
        let open = e.resp.recv.is_some() || e.resp.write.is_some();
        if open || pkt.bth().psn() != e.resp.epsn {
            return;
        }
        let rdd = e.eec().map(|r| r.rdd);
        let dest = self.qps.get(&dqpn).and_then(|q| {
            let r = q.rd.as_ref()?.qp()?;
            let ready = matches!(q.state, QpState::Rtr | QpState::Rts);
            (ready && Some(r.rdd) == rdd).then_some((q.init, q.cfg.access, q.cfg.qkey))
        });
        let e = self.qps.get_mut(&eecn).expect("present above");
        let dest = dest.map(|(init, access, qkey)| {
            e.init.srq = init.srq;
            e.init.recv_cq = init.recv_cq;
            e.cfg.access = access;
            e.cfg.qkey = qkey;
            BoundQp {
                qpn: dqpn,
                pd: init.pd,
            }
        });
        if let Some(role) = e.rd.as_mut().and_then(RdRole::eec_mut) {
            role.bound = Some(Bound { dest, src_qp });
        }
    }
}

/// The reliable datagram domain of an RD QP or EEC.
fn rdd_of(q: &Qp) -> Option<u32> {
    match q.rd.as_ref()? {
        RdRole::Qp(r) => Some(r.rdd),
        RdRole::Eec(e) => Some(e.rdd),
    }
}

/// The operations RD has opcodes for: SENDs, WRITEs, READ and the two
/// atomics (no SEND with invalidate, ATOMIC WRITE, FLUSH or memory window
/// operations).
pub(super) fn rd_op(op: &SendOp) -> bool {
    matches!(
        op,
        SendOp::Send
            | SendOp::SendWithImm(_)
            | SendOp::Write { .. }
            | SendOp::WriteWithImm { .. }
            | SendOp::Read { .. }
            | SendOp::CompareSwap { .. }
            | SendOp::FetchAdd { .. }
    )
}
