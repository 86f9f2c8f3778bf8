//! Event channels (`rdma_event_channel`): where the events of the IDs
//! created on a channel queue, with a descriptor that is readable while
//! events wait.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ferroce_cm::rdma_cm::PortSpace;
use ferroce_io::EventFd;

use super::id::CmId;
use super::{CmEvent, CmIdError};
use crate::Result;

/// An event channel (`rdma_create_event_channel`). Events of every ID
/// created on it queue here, oldest first; its descriptor ([`AsFd`]) is
/// readable while any wait, so epoll or an async runtime can watch it
/// (read the events with [`try_get_event`](Self::try_get_event)).
///
/// Unlike librdmacm, events need no acknowledgement: an event holds its
/// ID, which lives until the event and the application's handles are gone.
/// Dropping the channel drops the events still queued; IDs created on it
/// keep working, but their later events are lost.
#[derive(Debug)]
pub struct EventChannel {
    pub(crate) queue: Arc<EventQueue>,
}

/// What a channel and its IDs share.
#[derive(Debug)]
pub(crate) struct EventQueue {
    fd: EventFd,
    events: Mutex<VecDeque<CmEvent>>,
    /// Notified at each push: for waiters that take only some events,
    /// whom the descriptor (readable while any event waits) cannot wake.
    arrived: Condvar,
}

impl EventQueue {
    /// Queues `event` (the driver, or a call that completes at once).
    pub(crate) fn push(&self, event: CmEvent) {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        events.push_back(event);
        if events.len() == 1 {
            self.fd.signal();
        }
        self.arrived.notify_all();
    }

    fn pop(&self) -> Option<CmEvent> {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let event = events.pop_front()?;
        if events.is_empty() {
            // Under the lock: a push that follows signals again.
            self.fd.take();
        }
        Some(event)
    }

    /// Takes the oldest event that `want` accepts, leaving the others.
    fn take_matching(
        &self,
        events: &mut VecDeque<CmEvent>,
        want: &dyn Fn(&CmEvent) -> bool,
    ) -> Option<CmEvent> {
        let at = events.iter().position(want)?;
        let event = events.remove(at);
        if events.is_empty() {
            self.fd.take();
        }
        event
    }

    /// Waits up to `timeout` for an event `want` accepts.
    pub(crate) fn wait_for(
        &self,
        timeout: Duration,
        want: &dyn Fn(&CmEvent) -> bool,
    ) -> Result<Option<CmEvent>> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(event) = self.take_matching(&mut events, want) {
                return Ok(Some(event));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if events.is_empty() {
                drop(events);
                self.fd.wait_readable(left)?;
            } else {
                // Events that do not match keep the descriptor readable:
                // wait for the next push instead (under the lock the look
                // above held, so none is missed).
                drop(self.arrived.wait_timeout(events, left));
            }
        }
    }
}

impl EventChannel {
    /// `rdma_create_event_channel`.
    pub fn new() -> Result<Self> {
        Ok(Self {
            queue: Arc::new(EventQueue {
                fd: EventFd::new()?,
                events: Mutex::new(VecDeque::new()),
                arrived: Condvar::new(),
            }),
        })
    }

    /// `rdma_create_id`: a new ID in `port_space` whose events come to
    /// this channel (TCP: RC connections; UDP: UD peers through SIDR).
    pub fn create_id(&self, port_space: PortSpace) -> Result<CmId> {
        if matches!(port_space, PortSpace::Ipoib) {
            return Err(CmIdError::WrongState {
                call: "create_id",
                state: "in the IPoIB port space",
                needs: "use PortSpace::Tcp (RC) or PortSpace::Udp (UD); IPoIB needs an IB subnet",
            }
            .into());
        }
        Ok(CmId::new(&self.queue, port_space))
    }

    /// The oldest event without blocking.
    pub fn try_get_event(&self) -> Option<CmEvent> {
        self.queue.pop()
    }

    /// `rdma_get_cm_event`: waits for the oldest event.
    pub fn get_event(&self) -> Result<CmEvent> {
        loop {
            if let Some(event) = self.get_event_timeout(Duration::from_secs(3600))? {
                return Ok(event);
            }
        }
    }

    /// [`get_event`](Self::get_event), giving up after `timeout` with `None`.
    pub fn get_event_timeout(&self, timeout: Duration) -> Result<Option<CmEvent>> {
        self.queue.wait_for(timeout, &|_| true)
    }

    /// The oldest event `want` accepts, waiting up to `timeout` (`None`
    /// past it); the others stay queued. For callers that share a channel
    /// among waiters of their own (librdmacm's synchronous IDs).
    pub fn get_event_matching(
        &self,
        timeout: Duration,
        want: &dyn Fn(&CmEvent) -> bool,
    ) -> Result<Option<CmEvent>> {
        self.queue.wait_for(timeout, want)
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // The queued events hold their IDs; let them go now, outside the
        // queue's lock (an ID's destruction takes other locks).
        let events: Vec<CmEvent> = {
            let mut q = self.queue.events.lock().unwrap_or_else(|p| p.into_inner());
            q.drain(..).collect()
        };
        drop(events);
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.queue.fd.as_fd()
    }
}

impl AsRawFd for EventChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.queue.fd.as_raw_fd()
    }
}
