//! The active side: REQ out, REP in, RTU out; and MRA in, for either side.

use ferroce_core::Instant;
use ferroce_wire::mad::{
    CmMessage, CmMra, CmPath, CmRep, CmReq, CmRtu, TRANSPORT_RC, TRANSPORT_UC,
};

use super::{Cm, private};
use crate::conn::{CmState, Conn, TimerKind};
use crate::timing::{cm_time, local_ack_timeout, req_timeout};
use crate::{CmError, CmEvent, CmId, ConnectParams, PeerAddr, reason};

/// MRA `message_mraed` values.
pub(super) const MRAED_REQ: u8 = 0;
pub(super) const MRAED_REP: u8 = 1;

impl Cm {
    /// Sends a REQ; the answer comes as `RepReceived`, `Rejected`, or
    /// `Unreachable` after every retry.
    pub fn connect(&mut self, now: Instant, params: &ConnectParams) -> Result<CmId, CmError> {
        if !matches!(params.transport, TRANSPORT_RC | TRANSPORT_UC) {
            return Err(CmError::Unsupported("transport other than RC or UC"));
        }
        if self.pending >= self.config.max_pending {
            return Err(CmError::TooManyPending(self.config.max_pending));
        }
        let private_data = private::<92>(&params.private_data, "REQ")?;
        let id = self.new_comm_id();
        let req = self.req_for(id, params, private_data);
        let mut probe = [0u8; ferroce_wire::mad::CM_DATA_LEN];
        req.emit(&mut probe).map_err(CmError::Wire)?;
        let tid = self.own_tid(id);
        let mut conn = Conn::new(CmState::ReqSent, params.peer, tid);
        conn.local_qpn = params.qpn;
        conn.service_id = params.service_id;
        conn.packet_life_time = params.packet_life_time;
        conn.timeout = req_timeout(params.packet_life_time, params.remote_cm_response_timeout);
        conn.max_retries = params.max_cm_retries;
        conn.retries_left = params.max_cm_retries;
        conn.outstanding = Some(Self::cm_mad(tid, &CmMessage::Req(req)));
        self.insert(id, conn);
        self.send_outstanding(now, id);
        Ok(CmId(id))
    }

    /// The REQ [`connect`](Self::connect) sends for `params`, with comm ID 0:
    /// what the upper layer derives its QP attributes from when the REP
    /// comes (`rdma_cm::active_rtr`).
    pub fn request(&self, params: &ConnectParams) -> Result<CmReq, CmError> {
        let private_data = private::<92>(&params.private_data, "REQ")?;
        Ok(self.req_for(0, params, private_data))
    }

    /// The REQ for `params`, with the local ACK timeout the kernel derives
    /// from the packet life time and the device's ACK delay.
    fn req_for(&self, id: u32, params: &ConnectParams, private_data: [u8; 92]) -> CmReq {
        let mut path = params.path;
        path.local_ack_timeout =
            local_ack_timeout(self.config.ca_ack_delay, params.packet_life_time);
        CmReq {
            local_comm_id: id,
            service_id: params.service_id,
            local_ca_guid: self.config.local_ca_guid,
            local_qkey: 0,
            local_qpn: params.qpn,
            responder_resources: params.responder_resources,
            local_eecn: 0,
            initiator_depth: params.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: params.remote_cm_response_timeout,
            transport_service_type: params.transport,
            end_to_end_flow_control: false,
            starting_psn: params.starting_psn,
            local_cm_response_timeout: params.local_cm_response_timeout,
            retry_count: params.retry_count,
            partition_key: params.partition_key,
            path_packet_mtu: params.path_mtu,
            rdc_exists: false,
            rnr_retry_count: params.rnr_retry_count,
            max_cm_retries: params.max_cm_retries,
            srq: false,
            extended_transport_type: 0,
            primary_path: path,
            alternate_path: no_path(),
            sap_supported: false,
            private_data,
        }
    }

    pub(super) fn on_rep(&mut self, now: Instant, from: PeerAddr, tid: u64, rep: &CmRep) {
        let Some(conn) = self.conns.get(&rep.remote_comm_id) else {
            // The kernel rejects a REP for a comm ID it does not know.
            self.stats.unknown_comm_id += 1;
            let rej = self.stateless_rej(
                rep.remote_comm_id,
                rep.local_comm_id,
                1,
                reason::INVALID_COMM_ID,
            );
            return self.send(from, Self::cm_mad(tid, &rej));
        };
        let id = rep.remote_comm_id;
        match conn.state {
            CmState::ReqSent | CmState::MraReqRcvd => {}
            CmState::Established | CmState::MraRepSent => return self.resend_answer(id),
            CmState::RepRcvd => {
                // The application has not sent the RTU yet: rdma_cm's
                // delayed MRA goes out now.
                match self.config.delayed_mra {
                    Some(timeout) => {
                        self.stats.delayed_mra += 1;
                        self.send_mra_for(id, MRAED_REP, timeout, CmState::MraRepSent);
                    }
                    None => self.stats.duplicates_ignored += 1,
                }
                return;
            }
            _ => {
                self.stats.ignored += 1;
                return;
            }
        }
        let remote_key = (rep.local_ca_guid, rep.local_comm_id);
        let qpn_key = (rep.local_ca_guid, rep.local_qpn);
        if let Some(&other) = self.by_qpn.get(&qpn_key)
            && other != id
        {
            return self.stale(now, from, id, other, 1);
        }
        self.disarm(id);
        self.by_remote.insert(remote_key, id);
        self.by_qpn.insert(qpn_key, id);
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.remote_id = rep.local_comm_id;
            conn.remote_ca_guid = rep.local_ca_guid;
            conn.remote_qpn = rep.local_qpn;
            conn.remote_key = Some(remote_key);
            conn.qpn_key = Some(qpn_key);
            conn.outstanding = None;
        }
        self.set_state(id, CmState::RepRcvd);
        self.event(CmEvent::RepReceived {
            id: CmId(id),
            rep: Box::new(*rep),
        });
    }

    /// Answers a REP that names a QP we still hold in connection `other`:
    /// REJ "stale connection" to the sender and a DREQ on the old
    /// connection, as the kernel does (IBA 12.9.8.3.1 leaves the choice).
    pub(super) fn stale(
        &mut self,
        now: Instant,
        from: PeerAddr,
        id: u32,
        other: u32,
        rejected: u8,
    ) {
        self.stats.stale += 1;
        let (local, remote, tid) = match self.conns.get(&id) {
            Some(conn) => (id, conn.remote_id, conn.tid),
            None => return,
        };
        let rej = self.stateless_rej(local, remote, rejected, reason::STALE_CONN);
        self.send(from, Self::cm_mad(tid, &rej));
        self.event(CmEvent::Rejected {
            id: CmId(id),
            reason: reason::STALE_CONN,
            ari: Vec::new(),
            private_data: Vec::new(),
        });
        self.enter_timewait(now, id);
        if self.conns.get(&other).map(|c| c.state) == Some(CmState::Established) {
            let _ = self.disconnect(now, CmId(other), &[]);
        }
    }

    /// Sends the RTU after a `RepReceived`: the connection is established.
    pub fn rtu(&mut self, id: CmId, private_data: &[u8]) -> Result<(), CmError> {
        let conn = self.conn_in(id, "rtu", &[CmState::RepRcvd, CmState::MraRepSent])?;
        let rtu = CmMessage::Rtu(CmRtu {
            local_comm_id: id.0,
            remote_comm_id: conn.remote_id,
            private_data: private::<224>(private_data, "RTU")?,
        });
        let (peer, bytes) = (conn.peer, Self::cm_mad(conn.tid, &rtu));
        if let Some(conn) = self.conns.get_mut(&id.0) {
            conn.answer = Some(bytes.clone());
        }
        self.send(peer, bytes);
        self.set_state(id.0, CmState::Established);
        self.event(CmEvent::Established { id });
        Ok(())
    }

    /// An MRA: the peer is alive but slow; wait its service timeout plus
    /// the packet life time before the next resend (the kernel's rule).
    pub(super) fn on_mra(&mut self, now: Instant, mra: &CmMra) {
        let id = mra.remote_comm_id;
        let Some(conn) = self.conns.get(&id) else {
            self.stats.unknown_comm_id += 1;
            return;
        };
        let next = match (conn.state, mra.message_mraed) {
            (CmState::ReqSent, MRAED_REQ) => CmState::MraReqRcvd,
            (CmState::RepSent, MRAED_REP) => CmState::MraRepRcvd,
            (CmState::MraReqRcvd | CmState::MraRepRcvd, _) => {
                self.stats.duplicates_ignored += 1;
                return;
            }
            _ => {
                self.stats.ignored += 1;
                return;
            }
        };
        let wait = cm_time(mra.service_timeout) + cm_time(conn.packet_life_time.saturating_add(1));
        // The peer's comm ID is learnt from the REP, not the MRA (as the
        // kernel: a REJ withdrawing the REQ then names none).
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.timeout = wait;
        }
        self.set_state(id, next);
        self.arm(id, now.after(wait), TimerKind::Resend);
        self.event(CmEvent::MraReceived {
            id: CmId(id),
            service_timeout: mra.service_timeout,
        });
    }
}

/// The all-zero path of a REQ without an alternate path.
const fn no_path() -> CmPath {
    CmPath {
        local_port_lid: 0,
        remote_port_lid: 0,
        local_port_gid: [0; 16],
        remote_port_gid: [0; 16],
        flow_label: 0,
        packet_rate: 0,
        traffic_class: 0,
        hop_limit: 0,
        sl: 0,
        subnet_local: false,
        local_ack_timeout: 0,
    }
}
