//! PFC: no drops where the buffer overflows without it, refreshes
//! bounded, dynamic thresholds, pause hop by hop and per priority.

use super::{paused_us, run_toml};

const INCAST_16: &str = r#"
duration_us = 400
[topology]
kind = "incast"
senders = 16
[workload]
sizes = [{ bytes = 65536, weight = 1.0 }]
[switch]
buffer_bytes = 1048576
"#;

#[test]
fn incast_without_pfc_drops() {
    let r = run_toml(INCAST_16);
    assert!(r.drops > 0, "{}", r.summary());
    assert_eq!(r.pause_frames, 0);
    assert!(r.retransmits > 0, "losses are repaired by the engine");
}

#[test]
fn incast_with_pfc_does_not_drop() {
    // 16 ports x (XOFF + a round trip of headroom) fits the 1 MiB buffer.
    let r = run_toml(&format!(
        "{INCAST_16}\n[switch.pfc]\nxoff_bytes = 32768\nxon_bytes = 16384\n"
    ));
    assert_eq!(r.drops, 0, "{}", r.summary());
    assert!(r.pause_frames > 0);
    assert!(r.pause_us > 0.0);
    assert!(paused_us(&r, "h0") > 0.0, "senders are paused");
    let total: f64 = r.flows.iter().map(|f| f.wire_gbps).sum();
    assert!(total > 95.0, "the bottleneck stays busy: {total:.1} Gb/s");
    assert_eq!(r.retransmits, 0);
}

/// A PAUSE is re-sent at most once per half pause time of each XOFF
/// episode: refreshes stay under (time paused) / (half the pause time),
/// plus one per episode. (Each XOFF once started its own refresh chain,
/// and the chains piled up: 1 M frames where 46 k were due.)
#[test]
fn pause_refreshes_are_bounded() {
    // XON close under XOFF: a resumed sender crosses XOFF again well
    // within half a pause time, the case where chains piled up.
    let text = INCAST_16.replace("duration_us = 400", "duration_us = 2000");
    let r = run_toml(&format!(
        "{text}\n[switch.pfc]\nxoff_bytes = 49152\nxon_bytes = 40960\n"
    ));
    let half_pause_us = 65535.0 * 64.0 * 8.0 / 100e3 / 2.0;
    let sent = r.pause_sent;
    assert!(
        sent.xoff > 100,
        "the scenario has many XOFF episodes: {sent:?}"
    );
    let bound = (r.pause_us / half_pause_us) as u64 + sent.xoff;
    assert!(sent.refresh <= bound, "{sent:?}, bound {bound}");
    assert!(
        sent.xon <= sent.xoff && sent.xoff <= sent.xon + 16,
        "{sent:?}"
    );
}

/// Dynamic thresholds (the free buffer x 2^-alpha_shift): no drops in a
/// 1 MiB buffer either, and the senders are paused.
#[test]
fn incast_with_dynamic_pfc_does_not_drop() {
    let r = run_toml(&format!("{INCAST_16}\n[switch.pfc]\nalpha_shift = 5\n"));
    assert_eq!(r.drops, 0, "{}", r.summary());
    assert!(r.pause_frames > 0);
    assert!(paused_us(&r, "h0") > 0.0, "senders are paused");
}

/// Three flows into host 3 on the right switch, two from the left: the
/// right switch pauses the left one, whose queue then fills and pauses
/// its hosts: pause travels hop by hop.
#[test]
fn pause_propagates_hop_by_hop() {
    let r = run_toml(
        r#"
duration_us = 400
[topology]
kind = "dumbbell"
pairs = 2
[switch.pfc]
xoff_bytes = 32768
xon_bytes = 16384
[[flow]]
src = 0
dst = 3
[[flow]]
src = 1
dst = 3
[[flow]]
src = 2
dst = 3
"#,
    );
    assert!(
        paused_us(&r, "sw0>sw1") > 0.0,
        "the left switch is paused by the right one"
    );
    assert!(
        paused_us(&r, "h0") > 0.0 && paused_us(&r, "h1") > 0.0,
        "then its hosts"
    );
    assert_eq!(r.drops, 0);
}

/// PFC pauses per priority: the shipped victim scenario's victim flow
/// (host 2 to host 6) suffers with the incast on its priority, and not
/// on a priority of its own.
#[test]
fn pause_spares_other_priorities() {
    let text = include_str!("../../scenarios/pfc-victim.toml")
        .replace("duration_us = 2000", "duration_us = 600");
    let shared = run_toml(&text);
    let own = run_toml(&text.replace("src = 2\ndst = 6", "src = 2\ndst = 6\npriority = 1"));
    let (victim, spared) = (shared.flows[5].wire_gbps, own.flows[5].wire_gbps);
    assert!(
        spared > 3.0 * victim,
        "victim {victim:.1} Gb/s, on its own priority {spared:.1}"
    );
    assert_eq!((shared.drops, own.drops), (0, 0));
}
