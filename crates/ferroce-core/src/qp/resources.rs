//! The responder's resources (IBA 9.7.5.1.4, rxe's `resp_res`): a record of
//! the last READ and atomic requests it served, as many as the QP's
//! negotiated `max_dest_rd_atomic` (at least one), so that a duplicate is
//! answered from what was served and nothing else:
//!
//! * a duplicate READ is served again only if its PSN falls in a recorded
//!   READ's PSN range, with the same R_Key and a range of bytes inside the
//!   original one (a requester resuming after a lost response asks for the
//!   rest, from the missing PSN);
//! * a duplicate atomic is answered with the recorded original value, never
//!   executed twice, and a duplicate ATOMIC WRITE is answered, never placed
//!   twice;
//! * any other duplicate READ or atomic is dropped and counted (IBA's class
//!   D: a request the responder holds no resources for), as rxe drops it.
//!
//! The record also bounds the responder's outgoing work: each READ or atomic
//! response owed refers to a record, and at most one is queued per record.

use std::collections::VecDeque;

use ferroce_wire::Psn;

/// One READ or atomic request served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// The request's PSN (a READ's first response PSN).
    pub(crate) psn: Psn,
    pub(crate) kind: ServedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServedKind {
    Read {
        /// The PSN of its last response packet.
        last_psn: Psn,
        rkey: u32,
        va: u64,
        len: u32,
    },
    Atomic {
        /// The value the target held before (what the ACK returns).
        orig: u64,
    },
    /// An ATOMIC WRITE placed or a FLUSH done, answered with an empty READ
    /// RESPONSE: a duplicate is answered again, not executed again (a
    /// later WRITE to the same bytes must not be undone).
    Empty,
}

/// The records, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Resources {
    served: VecDeque<Served>,
}

impl Resources {
    /// Records a request served, forgetting the oldest beyond `capacity`
    /// (rxe likewise reuses its oldest resource).
    pub(crate) fn record(&mut self, capacity: usize, served: Served) {
        while self.served.len() >= capacity.max(1) {
            self.served.pop_front();
        }
        self.served.push_back(served);
    }

    /// The READ whose response PSNs include `psn`.
    pub(crate) fn read_at(&self, psn: Psn) -> Option<Served> {
        self.served.iter().copied().find(|s| match s.kind {
            ServedKind::Read { last_psn, .. } => {
                psn.distance(s.psn) >= 0 && psn.distance(last_psn) <= 0
            }
            ServedKind::Atomic { .. } | ServedKind::Empty => false,
        })
    }

    /// Whether the ATOMIC WRITE or FLUSH at `psn` was served.
    pub(crate) fn answered_empty_at(&self, psn: Psn) -> bool {
        self.served
            .iter()
            .any(|s| s.psn == psn && s.kind == ServedKind::Empty)
    }

    /// The original value of the atomic at `psn`.
    pub(crate) fn atomic_at(&self, psn: Psn) -> Option<u64> {
        self.served.iter().find_map(|s| match s.kind {
            ServedKind::Atomic { orig } if s.psn == psn => Some(orig),
            _ => None,
        })
    }

    /// How many requests are recorded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.served.len()
    }
}

/// Whether a duplicate READ at `psn` asking for `len` bytes at `va` under
/// `rkey` asks for part of what `read` (recorded at `first`) served: the
/// same R_Key, bytes inside the original ones (rxe's check), and also the
/// bytes that belong at that PSN (the original's offset of the packet at
/// `psn`, at `mtu` bytes a packet) and no PSN past the original's last. A
/// requester resuming after a lost response asks exactly for that; any
/// other request would put other bytes, or more packets, at those PSNs.
pub(crate) fn within(read: &Served, psn: Psn, rkey: u32, va: u64, len: u32, mtu: usize) -> bool {
    let ServedKind::Read {
        last_psn,
        rkey: r,
        va: start,
        len: total,
    } = read.kind
    else {
        return false;
    };
    let (Ok(skipped), Ok(mtu)) = (u64::try_from(psn.distance(read.psn)), u64::try_from(mtu)) else {
        return false;
    };
    let end = start.saturating_add(u64::from(total));
    let npkts = u64::from(len).div_ceil(mtu).max(1);
    let last = skipped + npkts - 1;
    let span = u64::try_from(last_psn.distance(read.psn)).unwrap_or(0);
    r == rkey
        && va == start.saturating_add(skipped * mtu)
        && va.checked_add(u64::from(len)).is_some_and(|e| e <= end)
        && last <= span
}
