//! The DCQCN paper's experiments, as shipped (`scenarios/dcqcn-*.toml`),
//! judged by the simulator's goals rather than by the figures they happen
//! to give: two flows converge to a fair share; an N:1 incast keeps its
//! queue near Kmax and shares fairly; DCQCN removes PFC's pause storm and
//! gives the victim flow its throughput back. The shipped scenarios use
//! the paper's settings; with mlx5's defaults the goals are not met (the
//! README gives both), which `mlx5_collapses_in_incast` pins down.

use super::run_toml;
use crate::Report;

/// Kmax of the shipped scenarios.
const KMAX: u64 = 204_800;
/// Time the incasts are given to settle before they are judged, us.
const SETTLE_US: f64 = 3000.0;
const END_US: f64 = 10_000.0;

fn mode(text: &str, mode: &str) -> String {
    text.replace("mode = \"paper\"", &format!("mode = \"{mode}\""))
}

#[test]
fn two_flows_converge_to_a_fair_share() {
    let r = run_toml(include_str!("../../scenarios/dcqcn-two-flows.toml"));
    // The second flow joins at 2 ms; fair from then on, within 2 ms.
    let fair = r
        .fair_from(0.95, 200.0)
        .expect("the two flows never settled fair");
    assert!(fair < 4000.0, "fair only from {fair} us");
    assert!(r.jain_between(4000.0, END_US) >= 0.95);
    let total: f64 = r.rates_between(4000.0, END_US).iter().sum();
    assert!(total > 90.0, "the link is left idle: {total:.1} Gb/s");
}

/// Runs an incast scenario in `mode` and gives its settled figures.
fn incast(text: &str, m: &str) -> (Report, f64, u64) {
    let r = run_toml(&mode(text, m));
    let jain = r.jain_between(SETTLE_US, END_US);
    let q = r.queue_p99_between(SETTLE_US, END_US);
    (r, jain, q)
}

fn incast_goals(text: &str) {
    let (on, jain, q) = incast(text, "paper");
    assert!(jain >= 0.95, "DCQCN: Jain {jain:.3}\n{}", on.summary());
    assert!(q <= KMAX * 3 / 2, "DCQCN: p99 queue {q} bytes, Kmax {KMAX}");
    let (off, _, q_off) = incast(text, "off");
    assert!(q_off > 4 * KMAX, "PFC alone: p99 queue {q_off}");
    assert!(
        on.pause_frames < off.pause_frames,
        "pauses: {} with DCQCN, {} without",
        on.pause_frames,
        off.pause_frames
    );
}

#[test]
fn incast_8() {
    incast_goals(include_str!("../../scenarios/dcqcn-incast8.toml"));
}

#[test]
fn incast_16() {
    incast_goals(include_str!("../../scenarios/dcqcn-incast16.toml"));
}

#[test]
fn incast_64() {
    incast_goals(include_str!("../../scenarios/dcqcn-incast64.toml"));
}

#[test]
fn mlx5_collapses_in_incast() {
    // With mlx5's defaults (a cut every 4 us while the queue drains, and a
    // 5 Mb/s additive increase every 300 us) the 8:1 incast's senders end
    // far below their fair share of 12.5 Gb/s.
    let (r, _, _) = incast(include_str!("../../scenarios/dcqcn-incast8.toml"), "mlx5");
    let total: f64 = r.rates_between(SETTLE_US, END_US).iter().sum();
    assert!(
        total < 10.0,
        "mlx5 carried {total:.1} Gb/s:\n{}",
        r.summary()
    );
}

#[test]
fn dcqcn_spares_the_victim_flow() {
    let text = include_str!("../../scenarios/dcqcn-pfc-victim.toml");
    let on = run_toml(text);
    let off = run_toml(&mode(text, "off"));
    let victim = |r: &Report| r.flows[5].wire_gbps;
    // PFC alone: the victim is paused with the incast (below the 20 Gb/s
    // the incast's senders would have at a fair share)...
    assert!(victim(&off) < 20.0, "victim {:.1}", victim(&off));
    // ...DCQCN gives it most of what the incast leaves (60 Gb/s), once
    // the paper's slow additive increase has brought it back (judged over
    // the last 30 ms of 50).
    let late = |r: &Report| r.rates_between(20_000.0, r.duration_us)[5];
    assert!(late(&on) > 45.0, "victim {:.1} Gb/s late", late(&on));
    assert!(late(&off) < 20.0, "victim {:.1} Gb/s late", late(&off));
    assert!(
        on.pause_frames * 10 < off.pause_frames,
        "pauses: {} with DCQCN, {} without",
        on.pause_frames,
        off.pause_frames
    );
    assert!(on.pause_us * 10.0 < off.pause_us);
}
