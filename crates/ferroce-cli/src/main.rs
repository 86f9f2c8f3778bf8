//! The `ferroce` command. Thin: argument parsing and printing only; the
//! protocol work lives in the library crates.

mod capture;
mod cmd;
mod error;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// RoCE (RDMA over Converged Ethernet) in userspace.
#[derive(Debug, Parser)]
#[command(name = "ferroce", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the RoCE packets of a pcap/pcapng capture, one per line.
    Dump(cmd::dump::DumpArgs),
    /// Write ferroce's sample packets (every opcode, v1 and v2) as a pcap.
    Sample(cmd::sample::SampleArgs),
    /// Ping-pong RC, UC or UD messages with a peer, as ibv_*_pingpong.
    Pingpong(cmd::pingpong::PingpongArgs),
    /// Bandwidth or latency of SEND, WRITE, READ or atomics, as perftest.
    Perf(cmd::perf::PerfArgs),
    /// ferroce beside raw UDP on loopback: goodput, latency, message rate,
    /// QP scaling and memory, with ratios, in one run.
    Bench(cmd::bench::BenchArgs),
    /// The raw UDP side of `bench` (a sink or an echo).
    #[command(hide = true)]
    UdpPeer(cmd::bench::UdpPeerArgs),
    /// Device and port attributes and the GID table, as ibv_devinfo [-v].
    Devinfo(cmd::devinfo::DevinfoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<bool, error::Error> = match &cli.command {
        Command::Dump(args) => cmd::dump::run(args),
        Command::Sample(args) => cmd::sample::run(args),
        Command::Pingpong(args) => cmd::pingpong::run(args),
        Command::Perf(args) => cmd::perf::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::UdpPeer(args) => cmd::bench::udp_peer(args),
        Command::Devinfo(args) => cmd::devinfo::run(args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ferroce: {e}");
            ExitCode::from(2)
        }
    }
}
