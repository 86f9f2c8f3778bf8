//! Queue pairs: creation attributes, posting work, and connecting RC/UC
//! QPs to a peer's [`QpEndpoint`].

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Arc;

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::srq::SrqHandle;
use crate::{
    AsyncEvent, CompletionQueue, ConnectOptions, Error, Path, Psn, QpAttr, QpEndpoint, QpState,
    QpType, RecvWr, Result, SendWr, SharedReceiveQueue,
};

/// What `create_qp` takes (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy)]
pub struct QpInitAttr<'a> {
    /// RC, UC, UD or XRC initiator (XRC targets: [`crate::XrcDomain`]).
    pub qp_type: QpType,
    /// Where send work requests complete.
    pub send_cq: &'a CompletionQueue,
    /// Where receive work requests complete.
    pub recv_cq: &'a CompletionQueue,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth; ignored when the QP takes its receives from an
    /// SRQ.
    pub max_recv_wr: u32,
    /// Every send work request completes, signaled or not.
    pub sq_sig_all: bool,
    /// Take receive work requests from this shared receive queue instead
    /// of a receive queue of the QP's own (`post_recv` is then refused).
    pub srq: Option<&'a SharedReceiveQueue>,
    /// The PSN of the QP's first request, which its endpoint advertises;
    /// `None` (the default) picks a random one, as rdma-core's tools do.
    pub psn: Option<Psn>,
}

impl<'a> QpInitAttr<'a> {
    /// Queues of 256 entries; only signaled send requests complete; a
    /// random first PSN.
    pub fn new(
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> Self {
        Self {
            qp_type,
            send_cq,
            recv_cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            sq_sig_all: false,
            srq: None,
            psn: None,
        }
    }
}

/// A queue pair. `Debug` shows its number in hex, as rdma-core prints it.
pub struct QueuePair {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) _device: Arc<DeviceHandle>,
    pub(crate) qpn: u32,
    qp_type: QpType,
    /// The first PSN this QP sends, fixed at creation so that its
    /// endpoint and its connection agree.
    psn: Psn,
    /// Keeps the SRQ it takes receives from until the QP is destroyed.
    pub(crate) srq: Option<Arc<SrqHandle>>,
    /// An XRC target keeps its domain open.
    _xrcd: Option<Arc<crate::xrcd::XrcdHandle>>,
    /// An RD QP keeps its domain.
    pub(crate) rdd: Option<Arc<crate::rd::RddHandle>>,
    /// Posts without the engine's lock where the request allows it.
    poster: Option<ferroce_core::QpPoster>,
}

impl fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuePair")
            .field("qpn", &format_args!("{:#x}", self.qpn))
            .field("qp_type", &self.qp_type)
            .field("psn", &format_args!("{:#x}", self.psn.value()))
            .finish_non_exhaustive()
    }
}

impl QueuePair {
    /// Wraps the engine's QP `qpn`, created from `attr`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        device: Arc<DeviceHandle>,
        qpn: u32,
        attr: &QpInitAttr<'_>,
    ) -> Self {
        // A random PSN without a dependency: the standard library's
        // per-process random hash keys.
        let psn = attr
            .psn
            .unwrap_or_else(|| Psn::new(RandomState::new().hash_one(qpn) as u32));
        let poster = shared.engine().qp_poster(qpn).ok();
        Self {
            shared,
            _device: device,
            qpn,
            qp_type: attr.qp_type,
            psn,
            srq: attr.srq.map(|s| s.inner.clone()),
            _xrcd: None,
            rdd: None,
            poster,
        }
    }

    /// Wraps the engine's XRC target QP `qpn` of domain `xrcd`.
    pub(crate) fn xrc_target(
        shared: Arc<Shared>,
        device: Arc<DeviceHandle>,
        qpn: u32,
        psn: Option<Psn>,
        xrcd: Arc<crate::xrcd::XrcdHandle>,
    ) -> Self {
        let psn = psn.unwrap_or_else(|| Psn::new(RandomState::new().hash_one(qpn) as u32));
        Self {
            shared,
            _device: device,
            qpn,
            qp_type: QpType::XrcTgt,
            psn,
            srq: None,
            _xrcd: Some(xrcd),
            rdd: None,
            // A target has no queues of its own to post to.
            poster: None,
        }
    }

    /// The QP number (24 bits; printed in hex).
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// RC, UC or UD.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The PSN of this QP's first request.
    pub fn psn(&self) -> Psn {
        self.psn
    }

    /// What the peer needs to connect to this QP: send it out of band
    /// ([`QpEndpoint::to_bytes`]).
    pub fn endpoint(&self) -> QpEndpoint {
        QpEndpoint {
            gid: self.shared.local,
            qp_type: self.qp_type,
            qpn: self.qpn,
            psn: self.psn,
            mtu: crate::endpoint::port_active_mtu(self.shared.local),
        }
    }

    /// Brings this UD or RD QP (which have no peer of their own) from
    /// RESET or INIT to RTS, with Q_Key `qkey` and, for RD, the remote
    /// `access` its RD peers' RDMA and atomics get.
    pub fn ready(&self, qkey: u32, access: crate::Access) -> Result<()> {
        if !matches!(self.qp_type, QpType::Ud | QpType::Rd) {
            return Err(Error::Verbs(crate::VerbsError::BadValue {
                what: "QP type of ready (UD or RD; connect RC, UC and XRC QPs)",
                value: 0,
            }));
        }
        let rd = self.qp_type == QpType::Rd;
        if self.state()? == QpState::Reset {
            self.modify(&QpAttr {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                qkey: Some(qkey),
                access: rd.then_some(access),
                ..QpAttr::default()
            })?;
        }
        self.modify(&QpAttr {
            state: Some(QpState::Rtr),
            ..QpAttr::default()
        })?;
        self.modify(&QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(self.psn),
            ..QpAttr::default()
        })
    }

    /// `ibv_query_qp`'s state.
    pub fn state(&self) -> Result<QpState> {
        Ok(self.shared.engine().qp_state(self.qpn)?)
    }

    /// `ibv_modify_qp`.
    ///
    /// On the raw backend, a path (`attr.path`) is checked first: its
    /// peer's MAC address must resolve, or the call fails naming the peer
    /// and the interface; a RoCE v1 path on the UDP backend is refused.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        let _device = self.shared.span.enter();
        if let Some(path) = &attr.path {
            self.shared.check_path(path)?;
        }
        if let Some(mtu) = attr.path_mtu {
            self.check_path_mtu(mtu)?;
        }
        self.shared.engine().modify_qp(self.qpn, attr)?;
        self.shared.kick();
        Ok(())
    }

    /// On the raw backend, a path MTU above the port's active MTU is
    /// refused: its frames would be larger than the interface takes, and
    /// the kernel would drop every full-size one (over UDP, IP
    /// fragmentation carries them).
    fn check_path_mtu(&self, mtu: crate::Mtu) -> Result<()> {
        if self.shared.neigh.is_none() {
            return Ok(());
        }
        let port = crate::device::query_port(self.shared.local)?;
        if mtu.bytes() > port.active_mtu.bytes() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "path MTU {} exceeds the port's active MTU {} on the raw backend \
                     (the interface's MTU is too small for larger frames): use {} or less, \
                     or raise the interface's MTU",
                    mtu.bytes(),
                    port.active_mtu.bytes(),
                    port.active_mtu.bytes()
                ),
            )));
        }
        Ok(())
    }

    /// Brings this RC or UC QP to RTS against `remote` (the peer's
    /// [`QueuePair::endpoint`]): from RESET to INIT, or from INIT (where
    /// receives may already be posted, as rdma-core's examples post them
    /// before the exchange); then RTR expecting the peer's PSN, with
    /// `opts.access`, and RTS sending from this QP's own PSN. The peer
    /// does the same with this QP's endpoint. Refuses a UD QP and a remote
    /// of another QP type (an XRC initiator connects to an XRC target and
    /// the other way round).
    pub fn connect(&self, remote: &QpEndpoint, opts: &ConnectOptions) -> Result<()> {
        let peer_type = match self.qp_type {
            QpType::XrcIni => QpType::XrcTgt,
            QpType::XrcTgt => QpType::XrcIni,
            t => t,
        };
        if self.qp_type == QpType::Ud || remote.qp_type != peer_type {
            return Err(Error::QpTypeMismatch {
                local: self.qp_type,
                remote: remote.qp_type,
            });
        }
        let rc = self.qp_type.is_reliable();
        if self.state()? == QpState::Reset {
            self.modify(&QpAttr {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                access: Some(opts.access),
                ..QpAttr::default()
            })?;
        }
        let path = opts.path(remote.gid, self.qpn, remote.qpn);
        self.modify(&QpAttr {
            state: Some(QpState::Rtr),
            path: Some(path),
            path_mtu: Some(crate::endpoint::connect_mtu(
                opts,
                self.shared.local,
                remote,
            )),
            dest_qpn: Some(remote.qpn),
            rq_psn: Some(remote.psn),
            access: Some(opts.access),
            max_dest_rd_atomic: rc.then_some(opts.max_dest_rd_atomic),
            min_rnr_timer: rc.then_some(opts.min_rnr_timer),
            ..QpAttr::default()
        })?;
        self.modify(&QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(self.psn),
            timeout: rc.then_some(opts.timeout),
            retry_cnt: rc.then_some(opts.retry_cnt),
            rnr_retry: rc.then_some(opts.rnr_retry),
            max_rd_atomic: rc.then_some(opts.max_rd_atomic),
            ..QpAttr::default()
        })
    }

    /// `ibv_post_send`. The request's scatter list and inline data are
    /// copied, so the caller's slices are free when this returns. Only
    /// queues the request: the driver thread, or the next
    /// [`CompletionQueue::poll`], sends it, so that a burst of posts goes
    /// out in batches rather than one system call each. The request is
    /// checked and queued in the QP's send ring without the engine's lock,
    /// so a post never waits for a round of progress (a BIND_MW or
    /// LOCAL_INV, and the sends of RD and XRC QPs, take the lock); the
    /// doorbell's system call is made only when the driver thread sleeps
    /// and would not wake soon on its own.
    ///
    /// A UD send's destination is checked as [`QueuePair::modify`] checks a
    /// path (on the raw backend the first send to a peer may wait for its
    /// MAC address to resolve, as `ibv_create_ah` does).
    pub fn post_send(&self, wr: SendWr<'_>) -> Result<()> {
        if let Some(ud) = &wr.ud {
            self.shared.check_path(&ud.path)?;
        }
        // Through the QP's ring, with no lock shared with the engine, where
        // the request needs none of the engine's tables.
        match self.poster.as_ref().and_then(|p| p.try_post_send(wr)) {
            Some(posted) => posted?,
            None => self.shared.engine().post_send(self.qpn, wr)?,
        }
        self.shared.kick();
        Ok(())
    }

    /// Binds `mw` as `bind` says ([`MemoryRegion::window`] makes one) and
    /// returns what the peer addresses through it: `ibv_bind_mw` for a type
    /// 1 window, a BIND_MW request (`ibv_post_send`) for a type 2 window,
    /// with the next key byte either way. The bind happens when this QP
    /// reaches it, in order with the requests posted before it; its
    /// completion (`WcOpcode::BindMw`, with `wr_id`) says whether it did,
    /// and a failed bind moves the QP to the error state.
    ///
    /// [`MemoryRegion::window`]: crate::MemoryRegion::window
    pub fn bind_mw(
        &self,
        mw: &crate::MemoryWindow,
        bind: crate::MwBind,
        wr_id: u64,
    ) -> Result<crate::RemoteRegion> {
        let rkey = (self.shared.engine()).bind_mw(self.qpn, mw.key, bind, wr_id, true)?;
        self.shared.kick();
        let addr = if bind.access.contains(crate::Access::ZERO_BASED) {
            0
        } else {
            bind.addr
        };
        Ok(crate::RemoteRegion::registered(addr, rkey, bind.len))
    }

    /// How a request posted with a bad scatter/gather list (an unknown
    /// lkey, a region of another PD, bytes outside the region) is reported:
    /// [`LocalErrors::Immediate`](crate::LocalErrors::Immediate), the
    /// default, refuses the post with [`VerbsError::BadSge`](crate::VerbsError::BadSge) naming the
    /// cause; [`LocalErrors::Completion`](crate::LocalErrors::Completion) takes it and completes it
    /// with `LocProtErr` when it executes, the QP then in error (IBA's
    /// behaviour, which the C ABI selects).
    pub fn set_local_errors(&self, mode: crate::LocalErrors) -> Result<()> {
        Ok(self.shared.engine().set_local_errors(self.qpn, mode)?)
    }

    /// `ibv_post_recv`; refused on a QP created with an SRQ (post to the
    /// [`SharedReceiveQueue`] instead).
    pub fn post_recv(&self, wr: RecvWr<'_>) -> Result<()> {
        match self.poster.as_ref().and_then(|p| p.try_post_recv(wr)) {
            Some(posted) => posted?,
            None => self.shared.engine().post_recv(self.qpn, wr)?,
        }
        self.shared.kick();
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // What the QP owes its peer (the ACK of the last request received)
        // goes out before it is destroyed.
        self.shared.flush_now();
        let groups = {
            let mut engine = self.shared.engine();
            let groups = engine.mcast_groups_of(self.qpn);
            let _ = engine.destroy_qp(self.qpn);
            groups
        };
        self.shared.leave_unused_groups(groups);
        // Its events the driver already took out of the engine go too.
        let qpn = self.qpn;
        self.shared.async_events.forget(|e| match *e {
            AsyncEvent::QpFatal { qpn: n } | AsyncEvent::QpLastWqeReached { qpn: n } => n == qpn,
            _ => false,
        });
        // Then the SRQ, if this QP was the last thing holding it.
        self.srq.take();
    }
}

/// A connected QP's path to `remote`, with the RoCE v2 UDP source port
/// derived from the two QP numbers as rdma-core derives it (for
/// [`QueuePair::modify`] by hand, and for a UD send's [`UdDest`](crate::UdDest)).
pub fn path_to(remote: IpAddr, local_qpn: u32, remote_qpn: u32) -> Path {
    use ferroce_wire::udp::{flow_label_from_qpns, source_port_from_flow_label};
    Path {
        remote,
        udp_src_port: source_port_from_flow_label(flow_label_from_qpns(local_qpn, remote_qpn)),
        traffic_class: 0,
        hop_limit: 64,
        roce: ferroce_core::verbs::RoceMode::V2,
    }
}
