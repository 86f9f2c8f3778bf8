//! `ferroce sim`: the fabric simulator of `ferroce-sim` (links, switches
//! with RED/ECN and PFC, hosts running ferroce's own engine with DCQCN)
//! behind the `ferroce` command. A thin layer: the arguments go to
//! [`ferroce_sim::cli::main`] as its own command line would give them, so
//! that `ferroce sim` and `ferroce-sim` behave alike.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
#[command(
    after_help = "Scenarios ship in crates/ferroce-sim/scenarios/ (the DCQCN paper's \
                  experiments among them); the README's \"ferroce sim\" section describes \
                  the file. Outputs: summary.txt, flows.csv, rates.csv, queues.csv, \
                  pause.csv, cnp.csv, dcqcn.csv and the plots (PNG and SVG)."
)]
pub(crate) struct SimArgs {
    /// The scenario file (TOML).
    #[arg(required_unless_present = "bench")]
    scenario: Option<PathBuf>,
    /// Where the CSV files and plots go (default: sim-out/<scenario file stem>).
    out: Option<PathBuf>,
    /// Replace the scenario's congestion mode: mlx5 (DCQCN with mlx5's
    /// defaults), paper (the DCQCN paper's values), no-dcqcn (CNPs, no rate
    /// cuts) or off (PFC alone).
    #[arg(long, value_name = "MODE", value_parser = ["mlx5", "paper", "no-dcqcn", "off"])]
    congestion: Option<String>,
    /// Instead of a scenario, the speed bench: the shipped 64:1 incast at
    /// 100 Gb/s for this many simulated milliseconds (build with --release).
    #[arg(long, value_name = "SIMULATED_MS", num_args = 0..=1, default_missing_value = "1000",
          conflicts_with_all = ["scenario", "out", "congestion"])]
    bench: Option<String>,
}

pub(crate) fn run(args: &SimArgs) -> ExitCode {
    let argv: Vec<String> = match &args.bench {
        Some(ms) => vec!["--bench".into(), ms.clone()],
        None => {
            let mode = args
                .congestion
                .iter()
                .flat_map(|m| ["--congestion".into(), m.clone()]);
            mode.chain(
                args.scenario
                    .iter()
                    .chain(args.out.iter())
                    .map(|p| p.display().to_string()),
            )
            .collect()
        }
    };
    ferroce_sim::cli::main(&argv)
}
