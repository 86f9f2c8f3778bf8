//! 24-bit packet sequence numbers with serial-number arithmetic.
//!
//! IBA vol. 1 §9.7.1: PSNs are 24 bits and wrap; "later than" is judged within
//! half the sequence space (2^23), as the kernel's rxe `psn_compare` does by
//! shifting the difference into the top 24 bits of an `i32`. Never compare bare
//! PSN integers with `<`: use [`Psn::cmp_serial`] or [`Psn::distance`].

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, Sub};

/// A 24-bit PSN. The constructor masks to 24 bits, so every value is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// The PSN mask: 24 bits.
    pub const MASK: u32 = 0x00ff_ffff;
    /// Half the sequence space; PSNs further apart than this are ambiguous.
    pub const HALF: u32 = 0x0080_0000;

    /// Builds a PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Self {
        Self(v & Self::MASK)
    }

    /// The PSN as an integer in `0..2^24`.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// The signed distance from `other` to `self` (`self - other`) in
    /// `-2^23 .. 2^23`.
    pub const fn distance(self, other: Self) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back: the
        // sign of the result is the serial-number order.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Serial-number order: `Greater` when `self` is later than `other`.
    pub const fn cmp_serial(self, other: Self) -> Ordering {
        let d = self.distance(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// The next PSN, wrapping from 0xFFFFFF to 0.
    pub const fn next(self) -> Self {
        Self::new(self.0.wrapping_add(1))
    }

    /// Whether `self` lies in the window `[start, start + len)`, modulo 2^24.
    pub const fn in_window(self, start: Self, len: u32) -> bool {
        (self.0.wrapping_sub(start.0) & Self::MASK) < len
    }
}

impl Add<u32> for Psn {
    type Output = Self;
    fn add(self, rhs: u32) -> Self {
        Self::new(self.0.wrapping_add(rhs))
    }
}

impl Sub<u32> for Psn {
    type Output = Self;
    fn sub(self, rhs: u32) -> Self {
        Self::new(self.0.wrapping_sub(rhs))
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(0xff_ffff).next(), Psn::new(0));
        assert_eq!(Psn::new(0x1ff_ffff).value(), 0xff_ffff);
        assert_eq!(Psn::new(0) - 1, Psn::new(0xff_ffff));
    }

    #[test]
    fn serial_order_across_wrap() {
        assert_eq!(
            Psn::new(0).cmp_serial(Psn::new(0xff_ffff)),
            Ordering::Greater
        );
        assert_eq!(Psn::new(0xff_fff0).cmp_serial(Psn::new(5)), Ordering::Less);
        assert_eq!(Psn::new(7).distance(Psn::new(0xff_fffe)), 9);
        assert_eq!(Psn::new(0x7f_ffff).distance(Psn::new(0)), 0x7f_ffff);
        assert_eq!(Psn::new(0x80_0000).distance(Psn::new(0)), -0x80_0000);
    }

    #[test]
    fn window() {
        assert!(Psn::new(2).in_window(Psn::new(0xff_fffe), 8));
        assert!(!Psn::new(6).in_window(Psn::new(0xff_fffe), 8));
    }

    proptest! {
        // Differential test against the spec's definition: b is later than a
        // iff (b - a) mod 2^24 is in 1 .. 2^23.
        #[test]
        fn matches_modular_definition(a in 0u32..1 << 24, d in 0u32..1 << 24) {
            let pa = Psn::new(a);
            let pb = pa + d;
            let expect = if d == 0 {
                Ordering::Equal
            } else if d < Psn::HALF {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            prop_assert_eq!(pb.cmp_serial(pa), expect);
            prop_assert_eq!(pb - d, pa);
        }
    }
}
