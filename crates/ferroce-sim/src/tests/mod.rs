//! The simulator's promises: determinism, line rate on an idle link (and
//! the engine's window where it binds), flows that start and stop, RED's
//! marking probability, ECMP's spread, the outputs and the scenario
//! checks here; PFC's in `pfc`.

mod congestion;
mod dcqcn;
mod pfc;

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use crate::port::FRAME_OVERHEAD;
use crate::scenario::{Red, Scenario};
use crate::switch::red_marks;
use crate::{Report, run};

pub(super) fn scenario(text: &str) -> Scenario {
    Scenario::from_toml(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

pub(super) fn run_toml(text: &str) -> Report {
    run(scenario(text)).expect("the scenario runs")
}

/// The last value of a port's cumulative pause time, us.
pub(super) fn paused_us(r: &Report, port: &str) -> f64 {
    let s = &r.series;
    let i = s
        .pause_labels
        .iter()
        .position(|l| l == port)
        .expect("a port of the fabric");
    s.pause_us[i].last().copied().unwrap_or(0.0)
}

pub(super) const INCAST_RED: &str = r#"
seed = 7
duration_us = 300
sample_us = 5
[topology]
kind = "incast"
senders = 4
[workload]
sizes = [{ bytes = 4096, weight = 1.0 }, { bytes = 65536, weight = 1.0 }]
[switch.red]
kmin_bytes = 5000
kmax_bytes = 200000
pmax = 0.2
[switch.pfc]
xoff_bytes = 100000
xon_bytes = 50000
"#;

fn outputs(r: &Report) -> Vec<(String, Vec<u8>)> {
    let dir = std::env::temp_dir().join(format!("ferroce-sim-test-{}-{:p}", std::process::id(), r));
    r.write_csv(&dir).expect("writes the CSV files");
    crate::plot::write(r, &dir).expect("draws the plots");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("the output directory")
        .map(|e| {
            let p = e.expect("an entry").path();
            (
                p.display()
                    .to_string()
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                std::fs::read(&p).expect("a file"),
            )
        })
        .collect();
    files.sort();
    let _ = std::fs::remove_dir_all(&dir);
    files
}

#[test]
fn same_seed_same_bytes() {
    let a = run_toml(INCAST_RED);
    let b = run_toml(INCAST_RED);
    assert!(a.ce_marks > 0, "the run exercises RED's coin");
    assert_eq!(a, b);
    let (fa, fb) = (outputs(&a), outputs(&b));
    assert_eq!(fa.len(), 15, "summary, 6 CSV files, 4 plots as PNG and SVG");
    assert_eq!(fa, fb, "the same seed wrote different files");
    let c = run_toml(&INCAST_RED.replace("seed = 7", "seed = 8"));
    assert_ne!(
        a.series, c.series,
        "another seed should change RED's marks and the sizes"
    );
}

/// One flow on an idle 100 Gb/s path with 1 us links: the engine's window
/// (128 PSNs) is far above the bandwidth-delay product, so the flow fills
/// the link.
#[test]
fn one_flow_reaches_line_rate() {
    let r = run_toml(
        r#"
duration_us = 500
[topology]
kind = "incast"
senders = 1
[workload]
sizes = [{ bytes = 65536, weight = 1.0 }]
"#,
    );
    let f = &r.flows[0];
    assert!(f.wire_gbps > 99.0, "wire rate {} Gb/s", f.wire_gbps);
    assert!(f.goodput_gbps > 95.0, "goodput {} Gb/s", f.goodput_gbps);
    assert_eq!(
        (r.drops, r.retransmits, r.ce_marks, r.pause_frames),
        (0, 0, 0, 0)
    );
}

/// With 25 us links (a 100 us round trip), the window binds. The engine
/// has 128 PSNs in flight at most and asks for an ACK every 64 packets
/// (as rxe), so a window's worth goes out per round trip plus the time to
/// send the 64 packets an ACK covers.
#[test]
fn one_flow_long_path_is_window_bound() {
    let r = run_toml(
        r#"
duration_us = 3000
[link]
delay_ns = 25000
[topology]
kind = "incast"
senders = 1
"#,
    );
    let frame = (4096 + 12 + 4 + FRAME_OVERHEAD) as f64;
    let serialize_us = frame * 8.0 / 100e3;
    let rtt_us = 4.0 * 25.0 + 2.0 * serialize_us;
    let window_gbps = 128.0 * frame * 8.0 / (rtt_us + 64.0 * serialize_us) / 1e3;
    let got = r.flows[0].wire_gbps;
    assert!(window_gbps < 40.0);
    assert!(
        (got - window_gbps).abs() < 0.05 * window_gbps,
        "rate {got:.1} Gb/s, window allows {window_gbps:.1}"
    );
}

/// RED's coin over many packets at three queue depths: never below Kmin,
/// always above Kmax, and pmax x (q - Kmin) / (Kmax - Kmin) between,
/// within 5 standard deviations.
#[test]
fn red_marks_with_the_configured_probability() {
    let red = Red {
        kmin_bytes: 10_000,
        kmax_bytes: 110_000,
        pmax: 0.4,
        at_dequeue: false,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let n = 100_000;
    let count = |q: u64, rng: &mut ChaCha8Rng| (0..n).filter(|_| red_marks(&red, q, rng)).count();
    assert_eq!(count(10_000, &mut rng), 0);
    assert_eq!(count(110_000, &mut rng), n);
    for q in [35_000, 60_000, 85_000] {
        let p = red.pmax * (q - red.kmin_bytes) as f64 / (red.kmax_bytes - red.kmin_bytes) as f64;
        let got = count(q, &mut rng) as f64 / n as f64;
        let sigma = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (got - p).abs() < 5.0 * sigma,
            "q {q}: marked {got:.4}, expected {p:.4}"
        );
    }
}

/// Marking as packets leave the queue: marks too, with the queue behind
/// them.
#[test]
fn red_marks_at_dequeue() {
    let r = run_toml(&INCAST_RED.replace("pmax = 0.2", "pmax = 0.2\nat_dequeue = true"));
    let enqueue = run_toml(INCAST_RED);
    assert!(r.ce_marks > 0);
    assert_ne!(r.ce_marks, enqueue.ce_marks);
}

/// A sender that does not mark ECT is never marked.
#[test]
fn red_leaves_not_ect_alone() {
    let r = run_toml(&INCAST_RED.replace("seed = 7", "seed = 7\necn = false"));
    assert_eq!(r.ce_marks, 0);
}

/// 16 flows from leaf 0 to leaf 1 over 4 spines: every spine carries some,
/// none most.
#[test]
fn ecmp_spreads_flows_over_spines() {
    let r = run_toml(
        r#"
duration_us = 100
[topology]
kind = "leaf-spine"
leaves = 2
spines = 4
hosts_per_leaf = 16
[workload]
sizes = [{ bytes = 65536, weight = 1.0 }]
"#,
    );
    // Packets leaf 0 (sw0) sent up to each spine (sw2 .. sw5).
    let per_spine: Vec<u64> = (2..6)
        .map(|sp| {
            let up = format!("sw0>sw{sp}");
            r.port_packets
                .iter()
                .find(|(l, _)| *l == up)
                .expect("an uplink")
                .1
        })
        .collect();
    let total: u64 = per_spine.iter().sum();
    assert!(per_spine.iter().all(|&n| n > 0), "{per_spine:?}");
    assert!(per_spine.iter().all(|&n| n < total / 2), "{per_spine:?}");
}

/// A flow that starts late and stops early sends only in between (give
/// or take the messages it had posted), and a flow with a byte count
/// finishes and reports its completion time.
#[test]
fn flows_start_stop_and_finish() {
    let r = run_toml(
        r#"
duration_us = 600
sample_us = 10
[topology]
kind = "dumbbell"
pairs = 2
[workload]
sizes = [{ bytes = 4096, weight = 3.0 }, { bytes = 65536, weight = 1.0 }]
[[flow]]
src = 0
dst = 2
start_us = 100
stop_us = 300
[[flow]]
src = 1
dst = 3
bytes = 1000000
"#,
    );
    let s = &r.series;
    let late = &s.flow_gbps[0];
    let at = |us: f64| {
        s.times_us
            .iter()
            .position(|&t| t >= us)
            .expect("a sample then")
    };
    assert!(
        late[..at(100.0)].iter().all(|&g| g == 0.0),
        "nothing before its start"
    );
    assert!(
        late[at(120.0)..at(300.0)].iter().any(|&g| g > 10.0),
        "it runs"
    );
    assert!(
        late[at(350.0)..].iter().all(|&g| g == 0.0),
        "nothing after its stop"
    );
    let sized = &r.flows[1];
    assert_eq!(sized.bytes_done, 1_000_000);
    let fct = sized.fct_us.expect("the flow finished");
    // 1 MB at about 100 Gb/s: 80 us and a little.
    assert!((80.0..200.0).contains(&fct), "fct {fct} us");
    assert!(sized.msg_p99_us >= sized.msg_p50_us && sized.messages > 1);
}

/// The command line runs a scenario file into a directory, and refuses
/// a missing file and a bad argument with their own exit codes.
#[test]
fn command_line_writes_outputs() {
    use std::process::ExitCode;
    let dir = std::env::temp_dir().join(format!("ferroce-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "duration_us = 50\n[topology]\nkind = \"incast\"\nsenders = 2\n",
    )
    .expect("written");
    let out = dir.join("out");
    let args = [file.display().to_string(), out.display().to_string()];
    assert_eq!(crate::cli::main(&args), ExitCode::SUCCESS);
    for f in [
        "summary.txt",
        "flows.csv",
        "rates.csv",
        "rates.svg",
        "queues.png",
        "pause.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    let missing = [dir.join("none.toml").display().to_string()];
    assert_eq!(crate::cli::main(&missing), ExitCode::FAILURE);
    assert_eq!(
        crate::cli::main(&["--bench".into(), "zero".into()]),
        ExitCode::from(2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shipped_scenarios_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("the scenarios directory") {
        let p = e.expect("an entry").path();
        let text = std::fs::read_to_string(&p).expect("a scenario");
        Scenario::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    assert!(n >= 4, "{n} scenarios shipped");
}

#[test]
fn bad_scenarios_name_the_field() {
    let huge = scenario(
        "duration_us = 1000000\nsample_us = 1\n[topology]\nkind = \"incast\"\nsenders = 64\n",
    );
    let e = run(huge).expect_err("too many samples to keep");
    assert!(e.0.contains("sample_us"), "{e}");
    let e = Scenario::from_toml("duration_us = 10\n[topology]\nkind = \"incast\"\nsenders = 2\n[switch.red]\nkmin_bytes = 10\nkmax_bytes = 5\npmax = 0.1\n")
        .expect_err("kmin above kmax");
    assert!(e.0.contains("kmin_bytes"), "{e}");
    let both = "duration_us = 10\n[topology]\nkind = \"incast\"\nsenders = 2\n[switch.pfc]\nxoff_bytes = 10\nxon_bytes = 5\nalpha_shift = 2\n";
    let e = Scenario::from_toml(both).expect_err("static and dynamic PFC at once");
    assert!(e.0.contains("alpha_shift"), "{e}");
    let e = Scenario::from_toml("duration_us = 10\n[topology]\nkind = \"ring\"\n")
        .expect_err("no such topology");
    assert!(e.0.contains("ring"), "{e}");
    let e = Scenario::from_toml(
        "duration_us = 10\nmtu = 1500\n[topology]\nkind = \"incast\"\nsenders = 2\n",
    )
    .expect_err("no such MTU");
    assert!(e.0.contains("mtu"), "{e}");
}
