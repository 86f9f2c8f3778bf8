//! `ferroce-sim SCENARIO.toml [OUT_DIR]`: runs a scenario, prints its
//! summary and wall-clock speed, and writes the CSV files and plots into
//! OUT_DIR (default: `sim-out/<scenario file stem>`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        eprintln!(
            "usage: ferroce-sim SCENARIO.toml [OUT_DIR]   (examples in crates/ferroce-sim/scenarios/)"
        );
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scenario = match ferroce_sim::Scenario::from_toml(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stem = PathBuf::from(file)
        .file_stem()
        .map(|s| s.to_owned())
        .unwrap_or_default();
    let out = args
        .get(1)
        .map_or_else(|| PathBuf::from("sim-out").join(stem), PathBuf::from);
    let simulated_s = scenario.duration_us / 1e6;
    let wall = Instant::now();
    let report = match ferroce_sim::run(scenario) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let secs = wall.elapsed().as_secs_f64();
    print!("{}", report.summary());
    println!(
        "wall time              {secs:.2} s: {:.2} M packet events/s, {:.1} s of wall time per simulated second",
        report.packet_events as f64 / secs / 1e6,
        secs / simulated_s
    );
    if let Err(e) = report.write_csv(&out) {
        eprintln!("cannot write the CSV files into {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    if let Err(e) = ferroce_sim::plot::write(&report, &out) {
        eprintln!("no plots: {e}");
        return ExitCode::FAILURE;
    }
    println!("outputs in {}", out.display());
    ExitCode::SUCCESS
}
