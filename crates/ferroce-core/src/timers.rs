//! The endpoint's QP timers (retransmission, the end of an RNR wait) in a
//! min-heap, so that finding the next one does not visit every QP.
//!
//! The contract: a QP files its deadline whenever it becomes earlier than
//! the one it has in the heap (`filed`, kept in the QP); a later or
//! cancelled deadline is not filed at once. An entry that reaches the top
//! is checked against its QP: gone, superseded by an earlier entry, or
//! moved, it is dropped (and a moved deadline filed again). So the heap
//! holds at most a few entries per QP, and each change of a QP's timer
//! costs O(log n) at most.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Instant;

/// QP deadlines, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Timers(BinaryHeap<Reverse<(Instant, u32)>>);

impl Timers {
    /// Files QP `qpn`'s `deadline` if it is earlier than the one `filed`
    /// says the heap holds for it.
    pub(crate) fn file(
        &mut self,
        qpn: u32,
        deadline: Option<Instant>,
        filed: &mut Option<Instant>,
    ) {
        if let Some(d) = deadline
            && filed.is_none_or(|f| d < f)
        {
            *filed = Some(d);
            self.0.push(Reverse((d, qpn)));
        }
    }

    /// The earliest entry: its deadline and QP.
    pub(crate) fn peek(&self) -> Option<(Instant, u32)> {
        self.0.peek().map(|&Reverse(e)| e)
    }

    /// Drops the earliest entry.
    pub(crate) fn pop(&mut self) {
        self.0.pop();
    }

    /// Takes out every entry due at `now`, earliest first.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<(Instant, u32)> {
        let mut due = Vec::new();
        while let Some((t, qpn)) = self.peek() {
            if t > now {
                break;
            }
            self.0.pop();
            due.push((t, qpn));
        }
        due
    }
}
