//! The `[congestion]` table reaches the engines: modes, overrides, the
//! line rate from the host's link; CNPs counted as they cross the fabric
//! and travel on their own priority.

use super::{INCAST_RED, paused_us, run_toml, scenario};
use crate::host::{cnp_priority, dscp_of, priority_of};

fn with(extra: &str) -> String {
    format!("{INCAST_RED}\n[congestion]\n{extra}\n")
}

#[test]
fn mode_off_sends_no_cnps() {
    let r = run_toml(&with("mode = \"off\""));
    assert_eq!(
        r.ce_marks, 0,
        "off sends Not-ECT packets, which RED leaves alone"
    );
    assert_eq!(r.cnps_sent + r.cnps_fabric + r.cnps_received, 0);
    assert!(
        r.series
            .dcqcn_rate_gbps
            .iter()
            .flatten()
            .all(|&g| g == 100.0)
    );
}

#[test]
fn mlx5_cnps_cross_the_fabric_and_cut_rates() {
    let r = run_toml(&with("mode = \"mlx5\""));
    assert!(r.ce_marks > 0 && r.cnps_sent > 0, "{}", r.summary());
    // One switch between every pair: each CNP crosses it once.
    assert_eq!(r.cnps_fabric, r.cnps_sent);
    assert_eq!(r.cnps_received, r.cnps_sent);
    let per_flow: u64 = r.flows.iter().map(|f| f.cnps).sum();
    assert_eq!(per_flow, r.cnps_received);
    // Per flow and sample: no sender takes more CNPs than its receiver sent.
    let s = &r.series;
    for (sent, taken) in s.flow_cnps_sent.iter().zip(&s.flow_cnps) {
        assert!(sent.iter().zip(taken).all(|(a, b)| a >= b));
        assert!(sent.last().is_some_and(|&n| n > 0));
    }
    assert!(r.rate_cuts > 0);
    let lowest = r
        .series
        .dcqcn_rate_gbps
        .iter()
        .flatten()
        .fold(f64::MAX, |a, &b| a.min(b));
    assert!(lowest < 100.0, "DCQCN never cut a rate: {lowest}");
}

#[test]
fn no_dcqcn_sends_cnps_but_never_cuts() {
    let r = run_toml(&with("mode = \"no-dcqcn\""));
    assert!(r.cnps_received > 0);
    assert_eq!(r.rate_cuts, 0);
}

#[test]
fn overrides_reach_the_engine() {
    // A cut that must leave 100 % of the rate: cuts are counted, the rate
    // never moves.
    let r = run_toml(&with("mode = \"mlx5\"\nrpg_min_dec_fac = 100"));
    assert!(r.rate_cuts > 0);
    assert!(
        r.series
            .dcqcn_rate_gbps
            .iter()
            .flatten()
            .all(|&g| g == 100.0)
    );
    // CNPs 100 us apart at most, per QP: fewer than the 4 us default gives.
    let spaced = run_toml(&with("min_time_between_cnps = 100"));
    let dense = run_toml(&with(""));
    assert!(
        spaced.cnps_sent < dense.cnps_sent,
        "{} vs {}",
        spaced.cnps_sent,
        dense.cnps_sent
    );
}

#[test]
fn line_rate_is_the_links() {
    let r = run_toml(&format!(
        "{}\n[link]\nrate_gbps = 25\n",
        with("mode = \"no-dcqcn\"")
    ));
    assert!(
        r.series
            .dcqcn_rate_gbps
            .iter()
            .flatten()
            .all(|&g| g == 25.0)
    );
}

#[test]
fn cnps_travel_on_their_own_priority() {
    let s = scenario(&with("cnp_dscp = 48"));
    let (hosts, _) = crate::host::build(&s, ports(&s)).expect("hosts");
    let receiver = &hosts[4];
    let cnp = cnp_priority(&receiver.ep).expect("CNPs are on");
    assert_eq!(cnp, 6, "DSCP 48 reads back as priority 6");
    assert_ne!(cnp, priority_of(dscp_of(s.priority) << 2), "not the data's");
    assert_eq!(
        receiver.cnp_priority,
        Some(cnp),
        "the NIC pulls CNPs while data is paused"
    );
    let e = crate::Scenario::from_toml(&with("cnp_dscp = 64")).expect_err("DSCP above 63");
    assert!(e.0.contains("cnp_dscp"), "{e}");
}

fn ports(s: &crate::Scenario) -> Vec<crate::port::Port> {
    let w = crate::topology::Wiring::build(s);
    (0..w.hosts)
        .map(|h| crate::sim::port_of(&w, crate::topology::NodeId::Host(h as u32), 0))
        .collect()
}

#[test]
fn unknown_congestion_field_is_refused() {
    let e = crate::Scenario::from_toml(&with("rpg_ai = 5")).expect_err("a typo");
    assert!(e.0.contains("rpg_ai"), "{e}");
}

#[test]
fn sampling_does_not_perturb_dcqcn() {
    // Sampling reads DCQCN through qp_congestion, which runs its timers up
    // to the sample's time: the run must not depend on when it looks.
    let a = run_toml(&with("mode = \"mlx5\""));
    let b = run_toml(&with("mode = \"mlx5\"").replace("sample_us = 5", "sample_us = 3"));
    assert!(a.rate_cuts > 0);
    assert_eq!(a.packet_events, b.packet_events);
    assert_eq!((a.cnps_sent, a.rate_cuts), (b.cnps_sent, b.rate_cuts));
    let bytes = |r: &crate::Report| r.flows.iter().map(|f| f.bytes_done).collect::<Vec<_>>();
    assert_eq!(bytes(&a), bytes(&b));
}

/// Host 4 receives two flows (whose marks make it send CNPs) and sends
/// into a 4:1 incast whose switch pauses it on the data's priority.
const PAUSED_RECEIVER: &str = r#"
duration_us = 1000
sample_us = 10
[topology]
kind = "incast"
senders = 6
[switch.red]
kmin_bytes = 5120
kmax_bytes = 204800
pmax = 0.01
at_dequeue = true
[switch.pfc]
xoff_bytes = 65536
xon_bytes = 32768
[congestion]
mode = "no-dcqcn"
cnp_dscp = 48
[[flow]]
src = 1
dst = 0
[[flow]]
src = 2
dst = 0
[[flow]]
src = 3
dst = 0
[[flow]]
src = 4
dst = 0
[[flow]]
src = 5
dst = 4
[[flow]]
src = 6
dst = 4
"#;

#[test]
fn cnps_on_their_priority_do_not_hold_back_a_paused_host() {
    // Pulling CNPs while host 4's data priority is paused must not make its
    // NIC hoard data ahead of its ACKs (a first version did, and the flows
    // into host 4 got half their rate): the flows into host 4 get the same
    // rate whether CNPs share the data's priority (DSCP 26) or not.
    let own = run_toml(PAUSED_RECEIVER);
    let shared = run_toml(&PAUSED_RECEIVER.replace("cnp_dscp = 48", "cnp_dscp = 26"));
    assert!(paused_us(&own, "h4") > 100.0, "host 4 was not paused");
    assert!(own.cnps_sent > 0);
    for f in [4, 5] {
        let (a, b) = (own.flows[f].wire_gbps, shared.flows[f].wire_gbps);
        assert!(
            a > 0.95 * b,
            "flow {f}: {a:.1} Gb/s with CNPs apart, {b:.1} shared"
        );
    }
}
