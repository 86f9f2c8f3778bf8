//! The README's table of the DCQCN paper's experiments: every shipped
//! `scenarios/dcqcn-*.toml` with the paper's settings, mlx5's defaults and
//! PFC alone, judged after the first 3 ms (the two-flow run after 4 ms,
//! 2 ms after the second flow joined; the 50 ms victim run after 20 ms),
//! with the same figures the tests check. `cargo run --release -p ferroce-sim --example dcqcn-table`.

use ferroce_sim::{Report, Scenario};

const SCENARIOS: [(&str, &str, f64); 5] = [
    (
        "two flows",
        include_str!("../scenarios/dcqcn-two-flows.toml"),
        4000.0,
    ),
    (
        "incast 8:1",
        include_str!("../scenarios/dcqcn-incast8.toml"),
        3000.0,
    ),
    (
        "incast 16:1",
        include_str!("../scenarios/dcqcn-incast16.toml"),
        3000.0,
    ),
    (
        "incast 64:1",
        include_str!("../scenarios/dcqcn-incast64.toml"),
        3000.0,
    ),
    (
        "PFC victim",
        include_str!("../scenarios/dcqcn-pfc-victim.toml"),
        20000.0,
    ),
];

fn run(text: &str, mode: &str) -> Report {
    let text = text.replace("mode = \"paper\"", &format!("mode = \"{mode}\""));
    let s = Scenario::from_toml(&text).expect("a shipped scenario");
    ferroce_sim::run(s).expect("it runs")
}

fn main() {
    println!(
        "| experiment | congestion | total Gb/s | Jain | p99 queue KB | PAUSE frames | paused ms | CNPs | fair from us | victim Gb/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, text, from) in SCENARIOS {
        for mode in ["paper", "mlx5", "off"] {
            let r = run(text, mode);
            let end = r.duration_us;
            let rates = r.rates_between(from, end);
            let total: f64 = rates.iter().sum();
            // Jain's index of idle flows is 1: say idle instead.
            let idle = total < 1.0;
            let fair = match r.fair_from(0.95, 200.0) {
                _ if idle => "idle".into(),
                Some(t) => format!("{t:.0}"),
                None => "never".into(),
            };
            let jain = if idle {
                "idle".into()
            } else {
                format!("{:.3}", r.jain_between(from, end))
            };
            let victim = if name == "PFC victim" {
                format!("{:.1}", rates[5])
            } else {
                "-".into()
            };
            println!(
                "| {name} | {mode} | {total:.1} | {jain} | {:.0} | {} | {:.1} | {} | {fair} | {victim} |",
                r.queue_p99_between(from, end) as f64 / 1000.0,
                r.pause_frames,
                r.pause_us / 1000.0,
                r.cnps_sent,
            );
        }
    }
}
