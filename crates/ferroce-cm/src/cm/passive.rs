//! The passive side: REQ in, REP out, RTU in; REJ and MRA out.

use ferroce_core::Instant;
use ferroce_wire::mad::{CmMessage, CmMra, CmRej, CmRep, CmReq, CmRtu};

use super::active::MRAED_REQ;
use super::{Cm, private};
use crate::conn::{CmState, Conn};
use crate::timing::{cm_time, packet_life_time_from_ack};
use crate::{CmError, CmEvent, CmId, PeerAddr, RepParams, reason};

/// REJ `message_rejected` values.
const REJECTED_REQ: u8 = 0;
const REJECTED_REP: u8 = 1;
const REJECTED_OTHER: u8 = 2;
/// The service timeout of an MRA the application asks for, when delayed
/// MRAs are off: rdma_cm's 24.
const DEFAULT_MRA_TIMEOUT: u8 = 24;

impl Cm {
    pub(super) fn on_req(&mut self, now: Instant, from: PeerAddr, tid: u64, req: &CmReq) {
        let remote_key = (req.local_ca_guid, req.local_comm_id);
        if let Some(&id) = self.by_remote.get(&remote_key) {
            return self.duplicate_req(id);
        }
        let qpn_key = (req.local_ca_guid, req.local_qpn);
        if let Some(&other) = self.by_qpn.get(&qpn_key) {
            // A new REQ from a QP we still think is connected: the peer lost
            // that connection. Reject this one and close the old one.
            self.stats.stale += 1;
            self.stats.rejected_sent += 1;
            let rej = self.stateless_rej(0, req.local_comm_id, REJECTED_REQ, reason::STALE_CONN);
            self.send(from, Self::cm_mad(tid, &rej));
            if self.conns.get(&other).map(|c| c.state) == Some(CmState::Established) {
                let _ = self.disconnect(now, CmId(other), &[]);
            }
            return;
        }
        // As the kernel: duplicates, then stale QPs, then the listener.
        if let Some(why) = self.refusal(req) {
            self.stats.rejected_sent += 1;
            let rej = self.stateless_rej(0, req.local_comm_id, REJECTED_REQ, why);
            return self.send(from, Self::cm_mad(tid, &rej));
        }
        self.start_passive(from, tid, req);
    }

    /// Why a new REQ cannot be taken, if it cannot. The transport is the
    /// listener's to judge, as in the kernel's ib_cm (rdma_cm refuses all
    /// but RC with REJ 28).
    fn refusal(&mut self, req: &CmReq) -> Option<u16> {
        if !self.listeners.contains(&req.service_id) {
            Some(reason::INVALID_SERVICE_ID)
        } else if self.pending >= self.config.max_pending {
            self.stats.pending_full += 1;
            Some(reason::NO_RESOURCES)
        } else {
            None
        }
    }

    /// Records a new REQ (REQ_RCVD) and tells the application.
    fn start_passive(&mut self, from: PeerAddr, tid: u64, req: &CmReq) {
        let remote_key = (req.local_ca_guid, req.local_comm_id);
        let qpn_key = (req.local_ca_guid, req.local_qpn);
        let id = self.new_comm_id();
        let mut conn = Conn::new(CmState::ReqRcvd, from, tid);
        conn.remote_id = req.local_comm_id;
        conn.remote_ca_guid = req.local_ca_guid;
        conn.remote_qpn = req.local_qpn;
        conn.service_id = req.service_id;
        conn.packet_life_time = packet_life_time_from_ack(req.primary_path.local_ack_timeout);
        conn.timeout = cm_time(req.local_cm_response_timeout);
        conn.max_retries = req.max_cm_retries;
        conn.remote_key = Some(remote_key);
        conn.qpn_key = Some(qpn_key);
        self.insert(id, conn);
        self.by_remote.insert(remote_key, id);
        self.by_qpn.insert(qpn_key, id);
        self.event(CmEvent::ReqReceived {
            id: CmId(id),
            peer: from,
            req: Box::new(*req),
        });
    }

    /// A REQ we have seen: while the application has not answered, the
    /// (delayed) MRA; in TimeWait, REJ "stale connection"; in every other
    /// state nothing, the REP being resent on its own timer.
    fn duplicate_req(&mut self, id: u32) {
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        match conn.state {
            CmState::ReqRcvd => match self.config.delayed_mra {
                Some(timeout) => {
                    self.stats.delayed_mra += 1;
                    self.send_mra_for(id, MRAED_REQ, timeout, CmState::MraReqSent);
                }
                None => self.stats.duplicates_ignored += 1,
            },
            CmState::MraReqSent => self.resend_answer(id),
            CmState::TimeWait => {
                self.stats.stale += 1;
                let rej =
                    self.stateless_rej(id, conn.remote_id, REJECTED_OTHER, reason::STALE_CONN);
                let (peer, tid) = (conn.peer, conn.tid);
                self.send(peer, Self::cm_mad(tid, &rej));
            }
            _ => self.stats.duplicates_ignored += 1,
        }
    }

    /// Accepts a REQ: sends the REP and waits for the RTU.
    pub fn accept(&mut self, now: Instant, id: CmId, params: &RepParams) -> Result<(), CmError> {
        let states = [CmState::ReqRcvd, CmState::MraReqSent];
        let conn = self.conn_in(id, "accept", &states)?;
        let rep = CmRep {
            local_comm_id: id.0,
            remote_comm_id: conn.remote_id,
            local_qkey: 0,
            local_qpn: params.qpn,
            local_eecn: 0,
            starting_psn: params.starting_psn,
            responder_resources: params.responder_resources,
            initiator_depth: params.initiator_depth,
            target_ack_delay: self.config.ca_ack_delay.min(31),
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: params.rnr_retry_count,
            srq: params.srq,
            local_ca_guid: self.config.local_ca_guid,
            private_data: private::<196>(&params.private_data, "REP")?,
        };
        let mut probe = [0u8; ferroce_wire::mad::CM_DATA_LEN];
        rep.emit(&mut probe).map_err(CmError::Wire)?;
        let bytes = Self::cm_mad(conn.tid, &CmMessage::Rep(rep));
        if let Some(conn) = self.conns.get_mut(&id.0) {
            conn.local_qpn = params.qpn;
            conn.retries_left = conn.max_retries;
            conn.outstanding = Some(bytes);
            conn.answer = None;
        }
        self.set_state(id.0, CmState::RepSent);
        self.send_outstanding(now, id.0);
        Ok(())
    }

    /// Rejects a REQ (or, on the active side, a REP) with `reason`
    /// (normally [`reason::CONSUMER_DEFINED`]) and up to 148 bytes of
    /// private data.
    pub fn reject(
        &mut self,
        now: Instant,
        id: CmId,
        why: u16,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let states = [
            CmState::ReqRcvd,
            CmState::MraReqSent,
            CmState::RepRcvd,
            CmState::MraRepSent,
        ];
        let conn = self.conn_in(id, "reject", &states)?;
        let passive = matches!(conn.state, CmState::ReqRcvd | CmState::MraReqSent);
        let rejected = if passive { REJECTED_REQ } else { REJECTED_REP };
        // The kernel leaves its comm ID out of a REJ of a REQ it has not
        // MRAed: the peer knows none yet.
        let local = if conn.state == CmState::ReqRcvd {
            0
        } else {
            id.0
        };
        let mut rej = self.rej_fields(local, conn.remote_id, rejected, why);
        rej.private_data = private::<148>(private_data, "REJ")?;
        let (peer, tid) = (conn.peer, conn.tid);
        self.stats.rejected_sent += 1;
        self.send(peer, Self::cm_mad(tid, &CmMessage::Rej(rej)));
        if passive {
            self.remove(id.0);
        } else {
            self.enter_timewait(now, id.0);
        }
        Ok(())
    }

    /// Tells the peer the application needs time to answer its REQ.
    pub fn send_mra(&mut self, id: CmId) -> Result<(), CmError> {
        self.conn_in(id, "send_mra", &[CmState::ReqRcvd, CmState::MraReqSent])?;
        self.disarm(id.0);
        self.mra_for_req(id.0);
        Ok(())
    }

    fn mra_for_req(&mut self, id: u32) {
        let timeout = self.config.delayed_mra.unwrap_or(DEFAULT_MRA_TIMEOUT);
        self.send_mra_for(id, MRAED_REQ, timeout, CmState::MraReqSent);
    }

    /// Sends an MRA for the peer's REQ or REP, keeps it as the answer to
    /// repeats, and moves to `next`.
    pub(super) fn send_mra_for(&mut self, id: u32, mraed: u8, timeout: u8, next: CmState) {
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let mra = CmMessage::Mra(CmMra {
            local_comm_id: id,
            remote_comm_id: conn.remote_id,
            message_mraed: mraed,
            service_timeout: timeout.min(31),
            private_data: [0; 222],
        });
        let (peer, bytes) = (conn.peer, Self::cm_mad(conn.tid, &mra));
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.answer = Some(bytes.clone());
        }
        self.send(peer, bytes);
        self.set_state(id, next);
    }

    pub(super) fn on_rtu(&mut self, rtu: &CmRtu) {
        let id = rtu.remote_comm_id;
        match self.conns.get(&id) {
            Some(c) if c.remote_id == rtu.local_comm_id => {
                if matches!(c.state, CmState::RepSent | CmState::MraRepRcvd) {
                    self.establish(id);
                } else {
                    self.stats.duplicates_ignored += 1;
                }
            }
            _ => self.stats.unknown_comm_id += 1,
        }
    }

    /// The QP saw traffic from the peer before the RTU arrived (the verbs
    /// COMM_EST event): the connection is established.
    pub fn comm_established(&mut self, id: CmId) -> Result<(), CmError> {
        let states = [CmState::RepSent, CmState::MraRepRcvd];
        self.conn_in(id, "comm_established", &states)?;
        self.establish(id.0);
        Ok(())
    }

    fn establish(&mut self, id: u32) {
        self.disarm(id);
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.outstanding = None;
        }
        self.set_state(id, CmState::Established);
        self.event(CmEvent::Established { id: CmId(id) });
    }

    /// A REJ with no private data.
    pub(super) fn stateless_rej(
        &self,
        local: u32,
        remote: u32,
        rejected: u8,
        why: u16,
    ) -> CmMessage {
        CmMessage::Rej(self.rej_fields(local, remote, rejected, why))
    }

    fn rej_fields(&self, local: u32, remote: u32, rejected: u8, why: u16) -> CmRej {
        let mut rej = CmRej {
            local_comm_id: local,
            remote_comm_id: remote,
            message_rejected: rejected,
            rejected_info_length: 0,
            reason: why,
            ari: [0; 72],
            private_data: [0; 148],
        };
        if why == reason::TIMEOUT {
            // The kernel names its CA GUID in the ARI of a timeout REJ, so
            // the receiver can find the connection without our comm ID.
            rej.ari[..8].copy_from_slice(&self.config.local_ca_guid.to_be_bytes());
            rej.rejected_info_length = 8;
        }
        rej
    }
}
