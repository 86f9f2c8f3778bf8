//! Shared receive queues.

use std::sync::Arc;

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::{RecvWr, Result, SrqAttr, SrqInfo};

/// A shared receive queue. Dropping it destroys it once the last QP that
/// uses it is gone too (ibverbs refuses `ibv_destroy_srq` before that).
#[derive(Debug)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Arc<SrqHandle>,
}

/// The engine's SRQ, destroyed when the last of its handle and its QPs
/// drops.
#[derive(Debug)]
pub(crate) struct SrqHandle {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) _device: Arc<DeviceHandle>,
    pub(crate) handle: u32,
    /// Posts without the engine's lock.
    pub(crate) poster: ferroce_core::SrqPoster,
    /// An XRC SRQ keeps its domain open.
    pub(crate) _xrcd: Option<Arc<crate::xrcd::XrcdHandle>>,
}

impl Drop for SrqHandle {
    fn drop(&mut self) {
        let _ = self.shared.engine().destroy_srq(self.handle);
        // Its events the driver already took out of the engine go too.
        let srq = self.handle;
        self.shared
            .async_events
            .forget(|e| *e == crate::AsyncEvent::SrqLimitReached { srq });
    }
}

impl SharedReceiveQueue {
    /// The number [`AsyncEvent::SrqLimitReached`](crate::AsyncEvent::SrqLimitReached) names it by.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// `ibv_get_srq_num`: the number an XRC initiator's requests name this
    /// XRC SRQ by ([`SendWr::to_srq`](crate::SendWr::to_srq)); refused for
    /// a basic SRQ.
    pub fn srq_num(&self) -> Result<u32> {
        Ok(self.inner.shared.engine().srq_num(self.inner.handle)?)
    }

    /// `ibv_post_srq_recv`: one receive work request, for whichever of
    /// its QPs next needs one. Checked and queued in the SRQ's ring without
    /// the engine's lock, as [`crate::QueuePair::post_recv`].
    pub fn post_recv(&self, wr: RecvWr<'_>) -> Result<()> {
        self.inner.poster.post_recv(wr)?;
        self.inner.shared.kick();
        Ok(())
    }

    /// How a receive posted with a bad scatter/gather list is reported:
    /// refused at post (the default), or failed with `LocProtErr` on the
    /// QP that takes it (see [`crate::QueuePair::set_local_errors`]).
    pub fn set_local_errors(&self, mode: crate::LocalErrors) -> Result<()> {
        Ok(self
            .inner
            .shared
            .engine()
            .set_srq_local_errors(self.inner.handle, mode)?)
    }

    /// Arms the limit (`ibv_modify_srq` with `IBV_SRQ_LIMIT`): once fewer
    /// than `limit` work requests are left, [`Context::poll_async_event`](crate::Context::poll_async_event)
    /// returns [`AsyncEvent::SrqLimitReached`](crate::AsyncEvent::SrqLimitReached) once, and the limit disarms.
    /// 0 disarms it.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        self.modify(&SrqAttr {
            max_wr: None,
            srq_limit: Some(limit),
        })
    }

    /// `ibv_modify_srq`: resize and/or set the limit.
    pub fn modify(&self, attr: &SrqAttr) -> Result<()> {
        Ok(self
            .inner
            .shared
            .engine()
            .modify_srq(self.inner.handle, attr)?)
    }

    /// `ibv_query_srq`, and how many work requests are waiting.
    pub fn query(&self) -> Result<SrqInfo> {
        Ok(self.inner.shared.engine().query_srq(self.inner.handle)?)
    }
}
