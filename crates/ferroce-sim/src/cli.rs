//! The command line, for the `ferroce-sim` binary and `ferroce sim`:
//! `[--congestion MODE] SCENARIO.toml [OUT_DIR]`: runs a scenario (its
//! `[congestion]` mode replaced by MODE if given), prints its
//! summary and wall-clock speed, and writes the CSV files and plots into
//! OUT_DIR (default: `sim-out/<scenario file stem>`).
//!
//! `ferroce-sim --bench [SIMULATED_MS]`: the speed bench, the shipped
//! 64:1 incast at 100 Gb/s for SIMULATED_MS (default 1000),
//! printing packet events per second and wall time per simulated second
//! (build with `--release`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use crate::congestion::Mode;

/// The bench's fabric: 64 senders into one receiver at 100 Gb/s.
const BENCH_SCENARIO: &str = include_str!("../scenarios/incast64.toml");

/// `println!` that ignores a closed standard output (`| head`) rather
/// than panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `print!` of the same kind.
fn say_raw(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_fmt(args);
}

/// Runs the command line `args` (without the program name).
pub fn main(args: &[String]) -> ExitCode {
    if args.first().map(String::as_str) == Some("--bench") {
        return bench(args.get(1).map(String::as_str));
    }
    let (mode, args) = match args {
        [flag, mode, rest @ ..] if flag == "--congestion" => match Mode::from_name(mode) {
            Some(m) => (Some(m), rest),
            None => {
                eprintln!("--congestion takes mlx5, paper, no-dcqcn or off, not {mode:?}");
                return ExitCode::from(2);
            }
        },
        _ => (None, args),
    };
    let Some(file) = args.first() else {
        eprintln!(
            "usage: ferroce-sim [--congestion mlx5|paper|no-dcqcn|off] SCENARIO.toml [OUT_DIR]   (examples in crates/ferroce-sim/scenarios/)"
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
    let mut scenario = match crate::Scenario::from_toml(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(m) = mode {
        scenario.congestion.mode = m;
    }
    let stem = PathBuf::from(file)
        .file_stem()
        .map(|s| s.to_owned())
        .unwrap_or_default();
    let out = args
        .get(1)
        .map_or_else(|| PathBuf::from("sim-out").join(stem), PathBuf::from);
    let simulated_s = scenario.duration_us / 1e6;
    let wall = Instant::now();
    let report = match crate::run(scenario) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let secs = wall.elapsed().as_secs_f64();
    say_raw(format_args!("{}", report.summary()));
    say!(
        "wall time              {secs:.2} s: {:.2} M packet events/s, {:.1} s of wall time per simulated second",
        report.packet_events as f64 / secs / 1e6,
        secs / simulated_s
    );
    if let Err(e) = report.write_csv(&out) {
        eprintln!("cannot write the CSV files into {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    if let Err(e) = crate::plot::write(&report, &out) {
        eprintln!("no plots: {e}");
        return ExitCode::FAILURE;
    }
    say!("outputs in {}", out.display());
    ExitCode::SUCCESS
}

fn bench(ms: Option<&str>) -> ExitCode {
    let ms: f64 = match ms.map(str::parse).unwrap_or(Ok(1000.0)) {
        Ok(ms) if ms > 0.0 => ms,
        _ => {
            eprintln!(
                "--bench takes the simulated time in milliseconds, above 0 (e.g. --bench 1000)"
            );
            return ExitCode::from(2);
        }
    };
    let mut scenario = match crate::Scenario::from_toml(BENCH_SCENARIO) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("the bench scenario: {e}");
            return ExitCode::FAILURE;
        }
    };
    scenario.duration_us = ms * 1000.0;
    let wall = Instant::now();
    let report = match crate::run(scenario) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("the bench scenario: {e}");
            return ExitCode::FAILURE;
        }
    };
    let secs = wall.elapsed().as_secs_f64();
    let total: f64 = report.flows.iter().map(|f| f.wire_gbps).sum();
    say!(
        "64:1 incast at 100 Gb/s, {ms} ms simulated: {total:.1} Gb/s into the receiver, {} PAUSE frames",
        report.pause_frames
    );
    say!(
        "{} events ({} packet events) in {secs:.2} s: {:.2} M packet events/s, {:.1} s of wall time per simulated second{}",
        report.events,
        report.packet_events,
        report.packet_events as f64 / secs / 1e6,
        secs / (ms / 1000.0),
        if cfg!(debug_assertions) {
            " (debug build: use --release)"
        } else {
            ""
        }
    );
    ExitCode::SUCCESS
}
