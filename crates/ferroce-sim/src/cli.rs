//! The command line, for the `ferroce-sim` binary and `ferroce sim`, one
//! clap definition ([`SimArgs`]) for both:
//! `[--congestion MODE] SCENARIO.toml [OUT_DIR]`: runs a scenario (its
//! `[congestion]` mode replaced by MODE if given), prints its
//! summary and wall-clock speed, and writes the CSV files and plots into
//! OUT_DIR (default: `sim-out/<scenario file stem>`).
//!
//! `--bench [SIMULATED_MS]`: the speed bench, the shipped
//! 64:1 incast at 100 Gb/s for SIMULATED_MS (default 1000),
//! printing packet events per second and wall time per simulated second
//! (build with `--release`).
//!
//! Exit status: 0; 1 when the scenario cannot be read, parsed, run or
//! written; 2 for a bad command line (clap's message).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser};

use crate::congestion::Mode;

/// The bench's fabric: 64 senders into one receiver at 100 Gb/s.
const BENCH_SCENARIO: &str = include_str!("../scenarios/incast64.toml");

/// The congestion modes `--congestion` takes, as scenario files name them.
const MODES: [&str; 4] = ["mlx5", "paper", "no-dcqcn", "off"];

/// The simulator's arguments (`ferroce sim`, `ferroce-sim`).
#[derive(Debug, Args)]
#[command(
    after_help = "Scenarios ship in crates/ferroce-sim/scenarios/ (the DCQCN paper's \
                  experiments among them); the README's \"ferroce sim\" section describes \
                  the file. Outputs: summary.txt, flows.csv, rates.csv, queues.csv, \
                  pause.csv, cnp.csv, dcqcn.csv and the plots (PNG and SVG)."
)]
pub struct SimArgs {
    /// The scenario file (TOML).
    #[arg(required_unless_present = "bench")]
    scenario: Option<PathBuf>,
    /// Where the CSV files and plots go (default: sim-out/STEM, STEM being the
    /// scenario file's name without its extension).
    out: Option<PathBuf>,
    /// Replace the scenario's congestion mode: mlx5 (DCQCN with mlx5's
    /// defaults), paper (the DCQCN paper's values), no-dcqcn (CNPs, no rate
    /// cuts) or off (PFC alone).
    #[arg(long, value_name = "MODE", value_parser = parse_mode())]
    congestion: Option<Mode>,
    /// Instead of a scenario, the speed bench: the shipped 64:1 incast at
    /// 100 Gb/s for this many simulated milliseconds (build with --release).
    #[arg(long, value_name = "SIMULATED_MS", num_args = 0..=1, default_missing_value = "1000",
          value_parser = parse_bench_ms, conflicts_with_all = ["scenario", "out", "congestion"])]
    bench: Option<f64>,
}

/// The `ferroce-sim` command: [`SimArgs`] under the binary's name.
#[derive(Debug, Parser)]
#[command(
    name = "ferroce-sim",
    about = "Simulate a RoCE fabric from a scenario file"
)]
struct SimCli {
    #[command(flatten)]
    args: SimArgs,
}

/// `--congestion`: one of [`MODES`], as the mode it names.
fn parse_mode() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(MODES).try_map(|name: String| {
        Mode::from_name(&name)
            .ok_or_else(|| format!("--congestion takes mlx5, paper, no-dcqcn or off, not {name:?}"))
    })
}

/// `--bench`'s simulated time: milliseconds, above 0.
fn parse_bench_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(ms) if ms > 0.0 => Ok(ms),
        _ => Err(
            "--bench takes the simulated time in milliseconds, above 0 (e.g. --bench 1000)".into(),
        ),
    }
}

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

/// Parses and runs the command line `args` (without the program name):
/// `ferroce-sim`'s `main`. A bad command line prints clap's message and
/// gives its status (2; 0 for `--help`).
pub fn main(args: &[String]) -> ExitCode {
    let argv = std::iter::once("ferroce-sim").chain(args.iter().map(String::as_str));
    match SimCli::try_parse_from(argv) {
        Ok(cli) => run(&cli.args),
        Err(e) => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
    }
}

/// Runs what `args` ask for: the bench, or a scenario file.
pub fn run(args: &SimArgs) -> ExitCode {
    if let Some(ms) = args.bench {
        return bench(ms);
    }
    let Some(file) = &args.scenario else {
        eprintln!("a scenario file is needed (examples in crates/ferroce-sim/scenarios/)");
        return ExitCode::from(2);
    };
    run_scenario(file, args.congestion, args.out.as_deref())
}

/// Runs the scenario in `file` and writes its outputs into `out`.
fn run_scenario(file: &Path, mode: Option<Mode>, out: Option<&Path>) -> ExitCode {
    let file_name = file.display();
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {file_name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut scenario = match crate::Scenario::from_toml(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{file_name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(m) = mode {
        scenario.congestion.mode = m;
    }
    let stem = file.file_stem().map(|s| s.to_owned()).unwrap_or_default();
    let out = out.map_or_else(|| PathBuf::from("sim-out").join(stem), PathBuf::from);
    let simulated_s = scenario.duration_us / 1e6;
    let wall = Instant::now();
    let report = match crate::run(scenario) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{file_name}: {e}");
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

/// The speed bench: the shipped incast for `ms` simulated milliseconds.
fn bench(ms: f64) -> ExitCode {
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
