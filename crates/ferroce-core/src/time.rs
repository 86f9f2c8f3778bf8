//! Time as the engine sees it: a point on a clock the caller owns. The core
//! never reads a clock; every input carries `now`.

use core::time::Duration;

/// Nanoseconds since an epoch of the caller's choosing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch itself.
    pub const ZERO: Self = Self(0);

    /// The instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(ns)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self + d`, saturating.
    pub fn after(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(d.as_nanos().min(u128::from(u64::MAX)) as u64),
        )
    }
    /// Time from `earlier` to `self` (zero if `earlier` is later).
    pub fn since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// The local ACK timeout for an attribute value: 4.096 us x 2^timeout
/// (IBA vol. 1 §9.7.6.1.3); 0 means never.
pub fn local_ack_timeout(code: u8) -> Option<Duration> {
    if code == 0 {
        None
    } else {
        Some(Duration::from_nanos(4096u64 << code.min(31)))
    }
}
