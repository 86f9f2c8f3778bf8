//! A QP's pacer: releases its request packets at the reaction point's
//! current rate. Sans-IO: it answers "may a packet go now, and if not,
//! when", and the endpoint files that instant in its timer heap, so a held
//! QP costs no polling.
//!
//! A QP that has sent nothing for a while may send a burst of up to
//! [`BURST_CREDIT`] bytes at once (the I/O layer wakes late by tens of
//! microseconds, and sends 64 KiB trains); past that, packets leave one
//! per `bytes / rate`.

use crate::time::Instant;

/// The most a paced QP sends back to back after an idle spell.
pub(crate) const BURST_CREDIT: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pacer {
    /// When the next packet may leave.
    next: Instant,
}

/// Nanoseconds `bytes` take at `rate_mbps`.
fn nanos(bytes: u64, rate_mbps: f64) -> u64 {
    // bits / (Mb/s) = µs; 1000 ns each.
    (bytes as f64 * 8.0 * 1000.0 / rate_mbps.max(1e-3)).ceil() as u64
}

impl Pacer {
    /// When a packet may leave: now, or the instant returned.
    pub(crate) fn wait(&self, now: Instant) -> Option<Instant> {
        (self.next > now).then_some(self.next)
    }

    /// A packet of `bytes` left at `now` while the rate is `rate_mbps`.
    pub(crate) fn sent(&mut self, now: Instant, bytes: u64, rate_mbps: f64) {
        let credit = nanos(BURST_CREDIT, rate_mbps);
        let earliest = now.as_nanos().saturating_sub(credit);
        let start = self.next.as_nanos().max(earliest);
        self.next = Instant::from_nanos(start + nanos(bytes, rate_mbps));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_at_the_rate_after_the_burst_credit() {
        let mut p = Pacer::default();
        let now = Instant::from_nanos(10_000_000);
        // 1000 Mb/s: a 4096-byte packet takes 32.768 µs.
        let mut sent = 0;
        while p.wait(now).is_none() {
            p.sent(now, 4096, 1000.0);
            sent += 1;
        }
        assert_eq!(sent, BURST_CREDIT / 4096 + 1);
        let at = p.wait(now).unwrap();
        assert_eq!(at.as_nanos() - now.as_nanos(), 32_768);
        // From then on, one packet per 32.768 µs.
        p.sent(at, 4096, 1000.0);
        assert_eq!(p.wait(at).unwrap().as_nanos() - at.as_nanos(), 32_768);
    }
}
