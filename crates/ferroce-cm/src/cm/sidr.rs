//! Service ID Resolution (UD): SIDR_REQ out and in, SIDR_REP out and in.

use ferroce_core::Instant;
use ferroce_wire::mad::{
    CmSidrRep, CmSidrReq, MAD_HEADER_LEN, MAD_LEN, SIDR_STATUS_REJECT, SIDR_STATUS_UNSUPPORTED,
    attr,
};

use super::{Cm, private};
use crate::conn::{CmState, Conn};
use crate::{CmError, CmEvent, CmId, PeerAddr, SidrParams, SidrReplyParams};

impl Cm {
    /// Asks the peer which QP and Q_Key serve `params.service_id`; the
    /// answer comes as `SidrReply` or, after every retry, `SidrTimeout`.
    pub fn sidr_request(&mut self, now: Instant, params: &SidrParams) -> Result<CmId, CmError> {
        if self.pending >= self.config.max_pending {
            return Err(CmError::TooManyPending(self.config.max_pending));
        }
        let req = CmSidrReq {
            request_id: 0,
            partition_key: params.partition_key,
            service_id: params.service_id,
            private_data: private::<216>(&params.private_data, "SIDR_REQ")?,
        };
        let id = self.new_comm_id();
        let tid = self.own_tid(id);
        let req = CmSidrReq {
            request_id: id,
            ..req
        };
        let mut bytes = vec![0u8; MAD_LEN];
        Self::header(tid, attr::SIDR_REQ)
            .emit(&mut bytes)
            .map_err(CmError::Wire)?;
        req.emit(&mut bytes[MAD_HEADER_LEN..])
            .map_err(CmError::Wire)?;
        let mut conn = Conn::new(CmState::SidrReqSent, params.peer, tid);
        conn.service_id = params.service_id;
        conn.timeout = params.timeout;
        conn.max_retries = params.max_retries;
        conn.retries_left = params.max_retries;
        conn.outstanding = Some(bytes);
        self.insert(id, conn);
        self.send_outstanding(now, id);
        Ok(CmId(id))
    }

    pub(super) fn on_sidr_req(&mut self, from: PeerAddr, tid: u64, data: &[u8]) {
        let Ok(req) = CmSidrReq::parse(data) else {
            self.stats.malformed += 1;
            return;
        };
        if self.by_sidr.contains_key(&(from.ip, req.request_id)) {
            // Being answered already: the kernel drops the repeat.
            self.stats.duplicates_ignored += 1;
            return;
        }
        let status = if !self.listeners.contains(&req.service_id) {
            Some(SIDR_STATUS_UNSUPPORTED)
        } else if self.pending >= self.config.max_pending {
            self.stats.pending_full += 1;
            Some(SIDR_STATUS_REJECT)
        } else {
            None
        };
        if let Some(status) = status {
            let rep = sidr_rep(req.request_id, req.service_id, status);
            return self.send_sidr_rep(from, tid, &rep);
        }
        let id = self.new_comm_id();
        let mut conn = Conn::new(CmState::SidrReqRcvd, from, tid);
        conn.remote_id = req.request_id;
        conn.service_id = req.service_id;
        self.insert(id, conn);
        self.by_sidr.insert((from.ip, req.request_id), id);
        self.event(CmEvent::SidrRequest {
            id: CmId(id),
            peer: from,
            service_id: req.service_id,
            partition_key: req.partition_key,
            private_data: req.private_data.to_vec(),
        });
    }

    /// Answers a `SidrRequest`.
    pub fn sidr_reply(&mut self, id: CmId, params: &SidrReplyParams) -> Result<(), CmError> {
        let conn = self.conn_in(id, "sidr_reply", &[CmState::SidrReqRcvd])?;
        let mut rep = sidr_rep(conn.remote_id, conn.service_id, params.status);
        rep.qpn = params.qpn;
        rep.qkey = params.qkey;
        rep.private_data = private::<136>(&params.private_data, "SIDR_REP")?;
        let mut probe = [0u8; ferroce_wire::mad::CM_DATA_LEN];
        rep.emit(&mut probe).map_err(CmError::Wire)?;
        let (peer, tid) = (conn.peer, conn.tid);
        self.send_sidr_rep(peer, tid, &rep);
        self.remove(id.0);
        Ok(())
    }

    pub(super) fn on_sidr_rep(&mut self, data: &[u8]) {
        let Ok(rep) = CmSidrRep::parse(data) else {
            self.stats.malformed += 1;
            return;
        };
        let id = rep.request_id;
        if self.conns.get(&id).map(|c| c.state) != Some(CmState::SidrReqSent) {
            self.stats.unknown_comm_id += 1;
            return;
        }
        self.remove(id);
        self.event(CmEvent::SidrReply {
            id: CmId(id),
            status: rep.status,
            qpn: rep.qpn,
            qkey: rep.qkey,
            private_data: rep.private_data.to_vec(),
        });
    }

    fn send_sidr_rep(&mut self, to: PeerAddr, tid: u64, rep: &CmSidrRep) {
        let mut bytes = vec![0u8; MAD_LEN];
        let header = Self::header(tid, attr::SIDR_REP).emit(&mut bytes);
        let body = rep.emit(&mut bytes[MAD_HEADER_LEN..]);
        if header.is_ok() && body.is_ok() {
            self.send(to, bytes);
        }
    }
}

fn sidr_rep(request_id: u32, service_id: u64, status: u8) -> CmSidrRep {
    CmSidrRep {
        request_id,
        status,
        additional_info_length: 0,
        qpn: 0,
        service_id,
        qkey: 0,
        additional_info: [0; 72],
        private_data: [0; 136],
    }
}
