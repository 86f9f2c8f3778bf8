//! Letting go of a communication in any state, as the kernel's
//! `ib_destroy_cm_id` does: the peer is told whatever lets it clean up, and
//! only a TimeWait (without events) may remain.

use ferroce_core::Instant;
use ferroce_wire::mad::SIDR_STATUS_REJECT;

use super::Cm;
use crate::conn::CmState;
use crate::{CmError, CmId, SidrReplyParams, reason};

impl Cm {
    /// Ends communication `id` whatever its state: a REQ not yet answered
    /// is withdrawn with REJ "timeout", an offer not yet taken is rejected
    /// (28), a connection gets one DREQ (or its DREP) and enters TimeWait at
    /// once. No event about `id` follows.
    pub fn destroy(&mut self, now: Instant, id: CmId) -> Result<(), CmError> {
        let state = self.conn(id)?.state;
        match state {
            CmState::ReqSent | CmState::MraReqRcvd => {
                self.send_rej_for(id.0, reason::TIMEOUT);
                self.remove(id.0);
            }
            CmState::ReqRcvd | CmState::MraReqSent | CmState::RepRcvd | CmState::MraRepSent => {
                self.reject(now, id, reason::CONSUMER_DEFINED, &[])?;
            }
            CmState::RepSent | CmState::MraRepRcvd => {
                self.send_rej_for(id.0, reason::CONSUMER_DEFINED);
                self.enter_timewait(now, id.0);
            }
            CmState::Established => {
                // One DREQ, not retried: the kernel goes on to TimeWait.
                self.disconnect(now, id, &[])?;
                self.disarm(id.0);
                self.enter_timewait(now, id.0);
            }
            CmState::DreqSent => self.enter_timewait(now, id.0),
            CmState::DreqRcvd => self.send_drep(now, id, &[])?,
            CmState::TimeWait => {}
            CmState::SidrReqSent => self.remove(id.0),
            CmState::SidrReqRcvd => {
                let reply = SidrReplyParams {
                    status: SIDR_STATUS_REJECT,
                    ..SidrReplyParams::default()
                };
                self.sidr_reply(id, &reply)?;
            }
        }
        if let Some(conn) = self.conns.get_mut(&id.0) {
            conn.destroyed = true;
        }
        Ok(())
    }
}
