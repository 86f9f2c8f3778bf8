//! `ferroce perf`: bandwidth and latency of SEND, RDMA WRITE, RDMA READ and
//! atomics between two processes, reported as perftest reports them.
//!
//! `ferroce perf write` alone runs a loopback test: it starts a server
//! process on 127.0.0.1 and runs the client on 127.0.0.2. With `--listen`
//! it is the server: it runs one test with one client and exits (as
//! perftest's servers); a connection that sends no usable hello is refused
//! and it waits for the next. With a server address, the client. The
//! exchange of QP numbers, PSNs and keys is one JSON line each way over TCP
//! (not perftest's format; see exchange.rs): both sides must be started
//! for the same test, `--lat`, `-s` and `-q`, or both exit non-zero. With `--perftest` the exchange is perftest's own instead, to
//! run against ib_write_bw / ib_send_bw / ib_read_bw / ib_atomic_bw and
//! ib_write_lat / ib_send_lat / ib_read_lat / ib_atomic_lat (see
//! perftest/), and with `-R` perftest's rdma_cm mode.
//!
//! On stdout, each side prints perftest's header block (header.rs: the
//! test, device, QPs, MTU, message size, TX depth, both sides' QPN, PSN,
//! RKey, VAddr and GID) and then the client its result table, in
//! perftest's format; `--quiet` prints the table alone.

mod bw;
mod exchange;
mod header;
mod lat;
mod perftest;
mod setup;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};

use clap::{Args, ValueEnum};
use ferroce::Mtu;

use super::{limits, tcp};
use crate::error::Error;
use setup::Params;

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
    /// Server to connect to (a host name or address; the TCP port is -p);
    /// without it (and without --listen), run both sides on loopback.
    server: Option<String>,
    /// Be the server: run one test with one client, then exit. The client
    /// must ask for the same test, --lat, -s and -q; it brings -n and -t.
    #[arg(long, conflicts_with = "server")]
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
    #[arg(long, short = 's', default_value_t = 65536,
          value_parser = clap::value_parser!(u64).range(1..=limits::MAX_SIZE))]
    size: u64,
    /// Messages per QP.
    #[arg(long, short = 'n', default_value_t = 5000,
          value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Queue pairs.
    #[arg(long, short = 'q', default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::MAX_QPS)))]
    qps: u32,
    /// Outstanding work requests per QP.
    #[arg(long, short = 't', default_value_t = 128,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::MAX_DEPTH)))]
    tx_depth: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096 (the smaller of the
    /// two sides' is used).
    #[arg(long, short = 'm', default_value = "4096", value_parser = limits::parse_mtu)]
    mtu: Mtu,
    /// This device's address (default 127.0.0.1 as server, 127.0.0.2 as client).
    #[arg(long, short = 'L')]
    local: Option<IpAddr>,
    /// TCP port of the exchange.
    #[arg(long, short = 'p', default_value_t = 18515)]
    port: u16,
    /// Loopback runs: the server process's address.
    #[arg(long, default_value = "127.0.0.1")]
    server_local: IpAddr,
    /// Print the result table alone: no header block (what is measured,
    /// both sides' addresses), no progress bar.
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
    /// With --perftest: perftest's -R (--rdma_cm): the exchange over an
    /// rdma_cm connection to port -p and the test's QPs connected by
    /// rdma_cm (run against `ib_write_bw -R`, `ib_send_bw -R`, `ib_read_bw
    /// -R`, `ib_atomic_bw -R`, and with --lat the `ib_*_lat -R` tools).
    // Needs --perftest: `check_modes` says so, naming the way out.
    #[arg(short = 'R', long = "rdma-cm")]
    rdma_cm: bool,
    #[command(flatten)]
    backend: crate::cmd::backend::BackendArgs,
}

/// Flags that only work together: `-R` is perftest's rdma_cm mode, so it
/// needs `--perftest` (ferroce's own exchange is TCP only). Said here
/// rather than by clap's `requires`, whose message names no way out.
fn check_modes(args: &PerfArgs) -> Result<(), Error> {
    if args.rdma_cm && !args.perftest {
        return Err(Error::Usage(
            "-R (rdma_cm) needs --perftest: -R is perftest's rdma_cm mode, and ferroce's own \
             exchange runs over TCP only; add --perftest (`ferroce perf write --perftest -R \
             SERVER`, against `ib_write_bw -R`)"
                .into(),
        ));
    }
    Ok(())
}

pub(crate) fn run(args: &PerfArgs) -> Result<bool, Error> {
    check_modes(args)?;
    let mut args = args.clone();
    if args.test == Test::Atomic {
        args.size = 8;
    }
    if args.perftest {
        return perftest::run(&args);
    }
    if args.listen {
        let local = args.local.unwrap_or(Ipv4Addr::new(127, 0, 0, 1).into());
        return server(&args, local);
    }
    match args.server.clone() {
        Some(s) => {
            let local = args.local.unwrap_or(Ipv4Addr::new(127, 0, 0, 2).into());
            client(&args, local, &s)
        }
        None => loopback(&args),
    }
}

/// Starts `ferroce perf ... --listen` as a child and runs the client here.
fn loopback(args: &PerfArgs) -> Result<bool, Error> {
    let exe = std::env::current_exe()?;
    let server_local = args.server_local.to_string();
    let mut child = Command::new(exe)
        .args(["perf", test_name(args.test), "--listen", "--quiet"])
        .args(["-L", &server_local, "-p", &args.port.to_string()])
        .args(["-s", &args.size.to_string(), "-q", &args.qps.to_string()])
        .args(["-m", &args.mtu.bytes().to_string()])
        .args(args.lat.then_some("--lat"))
        .args(args.stats.then_some("--stats"))
        .args(args.backend.raw.then_some("--raw"))
        .args(args.backend.cc_args())
        .args(
            args.backend
                .gid_index
                .iter()
                .flat_map(|g| ["-g".to_string(), g.to_string()]),
        )
        .env(crate::LOG_ENV, crate::log_filter())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| Error::Run(format!("starting the server process: {e}")))?;
    let local = args.local.unwrap_or(Ipv4Addr::new(127, 0, 0, 2).into());
    let result = client(args, local, &server_local);
    if result.is_err() {
        // It may be waiting for a client that will not come.
        let _ = child.kill();
    }
    let status = child.wait()?;
    if result.is_ok() && !status.success() {
        return Err(Error::Run(format!("the server process failed: {status}")));
    }
    result
}

pub(super) fn test_name(t: Test) -> &'static str {
    match t {
        Test::Send => "send",
        Test::Write => "write",
        Test::Read => "read",
        Test::Atomic => "atomic",
    }
}

fn server(args: &PerfArgs, local: IpAddr) -> Result<bool, Error> {
    let ours = Params::from_args(args);
    let listener = tcp::listen(SocketAddr::new(local, args.port))?;
    let (mut stream, params) = tcp::serve_first(&listener, |s| {
        let theirs = exchange::read_hello(s)?;
        let refusal = exchange::mismatch(&ours, &theirs);
        exchange::answer(s, refusal.as_deref())?;
        match refusal {
            None => Ok(theirs),
            Some(why) => Err(Error::Mismatch(format!(
                "the client at {} was refused: {why}",
                s.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string())
            ))),
        }
    })?;
    // The client's -n, -t and -m rule (its MTU no larger than ours).
    let params = Params {
        mtu: params.mtu.min(ours.mtu),
        ..params
    };
    let side = setup::Side::open_with(local, &params, &args.backend)?;
    let peer = exchange::exchange_server(&mut stream, &side)?;
    side.connect(&peer.qps, &params)?;
    if !args.quiet {
        print_header(args, &params, &side, &peer);
    }
    tcp::clear_timeouts(&stream)?;
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

fn client(args: &PerfArgs, local: IpAddr, server: &str) -> Result<bool, Error> {
    let mut stream = tcp::connect_retry(server, args.port)?;
    let params = Params::from_args(args);
    exchange::write_hello(&mut stream, &params)?;
    let peer = tcp::peer_name(&stream);
    exchange::read_answer(&mut stream, &peer)?;
    let side = setup::Side::open_with(local, &params, &args.backend)?;
    let peer = exchange::exchange_client(&mut stream, &side)?;
    side.connect(&peer.qps, &params)?;
    if !args.quiet {
        print_header(args, &params, &side, &peer);
    }
    tcp::clear_timeouts(&stream)?;
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

/// perftest's header block for this side and its peer (see header.rs).
fn print_header(args: &PerfArgs, p: &Params, side: &setup::Side, peer: &setup::Peer) {
    let region = |r: &ferroce::RemoteRegion| (r.rkey(), r.addr());
    let address = |e: &ferroce::QpEndpoint, (rkey, vaddr): (u32, u64)| header::Address {
        // RoCE has no LIDs: perftest prints 0 on Ethernet.
        lid: 0,
        qpn: e.qpn,
        psn: e.psn.value(),
        rkey,
        vaddr,
        gid: header::gid_bytes(e.gid),
    };
    let mine = region(&side.mr.remote());
    let local: Vec<_> = side
        .qps
        .iter()
        .map(|q| address(&q.endpoint(), mine))
        .collect();
    let theirs = region(&peer.region);
    let remote: Vec<_> = peer.qps.iter().map(|e| address(e, theirs)).collect();
    let exchange = "Ethernet (ferroce's JSON exchange over TCP)";
    header::Header::of_test(args, p, exchange, &local, &remote).print();
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// `ferroce perf` alone, to parse its arguments.
    #[derive(Debug, Parser)]
    struct Perf {
        #[command(flatten)]
        args: PerfArgs,
    }

    fn parse(argv: &[&str]) -> PerfArgs {
        let argv = std::iter::once("perf").chain(argv.iter().copied());
        Perf::try_parse_from(argv)
            .expect("the arguments parse")
            .args
    }

    #[test]
    fn rdma_cm_without_perftest_says_to_add_it() {
        let err = check_modes(&parse(&["write", "-R", "127.0.0.1"])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("-R (rdma_cm) needs --perftest"), "{msg}");
        assert!(matches!(err, Error::Usage(_)), "{err:?}");
        assert!(check_modes(&parse(&["write", "--perftest", "-R", "127.0.0.1"])).is_ok());
        assert!(check_modes(&parse(&["write"])).is_ok());
    }
}
