//! Completion queues, and the three ways to wait on one:
//!
//! * [`CompletionQueue::poll`] in a loop (busy-polling): the lowest
//!   latency; each poll also moves the engine, so the driver thread
//!   stands back while the application polls in a tight loop.
//! * [`CompletionQueue::wait`]: blocks the thread, without spinning, until
//!   a completion or a timeout. The driver thread serves the peer
//!   meanwhile, at full speed.
//! * a completion channel ([`crate::CompletionChannel`]) and
//!   [`CompletionQueue::req_notify`], as ibverbs: a file descriptor that an
//!   event loop (epoll, mio, tokio) watches; with the `tokio` feature,
//!   [`crate::AsyncChannel`] does that for you.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::DeviceHandle;
use crate::driver::Shared;
use ferroce_core::Endpoint;

use crate::{CompletionChannel, Result, VerbsError, WorkCompletion};

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) _device: Arc<DeviceHandle>,
    pub(crate) handle: u32,
    /// The channel its events go to, if it was created with one.
    pub(crate) channel: Option<CompletionChannel>,
}

impl CompletionQueue {
    /// `ibv_resize_cq`: holds up to `depth` completions from now on (1 to
    /// [`crate::MAX_CQE`]); refused below the completions it holds now.
    pub fn resize(&self, depth: u32) -> Result<()> {
        Ok(self.shared.engine().resize_cq(self.handle, depth)?)
    }

    /// Takes up to `max` completions, as `ibv_poll_cq`. Also moves the
    /// engine forward, so that a busy-polling caller never waits on the
    /// driver thread.
    pub fn poll(&self, max: usize) -> Result<Vec<WorkCompletion>> {
        // Completions already there are returned without a round of
        // progress, unless something was posted since the last round (a
        // post is not sent until a round runs). That round's receive is a
        // system call, about 1 µs on loopback, which a ping-pong taking the
        // two completions of one arrival (its SEND's and the peer's reply)
        // paid between them.
        if max > 0 && !self.shared.kicked_since_round() {
            let wcs = self.shared.engine().poll_cq(self.handle, max)?;
            if !wcs.is_empty() {
                return Ok(wcs);
            }
        }
        self.shared.app_progress();
        Ok(self.shared.engine().poll_cq(self.handle, max)?)
    }

    /// Moves up to `out.len()` completions into `out` and returns how
    /// many, without allocating (the buffer is reused from call to call;
    /// [`WorkCompletion::default`] fills it). Moves the engine forward as
    /// [`CompletionQueue::poll`] does.
    ///
    /// ```no_run
    /// # fn f(cq: &ferroce::CompletionQueue) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut wcs = [ferroce::WorkCompletion::default(); 16];
    /// let n = cq.poll_into(&mut wcs)?;
    /// for wc in &wcs[..n] {
    ///     wc.ok()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn poll_into(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        if !out.is_empty() && !self.shared.kicked_since_round() {
            let n = self.shared.engine().poll_cq_into(self.handle, out)?;
            if n > 0 {
                return Ok(n);
            }
        }
        self.shared.app_progress();
        Ok(self.shared.engine().poll_cq_into(self.handle, out)?)
    }

    /// Takes up to `max` completions, blocking until there is at least one
    /// or `timeout` has passed (then the result is empty). The thread
    /// sleeps in the kernel, and the driver thread serves the peer
    /// meanwhile: a blocked waiter never counts as a polling application.
    /// Several threads may wait on one CQ; each completion goes to one.
    pub fn wait(&self, max: usize, timeout: Duration) -> Result<Vec<WorkCompletion>> {
        let taken = self.wait_for(timeout, |ep| {
            let wcs = ep.poll_cq(self.handle, max)?;
            Ok((!wcs.is_empty() || max == 0).then_some(wcs))
        })?;
        Ok(taken.unwrap_or_default())
    }

    /// [`CompletionQueue::wait`] without allocating, as
    /// [`CompletionQueue::poll_into`] is to [`CompletionQueue::poll`]:
    /// moves up to `out.len()` completions into `out`, blocking until
    /// there is at least one or `timeout` has passed, and returns how many
    /// (0 on a timeout, or at once for an empty `out`).
    ///
    /// ```no_run
    /// # fn f(cq: &ferroce::CompletionQueue) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let mut wcs = [ferroce::WorkCompletion::default(); 16];
    /// let n = cq.wait_into(&mut wcs, Duration::from_secs(1))?;
    /// for wc in &wcs[..n] {
    ///     wc.ok()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait_into(&self, out: &mut [WorkCompletion], timeout: Duration) -> Result<usize> {
        let taken = self.wait_for(timeout, |ep| {
            let n = ep.poll_cq_into(self.handle, out)?;
            Ok((n > 0 || out.is_empty()).then_some(n))
        })?;
        Ok(taken.unwrap_or(0))
    }

    /// The blocking of [`CompletionQueue::wait`]: runs `take` on the
    /// engine until it returns something, sleeping between tries until
    /// the CQ is woken or `timeout` has passed (then `None`).
    fn wait_for<T>(
        &self,
        timeout: Duration,
        mut take: impl FnMut(&mut Endpoint) -> std::result::Result<Option<T>, VerbsError>,
    ) -> Result<Option<T>> {
        let deadline = Instant::now().checked_add(timeout);
        self.shared.app_blocks();
        loop {
            // Read before looking, so that a completion arriving between
            // the look and the sleep still wakes the sleep.
            let seen = self.shared.cq_wakes();
            {
                let mut ep = self.shared.engine();
                if let Some(taken) = take(&mut ep)? {
                    return Ok(Some(taken));
                }
                if ep.watch_cq(self.handle)? {
                    continue;
                }
            }
            let left = deadline.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Ok(None);
            }
            self.shared.wait_for_cq(seen, left);
        }
    }

    /// `ibv_req_notify_cq`: arms the CQ to queue one event on its
    /// completion channel for its next completion (`solicited_only`: the
    /// next receive whose sender set the solicited-event bit, or the next
    /// unsuccessful completion). Completions queued before the arm fire
    /// nothing: poll after arming. Fails if the CQ has no channel. Arming
    /// tells the driver thread that the application is about to wait, so
    /// it serves the peer in full from then on.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        if self.channel.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "req_notify on a CQ without a completion channel: create it with \
                 Context::create_cq_with_channel",
            )
            .into());
        }
        // Arming is what a thread does before it waits on the channel: from
        // now on the driver thread serves the peer.
        self.shared.app_blocks();
        Ok(self
            .shared
            .engine()
            .req_notify_cq(self.handle, solicited_only)?)
    }

    /// The completion channel the CQ was created with.
    pub fn channel(&self) -> Option<&CompletionChannel> {
        self.channel.as_ref()
    }

    /// Takes up to `max` completions already queued, running no round of
    /// progress (the driver thread's rounds fill the CQ): for waiters,
    /// which must not count as polling.
    #[cfg(feature = "tokio")]
    pub(crate) fn take(&self, max: usize) -> Result<Vec<WorkCompletion>> {
        Ok(self.shared.engine().poll_cq(self.handle, max)?)
    }

    /// Whether completions were lost because the queue was full.
    pub fn overflowed(&self) -> Result<bool> {
        Ok(self.shared.engine().cq_overflowed(self.handle)?)
    }

    /// The number [`AsyncEvent::CqOverflow`] names it by.
    ///
    /// [`AsyncEvent::CqOverflow`]: crate::AsyncEvent::CqOverflow
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
