//! Completion queues: bounded FIFOs of work completions, and their
//! notification arming (`ibv_req_notify_cq`).
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
//! The endpoint keeps the set of armed CQs, so that collecting what fired
//! after a round ([`Endpoint::take_cq_events`]) visits those only.

use std::collections::VecDeque;

use crate::Endpoint;
use crate::verbs::{VerbsError, WcStatus, WorkCompletion};

/// Completions a CQ holds at most (the device's `max_cqe`).
pub const MAX_CQE: u32 = 1 << 20;

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
            entries: VecDeque::with_capacity(depth.min(4096)),
            depth,
            overflowed: false,
            overflow_reported: false,
            arm: None,
            watched: false,
            fired: CqFired::default(),
        }
    }

    /// Queues a completion that is not a solicited receive (an unsuccessful
    /// one still fires a solicited-only arm).
    /// Completions waiting to be polled.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn set_depth(&mut self, depth: usize) {
        self.depth = depth;
    }

    pub(crate) fn push(&mut self, wc: WorkCompletion) {
        self.push_solicited(wc, false);
    }

    /// Queues a completion; `solicited`: a receive whose message asked for
    /// a solicited event (its last packet's SE bit).
    pub(crate) fn push_solicited(&mut self, wc: WorkCompletion, solicited: bool) {
        let solicited = solicited || wc.status != WcStatus::Success;
        if self.entries.len() >= self.depth {
            self.overflowed = true;
            return;
        }
        self.entries.push_back(wc);
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

    pub(crate) fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
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
        if !q.entries.is_empty() {
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
mod tests {
    use super::*;
    use crate::EndpointConfig;
    use crate::verbs::WcOpcode;

    fn wc(status: WcStatus) -> WorkCompletion {
        WorkCompletion {
            status,
            ..WorkCompletion::flushed(7, WcOpcode::Recv, 0x11)
        }
    }

    /// The endpoint with one CQ, and what `take_cq_events` reports.
    fn fired(ep: &mut Endpoint) -> Vec<(u32, CqFired)> {
        let mut out = Vec::new();
        ep.take_cq_events(|h, f| out.push((h, f)));
        out
    }

    fn push(ep: &mut Endpoint, h: u32, status: WcStatus, solicited: bool) {
        ep.cqs
            .get_mut(&h)
            .unwrap()
            .push_solicited(wc(status), solicited);
    }

    #[test]
    fn an_arm_fires_once_for_the_next_completion() {
        let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
        let h = ep.create_cq(8).unwrap();
        push(&mut ep, h, WcStatus::Success, false);
        ep.req_notify_cq(h, false).unwrap();
        assert!(
            fired(&mut ep).is_empty(),
            "a queued completion fires nothing"
        );
        push(&mut ep, h, WcStatus::Success, false);
        let notify = CqFired {
            notify: true,
            watch: false,
        };
        assert_eq!(fired(&mut ep), [(h, notify)]);
        push(&mut ep, h, WcStatus::Success, false);
        assert!(fired(&mut ep).is_empty(), "once per arm");
        assert!(ep.cq_armed.is_empty());
    }

    #[test]
    fn solicited_only_waits_for_se_or_an_error() {
        let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
        let h = ep.create_cq(8).unwrap();
        ep.req_notify_cq(h, true).unwrap();
        push(&mut ep, h, WcStatus::Success, false);
        assert!(fired(&mut ep).is_empty());
        push(&mut ep, h, WcStatus::Success, true);
        assert_eq!(fired(&mut ep).len(), 1);
        ep.req_notify_cq(h, true).unwrap();
        push(&mut ep, h, WcStatus::WrFlushErr, false);
        assert_eq!(fired(&mut ep).len(), 1);
        // Next wins over Solicited when both are asked.
        ep.req_notify_cq(h, true).unwrap();
        ep.req_notify_cq(h, false).unwrap();
        push(&mut ep, h, WcStatus::Success, false);
        assert_eq!(fired(&mut ep).len(), 1);
    }

    #[test]
    fn a_watch_fires_unless_completions_wait() {
        let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
        let h = ep.create_cq(8).unwrap();
        assert!(!ep.watch_cq(h).unwrap());
        push(&mut ep, h, WcStatus::Success, false);
        let watch = CqFired {
            notify: false,
            watch: true,
        };
        assert_eq!(fired(&mut ep), [(h, watch)]);
        assert!(ep.watch_cq(h).unwrap(), "one is queued");
        assert!(matches!(ep.watch_cq(99), Err(VerbsError::NoSuchCq(99))));
    }
}
