//! The reaction point alone, on a fake clock, against values worked out by
//! hand from the paper's formulas (see the module docs of `dcqcn`).

use core::time::Duration;

use super::{Dcqcn, DcqcnConfig};
use crate::time::Instant;

fn us(n: u64) -> Instant {
    Instant::from_nanos(n * 1000)
}

/// Round numbers: alpha starts at 1, g = 1020/1024 (the paper's 1/256),
/// both timers every 55 µs, F = 2, R_AI = 40, R_HAI = 400, no floor on
/// a cut but the rate's, a cut on every CNP.
fn cfg() -> DcqcnConfig {
    DcqcnConfig {
        rpg_time_reset: Duration::from_micros(55),
        rpg_byte_reset: 1000,
        rpg_threshold: 2,
        rpg_ai_rate: 40,
        rpg_hai_rate: 400,
        rpg_gd: 11,
        rpg_min_dec_fac: 0,
        rpg_min_rate: 1,
        rate_to_set_on_first_cnp: 0,
        dce_tcp_g: 1020,
        dce_tcp_rtt: Duration::from_micros(55),
        initial_alpha_value: 1024,
        rate_reduce_monitor_period: Duration::ZERO,
    }
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} != {b}");
}

#[test]
fn cut_fast_recovery_additive_and_hyper_increase() {
    let mut d = Dcqcn::new(cfg(), 40_000);
    assert!(!d.limited());
    close(d.rate(), 40_000.0);
    // First CNP: alpha = 1, RT = RC = 40000, RC = 40000 (1 - 1/2).
    d.on_cnp(us(0));
    close(d.rate(), 20_000.0);
    close(d.target(), 40_000.0);
    // Second CNP before any alpha update: RT = 20000, RC = 10000; the
    // increase timer starts again (due at 65 µs).
    d.on_cnp(us(10));
    close(d.rate(), 10_000.0);
    close(d.target(), 20_000.0);
    // 55 µs: alpha update with a CNP in the period: g + (1 - g) = 1.
    d.advance(us(55));
    close(d.alpha(), 1.0);
    // 65 µs: T = 1 <= F, fast recovery: (20000 + 10000) / 2.
    d.advance(us(65));
    close(d.rate(), 15_000.0);
    // 110 µs: no CNP in the period: alpha = g. 120 µs: T = 2, recovery.
    d.advance(us(120));
    let g = 1020.0 / 1024.0;
    close(d.alpha(), g);
    close(d.rate(), 17_500.0);
    // 175 µs: T = 3 > F, BC = 0: additive increase.
    d.advance(us(175));
    close(d.target(), 20_040.0);
    close(d.rate(), 18_770.0);
    close(d.alpha(), g * g);
    // 3000 bytes: BC = 1 and 2 additive, BC = 3 (both past F) hyper
    // increase by (3 - 2) R_HAI.
    d.on_sent(us(176), 3000);
    close(d.target(), 20_120.0 + 400.0);
    close(
        d.rate(),
        (20_520.0 + (20_120.0 + (20_080.0 + 18_770.0) / 2.0) / 2.0) / 2.0,
    );
    // A third CNP at 200 µs cuts by the alpha of then, g^2.
    let rc = d.rate();
    d.on_cnp(us(200));
    close(d.target(), rc);
    close(d.rate(), rc * (1.0 - g * g / 2.0));
    assert_eq!(d.counts(), (3, 3));
}

#[test]
fn a_cut_keeps_min_dec_fac_and_min_rate() {
    let mut c = cfg();
    c.rpg_gd = 10; // alpha = 1 would cut to 0
    c.rpg_min_dec_fac = 50;
    c.rpg_min_rate = 3000;
    let mut d = Dcqcn::new(c, 10_000);
    d.on_cnp(us(0));
    close(d.rate(), 5_000.0);
    d.on_cnp(us(1));
    close(d.rate(), 3_000.0);
    d.on_cnp(us(2));
    close(d.rate(), 3_000.0);
}

#[test]
fn one_cut_per_monitor_period_but_every_cnp_counts() {
    let mut c = cfg();
    c.rate_reduce_monitor_period = Duration::from_micros(4);
    let mut d = Dcqcn::new(c, 40_000);
    d.on_cnp(us(0));
    d.on_cnp(us(1));
    d.on_cnp(us(3));
    close(d.rate(), 20_000.0);
    d.on_cnp(us(4));
    close(d.rate(), 10_000.0);
    assert_eq!(d.counts(), (4, 2));
}

#[test]
fn first_cnp_can_set_a_rate() {
    let mut c = cfg();
    c.rate_to_set_on_first_cnp = 1_000;
    let mut d = Dcqcn::new(c, 40_000);
    d.on_cnp(us(0));
    close(d.rate(), 1_000.0);
    close(d.target(), 1_000.0);
}

#[test]
fn the_rate_returns_to_line_rate_and_stops_being_limited() {
    let mut d = Dcqcn::new(DcqcnConfig::MLX5, 100_000);
    d.on_cnp(us(0));
    assert!(d.limited());
    assert!(d.rate() < 51_000.0, "{}", d.rate());
    d.advance(Instant::from_nanos(1_000_000_000));
    assert!(!d.limited());
    close(d.rate(), 100_000.0);
    // The next CNP starts a new episode from initial_alpha_value.
    d.on_cnp(Instant::from_nanos(1_000_000_000));
    close(d.alpha(), 1023.0 / 1024.0);
}

#[test]
fn catching_up_at_once_equals_stepping_each_microsecond() {
    let mut a = Dcqcn::new(DcqcnConfig::MLX5, 25_000);
    let mut b = a.clone();
    for d in [&mut a, &mut b] {
        d.on_cnp(us(0));
        d.on_cnp(us(5));
    }
    for t in 1..=2_000 {
        b.advance(us(t));
    }
    a.advance(us(2_000));
    close(a.rate(), b.rate());
    close(a.target(), b.target());
    assert!((a.alpha() - b.alpha()).abs() < 1e-9);
    // The timer fired 6 times by 2 ms (every 300 µs from 305 µs), with
    // F = 1: one fast recovery, then 5 additive steps of 5 Mb/s on the
    // target the second cut left, the rate after the first.
    close(a.target(), 25_000.0 * (1.0 - 1023.0 / 2048.0) + 25.0);
    assert!(a.rate() < a.target());
}
