//! Completion queues, and the three ways to wait on one:
//!
//! * [`CompletionQueue::poll`] in a loop (busy-polling): the lowest
//!   latency; a poll that finds the CQ empty also moves the engine, so the
//!   driver thread stands back while the application polls in a tight
//!   loop.
//! * [`CompletionQueue::wait`]: blocks the thread, without spinning, until
//!   a completion or a timeout. The driver thread serves the peer
//!   meanwhile, at full speed.
//! * a completion channel ([`crate::CompletionChannel`]) and
//!   [`CompletionQueue::req_notify`], as ibverbs: a file descriptor that an
//!   event loop (epoll, mio, tokio) watches; with the `tokio` feature,
//!   [`crate::AsyncChannel`] does that for you.
//!
//! A CQ's completions are in a ring that the engine fills and the CQ
//! reads without the engine's lock ([`ferroce_core::CqReader`]), as a
//! NIC's CQ is a ring the hardware writes and the application reads:
//! taking completions that are there makes no system call and never waits
//! for the driver thread, even one preempted in the middle of a round.
//! Several threads may poll or wait on one CQ; each completion goes to one
//! of them, and the completions one thread takes are in the order they
//! completed. [`CompletionQueue::resize`] keeps the completions held, in
//! order, and pollers polling meanwhile go on undisturbed.
//!
//! An arm ([`CompletionQueue::req_notify`]) covers the completions that
//! come after it; those already in the CQ fire nothing, so poll after
//! arming, before waiting for the event.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::DeviceHandle;
use crate::driver::Shared;
use ferroce_core::CqReader;

use crate::{CompletionChannel, Result, WorkCompletion};

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) _device: Arc<DeviceHandle>,
    pub(crate) handle: u32,
    /// Takes the completions without the engine.
    pub(crate) reader: CqReader,
    /// The channel its events go to, if it was created with one.
    pub(crate) channel: Option<CompletionChannel>,
}

impl CompletionQueue {
    /// `ibv_resize_cq`: holds up to `depth` completions from now on (1 to
    /// [`crate::MAX_CQE`]); refused below the completions it holds now,
    /// which it keeps, in order. Threads polling the CQ meanwhile go on
    /// taking its completions; the depth they may have made room for
    /// counts from the resize on.
    pub fn resize(&self, depth: u32) -> Result<()> {
        Ok(self.shared.engine().resize_cq(self.handle, depth)?)
    }

    /// Takes up to `max` completions, as `ibv_poll_cq`. Completions
    /// already there are taken without a lock; only if there are none does
    /// the poll move the engine forward itself, so that a busy-polling
    /// caller never waits on the driver thread.
    pub fn poll(&self, max: usize) -> Result<Vec<WorkCompletion>> {
        // Completions already there are returned without a round of
        // progress, unless something was posted since the last round (a
        // post is not sent until a round runs). That round's receive is a
        // system call, about 1 µs on loopback, which a ping-pong taking the
        // two completions of one arrival (its SEND's and the peer's reply)
        // paid between them.
        if max > 0 && !self.shared.kicked_since_round() {
            let wcs = self.reader.poll(max);
            if !wcs.is_empty() {
                return Ok(wcs);
            }
        }
        self.shared.app_progress();
        Ok(self.reader.poll(max))
    }

    /// Moves up to `out.len()` completions into `out` and returns how
    /// many, without allocating (the buffer is reused from call to call;
    /// [`WorkCompletion::default`] fills it). Takes them and moves the
    /// engine forward as [`CompletionQueue::poll`] does.
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
            let n = self.reader.poll_into(out);
            if n > 0 {
                return Ok(n);
            }
        }
        self.shared.app_progress();
        Ok(self.reader.poll_into(out))
    }

    /// Takes up to `max` completions, blocking until there is at least one
    /// or `timeout` has passed (then the result is empty). The thread
    /// sleeps in the kernel, and the driver thread serves the peer
    /// meanwhile: a blocked waiter never counts as a polling application.
    /// Several threads may wait on one CQ; each completion goes to one.
    pub fn wait(&self, max: usize, timeout: Duration) -> Result<Vec<WorkCompletion>> {
        let taken = self.wait_for(timeout, || {
            let wcs = self.reader.poll(max);
            (!wcs.is_empty() || max == 0).then_some(wcs)
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
        let taken = self.wait_for(timeout, || {
            let n = self.reader.poll_into(out);
            (n > 0 || out.is_empty()).then_some(n)
        })?;
        Ok(taken.unwrap_or(0))
    }

    /// The blocking of [`CompletionQueue::wait`]: runs `take` until it
    /// returns something, sleeping between tries until the CQ is woken or
    /// `timeout` has passed (then `None`). Only a `take` that finds
    /// nothing locks the engine, to watch the CQ.
    fn wait_for<T>(
        &self,
        timeout: Duration,
        mut take: impl FnMut() -> Option<T>,
    ) -> Result<Option<T>> {
        let deadline = Instant::now().checked_add(timeout);
        self.shared.app_blocks();
        loop {
            // Read before looking, so that a completion arriving between
            // the look and the sleep still wakes the sleep.
            let seen = self.shared.cq_wakes();
            if let Some(taken) = take() {
                return Ok(Some(taken));
            }
            // The engine pushes, and fires the watch, under its lock: a
            // completion that came after the look is either seen here or
            // fires the watch, which wakes the sleep below.
            if self.shared.engine().watch_cq(self.handle)? {
                continue;
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
        Ok(self.reader.poll(max))
    }

    /// Whether completions were lost because the queue was full.
    pub fn overflowed(&self) -> Result<bool> {
        Ok(self.reader.overflowed())
    }

    /// The number [`AsyncEvent::CqOverflow`] names it by.
    ///
    /// [`AsyncEvent::CqOverflow`]: crate::AsyncEvent::CqOverflow
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
