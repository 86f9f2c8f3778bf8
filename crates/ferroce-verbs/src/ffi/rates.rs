//! The static rate helpers of `<infiniband/verbs.h>`: `ibv_rate_to_mult`,
//! `mult_to_ibv_rate`, `ibv_rate_to_mbps`, `mbps_to_ibv_rate`. Pure
//! functions over one table (the header's `enum ibv_rate`, each rate's
//! multiple of 2.5 Gb/s where IBA defines one, and its data rate in Mb/s
//! as rdma-core gives it, after line coding).

use std::ffi::c_int;

/// `IBV_RATE_MAX`: what the inverse lookups give for a value of no rate.
const RATE_MAX: c_int = 0;

/// (`enum ibv_rate`, multiple of 2.5 Gb/s or -1, Mb/s).
const RATES: [(c_int, c_int, c_int); 23] = [
    (2, 1, 2_500),        // IBV_RATE_2_5_GBPS
    (5, 2, 5_000),        // IBV_RATE_5_GBPS
    (3, 4, 10_000),       // IBV_RATE_10_GBPS
    (6, 8, 20_000),       // IBV_RATE_20_GBPS
    (4, 12, 30_000),      // IBV_RATE_30_GBPS
    (7, 16, 40_000),      // IBV_RATE_40_GBPS
    (8, 24, 60_000),      // IBV_RATE_60_GBPS
    (9, 32, 80_000),      // IBV_RATE_80_GBPS
    (10, 48, 120_000),    // IBV_RATE_120_GBPS
    (11, -1, 14_062),     // IBV_RATE_14_GBPS (FDR, 64b/66b)
    (12, -1, 56_250),     // IBV_RATE_56_GBPS
    (13, -1, 112_500),    // IBV_RATE_112_GBPS
    (14, -1, 168_750),    // IBV_RATE_168_GBPS
    (15, -1, 25_781),     // IBV_RATE_25_GBPS (EDR lane)
    (16, -1, 103_125),    // IBV_RATE_100_GBPS
    (17, -1, 206_250),    // IBV_RATE_200_GBPS
    (18, -1, 309_375),    // IBV_RATE_300_GBPS
    (19, 11, 28_125),     // IBV_RATE_28_GBPS
    (20, 20, 53_125),     // IBV_RATE_50_GBPS
    (21, 160, 425_000),   // IBV_RATE_400_GBPS
    (22, 240, 637_500),   // IBV_RATE_600_GBPS
    (23, 320, 850_000),   // IBV_RATE_800_GBPS
    (24, 480, 1_275_000), // IBV_RATE_1200_GBPS
];

/// `ibv_rate_to_mult`: the rate as a multiple of 2.5 Gb/s, or -1.
pub(super) extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

/// `mult_to_ibv_rate`: the rate of that multiple, or `IBV_RATE_MAX`.
pub(super) extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult > 0)
        .map_or(RATE_MAX, |r| r.0)
}

/// `ibv_rate_to_mbps`: the rate in Mb/s, or -1.
pub(super) extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

/// `mbps_to_ibv_rate`: the rate of exactly that many Mb/s, or
/// `IBV_RATE_MAX`.
pub(super) extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(RATE_MAX, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rate_maps_both_ways() {
        for (rate, mult, mbps) in RATES {
            assert_eq!(ibv_rate_to_mbps(rate), mbps);
            assert_eq!(mbps_to_ibv_rate(mbps), rate);
            assert_eq!(ibv_rate_to_mult(rate), mult);
            if mult > 0 {
                assert_eq!(mult_to_ibv_rate(mult), rate);
            }
        }
        assert_eq!((ibv_rate_to_mbps(0), ibv_rate_to_mult(99)), (-1, -1));
        assert_eq!((mbps_to_ibv_rate(1), mult_to_ibv_rate(-1)), (0, 0));
    }
}
