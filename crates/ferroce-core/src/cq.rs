//! Completion queues: bounded FIFOs of work completions.

use std::collections::VecDeque;

use crate::verbs::WorkCompletion;

/// A completion queue. Overflowing it is an asynchronous error in ibverbs
/// (`IBV_EVENT_CQ_ERR`); here the completion is dropped, `overflowed` is
/// set, and the endpoint raises the event once, so the user can see it
/// instead of silently losing it.
#[derive(Debug)]
pub(crate) struct Cq {
    entries: VecDeque<WorkCompletion>,
    depth: usize,
    pub(crate) overflowed: bool,
    /// The overflow event has been raised.
    pub(crate) overflow_reported: bool,
}

impl Cq {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(depth.min(4096)),
            depth,
            overflowed: false,
            overflow_reported: false,
        }
    }

    pub(crate) fn push(&mut self, wc: WorkCompletion) {
        if self.entries.len() >= self.depth {
            self.overflowed = true;
        } else {
            self.entries.push_back(wc);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
    }
}
