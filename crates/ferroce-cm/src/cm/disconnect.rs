//! DREQ/DREP, REJ in, and what happens when a resend timer runs out.

use ferroce_core::Instant;
use ferroce_wire::mad::{CmDrep, CmDreq, CmMessage, CmRej};

use super::{Cm, private};
use crate::conn::CmState;
use crate::event::Unanswered;
use crate::{CmError, CmEvent, CmId, PeerAddr, reason};

impl Cm {
    /// Closes a connection: from Established it sends a DREQ (resent until
    /// a DREP, then TimeWait); after a `DisconnectRequest` it sends the DREP
    /// and enters TimeWait.
    pub fn disconnect(
        &mut self,
        now: Instant,
        id: CmId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let states = [CmState::Established, CmState::DreqRcvd];
        let conn = self.conn_in(id, "disconnect", &states)?;
        if conn.state == CmState::DreqRcvd {
            self.send_drep(now, id, private_data)?;
            self.event(CmEvent::Disconnected {
                id,
                dreq_unanswered: false,
            });
            return Ok(());
        }
        let dreq = CmMessage::Dreq(CmDreq {
            local_comm_id: id.0,
            remote_comm_id: conn.remote_id,
            remote_qpn: conn.remote_qpn,
            private_data: private::<220>(private_data, "DREQ")?,
        });
        // A DREQ starts a transaction of its own (the kernel forms a new TID).
        let bytes = Self::cm_mad(self.own_tid(id.0), &dreq);
        if let Some(conn) = self.conns.get_mut(&id.0) {
            conn.retries_left = conn.max_retries;
            conn.outstanding = Some(bytes);
        }
        self.set_state(id.0, CmState::DreqSent);
        self.send_outstanding(now, id.0);
        Ok(())
    }

    /// Answers the peer's DREQ and enters TimeWait (the kernel enters it
    /// first; the DREP is kept to answer repeats).
    pub(super) fn send_drep(
        &mut self,
        now: Instant,
        id: CmId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let conn = self.conn(id)?;
        let drep = CmMessage::Drep(CmDrep {
            local_comm_id: id.0,
            remote_comm_id: conn.remote_id,
            private_data: private::<224>(private_data, "DREP")?,
        });
        let (peer, bytes) = (conn.peer, Self::cm_mad(conn.tid, &drep));
        self.enter_timewait(now, id.0);
        if let Some(conn) = self.conns.get_mut(&id.0) {
            conn.answer = Some(bytes.clone());
        }
        self.send(peer, bytes);
        Ok(())
    }

    pub(super) fn on_dreq(&mut self, now: Instant, from: PeerAddr, tid: u64, dreq: &CmDreq) {
        let id = dreq.remote_comm_id;
        let found = self
            .conns
            .get(&id)
            .filter(|c| c.remote_id == dreq.local_comm_id);
        let Some(conn) = found else {
            // The kernel answers a DREQ it cannot place with a DREP, so the
            // peer stops resending and leaves for TimeWait.
            self.stats.unknown_comm_id += 1;
            let drep = CmMessage::Drep(CmDrep {
                local_comm_id: dreq.remote_comm_id,
                remote_comm_id: dreq.local_comm_id,
                private_data: [0; 224],
            });
            return self.send(from, Self::cm_mad(tid, &drep));
        };
        if conn.local_qpn != dreq.remote_qpn {
            // The right comm IDs but another QP: the kernel drops it.
            self.stats.ignored += 1;
            return;
        }
        match conn.state {
            CmState::Established | CmState::RepSent | CmState::MraRepRcvd | CmState::DreqSent => {}
            CmState::TimeWait => return self.resend_answer(id),
            CmState::DreqRcvd => {
                self.stats.duplicates_ignored += 1;
                return;
            }
            _ => {
                self.stats.ignored += 1;
                return;
            }
        }
        self.disarm(id);
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.outstanding = None;
            conn.tid = tid;
        }
        self.set_state(id, CmState::DreqRcvd);
        let _ = now;
        self.event(CmEvent::DisconnectRequest {
            id: CmId(id),
            private_data: dreq.private_data.to_vec(),
        });
    }

    pub(super) fn on_drep(&mut self, now: Instant, drep: &CmDrep) {
        let id = drep.remote_comm_id;
        let state = self
            .conns
            .get(&id)
            .filter(|c| c.remote_id == drep.local_comm_id)
            .map(|c| c.state);
        match state {
            Some(CmState::DreqSent) => {
                self.event(CmEvent::Disconnected {
                    id: CmId(id),
                    dreq_unanswered: false,
                });
                self.enter_timewait(now, id);
            }
            Some(_) => self.stats.duplicates_ignored += 1,
            None => self.stats.unknown_comm_id += 1,
        }
    }

    pub(super) fn on_rej(&mut self, now: Instant, rej: &CmRej) {
        let Some(id) = self.rejected_id(rej) else {
            self.stats.unknown_comm_id += 1;
            return;
        };
        let Some(state) = self.conns.get(&id).map(|c| c.state) else {
            return;
        };
        // The kernel's rule: a REJ of a REQ ends the attempt (TimeWait only
        // for "stale connection"); a REJ after a REP or of a connection goes
        // through TimeWait.
        let timewait = match state {
            CmState::ReqSent
            | CmState::MraReqRcvd
            | CmState::RepSent
            | CmState::MraRepRcvd
            | CmState::ReqRcvd
            | CmState::MraReqSent => rej.reason == reason::STALE_CONN,
            CmState::DreqSent | CmState::RepRcvd | CmState::MraRepSent | CmState::Established => {
                true
            }
            _ => {
                self.stats.ignored += 1;
                return;
            }
        };
        self.stats.rejected_received += 1;
        self.event(CmEvent::Rejected {
            id: CmId(id),
            reason: rej.reason,
            ari: rej.ari_bytes().to_vec(),
            private_data: rej.private_data.to_vec(),
        });
        if timewait {
            self.enter_timewait(now, id);
        } else {
            self.remove(id);
        }
    }

    /// The connection a REJ is about: by our comm ID, or, for a timeout REJ
    /// sent before the peer learned our ID, by its CA GUID and comm ID.
    fn rejected_id(&self, rej: &CmRej) -> Option<u32> {
        if let Some(conn) = self.conns.get(&rej.remote_comm_id)
            && (conn.remote_id == 0 || conn.remote_id == rej.local_comm_id)
        {
            return Some(rej.remote_comm_id);
        }
        let ari = rej.ari_bytes();
        if rej.reason == reason::TIMEOUT && ari.len() >= 8 {
            let mut guid = [0u8; 8];
            guid.copy_from_slice(&ari[..8]);
            let key = (u64::from_be_bytes(guid), rej.local_comm_id);
            return self.by_remote.get(&key).copied();
        }
        None
    }

    /// A resend timer ran out: resend, or after the last retry give up the
    /// way the kernel does.
    pub(super) fn resend_or_give_up(&mut self, now: Instant, id: u32) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.retries_left > 0 {
            conn.retries_left -= 1;
            self.stats.resent += 1;
            return self.send_outstanding(now, id);
        }
        let state = conn.state;
        self.stats.gave_up += 1;
        match state {
            CmState::ReqSent | CmState::MraReqRcvd => {
                self.send_rej_for(id, reason::TIMEOUT);
                self.event(CmEvent::Unreachable {
                    id: CmId(id),
                    unanswered: Unanswered::Req,
                });
                self.remove(id);
            }
            CmState::RepSent | CmState::MraRepRcvd => {
                // The kernel's consumer destroys the ID, which rejects
                // the REP as a consumer reject.
                self.send_rej_for(id, reason::CONSUMER_DEFINED);
                self.event(CmEvent::Unreachable {
                    id: CmId(id),
                    unanswered: Unanswered::Rep,
                });
                self.enter_timewait(now, id);
            }
            CmState::DreqSent => {
                self.event(CmEvent::Disconnected {
                    id: CmId(id),
                    dreq_unanswered: true,
                });
                self.enter_timewait(now, id);
            }
            CmState::SidrReqSent => {
                self.event(CmEvent::SidrTimeout { id: CmId(id) });
                self.remove(id);
            }
            _ => {}
        }
    }

    /// A REJ of our own message when giving up (or destroying), so that the
    /// peer drops its half; the kernel marks it "other message" (2).
    pub(super) fn send_rej_for(&mut self, id: u32, why: u16) {
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let rej = self.stateless_rej(id, conn.remote_id, 2, why);
        let (peer, tid) = (conn.peer, conn.tid);
        self.stats.rejected_sent += 1;
        self.send(peer, Self::cm_mad(tid, &rej));
    }
}
