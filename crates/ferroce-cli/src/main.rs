//! The `ferroce` command. Thin: argument parsing and printing only; the
//! protocol work lives in the library crates.
//!
//! The libraries log through `tracing`; here a subscriber writes what
//! `FERROCE_LOG` (a `tracing_subscriber::EnvFilter`, e.g. `debug` or
//! `ferroce_core=trace`) or else `-v`/`-q` let through, to stderr, so
//! that stdout stays the tool's own output. By default only warnings.

#![forbid(unsafe_code)]

mod capture;
mod cmd;
mod error;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::OnceLock;

use clap::{ArgAction, CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// RoCE (RDMA over Converged Ethernet) in userspace.
#[derive(Debug, Parser)]
#[command(name = "ferroce", version, about)]
struct Cli {
    /// More log lines on stderr: -v info, -vv debug (QP state changes,
    /// retransmissions, RNR waits, NAKs), -vvv trace (every dropped packet).
    /// Before the command (`ferroce -vv perf write`).
    #[arg(short, long, action = ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Errors only on stderr (no warnings).
    #[arg(short, long)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// The environment variable that, when set, chooses what is logged (it
/// overrides `-v`/`-q`).
pub(crate) const LOG_ENV: &str = ferroce::env::LOG;

/// The filter in force, as `FERROCE_LOG` would spell it.
static LOG_FILTER: OnceLock<String> = OnceLock::new();

/// The filter in force, for a child `ferroce` process (`FERROCE_LOG`), so
/// that `ferroce -vv perf write` logs its server side too.
pub(crate) fn log_filter() -> &'static str {
    LOG_FILTER.get().map_or("warn", String::as_str)
}

/// Installs the stderr subscriber: `FERROCE_LOG` if set, else the level
/// `-v`/`-q` choose.
fn init_logging(cli: &Cli) -> Result<(), String> {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => LevelFilter::ERROR,
        (false, 0) => LevelFilter::WARN,
        (false, 1) => LevelFilter::INFO,
        (false, 2) => LevelFilter::DEBUG,
        (false, _) => LevelFilter::TRACE,
    };
    let spec = ferroce::env::Env::get()
        .log
        .clone()
        .unwrap_or_else(|| level.to_string().to_lowercase());
    let filter = EnvFilter::builder().parse(&spec).map_err(|e| {
        format!(
            "{LOG_ENV}={spec:?} is not a log filter ({e}): use a level (error, warn, info, \
             debug, trace) or target=level pairs such as ferroce_core=debug"
        )
    })?;
    let _ = LOG_FILTER.set(spec);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // The environment was parsed (and its warnings logged) before there
    // was a subscriber to log them to.
    for w in &ferroce::env::Env::get().warnings {
        tracing::warn!("{w}");
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the RoCE packets of a pcap/pcapng capture, one per line.
    Dump(cmd::dump::DumpArgs),
    /// Write ferroce's sample packets (every opcode, v1 and v2) as a pcap.
    Sample(cmd::sample::SampleArgs),
    /// Ping-pong RC, UC or UD messages with a peer, as ibv_*_pingpong.
    Pingpong(cmd::pingpong::PingpongArgs),
    /// Ping a peer with RDMA READ and WRITE over an rdma_cm connection, as
    /// librdmacm's rping.
    Rping(cmd::rping::RpingArgs),
    /// Bandwidth or latency of SEND, WRITE, READ or atomics, as perftest.
    Perf(cmd::perf::PerfArgs),
    /// ferroce beside its baselines, with ratios, in one run: goodput,
    /// latency, message rate, QP scaling and memory beside raw UDP on
    /// loopback; rdma_cm setups beside TCP; perftest and UCX on ferroce's
    /// libraries beside `ferroce perf`; the raw-Ethernet backend on a veth
    /// pair (root).
    Bench(cmd::bench::BenchArgs),
    /// The raw UDP side of `bench` (a sink or an echo).
    #[command(hide = true)]
    UdpPeer(cmd::bench::UdpPeerArgs),
    /// The raw-Ethernet side of `bench` (flood, sink, ping, echo).
    #[command(hide = true)]
    RawPeer(cmd::bench::RawPeerArgs),
    /// Device and port attributes and the GID table, as ibv_devinfo [-v].
    Devinfo(cmd::devinfo::DevinfoArgs),
    /// RC connections through rdma_cm, as rdma-core's ucmatose.
    Cmatose(cmd::cmatose::CmatoseArgs),
    /// UD peers resolved through rdma_cm (SIDR), as rdma-core's udaddy.
    Udaddy(cmd::udaddy::UdaddyArgs),
    /// UD multicast through rdma_cm, as rdma-core's mckey.
    Mckey(cmd::mckey::MckeyArgs),
    /// The device and its port as ibstat shows them (-l, -p, -s, CA [PORT]).
    Ibstat(cmd::ibstat::IbstatArgs),
    /// rdma_cm's RoCE mode and ToS per port: the tree, `get KEY`, `set KEY VALUE`.
    Config(cmd::config::ConfigArgs),
    /// librdmacm's rdma_server: one rdma_cm connection, 16 bytes each way.
    RdmaServer(cmd::rdma_example::ServerArgs),
    /// librdmacm's rdma_client: one rdma_cm connection, 16 bytes each way.
    RdmaClient(cmd::rdma_example::ClientArgs),
    /// Run an unmodified RDMA program (ibv_*, rping, perftest, UCX, ...) on
    /// ferroce's libibverbs.so.1 and librdmacm.so.1: `ferroce exec -L
    /// 127.0.0.2 -- ibv_rc_pingpong -g 0 127.0.0.1`.
    Exec(cmd::exec::ExecArgs),
    /// Write the man pages of ferroce and of each command into a directory.
    Manpages(cmd::manpages::ManpagesArgs),
    /// Simulate a RoCE fabric (RED/ECN, PFC, DCQCN) whose hosts run
    /// ferroce's engine, from a scenario file: summary, CSV and plots.
    Sim(ferroce_sim::cli::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging(&cli) {
        eprintln!("ferroce: {e}");
        return ExitCode::from(2);
    }
    // The simulator has its own exit codes and messages.
    if let Command::Sim(args) = &cli.command {
        return ferroce_sim::cli::run(args);
    }
    let result: Result<bool, error::Error> = match &cli.command {
        Command::Dump(args) => cmd::dump::run(args),
        Command::Sample(args) => cmd::sample::run(args),
        Command::Pingpong(args) => cmd::pingpong::run(args),
        Command::Rping(args) => cmd::rping::run(args),
        Command::Perf(args) => cmd::perf::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::UdpPeer(args) => cmd::bench::udp_peer(args),
        Command::RawPeer(args) => cmd::bench::raw_peer(args),
        Command::Devinfo(args) => cmd::devinfo::run(args),
        Command::Cmatose(args) => cmd::cmatose::run(args),
        Command::Udaddy(args) => cmd::udaddy::run(args),
        Command::Mckey(args) => cmd::mckey::run(args),
        Command::Ibstat(args) => cmd::ibstat::run(args),
        Command::Config(args) => cmd::config::run(args),
        Command::RdmaServer(args) => cmd::rdma_example::server(args),
        Command::RdmaClient(args) => cmd::rdma_example::client(args),
        Command::Exec(args) => cmd::exec::run(args),
        Command::Manpages(args) => cmd::manpages::run(args, Cli::command()),
        Command::Sim(_) => unreachable!("run above"),
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
