//! Completion queues: bounded FIFOs of work completions, and their
//! notification arming (`ibv_req_notify_cq`).
//!
//! A CQ's completions live in a ring ([`ring`]) that the engine fills and
//! the application drains through [`CqReader`]s
//! ([`Endpoint::cq_reader`]) without the engine: polling takes no lock
//! the engine holds, from any number of threads, each completion going to
//! one of them. The engine is the ring's only producer: it pushes while it
//! holds its own `&mut Endpoint`, so a push is ordered with every arm,
//! watch and resize. [`Endpoint::poll_cq`] takes from the same ring.
//!
//! * Depth: a completion that finds `depth` completions waiting is lost;
//!   the CQ is then overflowed for good ([`Endpoint::cq_overflowed`],
//!   [`CqReader::overflowed`]), and the endpoint raises
//!   [`AsyncEvent::CqOverflow`](crate::verbs::AsyncEvent::CqOverflow)
//!   once. Readers taking completions meanwhile only make room, so the
//!   ring never holds more than `depth`.
//! * Resize ([`Endpoint::resize_cq`]) changes the depth the engine
//!   enforces from its next push on, and keeps the ring, so the
//!   completions it holds stay in order and readers polling meanwhile are
//!   not disturbed. It is refused below the completions held when it
//!   looks; readers taking completions concurrently can only have made
//!   that count smaller.
//!
//! A CQ can be armed two ways, each firing once, for the next completion
//! pushed after the arm (completions already queued do not fire it):
//!
//! * the application's arm ([`Endpoint::req_notify_cq`]), for any
//!   completion or, `solicited_only`, for a receive whose last packet had
//!   the BTH SE bit or for any unsuccessful completion (IBA 11.4.2.2; rxe
//!   counts flushed receives as solicited too). The API turns it into an
//!   event on the CQ's completion channel.
//! * a blocked waiter's watch ([`Endpoint::watch_cq`]), for any completion.
//!
//! Arming, watching and pushing all happen under `&mut Endpoint`, so "arm,
//! then poll" is race-free for a reader: a completion pushed before the
//! arm is in the ring when the arm returns (the poll finds it), and one
//! pushed after fires the arm.
//!
//! The endpoint keeps the set of armed CQs, so that collecting what fired
//! after a round ([`Endpoint::take_cq_events`]) visits those only.

use std::sync::Arc;

use crate::Endpoint;
use crate::verbs::{VerbsError, WcStatus, WorkCompletion};

pub(crate) mod ring;

pub use ring::CqReader;
use ring::Ring;

/// Completions a CQ holds at most (the device's `max_cqe`).
pub const MAX_CQE: u32 = 1 << 20;

/// A completion queue, as the engine sees it: the producer's side of its
/// ring, and its arms. Overflowing it is an asynchronous error in ibverbs
/// (`IBV_EVENT_CQ_ERR`); here the completion is dropped, the ring marked
/// overflowed, and the endpoint raises the event once, so the user can see
/// it instead of silently losing it.
#[derive(Debug)]
pub(crate) struct Cq {
    ring: Arc<Ring>,
    depth: usize,
    /// Completions pushed so far, and how many of them readers had taken
    /// when the engine last read the ring's count: their difference bounds
    /// what the ring holds from above (readers only take), so most pushes
    /// need not read the count the readers share.
    pushed: u64,
    taken_seen: u64,
    /// The overflow event has been raised.
    pub(crate) overflow_reported: bool,
    /// The application's arm, until it fires.
    arm: Option<Arm>,
    /// A waiter watches for the next completion.
    watched: bool,
    /// What fired since [`Endpoint::take_cq_events`] last looked.
    fired: CqFired,
}

/// What an application's arm waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    Next,
    Solicited,
}

/// Which of a CQ's arms fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CqFired {
    /// The application's arm ([`Endpoint::req_notify_cq`]): one event for
    /// its completion channel.
    pub notify: bool,
    /// A waiter's watch ([`Endpoint::watch_cq`]).
    pub watch: bool,
}

impl CqFired {
    fn any(self) -> bool {
        self.notify || self.watch
    }
}

impl Cq {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            ring: Arc::default(),
            depth,
            pushed: 0,
            taken_seen: 0,
            overflow_reported: false,
            arm: None,
            watched: false,
            fired: CqFired::default(),
        }
    }

    /// Completions waiting to be polled.
    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    pub(crate) fn set_depth(&mut self, depth: usize) {
        self.depth = depth;
    }

    /// Whether a completion was lost because the CQ was full.
    pub(crate) fn overflowed(&self) -> bool {
        self.ring.overflowed()
    }

    /// The completions, shared with the CQ's readers.
    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }

    /// A reader of the completions, for CQ `handle` (this one).
    pub(crate) fn reader(&self, handle: u32) -> CqReader {
        CqReader::new(self.ring.clone(), handle)
    }

    /// Whether one more completion fits in `depth`. Readers taking
    /// completions meanwhile only make room, so a ring never holds more
    /// than `depth`.
    fn has_room(&mut self) -> bool {
        let depth = self.depth as u64;
        if self.pushed - self.taken_seen < depth {
            return true;
        }
        let held = self.ring.len() as u64;
        self.taken_seen = self.pushed - held;
        held < depth
    }

    /// Queues a completion that is not a solicited receive (an unsuccessful
    /// one still fires a solicited-only arm).
    pub(crate) fn push(&mut self, wc: WorkCompletion) {
        self.push_solicited(wc, false);
    }

    /// Queues a completion; `solicited`: a receive whose message asked for
    /// a solicited event (its last packet's SE bit).
    pub(crate) fn push_solicited(&mut self, wc: WorkCompletion, solicited: bool) {
        let solicited = solicited || wc.status != WcStatus::Success;
        if !self.has_room() {
            self.ring.set_overflowed();
            return;
        }
        self.ring.push(wc);
        self.pushed += 1;
        if self.watched {
            self.watched = false;
            self.fired.watch = true;
        }
        match self.arm {
            Some(Arm::Next) => {}
            Some(Arm::Solicited) if solicited => {}
            _ => return,
        }
        self.arm = None;
        self.fired.notify = true;
    }
}

impl Endpoint {
    /// `ibv_req_notify_cq`: arms `cq` to fire once, for the next
    /// completion (`solicited_only`: the next solicited or unsuccessful
    /// one). Arming an armed CQ again keeps one arm; `Next` wins over
    /// `Solicited`, as ibverbs specifies.
    pub fn req_notify_cq(&mut self, cq: u32, solicited_only: bool) -> Result<(), VerbsError> {
        let q = self.cqs.get_mut(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        q.arm = match (q.arm, solicited_only) {
            (Some(Arm::Next), _) | (_, false) => Some(Arm::Next),
            _ => Some(Arm::Solicited),
        };
        self.cq_armed.insert(cq);
        Ok(())
    }

    /// For a thread about to block until `cq` has a completion: returns
    /// `true` if it has one already, else watches it (the next completion
    /// fires [`CqFired::watch`]) and returns `false`.
    pub fn watch_cq(&mut self, cq: u32) -> Result<bool, VerbsError> {
        let q = self.cqs.get_mut(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        if !q.ring.is_empty() {
            return Ok(true);
        }
        q.watched = true;
        self.cq_armed.insert(cq);
        Ok(false)
    }

    /// Calls `f` for each CQ whose arm or watch fired since the last call,
    /// with what fired. Visits armed CQs only: nothing when none is.
    pub fn take_cq_events(&mut self, mut f: impl FnMut(u32, CqFired)) {
        if self.cq_armed.is_empty() {
            return;
        }
        let cqs = &mut self.cqs;
        self.cq_armed.retain(|h| {
            let Some(q) = cqs.get_mut(h) else {
                return false;
            };
            let fired = std::mem::take(&mut q.fired);
            if fired.any() {
                f(*h, fired);
            }
            q.arm.is_some() || q.watched
        });
    }
}

#[cfg(test)]
mod tests;
