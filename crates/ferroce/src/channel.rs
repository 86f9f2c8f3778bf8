//! Completion channels (`ibv_comp_channel`): a file descriptor that
//! becomes readable when an armed CQ gets a completion.
//!
//! A CQ created with [`Context::create_cq_with_channel`] and armed with
//! [`CompletionQueue::req_notify`] fires once, for its next completion
//! (solicited only: the next solicited or unsuccessful one); the driver
//! then queues one event naming the CQ on its channel and makes the
//! channel's eventfd readable. [`CompletionChannel::get_event`] takes the
//! oldest event, blocking; [`try_get_event`](CompletionChannel::try_get_event)
//! does not. The descriptor ([`AsFd`]) stays readable while events wait,
//! so epoll, mio or tokio can watch it; read the events with
//! `try_get_event`, never with read(2). The channel reads its descriptor
//! only right after taking the last waiting event, when it is known to be
//! signalled, so the descriptor may be made blocking (the C library does,
//! so that an O_NONBLOCK set by the application is the application's).
//!
//! Unlike ibverbs, events need no acknowledgement: ibverbs counts them so
//! that `ibv_destroy_cq` can wait for every event the application holds;
//! here an event is a CQ handle, which outlives nothing, so
//! there is nothing to wait for. The usual loop is as in ibverbs: arm, poll
//! until empty (a completion that came before the arm fires nothing), wait
//! for an event, repeat.
//!
//! [`Context::create_cq_with_channel`]: crate::Context::create_cq_with_channel
//! [`CompletionQueue::req_notify`]: crate::CompletionQueue::req_notify

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferroce_io::EventFd;

use crate::Result;

/// A completion channel (`ibv_comp_channel`): CQs created with it queue
/// an event here when their arm ([`crate::CompletionQueue::req_notify`])
/// fires, and its descriptor ([`AsFd`]) is readable while events wait.
/// Events need no acknowledgement. Clones share the channel.
#[derive(Debug, Clone)]
pub struct CompletionChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

/// What the channel's handles and the driver share.
#[derive(Debug)]
pub(crate) struct ChannelInner {
    /// Readable while `events` is not empty.
    fd: EventFd,
    /// The CQs whose arm fired, oldest first.
    events: Mutex<VecDeque<u32>>,
}

impl ChannelInner {
    /// Queues an event for `cq` (the driver, when its arm fires).
    pub(crate) fn push(&self, cq: u32) {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        events.push_back(cq);
        if events.len() == 1 {
            self.fd.signal();
        }
    }
}

impl CompletionChannel {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self {
            inner: Arc::new(ChannelInner {
                fd: EventFd::new()?,
                events: Mutex::new(VecDeque::new()),
            }),
        })
    }

    /// The oldest event without blocking: the handle of the CQ whose arm
    /// fired ([`crate::CompletionQueue::handle`]), or `None`.
    pub fn try_get_event(&self) -> Option<u32> {
        let mut events = self.inner.events.lock().unwrap_or_else(|p| p.into_inner());
        let cq = events.pop_front()?;
        if events.is_empty() {
            // Under the lock: a push that follows signals again.
            self.inner.fd.take();
        }
        Some(cq)
    }

    /// `ibv_get_cq_event`: waits for the oldest event and returns the
    /// handle of its CQ.
    pub fn get_event(&self) -> Result<u32> {
        loop {
            if let Some(cq) = self.get_event_timeout(Duration::from_secs(3600))? {
                return Ok(cq);
            }
        }
    }

    /// [`get_event`](Self::get_event), giving up after `timeout` with
    /// `None`.
    pub fn get_event_timeout(&self, timeout: Duration) -> Result<Option<u32>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(cq) = self.try_get_event() {
                return Ok(Some(cq));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.inner.fd.wait_readable(left)?;
        }
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

impl AsRawFd for CompletionChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd.as_raw_fd()
    }
}
