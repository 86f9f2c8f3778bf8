//! Completion queues: bounded FIFOs of work completions.

use std::collections::VecDeque;

use crate::verbs::WorkCompletion;

/// A completion queue. Overflowing it is an asynchronous error in ibverbs;
/// here the completion is dropped and `overflowed` is set, so the user can
/// see it instead of silently losing it.
#[derive(Debug)]
pub(crate) struct Cq {
    entries: VecDeque<WorkCompletion>,
    depth: usize,
    pub(crate) overflowed: bool,
}

impl Cq {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(depth.min(4096)),
            depth,
            overflowed: false,
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
