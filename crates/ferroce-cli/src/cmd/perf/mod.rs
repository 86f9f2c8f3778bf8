//! `ferroce perf`: bandwidth and latency of SEND, RDMA WRITE, RDMA READ and
//! atomics between two processes, reported as perftest reports them.
//!
//! `ferroce perf write` alone runs a loopback test: it starts a server
//! process on 127.0.0.1 and runs the client on 127.0.0.2. With `--listen`
//! it is the server; with a server address, the client. The exchange of QP
//! numbers, PSNs and keys is one JSON line each way over TCP (not perftest's
//! format). With `--perftest` the exchange is perftest's own instead, to
//! run against ib_write_bw / ib_send_bw / ib_read_bw / ib_atomic_bw and
//! ib_write_lat / ib_send_lat / ib_read_lat / ib_atomic_lat (see
//! perftest/).

mod bw;
mod lat;
mod perftest;
mod setup;

use std::net::{IpAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Which operation to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Test {
    Send,
    Write,
    Read,
    Atomic,
}

/// Which atomic operation `perf atomic` posts (perftest's `-A`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AtomicType {
    #[value(name = "FETCH_AND_ADD", alias = "fetch-and-add")]
    FetchAndAdd,
    #[value(name = "CMP_AND_SWAP", alias = "cmp-and-swap")]
    CmpAndSwap,
}

/// Arguments of `ferroce perf`.
#[derive(Debug, Args, Clone)]
pub(crate) struct PerfArgs {
    /// What to measure.
    #[arg(value_enum)]
    test: Test,
    /// Server to connect to; without it (and without --listen), run both
    /// sides on loopback.
    server: Option<String>,
    /// Be the server.
    #[arg(long)]
    listen: bool,
    /// Measure latency (ping-pong) instead of bandwidth.
    #[arg(long)]
    lat: bool,
    /// atomic: fetch-and-add or compare-and-swap (as perftest's -A).
    #[arg(
        long = "atomic-type",
        short = 'A',
        value_enum,
        default_value = "FETCH_AND_ADD"
    )]
    atomic_type: AtomicType,
    /// Message size in bytes (atomics: always 8).
    #[arg(long, short = 's', default_value_t = 65536)]
    size: usize,
    /// Messages per QP.
    #[arg(long, short = 'n', default_value_t = 5000)]
    iters: u32,
    /// Queue pairs.
    #[arg(long, short = 'q', default_value_t = 1)]
    qps: u32,
    /// Outstanding work requests per QP.
    #[arg(long, short = 't', default_value_t = 128)]
    tx_depth: u32,
    /// Path MTU in bytes.
    #[arg(long, short = 'm', default_value_t = 4096)]
    mtu: usize,
    /// This device's address (default 127.0.0.1 as server, 127.0.0.2 as client).
    #[arg(long, short = 'L')]
    local: Option<IpAddr>,
    /// TCP port of the exchange.
    #[arg(long, short = 'p', default_value_t = 18515)]
    port: u16,
    /// Loopback runs: the server process's address.
    #[arg(long, default_value = "127.0.0.1")]
    server_local: IpAddr,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// At the end, print the engine's and the UDP backend's counters
    /// (packets, retransmissions, drops by cause, GSO/GRO use) to stderr.
    #[arg(long)]
    stats: bool,
    /// Speak perftest's TCP exchange (run against ib_write_bw, ib_send_bw,
    /// ib_read_bw, ib_atomic_bw, and with --lat ib_write_lat, ib_send_lat,
    /// ib_read_lat, ib_atomic_lat); both sides need the same -s (and for
    /// latency the same -n).
    #[arg(long)]
    perftest: bool,
}

pub(crate) fn run(args: &PerfArgs) -> Result<bool, String> {
    let mut args = args.clone();
    if args.test == Test::Atomic {
        args.size = 8;
    }
    if args.size == 0 || args.size > ferroce::MAX_MSG_SIZE as usize {
        return Err(format!(
            "message size {} is outside 1 .. {}",
            args.size,
            ferroce::MAX_MSG_SIZE
        ));
    }
    if args.perftest {
        return perftest::run(&args);
    }
    if args.listen {
        let local = args.local.unwrap_or_else(|| "127.0.0.1".parse().unwrap());
        return server(&args, local);
    }
    match args.server.clone() {
        Some(s) => {
            let local = args.local.unwrap_or_else(|| "127.0.0.2".parse().unwrap());
            client(&args, local, &s)
        }
        None => loopback(&args),
    }
}

/// Starts `ferroce perf ... --listen` as a child and runs the client here.
fn loopback(args: &PerfArgs) -> Result<bool, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let server_local = args.server_local.to_string();
    let mut child = Command::new(exe)
        .args([
            "perf",
            test_name(args.test),
            "--listen",
            "--quiet",
            "-L",
            &server_local,
        ])
        .args(["-p", &args.port.to_string(), "-m", &args.mtu.to_string()])
        .args(args.stats.then_some("--stats"))
        .env(crate::LOG_ENV, crate::log_filter())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the server process: {e}"))?;
    let local = args.local.unwrap_or_else(|| "127.0.0.2".parse().unwrap());
    let result = client(args, local, &server_local);
    let status = child.wait().map_err(|e| e.to_string())?;
    if result.is_ok() && !status.success() {
        return Err(format!("server process failed: {status}"));
    }
    result
}

fn test_name(t: Test) -> &'static str {
    match t {
        Test::Send => "send",
        Test::Write => "write",
        Test::Read => "read",
        Test::Atomic => "atomic",
    }
}

fn server(args: &PerfArgs, local: IpAddr) -> Result<bool, String> {
    let listener = TcpListener::bind((local, args.port))
        .map_err(|e| format!("listening on {local}:{}: {e}", args.port))?;
    let (mut stream, _) = listener.accept().map_err(|e| e.to_string())?;
    let params = setup::read_params(&mut stream)?;
    let side = setup::Side::open(local, &params)?;
    let peer = setup::exchange_server(&mut stream, &side)?;
    side.connect(&peer, &params)?;
    let result = if params.lat {
        lat::serve(&side, &peer, &params, &mut stream)
    } else {
        bw::serve(&side, &params, &mut stream)
    };
    if args.stats {
        side.print_stats();
    }
    result
}

fn client(args: &PerfArgs, local: IpAddr, server: &str) -> Result<bool, String> {
    let mut stream = connect_retry(server, args.port)?;
    let params = setup::Params::from_args(args);
    setup::write_params(&mut stream, &params)?;
    let side = setup::Side::open(local, &params)?;
    let peer = setup::exchange_client(&mut stream, &side)?;
    side.connect(&peer, &params)?;
    let result = if params.lat {
        lat::run(&side, &peer, &params, &mut stream)
    } else {
        bw::run(&side, &peer, &params, &mut stream, !args.quiet)
    };
    if args.stats {
        side.print_stats();
    }
    result
}

/// Connects to the server, waiting up to 10 s for it to listen.
fn connect_retry(server: &str, port: u16) -> Result<TcpStream, String> {
    use std::net::ToSocketAddrs;
    let addr = (server, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {server}: {e}"))?
        .next()
        .ok_or_else(|| format!("{server} has no address"))?;
    let mut last = None;
    for _ in 0..100 {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "connecting to {addr}: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}
