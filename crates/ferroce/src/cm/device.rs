//! One device's rdma_cm layer: the IB CM (`ferroce_cm::Cm`) fed from QP1 by
//! the driver, the IDs its communications belong to, and what each CM
//! event does to an ID (QP transitions, then the event on its channel).
//!
//! Lock order: the device's CM lock, then an ID's state, then the engine.
//! IDs are held weakly; what a dropped ID still owes the peer is handed
//! over as an orphan and settled at the next round.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Weak};

use ferroce_cm::rdma_cm::{PortSpace, RdmaService};
use ferroce_cm::{Cm, CmConfig, CmEvent as IbEvent, CmId as CommId, PeerAddr};
use ferroce_core::Instant;
use tracing::debug;

use super::id::{IdInner, Phase};
use super::{CmEventKind, registry};
use crate::context::DeviceHandle;
use crate::driver::Shared;

/// librdmacm's status of an event for a peer that never answered.
const ETIMEDOUT: i32 = -110;

/// The rdma_cm state of one device.
#[derive(Debug)]
pub(crate) struct DeviceCm {
    pub(crate) cm: Cm,
    /// Our comm ID -> the rdma_cm ID it belongs to.
    pub(crate) ids: HashMap<u32, Weak<IdInner>>,
    /// Listeners bound to this device's address.
    pub(crate) listeners: HashMap<(PortSpace, u16), Weak<IdInner>>,
    /// The device, for the IDs of incoming requests.
    pub(crate) device: Weak<DeviceHandle>,
    pub(crate) local: IpAddr,
    /// Every ID this CM took a strong reference to while locked: dropped
    /// only after the lock is released ([`DeviceCm::take_graveyard`]), since
    /// the last reference to an ID may be the last to its device, whose
    /// closing runs a round of its own.
    graveyard: Vec<Arc<IdInner>>,
}

/// What a dropped ID left to settle.
#[derive(Debug)]
pub(crate) enum Orphan {
    Comm(CommId),
    Listen(RdmaService),
}

impl DeviceCm {
    pub(crate) fn new(local: IpAddr, config: CmConfig) -> Self {
        Self {
            cm: Cm::new(config),
            ids: HashMap::new(),
            listeners: HashMap::new(),
            device: Weak::new(),
            local,
            graveyard: Vec::new(),
        }
    }

    /// Settles what dropped IDs left: the CM destroys their communication
    /// (REJ, DREQ or DREP as the state needs); a listener's service stops
    /// unless a wildcard listener still has it.
    pub(crate) fn settle(&mut self, now: Instant, orphan: Orphan) {
        match orphan {
            Orphan::Comm(comm) => {
                self.ids.remove(&comm.0);
                let _ = self.cm.destroy(now, comm);
            }
            Orphan::Listen(service) => {
                let key = (service.port_space, service.port);
                if self
                    .listeners
                    .get(&key)
                    .is_some_and(|l| l.strong_count() == 0)
                {
                    self.listeners.remove(&key);
                }
                self.unlisten_if_unused(service);
            }
        }
    }

    fn unlisten_if_unused(&mut self, service: RdmaService) {
        let key = (service.port_space, service.port);
        let wildcard =
            registry::wildcard_listener(service.port_space, service.port, self.local.is_ipv6());
        if !self.listeners.contains_key(&key) && wildcard.is_none() {
            self.cm.unlisten(service.service_id());
        }
        self.graveyard.extend(wildcard);
    }

    /// The IDs to drop once the CM's lock is released.
    pub(crate) fn take_graveyard(&mut self) -> Vec<Arc<IdInner>> {
        std::mem::take(&mut self.graveyard)
    }

    /// Keeps `id` alive until the lock is released (see `graveyard`).
    fn keep(&mut self, id: Option<Arc<IdInner>>) -> Option<Arc<IdInner>> {
        self.graveyard.extend(id.clone());
        id
    }

    /// The listener for `service`: bound to this device, else a wildcard.
    pub(crate) fn listener(&mut self, service: RdmaService) -> Option<Arc<IdInner>> {
        let key = (service.port_space, service.port);
        let id = self
            .listeners
            .get(&key)
            .and_then(Weak::upgrade)
            .or_else(|| {
                registry::wildcard_listener(service.port_space, service.port, self.local.is_ipv6())
            });
        self.keep(id)
    }

    /// The ID of communication `comm`, if it is still alive.
    pub(crate) fn id_of(&mut self, comm: CommId) -> Option<Arc<IdInner>> {
        let id = self.ids.get(&comm.0).and_then(Weak::upgrade);
        self.keep(id)
    }

    /// Acts on every event the CM has.
    pub(crate) fn process_events(&mut self, shared: &Shared, now: Instant) {
        while let Some(event) = self.cm.poll_event() {
            debug!(?event, "CM event");
            self.handle(shared, now, event);
        }
    }

    fn handle(&mut self, shared: &Shared, now: Instant, event: IbEvent) {
        match event {
            IbEvent::ReqReceived { id, peer, req } => {
                super::passive::on_req(self, now, id, peer, *req)
            }
            IbEvent::SidrRequest {
                id,
                peer,
                service_id,
                private_data,
                ..
            } => super::passive::on_sidr_req(self, id, peer, service_id, &private_data),
            IbEvent::RepReceived { id, rep } => super::active::on_rep(self, shared, now, id, &rep),
            IbEvent::SidrReply {
                id,
                status,
                qpn,
                qkey,
                private_data,
            } => super::active::on_sidr_rep(self, id, status, qpn, qkey, private_data),
            IbEvent::MraReceived { .. } => {}
            IbEvent::Established { id } => self.on_established(id),
            IbEvent::Rejected {
                id,
                reason,
                private_data,
                ..
            } => self.on_rejected(shared, id, reason, private_data),
            IbEvent::Unreachable { id, unanswered } => {
                let what = match unanswered {
                    ferroce_cm::Unanswered::Req => "REQ",
                    ferroce_cm::Unanswered::Rep => "REP",
                };
                self.fail(shared, id, |peer| CmEventKind::Unreachable {
                    reason: format!("{peer} never answered our {what} (every retry timed out)"),
                    status: ETIMEDOUT,
                });
            }
            IbEvent::SidrTimeout { id } => self.fail(shared, id, |peer| CmEventKind::Unreachable {
                reason: format!("{peer} never answered our SIDR request"),
                status: ETIMEDOUT,
            }),
            IbEvent::DisconnectRequest { id, .. } => self.on_disconnect(shared, id, true),
            IbEvent::Disconnected { id, .. } => self.on_disconnect(shared, id, false),
            IbEvent::TimewaitExit { id } => {
                let inner = self.ids.remove(&id.0).and_then(|w| w.upgrade());
                if let Some(inner) = self.keep(inner) {
                    inner.state().comm = None;
                    inner.report(CmEventKind::TimewaitExit, None);
                }
            }
        }
    }

    fn on_established(&mut self, comm: CommId) {
        let Some(inner) = self.id_of(comm) else {
            return;
        };
        let mut st = inner.state();
        if !matches!(st.phase, Phase::Connecting | Phase::Accepted) {
            return;
        }
        // The active side of a QP the application moves itself had its
        // CONNECT_RESPONSE and sent the RTU with `establish`: the kernel
        // reports nothing more (rping -q counts its events).
        let quiet = st.phase == Phase::Connecting && st.qp.is_none();
        st.phase = Phase::Connected;
        let param = st.info.clone();
        drop(st);
        if !quiet {
            inner.report(CmEventKind::Established { param, ud: None }, None);
        }
    }

    fn on_rejected(&mut self, shared: &Shared, comm: CommId, reason: u16, private_data: Vec<u8>) {
        self.fail(shared, comm, |peer| CmEventKind::Rejected {
            reason,
            message: super::reject_message(peer, reason),
            private_data,
        });
    }

    /// Ends the ID of `comm` with the event `kind` makes (from the peer's
    /// address and the service port): QP to error, phase failed.
    fn fail(
        &mut self,
        shared: &Shared,
        comm: CommId,
        kind: impl FnOnce(super::PeerName) -> CmEventKind,
    ) {
        let Some(inner) = self.id_of(comm) else {
            return;
        };
        let mut st = inner.state();
        if matches!(st.phase, Phase::Failed | Phase::Disconnected) {
            return;
        }
        st.phase = Phase::Failed;
        if let Some(qp) = st.qp {
            super::transitions::to_error(shared, qp.qpn);
        }
        let name = super::PeerName(st.remote);
        drop(st);
        if self.cm.state(comm).is_none() {
            self.ids.remove(&comm.0);
        }
        inner.report(kind(name), None);
    }

    /// The peer's DREQ (`by_peer`), or the end of our own disconnect.
    fn on_disconnect(&mut self, shared: &Shared, comm: CommId, by_peer: bool) {
        let Some(inner) = self.id_of(comm) else {
            return;
        };
        let mut st = inner.state();
        let report = !st.disconnect_reported;
        st.disconnect_reported = true;
        st.phase = Phase::Disconnected;
        if !by_peer && let Some(qp) = st.qp {
            super::transitions::to_error(shared, qp.qpn);
        }
        drop(st);
        if report {
            inner.report(CmEventKind::Disconnected, None);
        }
    }
}

/// The peer of a MAD for the CM: its IP, sending QP and RoCE version.
pub(crate) fn peer(mad: &ferroce_core::Mad) -> PeerAddr {
    PeerAddr {
        ip: mad.from,
        qpn: mad.src_qp,
        roce: mad.roce,
    }
}
