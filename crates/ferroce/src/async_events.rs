//! The device's asynchronous events (`ibv_get_async_event`'s), taken out
//! of the engine at the end of every round of progress into a queue whose
//! descriptor is readable exactly while events wait, so that an
//! application can `poll`/epoll for them instead of asking again and
//! again ([`crate::Context::async_event_fd`]).
//!
//! The descriptor is an eventfd that is signalled when the queue goes from
//! empty to not empty and read when it goes back to empty, both under the
//! queue's lock: it is never read while its count is zero, so it works the
//! same whether the descriptor is blocking or not (an application may set
//! O_NONBLOCK on it, as on rdma-core's `async_fd`).

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;

use ferroce_core::Endpoint;
use ferroce_core::verbs::AsyncEvent;
use ferroce_io::EventFd;

/// The events taken from the engine, oldest first, and their descriptor.
#[derive(Debug)]
pub(crate) struct AsyncQueue {
    events: Mutex<VecDeque<AsyncEvent>>,
    fd: EventFd,
}

impl AsyncQueue {
    pub(crate) fn new() -> std::io::Result<Self> {
        Ok(Self {
            events: Mutex::new(VecDeque::new()),
            fd: EventFd::new()?,
        })
    }

    /// Moves the engine's waiting events here (with the engine locked).
    pub(crate) fn collect(&self, ep: &mut Endpoint) {
        // Every driver round calls this, and almost every round has no
        // event: lock only when there is one.
        let Some(first) = ep.poll_async_event() else {
            return;
        };
        let mut events = self.lock();
        let was_empty = events.is_empty();
        events.push_back(first);
        while let Some(e) = ep.poll_async_event() {
            events.push_back(e);
        }
        if was_empty && !events.is_empty() {
            self.fd.signal();
        }
    }

    /// The oldest event.
    pub(crate) fn pop(&self) -> Option<AsyncEvent> {
        let mut events = self.lock();
        let e = events.pop_front()?;
        if events.is_empty() {
            self.fd.take();
        }
        Some(e)
    }

    /// Drops the events `gone` says name a destroyed object (the engine
    /// drops its own when the object goes; these were taken out before).
    pub(crate) fn forget(&self, gone: impl Fn(&AsyncEvent) -> bool) {
        let mut events = self.lock();
        let had = !events.is_empty();
        events.retain(|e| !gone(e));
        if had && events.is_empty() {
            self.fd.take();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<AsyncEvent>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl AsFd for AsyncQueue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
