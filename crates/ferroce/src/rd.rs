//! Reliable datagram (RD, IBA 9.7): reliable datagram domains, EE contexts
//! and RD QPs. ibverbs has no RD verbs (no NIC or kernel implements RD),
//! so this API is ferroce's own, shaped as the rest:
//!
//! * [`Context::alloc_rdd`] makes a domain; [`RdDomain::create_eec`] an EE
//!   context in it, which [`EeContext::connect`] joins to one EE context of
//!   a peer (exchanged out of band as a [`QpEndpoint`] of type RD), as an
//!   RC QP is joined;
//! * [`ProtectionDomain::create_rd_qp`] makes an RD QP of the domain;
//!   [`QueuePair::ready`] brings it to RTS with its Q_Key (it has no peer
//!   of its own); each send names an EE context of the domain, the
//!   destination RD QP and its Q_Key ([`SendWr::via`](crate::SendWr::via)).
//!
//! The engine's rules (ferroce-core's `endpoint::rd`): an EE context
//! carries one message at a time, and an RD QP has one message on an EE
//! context at a time, so its completions come in the order it posted; a
//! request for an RD QP of another domain, or with another Q_Key, is
//! refused by the peer's EE context (`RemInvRdReqErr`).
//!
//! [`Context::alloc_rdd`]: crate::Context::alloc_rdd
//! [`ProtectionDomain::create_rd_qp`]: crate::ProtectionDomain::create_rd_qp
//! [`QueuePair::ready`]: crate::QueuePair::ready

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::{ConnectOptions, Error, Psn, QpAttr, QpEndpoint, QpState, QpType, Result};

/// A reliable datagram domain: its EE contexts and RD QPs reach each
/// other's. Deallocated when it and everything made in it are dropped.
#[derive(Debug, Clone)]
pub struct RdDomain {
    pub(crate) inner: Arc<RddHandle>,
}

#[derive(Debug)]
pub(crate) struct RddHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) device: Arc<DeviceHandle>,
    pub(crate) handle: u32,
}

impl Drop for RddHandle {
    fn drop(&mut self) {
        let _ = self.shared.engine().dealloc_rdd(self.handle);
    }
}

impl crate::Context {
    /// A new reliable datagram domain of this device.
    pub fn alloc_rdd(&self) -> RdDomain {
        let handle = self.shared.engine().alloc_rdd();
        RdDomain {
            inner: Arc::new(RddHandle {
                shared: self.shared.clone(),
                device: self.device.clone(),
                handle,
            }),
        }
    }
}

impl RdDomain {
    /// The engine's handle of the domain.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// An EE context of this domain, in RESET, sending from `psn` (random
    /// if `None`): [`EeContext::connect`] joins it to a peer's.
    pub fn create_eec(&self, psn: Option<Psn>) -> Result<EeContext> {
        let d = &self.inner;
        let eecn = d.shared.engine().create_eec(d.handle)?;
        let psn = psn.unwrap_or_else(|| Psn::new(RandomState::new().hash_one(eecn) as u32));
        Ok(EeContext {
            shared: d.shared.clone(),
            _device: d.device.clone(),
            eecn,
            psn,
            _rdd: self.inner.clone(),
        })
    }
}

/// An EE context: the reliable connection between this device and one EE
/// context of a peer, which carries the RD QPs' messages (PSNs, ACKs,
/// retransmission). Destroyed when dropped.
#[derive(Debug)]
pub struct EeContext {
    shared: Arc<Shared>,
    _device: Arc<DeviceHandle>,
    eecn: u32,
    psn: Psn,
    _rdd: Arc<RddHandle>,
}

impl EeContext {
    /// Its number: what a send names ([`crate::RdDest::eec`]) and the
    /// peer's RDETH carries.
    pub fn eecn(&self) -> u32 {
        self.eecn
    }

    /// What the peer's EE context needs to connect to this one.
    pub fn endpoint(&self) -> QpEndpoint {
        QpEndpoint {
            gid: self.shared.local,
            qp_type: QpType::Rd,
            qpn: self.eecn,
            psn: self.psn,
            mtu: crate::endpoint::port_active_mtu(self.shared.local),
        }
    }

    /// Its state.
    pub fn state(&self) -> Result<QpState> {
        Ok(self.shared.engine().eec_state(self.eecn)?)
    }

    /// Moves it as `modify_qp` moves an RC QP (after an error: to RESET,
    /// then [`Self::connect`] again).
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        if let Some(path) = &attr.path {
            self.shared.check_path(path)?;
        }
        self.shared.engine().modify_eec(self.eecn, attr)?;
        self.shared.kick();
        Ok(())
    }

    /// Brings it to RTS against `remote` (the peer EE context's
    /// [`Self::endpoint`]), as [`crate::QueuePair::connect`] brings an RC
    /// QP: `opts` gives MTU, timeout, retries and depths (`access` is the
    /// RD QPs' own, not the EE context's).
    pub fn connect(&self, remote: &QpEndpoint, opts: &ConnectOptions) -> Result<()> {
        if remote.qp_type != QpType::Rd {
            return Err(Error::QpTypeMismatch {
                local: QpType::Rd,
                remote: remote.qp_type,
            });
        }
        if self.state()? == QpState::Reset {
            self.modify(&QpAttr {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                access: Some(opts.access),
                ..QpAttr::default()
            })?;
        }
        let path = opts.path(remote.gid, self.eecn, remote.qpn);
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
            max_dest_rd_atomic: Some(opts.max_dest_rd_atomic),
            min_rnr_timer: Some(opts.min_rnr_timer),
            ..QpAttr::default()
        })?;
        self.modify(&QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(self.psn),
            timeout: Some(opts.timeout),
            retry_cnt: Some(opts.retry_cnt),
            rnr_retry: Some(opts.rnr_retry),
            max_rd_atomic: Some(opts.max_rd_atomic),
            ..QpAttr::default()
        })
    }
}

impl Drop for EeContext {
    fn drop(&mut self) {
        // What it owes its peer (the ACK of the last request) goes first.
        self.shared.flush_now();
        let _ = self.shared.engine().destroy_eec(self.eecn);
    }
}
