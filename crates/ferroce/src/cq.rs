//! Completion queues.

use std::sync::Arc;

use crate::driver::Shared;
use crate::{Result, WorkCompletion};

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    pub(crate) shared: Arc<Shared>,
    pub(crate) handle: u32,
}

impl CompletionQueue {
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

    /// Whether completions were lost because the queue was full.
    pub fn overflowed(&self) -> Result<bool> {
        Ok(self.shared.engine().cq_overflowed(self.handle)?)
    }

    /// The number [`AsyncEvent::CqOverflow`] names it by.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}
