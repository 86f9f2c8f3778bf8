//! A QP's pacer: releases its request packets at the reaction point's
//! current rate. Sans-IO: it answers "may a packet go now, and if not,
//! when", and the endpoint files that instant in its timer heap, so a held
//! QP costs no polling.
//!
//! A token bucket: a QP that has sent nothing for a while may send a
//! burst of up to [`BURST_CREDIT`] bytes at once (the I/O layer wakes late
//! by tens of microseconds, and sends 64 KiB trains); past that, packets
//! leave one per `bytes / rate`.

use crate::time::Instant;

/// The most a paced QP sends back to back after an idle spell.
pub(crate) const BURST_CREDIT: u64 = 64 * 1024;

/// A token bucket of bytes, filled at the rate, holding at most
/// [`BURST_CREDIT`]; a packet may leave while the bucket is not empty
/// (and may take it below zero, to be paid back before the next).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacer {
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Option<Instant>,
}

impl Default for Pacer {
    fn default() -> Self {
        Self {
            tokens: BURST_CREDIT as f64,
            at: None,
        }
    }
}

/// Bytes per nanosecond at `rate_mbps`.
fn bytes_per_ns(rate_mbps: f64) -> f64 {
    rate_mbps.max(1e-3) / 8000.0
}

impl Pacer {
    fn refill(&mut self, now: Instant, rate_mbps: f64) {
        if let Some(at) = self.at {
            let ns = now.as_nanos().saturating_sub(at.as_nanos()) as f64;
            self.tokens = (self.tokens + ns * bytes_per_ns(rate_mbps)).min(BURST_CREDIT as f64);
        }
        self.at = Some(now);
    }

    /// When a packet may leave at `rate_mbps`: now (`None`), or the
    /// instant returned.
    pub(crate) fn wait(&mut self, now: Instant, rate_mbps: f64) -> Option<Instant> {
        self.refill(now, rate_mbps);
        if self.tokens > 0.0 {
            return None;
        }
        let ns = (-self.tokens / bytes_per_ns(rate_mbps)).ceil() as u64 + 1;
        Some(Instant::from_nanos(now.as_nanos() + ns))
    }

    /// A packet of `bytes` left at `now` while the rate is `rate_mbps`.
    pub(crate) fn sent(&mut self, now: Instant, bytes: u64, rate_mbps: f64) {
        self.refill(now, rate_mbps);
        self.tokens -= bytes as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_at_the_rate_after_the_burst_credit() {
        let mut p = Pacer::default();
        let now = Instant::ZERO;
        // 1000 Mb/s: a 4096-byte packet takes 32.768 µs.
        let mut sent = 0;
        while p.wait(now, 1000.0).is_none() {
            p.sent(now, 4096, 1000.0);
            sent += 1;
        }
        assert_eq!(sent, BURST_CREDIT / 4096);
        // The bucket is empty: the next packet waits one packet's time.
        let at = p.wait(now, 1000.0).unwrap();
        assert_eq!(at.as_nanos() - now.as_nanos(), 1);
        p.sent(at, 4096, 1000.0);
        let next = p.wait(at, 1000.0).unwrap();
        assert_eq!(next.as_nanos() - at.as_nanos(), 32_768);
        // From then on, one packet per 32.768 µs.
        p.sent(next, 4096, 1000.0);
        let after = p.wait(next, 1000.0).unwrap();
        assert_eq!(after.as_nanos() - next.as_nanos(), 32_768);
        // Idle for a second: the credit is back, capped at the burst.
        let later = Instant::from_nanos(1_000_000_000);
        assert!(p.wait(later, 1000.0).is_none());
        p.sent(later, BURST_CREDIT, 1000.0);
        assert!(p.wait(later, 1000.0).is_some());
    }
}
