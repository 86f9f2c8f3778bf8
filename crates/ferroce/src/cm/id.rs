//! rdma_cm identifiers ([`CmId`]): binding, resolution, QP creation,
//! connecting, listening, accepting and disconnecting.
//!
//! An ID's state is behind its own mutex; the device's CM (in the driver)
//! takes it after its own lock, never the other way round, so a call here
//! releases the ID's state before it enters the device's CM.

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use ferroce_cm::rdma_cm::PortSpace;

use super::channel::EventQueue;
pub(crate) use super::state::{ConnParam, IdState, Phase, QpSlot, Route, wrong_state};
use super::{CmEvent, CmEventKind, CmIdError, registry};
use crate::{
    Context, ProtectionDomain, QpAttr, QpInitAttr, QpState, QpType, QueuePair, Result, RoceMode,
};

/// What an ID's handles, its events and the device's CM share.
pub(crate) struct IdInner {
    pub(crate) queue: Weak<EventQueue>,
    pub(crate) port_space: PortSpace,
    pub(crate) state: Mutex<IdState>,
}

impl IdInner {
    pub(crate) fn state(&self) -> MutexGuard<'_, IdState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `kind` about `id` on the ID's channel (lost if the channel
    /// is gone).
    pub(crate) fn report(self: &Arc<Self>, kind: CmEventKind, listen_id: Option<CmId>) {
        if let Some(queue) = self.queue.upgrade() {
            queue.push(CmEvent {
                id: CmId {
                    inner: self.clone(),
                },
                listen_id,
                kind,
            });
        }
    }
}

impl fmt::Debug for IdInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state();
        f.debug_struct("CmId")
            .field("port_space", &self.port_space)
            .field("phase", &st.phase)
            .field("local", &st.local)
            .field("remote", &st.remote)
            .field("qpn", &st.qp.map(|q| format!("{:#x}", q.qpn)))
            .finish_non_exhaustive()
    }
}

impl Drop for IdInner {
    /// `rdma_destroy_id`: what the CM still owes the peer (a REJ, a DREQ or
    /// DREP) goes out from the device's driver, which also forgets the
    /// communication; the port is released now.
    fn drop(&mut self) {
        super::multicast::leave_all(self);
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(bound) = st.bound.take() {
            registry::release_port(self.port_space, bound);
        }
        let listening = st.phase == Phase::Listening;
        if listening
            && st.wildcard
            && let Some(local) = st.local
        {
            registry::unlisten_wildcard(self.port_space, local.port(), local.is_ipv6());
        }
        if let Some(ctx) = &st.device {
            let service = st
                .local
                .filter(|_| listening)
                .map(|l| ferroce_cm::rdma_cm::RdmaService::new(self.port_space, l.port()));
            ctx.shared.cm_orphan(st.comm.take(), service);
        }
    }
}

/// An rdma_cm identifier (`struct rdma_cm_id`). Clones (and the events
/// about it) share the ID; it is destroyed, as `rdma_destroy_id`, when the
/// last is dropped. Its QP ([`create_qp`](Self::create_qp)) is the
/// application's: drop it after the ID is disconnected.
#[derive(Clone)]
pub struct CmId {
    pub(crate) inner: Arc<IdInner>,
}

impl fmt::Debug for CmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl PartialEq for CmId {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for CmId {}

impl CmId {
    pub(crate) fn new(queue: &Arc<EventQueue>, port_space: PortSpace) -> Self {
        Self::with_state(Arc::downgrade(queue), port_space, IdState::new())
    }

    pub(crate) fn with_state(
        queue: Weak<EventQueue>,
        port_space: PortSpace,
        state: IdState,
    ) -> Self {
        Self {
            inner: Arc::new(IdInner {
                queue,
                port_space,
                state: Mutex::new(state),
            }),
        }
    }

    /// The port space the ID was created in.
    pub fn port_space(&self) -> PortSpace {
        self.inner.port_space
    }

    /// The device the ID is bound to (`id->verbs`): allocate the PD and CQs
    /// of its QP there. `None` until bound to a local address or resolved.
    pub fn verbs(&self) -> Option<Context> {
        self.inner.state().device.clone()
    }

    /// The local address and port (`rdma_get_local_addr`).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.state().local
    }

    /// The peer's address and port (`rdma_get_peer_addr`).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.inner.state().remote
    }

    /// The number of the QP created on this ID.
    pub fn qp_num(&self) -> Option<u32> {
        self.inner.state().qp.map(|q| q.qpn)
    }

    /// `rdma_set_option(RDMA_OPTION_ID_TOS)`: the IP ToS (DSCP and ECN
    /// bits) of this ID's connection, instead of the port's
    /// `default_roce_tos` (`ferroce config`). Set it before connecting; a
    /// listener's passes to the IDs of its requests, whose connections
    /// otherwise take the traffic class the REQ carries.
    pub fn set_tos(&self, tos: u8) {
        self.inner.state().tos = Some(tos);
    }

    /// `rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)`: the QP's local ACK
    /// timeout (5 bits) instead of the CM's.
    pub fn set_ack_timeout(&self, timeout: u8) {
        self.inner.state().options.ack_timeout = Some(timeout.min(31));
    }

    /// `rdma_set_min_rnr_timer`: the RNR NAK timer (5 bits) the QP sends.
    pub fn set_min_rnr_timer(&self, timer: u8) {
        self.inner.state().options.min_rnr_timer = Some(timer.min(31));
    }

    /// `rdma_bind_addr`: binds the ID to a local address and port (port 0
    /// picks one); the unspecified address (`0.0.0.0`, `::`) listens on
    /// every device of the family.
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        let mut st = self.inner.state();
        if st.phase != Phase::Idle {
            return Err(wrong_state("bind_addr", st.phase, "bind a new ID"));
        }
        let device = if addr.ip().is_unspecified() {
            None
        } else {
            Some(registry::device_for(addr.ip())?)
        };
        let bound = registry::bind_port(self.inner.port_space, addr)?;
        st.bound = Some(bound);
        st.local = Some(bound);
        st.device = device;
        st.phase = Phase::AddrBound;
        Ok(())
    }

    /// `rdma_resolve_addr`: finds the local address that reaches `dst`
    /// (from `src` if given, else the routing table's choice) and the path
    /// from there, binds the ID to the device on it, and queues
    /// ADDR_RESOLVED. Resolution is local and
    /// immediate; `timeout` is accepted for librdmacm's shape.
    pub fn resolve_addr(
        &self,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        _timeout: Duration,
    ) -> Result<()> {
        let mut st = self.inner.state();
        if !matches!(st.phase, Phase::Idle | Phase::AddrBound) {
            return Err(wrong_state(
                "resolve_addr",
                st.phase,
                "resolve on a new (or only bound) ID",
            ));
        }
        let src = src.or(st.local.filter(|a| !a.ip().is_unspecified()));
        let host_route = super::route::resolve(dst, src)?;
        let local_ip = super::route::local_of(&host_route);
        let device = registry::device_for(local_ip)?;
        let settings = device
            .shared
            .cm
            .port_settings()
            .map_err(CmIdError::Config)?;
        let roce = roce_of(settings.mode, &device)?;
        if st.bound.is_none() {
            let port = src.map_or(0, |s| s.port());
            let bound =
                registry::bind_port(self.inner.port_space, SocketAddr::new(local_ip, port))?;
            st.bound = Some(bound);
        }
        let port = st.bound.map_or(0, |b| b.port());
        st.local = Some(SocketAddr::new(local_ip, port));
        st.remote = Some(SocketAddr::new(dst.ip().to_canonical(), dst.port()));
        st.device = Some(device);
        st.default_tos = settings.tos;
        st.roce = roce;
        st.route = Some(super::route::path_of(&host_route));
        st.phase = Phase::AddrResolved;
        drop(st);
        self.inner.report(CmEventKind::AddrResolved, None);
        Ok(())
    }

    /// `rdma_resolve_route`: the path (MTU and hop limit, found from the
    /// routing table with the address) is the ID's from now; queues
    /// ROUTE_RESOLVED.
    pub fn resolve_route(&self, _timeout: Duration) -> Result<()> {
        let mut st = self.inner.state();
        if st.phase != Phase::AddrResolved {
            return Err(wrong_state(
                "resolve_route",
                st.phase,
                "call resolve_addr and wait for ADDR_RESOLVED first",
            ));
        }
        st.phase = Phase::RouteResolved;
        drop(st);
        self.inner.report(CmEventKind::RouteResolved, None);
        Ok(())
    }

    /// `rdma_create_qp`: a QP on the ID's device, which the CM moves
    /// through INIT, RTR and RTS as rdma_cm does: RC on a TCP-space ID, UD
    /// on a UDP-space one (brought to RTS at once with rdma_cm's Q_Key).
    pub fn create_qp(&self, pd: &ProtectionDomain, attr: &QpInitAttr<'_>) -> Result<QueuePair> {
        let ctx = self.qp_device(attr.qp_type)?;
        if !Arc::ptr_eq(&pd.shared, &ctx.shared) {
            return Err(self.misplaced("allocate the PD on the ID's device (CmId::verbs)"));
        }
        let qp = pd.create_qp(attr)?;
        self.attach_qp(&qp)?;
        Ok(qp)
    }

    /// [`create_qp`](Self::create_qp) for a QP the caller created on the
    /// ID's device (the C library's `rdma_create_qp`, whose QP is an
    /// `ibv_qp` of its own): checks it as `create_qp` does, moves it to
    /// INIT (UD: to RTS) and hands it to the CM.
    pub fn attach_qp(&self, qp: &QueuePair) -> Result<()> {
        let ctx = self.qp_device(qp.qp_type())?;
        if !Arc::ptr_eq(&qp.shared, &ctx.shared) {
            return Err(self.misplaced("create the QP on the ID's device (CmId::verbs)"));
        }
        let mut st = self.inner.state();
        if st.qp.is_some() {
            return Err(wrong_state("create_qp", st.phase, "an ID has one QP"));
        }
        super::transitions::init_qp(qp, self.inner.port_space)?;
        st.qp = Some(QpSlot {
            qpn: qp.qpn(),
            psn: qp.psn(),
        });
        Ok(())
    }

    /// Forgets the ID's QP (`rdma_destroy_qp`), so that another may be
    /// created on it; the QP itself is the caller's to destroy.
    pub fn detach_qp(&self) {
        self.inner.state().qp = None;
    }

    /// The device a QP of `qp_type` is created on for this ID: refuses an
    /// ID with a QP already, of the other port space, or without a device.
    fn qp_device(&self, qp_type: QpType) -> Result<Context> {
        let st = self.inner.state();
        if st.qp.is_some() {
            return Err(wrong_state("create_qp", st.phase, "an ID has one QP"));
        }
        let want = if self.inner.port_space.connects() {
            QpType::Rc
        } else {
            QpType::Ud
        };
        if qp_type != want {
            return Err(CmIdError::WrongState {
                call: "create_qp",
                state: if want == QpType::Rc {
                    "in the TCP port space"
                } else {
                    "in the UDP port space"
                },
                needs: "create an RC QP on a TCP-space ID and a UD QP on a UDP-space ID",
            }
            .into());
        }
        st.device.clone().ok_or_else(|| {
            wrong_state(
                "create_qp",
                st.phase,
                "resolve the address (or take the ID of a CONNECT_REQUEST) first",
            )
        })
    }

    fn misplaced(&self, needs: &'static str) -> crate::Error {
        wrong_state("create_qp", self.inner.state().phase, needs)
    }

    /// `rdma_init_qp_attr`: the attributes that move a QP the application
    /// manages itself (given to `connect`/`accept` as
    /// [`ConnParam::qp_num`]) to `state` (INIT, RTR or RTS), the same the
    /// CM applies to a QP made with [`create_qp`](Self::create_qp). INIT
    /// is known once the ID has a device; RTR and RTS once the exchange is
    /// (passive: at CONNECT_REQUEST, move the QP before `accept`; active:
    /// at CONNECT_RESPONSE, then call [`establish`](Self::establish)).
    /// Before that, or for another state, a wrong-state error.
    pub fn qp_attr(&self, state: QpState) -> Result<QpAttr> {
        let st = self.inner.state();
        super::qp_attr::for_state(&st, self.inner.port_space, state)
    }

    /// The GRH flow label of the connection's path (the RTR path's UDP
    /// source port comes from it), once the exchange is known.
    pub fn flow_label(&self) -> Option<u32> {
        let st = self.inner.state();
        let (local, remote) = (st.local?, st.remote?);
        match (&st.req, &st.sent) {
            (Some(req), _) => Some(super::transitions::flow_label(
                req,
                (remote.port(), local.port()),
            )),
            (None, Some(req)) => Some(super::transitions::flow_label(
                req,
                (local.port(), remote.port()),
            )),
            (None, None) => None,
        }
    }

    /// `rdma_connect`: sends the REQ (or, in the UDP space, the SIDR_REQ).
    /// ESTABLISHED, REJECTED, UNREACHABLE or CONNECT_ERROR follows.
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        super::active::connect(&self.inner, param)
    }

    /// `rdma_listen`: takes connect requests for the bound address and port
    /// (every device of the family for a wildcard address). `backlog` is
    /// accepted for librdmacm's shape; the CM bounds requests in setup.
    pub fn listen(&self, _backlog: u32) -> Result<()> {
        super::passive::listen(&self.inner)
    }

    /// `rdma_accept`: answers a CONNECT_REQUEST; the QP goes to RTS before
    /// the REP (or SIDR_REP) goes out. ESTABLISHED follows the RTU.
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        super::passive::accept(&self.inner, param)
    }

    /// `rdma_reject`: answers a CONNECT_REQUEST with REJ reason 28
    /// (consumer) and `private_data` (at most 148 bytes).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        super::passive::reject(&self.inner, private_data)
    }

    /// `rdma_establish`: after CONNECT_RESPONSE on an ID without a QP
    /// (its QP moved to RTS with [`qp_attr`](Self::qp_attr)), sends the
    /// RTU. The connection is then established; as with the kernel, no
    /// ESTABLISHED event follows on this side.
    pub fn establish(&self) -> Result<()> {
        super::active::establish(&self.inner)
    }

    /// `rdma_disconnect`: moves the QP to the error state and sends the
    /// DREQ, or the DREP if the peer disconnected first. DISCONNECTED
    /// follows (at once, if the peer started it and it was reported).
    pub fn disconnect(&self) -> Result<()> {
        super::active::disconnect(&self.inner)
    }

    /// Whether the ID's connection is established and not yet
    /// disconnected (no DREQ or DREP has ended it): what
    /// [`disconnect`](Self::disconnect) would end with a DREQ.
    pub fn is_connected(&self) -> bool {
        self.inner.state().phase == Phase::Connected
    }

    /// Ends the ID's communication as destroying the ID would (a REJ, a
    /// DREQ or the DREP owed, as its state needs; sent in the device's next
    /// round), while the ID itself stays: what the kernel does to a
    /// process's IDs when the process exits, for a library whose IDs other
    /// threads may still hold then. The ID has no connection afterwards.
    pub fn abandon(&self) {
        let mut st = self.inner.state();
        let comm = st.comm.take();
        let device = st.device.clone();
        drop(st);
        if let (Some(ctx), Some(comm)) = (device, comm) {
            ctx.shared.cm_orphan(Some(comm), None);
        }
    }

    /// `rdma_get_request` for a listening ID: waits up to `timeout` for the
    /// next CONNECT_REQUEST to it on its channel (other events stay
    /// queued) and returns it.
    pub fn get_request(&self, timeout: Duration) -> Result<CmEvent> {
        let Some(queue) = self.inner.queue.upgrade() else {
            return Err(wrong_state(
                "get_request",
                Phase::Listening,
                "keep the event channel open",
            ));
        };
        let me = &self.inner;
        let want = |e: &CmEvent| {
            matches!(e.kind, CmEventKind::ConnectRequest { .. })
                && e.listen_id
                    .as_ref()
                    .is_some_and(|l| Arc::ptr_eq(&l.inner, me))
        };
        queue
            .wait_for(timeout, &want)?
            .ok_or_else(|| CmIdError::TimedOut("a connect request").into())
    }
}

/// The RoCE version of the connections an ID starts on `device`: its
/// port's `default_roce_mode`, the kernel's default GID type. RoCE v1 on a
/// device of the UDP backend is refused, naming the fix.
fn roce_of(mode: crate::roce_config::RoceMode, device: &Context) -> Result<RoceMode> {
    use crate::roce_config::{ConfigError, RoceMode as Mode, SettingError};
    match mode {
        Mode::V2 => Ok(RoceMode::V2),
        Mode::V1 if device.backend() == crate::BackendKind::Raw => Ok(RoceMode::V1),
        Mode::V1 => Err(CmIdError::Config(ConfigError::Setting(SettingError::RoceV1OnUdp)).into()),
    }
}
