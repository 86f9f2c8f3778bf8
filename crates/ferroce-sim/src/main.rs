//! `ferroce-sim`: see [`ferroce_sim::cli`] for the command line.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    ferroce_sim::cli::main(&args)
}
