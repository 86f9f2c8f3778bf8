//! XRC domains (`ibv_open_xrcd`): what XRC SRQs and XRC target QPs share.
//! An initiator QP ([`QpType::XrcIni`], made by
//! [`ProtectionDomain::create_qp`](crate::ProtectionDomain::create_qp))
//! sends each request to one XRC SRQ of its peer, named by
//! [`SendWr::to_srq`](crate::SendWr::to_srq) with the number
//! [`SharedReceiveQueue::srq_num`] gives; the target QP that receives it
//! ([`XrcDomain::create_tgt_qp`]) delivers it into that SRQ, which must be
//! of the target's domain.
//!
//! The domain closes when it and everything made in it are dropped.

use std::sync::Arc;

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::srq::SrqHandle;
use crate::{CompletionQueue, ProtectionDomain, Psn, QueuePair, Result, SharedReceiveQueue};

/// An XRC domain.
#[derive(Debug, Clone)]
pub struct XrcDomain {
    pub(crate) inner: Arc<XrcdHandle>,
}

/// The engine's XRC domain, closed when the last of its handle, SRQs and
/// target QPs drops.
#[derive(Debug)]
pub(crate) struct XrcdHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) device: Arc<DeviceHandle>,
    pub(crate) handle: u32,
}

impl Drop for XrcdHandle {
    fn drop(&mut self) {
        let _ = self.shared.engine().close_xrcd(self.handle);
    }
}

impl XrcDomain {
    /// The engine's handle of the domain.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// `ibv_create_qp_ex` with `IBV_QPT_XRC_RECV`: a target QP in RESET,
    /// first PSN `psn` (random if `None`). It has no queues, PD or CQ: bring
    /// it up with [`QueuePair::connect`] to an initiator's endpoint; the
    /// requests it receives complete on the CQs of the SRQs they name.
    pub fn create_tgt_qp(&self, psn: Option<Psn>) -> Result<QueuePair> {
        let d = &self.inner;
        let qpn = d.shared.engine().create_xrc_tgt_qp(d.handle)?;
        Ok(QueuePair::xrc_target(
            d.shared.clone(),
            d.device.clone(),
            qpn,
            psn,
            self.inner.clone(),
        ))
    }
}

impl ProtectionDomain {
    /// `ibv_create_srq_ex` with `IBV_SRQT_XRC`: an SRQ of up to `max_wr`
    /// receives in XRC domain `xrcd`, completing on `cq`. The requests
    /// delivered into it reach memory of this PD.
    pub fn create_xrc_srq(
        &self,
        xrcd: &XrcDomain,
        cq: &CompletionQueue,
        max_wr: u32,
    ) -> Result<SharedReceiveQueue> {
        let (handle, poster) = {
            let mut ep = self.shared.engine();
            let handle = ep.create_xrc_srq(self.handle, xrcd.handle(), cq.handle, max_wr, 0)?;
            (handle, ep.srq_poster(handle)?)
        };
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqHandle {
                shared: self.shared.clone(),
                _device: self.device.clone(),
                handle,
                poster,
                _xrcd: Some(xrcd.inner.clone()),
            }),
        })
    }
}

impl crate::Context {
    /// `ibv_open_xrcd`: a new XRC domain of this device.
    pub fn open_xrcd(&self) -> XrcDomain {
        let handle = self.shared.engine().open_xrcd();
        XrcDomain {
            inner: Arc::new(XrcdHandle {
                shared: self.shared.clone(),
                device: self.device.clone(),
                handle,
            }),
        }
    }
}
