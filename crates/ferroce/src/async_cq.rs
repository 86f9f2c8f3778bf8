//! Awaiting completions under tokio (the `tokio` feature): a completion
//! channel registered with tokio's reactor ([`AsyncChannel`]), and
//! [`CompletionQueue::wait_async`] / [`CompletionQueue::next`] on a CQ
//! created with that channel.
//!
//! The wait is the ibverbs loop made a future: take what is queued; if
//! nothing, arm the CQ, take again (a completion may have come before the
//! arm), then await the channel's descriptor. A task awaiting never polls,
//! so the driver thread serves the peer meanwhile at full speed. One
//! `AsyncChannel` per descriptor: tokio refuses to register a descriptor
//! twice; CQs sharing a channel are best served by one task that takes the
//! events ([`AsyncChannel::get_event`]) and polls the CQ each names.

use std::io;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;

use crate::{CompletionChannel, CompletionQueue, Result, WorkCompletion};

/// A [`CompletionChannel`] watched by tokio's reactor. Create it inside a
/// runtime with I/O enabled.
#[derive(Debug)]
pub struct AsyncChannel {
    fd: AsyncFd<CompletionChannel>,
}

impl AsyncChannel {
    /// Registers `channel`'s descriptor with the current tokio runtime.
    pub fn new(channel: CompletionChannel) -> io::Result<Self> {
        // tokio 1.5x deprecates the safe `new` for `unsafe fn register`,
        // whose contract is that the descriptor stays open and the same
        // while registered. It does here: the AsyncFd owns a handle of the
        // channel, whose eventfd (an OwnedFd behind an Arc) is closed only
        // when the last handle goes, and `as_raw_fd` always returns it. The
        // safe call keeps `unsafe` out of this crate (it lives in
        // ferroce-io's sys module only).
        #[allow(deprecated)]
        let fd = AsyncFd::new(channel)?;
        Ok(Self { fd })
    }

    /// The channel.
    pub fn channel(&self) -> &CompletionChannel {
        self.fd.get_ref()
    }

    /// Awaits the oldest event and returns the handle of its CQ
    /// ([`CompletionQueue::handle`]).
    pub async fn get_event(&self) -> Result<u32> {
        loop {
            let mut ready = self.fd.readable().await?;
            if let Some(cq) = self.fd.get_ref().try_get_event() {
                return Ok(cq);
            }
            ready.clear_ready();
        }
    }
}

impl CompletionQueue {
    /// Takes up to `max` completions, awaiting at least one: the async
    /// [`wait`](Self::wait). The CQ must have been created with `channel`'s
    /// [`CompletionChannel`]; events for it that the wait finds are taken.
    pub async fn wait_async(
        &self,
        channel: &AsyncChannel,
        max: usize,
    ) -> Result<Vec<WorkCompletion>> {
        let ours = self
            .channel
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.inner, &channel.channel().inner));
        if !ours {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "wait_async with a channel this CQ was not created with: create the CQ with \
                 Context::create_cq_with_channel on the AsyncChannel's channel",
            )
            .into());
        }
        loop {
            let wcs = self.take(max)?;
            if !wcs.is_empty() || max == 0 {
                return Ok(wcs);
            }
            self.req_notify(false)?;
            let wcs = self.take(max)?;
            if !wcs.is_empty() {
                return Ok(wcs);
            }
            channel.get_event().await?;
        }
    }

    /// The next completion, awaited ([`wait_async`](Self::wait_async) for
    /// one).
    pub async fn next(&self, channel: &AsyncChannel) -> Result<WorkCompletion> {
        loop {
            if let Some(wc) = self.wait_async(channel, 1).await?.pop() {
                return Ok(wc);
            }
        }
    }
}
