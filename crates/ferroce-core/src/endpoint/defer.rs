//! Packets set aside because the application holds a region they need.
//!
//! The engine never waits for a region's lock (the driver holds the engine
//! while it works, so waiting would stall every QP for one application
//! scan). A packet that would write a region the application is reading or
//! writing, or read one it is writing, is kept, untouched, in a small
//! queue of its QP; the QP's later packets queue behind it, so that the QP
//! still takes them in order. The queues are tried again every
//! [`RETRY_AFTER`] (through [`Endpoint::poll_timeout`]) until the region is
//! free. A queue holds at most [`MAX_DEFERRED`] packets, and all queues
//! together [`MAX_DEFERRED_TOTAL`] (so that many QPs on one held region
//! cannot make the endpoint keep a peer's flood); past either a packet is
//! dropped unexecuted ([`crate::Stats::rx_deferred_dropped`]), which an RC
//! peer recovers as a loss (a PSN gap, then go-back-N).

use std::collections::VecDeque;
use std::net::IpAddr;

use super::Endpoint;
use super::Grh;
use crate::time::Instant;

/// How long a deferred packet waits before it is tried again.
pub(crate) const RETRY_AFTER: core::time::Duration = core::time::Duration::from_micros(50);

/// Packets deferred per QP at most (a 256 KiB message at MTU 4096).
pub const MAX_DEFERRED: usize = 64;

/// Packets deferred over all QPs at most (4 MiB at MTU 4096, as many as
/// the endpoint keeps in flight).
pub const MAX_DEFERRED_TOTAL: usize = 1024;

/// A QP's deferred packets, in arrival order.
pub(super) type Queue = VecDeque<(IpAddr, Option<Box<Grh>>, Vec<u8>)>;

impl Endpoint {
    /// Whether QP `qpn` has packets set aside, which a new one must follow.
    pub(super) fn is_deferring(&self, qpn: u32) -> bool {
        self.deferred.contains_key(&qpn)
    }

    /// Sets a packet for QP `qpn` aside, or drops it past the bound.
    pub(super) fn defer(
        &mut self,
        now: Instant,
        qpn: u32,
        from: IpAddr,
        grh: Option<&Grh>,
        data: &[u8],
    ) {
        let total = self.deferred_total;
        let queue = self.deferred.entry(qpn).or_default();
        if queue.len() >= MAX_DEFERRED || total >= MAX_DEFERRED_TOTAL {
            self.stats.rx_deferred_dropped += 1;
            return;
        }
        queue.push_back((from, grh.map(|g| Box::new(*g)), data.to_vec()));
        self.deferred_total += 1;
        self.stats.rx_deferred += 1;
        self.defer_retry_at.get_or_insert(now.after(RETRY_AFTER));
    }

    /// Forgets the packets set aside for a QP destroyed.
    pub(super) fn forget_deferred(&mut self, qpn: u32) {
        if let Some(queue) = self.deferred.remove(&qpn) {
            self.deferred_total -= queue.len();
        }
    }

    /// When the deferred packets are next tried.
    pub(super) fn deferred_due(&self) -> Option<Instant> {
        self.defer_retry_at
    }

    /// Tries the deferred packets again, each QP's in order, up to the
    /// first whose region is still held.
    pub(super) fn retry_deferred(&mut self, now: Instant) {
        if self.defer_retry_at.is_none_or(|t| t > now) {
            return;
        }
        self.defer_retry_at = None;
        let qpns: Vec<u32> = self.deferred.keys().copied().collect();
        for qpn in qpns {
            let Some(mut queue) = self.deferred.remove(&qpn) else {
                continue;
            };
            self.deferred_total -= queue.len();
            while let Some((from, grh, data)) = queue.pop_front() {
                self.receive(now, from, grh.as_deref(), super::Ecn::NotEct, &data);
                if self.is_deferring(qpn) {
                    // Still held: the rest stay behind it, in order.
                    if let Some(q) = self.deferred.get_mut(&qpn) {
                        self.deferred_total += queue.len();
                        q.extend(queue.drain(..));
                    }
                    break;
                }
            }
        }
    }
}
