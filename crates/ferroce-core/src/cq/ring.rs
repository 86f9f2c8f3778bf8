//! A CQ's completions: a lock-free FIFO that the engine fills and any
//! number of [`CqReader`]s drain, as a NIC writes its CQ ring and the
//! application reads it with no lock shared with the hardware.
//!
//! * One producer: the engine pushes while it holds its own
//!   `&mut Endpoint`, so pushes are ordered with every other engine call
//!   (arming, watching, resizing) and never race each other.
//! * Any number of consumers: [`CqReader`] is `Clone + Send + Sync`; each
//!   completion goes to exactly one pop, oldest first. Completions a
//!   single reader takes come in the order the engine pushed them; the
//!   completions several threads take are each in that order, interleaved
//!   between them.
//! * The ring grows by small blocks as completions come and frees them as
//!   they are taken, so a CQ costs memory for what it holds, not for its
//!   depth, and a resize only changes the depth the engine enforces: the
//!   ring, and the pollers reading it, are untouched.
//! * Taking a completion is a compare-and-swap; finding the ring empty is
//!   two loads. No lock, no system call. The one wait: a reader that finds
//!   the engine in the middle of a push (a claimed slot not yet written, a
//!   few instructions) spins, then yields, until the slot is written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_queue::SegQueue;

use crate::verbs::WorkCompletion;

/// The shared state of one CQ: its completions and whether one was lost.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    entries: SegQueue<WorkCompletion>,
    /// A completion found the CQ full and was dropped. Never cleared, as
    /// an overflowed CQ is in error in ibverbs.
    overflowed: AtomicBool,
}

impl Ring {
    /// Queues `wc`. Only the engine calls this (one producer), after
    /// checking the CQ's depth.
    pub(crate) fn push(&self, wc: WorkCompletion) {
        self.entries.push(wc);
    }

    /// A completion found the CQ full and was dropped.
    pub(crate) fn set_overflowed(&self) {
        self.overflowed.store(true, Ordering::Release);
    }

    pub(crate) fn pop(&self) -> Option<WorkCompletion> {
        // Two plain loads say "empty" (a busy poller's usual answer) without
        // the fence the queue's own `pop` takes to say so.
        if self.entries.is_empty() {
            return None;
        }
        self.entries.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }
}

/// A consumer's handle on one CQ's completions
/// ([`Endpoint::cq_reader`](crate::Endpoint::cq_reader)): takes them
/// without the engine, from any thread. Clones read the same CQ; each
/// completion goes to one of them. It stays valid as long as it lives,
/// across resizes; it only reads completions, so arming, watching and
/// resizing remain the engine's calls.
#[derive(Debug, Clone)]
pub struct CqReader {
    ring: Arc<Ring>,
    handle: u32,
}

impl CqReader {
    pub(crate) fn new(ring: Arc<Ring>, handle: u32) -> Self {
        Self { ring, handle }
    }

    /// The CQ's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The oldest completion, if any.
    pub fn pop(&self) -> Option<WorkCompletion> {
        self.ring.pop()
    }

    /// Takes up to `max` completions, oldest first.
    pub fn poll(&self, max: usize) -> Vec<WorkCompletion> {
        std::iter::from_fn(|| self.ring.pop()).take(max).collect()
    }

    /// Moves up to `out.len()` completions into `out`, oldest first, and
    /// returns how many.
    pub fn poll_into(&self, out: &mut [WorkCompletion]) -> usize {
        poll_into(&self.ring, out)
    }

    /// Whether no completion waits (a snapshot: the engine may push one
    /// and other readers may take them at any time).
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// How many completions wait (a snapshot, as [`CqReader::is_empty`]).
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether a completion was lost because the CQ was full.
    pub fn overflowed(&self) -> bool {
        self.ring.overflowed()
    }
}

/// Moves up to `out.len()` completions of `ring` into `out`; how many.
pub(crate) fn poll_into(ring: &Ring, out: &mut [WorkCompletion]) -> usize {
    let mut n = 0;
    for slot in out.iter_mut() {
        let Some(wc) = ring.pop() else { break };
        *slot = wc;
        n += 1;
    }
    n
}
