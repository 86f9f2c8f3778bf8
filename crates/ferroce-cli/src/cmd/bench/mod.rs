//! `ferroce bench`: what ferroce carries between two processes on loopback,
//! each figure beside a raw UDP baseline measured in the same run between
//! the same two addresses, with the ratio and the goal it is held to:
//!
//! * the limit: raw UDP streams of RoCE-sized datagrams (BTH + 4096 +
//!   ICRC), with `sendmmsg`/`recvmmsg` and with UDP GSO + GRO;
//! * RC WRITE, READ and SEND goodput, 64 KiB and 1 MiB messages, MTU 4096,
//!   1 and 8 QPs, against the better raw figure;
//! * 8-byte RC WRITE and SEND latency (median and p99, half round trip)
//!   against a raw UDP ping-pong, both busy-polling;
//! * the rate of 64-byte WRITEs, beside raw UDP's rate of datagrams of the
//!   same size;
//! * WRITE goodput with 1, 100 and 1,000 QPs, against 1 QP;
//! * resident memory per idle RC QP;
//! * rdma_cm connection setups per second (connect, accept, ESTABLISHED,
//!   disconnect, DISCONNECTED on both sides), one at a time and 64 in
//!   parallel, against TCP connect + accept + close on the same addresses;
//! * the C ABI: perftest's `ib_write_bw` and `ib_write_lat` on ferroce's
//!   `libibverbs.so.1`, against `ferroce perf` running the same tests
//!   (see [`cabi`]; `--c-abi-only` runs just these);
//! * middleware: UCX's `ucx_perftest` on ferroce's libraries, against
//!   `ferroce perf` running the same transfer (see [`middleware`];
//!   `--middleware-only` runs just these);
//! * the raw-Ethernet backend on a veth pair between two namespaces (root
//!   only): the rings' own limit, RC WRITE 64 KiB against it and against
//!   the UDP backend on the same veth, 8-byte WRITE latency against the
//!   rings' ping-pong (see [`veth`]; `--raw-only` runs just these);
//! * the engine's "never waits" goals: a region scanned while a peer
//!   writes into it, the ACK owed by a receiver that stops polling, a
//!   passive server blocking in `CompletionQueue::wait`, and the spread of
//!   `ib_write_lat`'s runs (see [`progress`]; `--progress-only` runs just
//!   these);
//! * where the time of one packet goes: a 1 KiB and a 64-byte RC WRITE's
//!   parsing, QP work, emitting, payload copy, ICRC and system calls, each
//!   timed alone in one process, their sum beside what `ferroce perf write`
//!   reaches per packet (see [`packet`]; `--packet-only` runs just these).
//!
//! The ferroce figures come from `ferroce perf` runs (a client and a server
//! process); the raw side is `ferroce udp-peer`. The machine is shared:
//! compare ratios within one run.

mod cabi;
mod cm;
mod memory;
mod middleware;
mod packet;
mod progress;
mod raw;
mod rawpeer;
mod report;
mod veth;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use crate::error::Error;
use clap::Args;

pub(crate) use raw::{UdpPeerArgs, udp_peer};
pub(crate) use rawpeer::{RawPeerArgs, raw_peer};

/// A full RoCE datagram at MTU 4096 (BTH + 4096 + ICRC) and an 8-byte
/// WRITE ONLY (BTH + RETH + 8 + ICRC).
const FULL_DATAGRAM: usize = 12 + 4096 + 4;
const SMALL_WRITE: usize = 12 + 16 + 8 + 4;
const RATE_WRITE: usize = 12 + 16 + 64 + 4;

/// Arguments of `ferroce bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Bytes moved by each bandwidth run.
    #[arg(long, default_value_t = 256 << 20)]
    bytes: u64,
    /// Round trips per latency run.
    #[arg(long, default_value_t = 5000)]
    lat_iters: u32,
    /// 64-byte WRITEs in the message-rate run.
    #[arg(long, default_value_t = 300_000)]
    rate_msgs: u32,
    /// Idle QPs created for the memory figure.
    #[arg(long, default_value_t = 5000)]
    idle_qps: u32,
    /// Seconds each rdma_cm (and TCP) setup-rate run lasts.
    #[arg(long, default_value_t = 2.0)]
    cm_secs: f64,
    /// Run only the rdma_cm setup-rate rows and their TCP baseline.
    #[arg(long)]
    cm_only: bool,
    /// Run only the C ABI rows (perftest on ferroce's libibverbs.so.1
    /// beside `ferroce perf`).
    #[arg(long)]
    c_abi_only: bool,
    /// Run only the middleware rows (UCX's ucx_perftest on ferroce's
    /// libibverbs.so.1 and librdmacm.so.1 beside `ferroce perf`).
    #[arg(long)]
    middleware_only: bool,
    /// Run only the raw-Ethernet backend's rows (root: on a veth pair
    /// between two namespaces the bench makes and removes).
    #[arg(long)]
    raw_only: bool,
    /// Run only the rows of the engine's "never waits" goals (region
    /// scan, owed ACK, passive server, ib_write_lat's run-to-run spread).
    #[arg(long)]
    progress_only: bool,
    /// Run only the per-packet cost rows (a 1 KiB and a 64-byte WRITE's
    /// phases, each timed alone, beside `ferroce perf write` per packet).
    #[arg(long)]
    packet_only: bool,
    /// ib_write_lat runs in a row for the latency-stability row.
    #[arg(long, default_value_t = 30)]
    stability_runs: u32,
    /// ferroce's libibverbs.so for the C ABI rows (default:
    /// $FERROCE_LIBIBVERBS, else libibverbs.so beside this binary, where
    /// `cargo build --release -p ferroce-verbs` puts it).
    #[arg(long)]
    libibverbs: Option<PathBuf>,
    /// Runs of each measure; the table shows their median.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// The server side's loopback address (each run's server process and
    /// raw peer).
    #[arg(long, default_value = "127.0.0.61")]
    server: IpAddr,
    /// The client side's loopback address.
    #[arg(long, default_value = "127.0.0.62")]
    client: IpAddr,
}

/// The two loopback addresses of a pair of processes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Peers {
    pub(super) server: IpAddr,
    pub(super) client: IpAddr,
}

impl BenchArgs {
    /// The server's and the client's addresses the options name.
    fn peers(&self) -> Peers {
        Peers {
            server: self.server,
            client: self.client,
        }
    }
}

/// Median and 99th percentile of `v` (sorted in place).
pub(super) fn median_p99(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    (v[n / 2], v[(n * 99 / 100).min(n - 1)])
}

/// Runs `f` `n` times (at least once) and returns the median of each of
/// its figures; any failed run fails the measure.
fn repeated<const K: usize>(
    n: u32,
    mut f: impl FnMut() -> Result<[f64; K], Error>,
) -> Result<[f64; K], Error> {
    let mut runs = Vec::new();
    for _ in 0..n.max(1) {
        runs.push(f()?);
    }
    Ok(std::array::from_fn(|k| {
        let mut v: Vec<f64> = runs.iter().map(|r| r[k]).collect();
        median_p99(&mut v).0
    }))
}

/// The median of each figure of (median, p99) runs; any failed run fails
/// the measure.
fn medians(runs: Vec<Result<(f64, f64), Error>>) -> Result<[f64; 2], Error> {
    let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    let (mut m, mut p): (Vec<f64>, Vec<f64>) = runs.into_iter().unzip();
    Ok([median_p99(&mut m).0, median_p99(&mut p).0])
}

/// One `ferroce perf` run (client here, server in a child process); returns
/// the numbers of its data row.
fn perf(args: &BenchArgs, extra: &[String], port: u16) -> Result<Vec<f64>, Error> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .arg("perf")
        .args(extra)
        .args(["--quiet", "-p", &port.to_string()])
        .args(["-L", &args.client.to_string()])
        .args(["--server-local", &args.server.to_string()])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "ferroce perf {} failed: {text}{}",
            extra.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let row = text.lines().nth(2).unwrap_or_default();
    Ok(row
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect())
}

/// A bandwidth run: `op` with `size`-byte messages on `qps` QPs, moving
/// about `args.bytes`. Returns (GB/s of payload, million messages/s).
fn bandwidth(
    args: &BenchArgs,
    op: &str,
    size: u64,
    qps: u32,
    port: u16,
) -> Result<(f64, f64), Error> {
    let per_qp = (args.bytes / size / u64::from(qps)).max(1);
    // Keep the bytes in flight about the same whatever the QP count.
    let depth = (128 / qps).clamp(2, 128);
    let a: Vec<String> = [op, "-s", &size.to_string(), "-n", &per_qp.to_string()]
        .iter()
        .map(|s| s.to_string())
        .chain(["-q".into(), qps.to_string(), "-t".into(), depth.to_string()])
        .collect();
    let cols = perf(args, &a, port)?;
    // #bytes #iterations BW-peak BW-average[MB/s] MsgRate[Mpps]
    let mb = cols.get(3).copied().unwrap_or(f64::NAN);
    let mpps = cols.get(4).copied().unwrap_or(f64::NAN);
    Ok((mb * 1_048_576.0 / 1e9, mpps))
}

/// An 8-byte latency run: (median, p99) in µs.
fn latency(args: &BenchArgs, op: &str, port: u16) -> Result<(f64, f64), Error> {
    let a: Vec<String> = [op, "--lat", "-s", "8", "-n", &args.lat_iters.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    // #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    let cols = perf(args, &a, port)?;
    Ok((
        cols.get(4).copied().unwrap_or(f64::NAN),
        cols.get(7).copied().unwrap_or(f64::NAN),
    ))
}

/// The raw UDP figures every ferroce figure is set beside.
pub(super) struct Raw {
    /// GB/s of full datagrams with `sendmmsg` and with GSO + GRO, the
    /// better of the two, and shaped as a 64 KiB WRITE's packets.
    mmsg: f64,
    gso: f64,
    limit: f64,
    shaped: f64,
    /// Datagrams per second of 64-byte WRITE's size.
    rate_mmsg: f64,
    rate_gso: f64,
}

/// One measure's median, or why it failed.
type Figure = Result<f64, Error>;

/// What the ferroce runs measured (each may have failed on its own).
pub(super) struct Figures {
    /// (operation, message size, QPs, GB/s).
    bandwidth: Vec<(&'static str, u64, u32, Figure)>,
    /// Raw UDP's half round trip (median, p99), in µs.
    raw_latency: [f64; 2],
    /// (operation, median, p99) in µs.
    latency: Vec<(&'static str, Figure, Figure)>,
    /// Million 64-byte WRITEs per second.
    rate: Figure,
    /// (QPs, GB/s).
    scale: Vec<(u32, Figure)>,
    /// Resident bytes per idle QP.
    memory: Figure,
}

/// rdma_cm setups per second and TCP's, one at a time and in parallel.
pub(super) struct CmFigures {
    /// (connections in flight, rdma_cm setups/s, TCP setups/s).
    rows: Vec<(usize, Figure, Figure)>,
}

/// The setup rates in flight counts of 1 and [`CM_PARALLEL`].
const CM_PARALLEL: usize = 64;

pub(crate) fn run(args: &BenchArgs) -> Result<bool, Error> {
    if args.cm_only {
        return Ok(report::print_cm(args, measure_cm(args)));
    }
    let mut port = 18700;
    let mut cabi_ports = || {
        port += 1;
        port
    };
    if args.c_abi_only {
        return Ok(report::print_cabi(args, cabi::measure(args, cabi_ports)));
    }
    if args.middleware_only {
        return Ok(report::print_middleware(
            args,
            middleware::measure(args, cabi_ports),
        ));
    }
    if args.raw_only {
        return Ok(report::print_veth(args, veth::measure(args)));
    }
    if args.progress_only {
        return Ok(report::print_progress(
            args,
            progress::measure(args, cabi_ports),
        ));
    }
    if args.packet_only {
        return Ok(packet::print_packet(
            args,
            packet::measure(args, cabi_ports),
        ));
    }
    let raw = measure_raw(args)?;
    let figures = measure_ferroce(args)?;
    let cm = measure_cm(args);
    let c_abi = cabi::measure(args, &mut cabi_ports);
    let ucx = middleware::measure(args, &mut cabi_ports);
    let veth = veth::measure(args);
    let progress = progress::measure(args, &mut cabi_ports);
    let per_packet = packet::measure(args, &mut cabi_ports);
    let ok = report::print(args, &raw, figures);
    let ok = report::print_cm(args, cm) && ok;
    let ok = report::print_cabi(args, c_abi) && ok;
    let ok = report::print_middleware(args, ucx) && ok;
    let ok = report::print_veth(args, veth) && ok;
    let ok = report::print_progress(args, progress) && ok;
    Ok(packet::print_packet(args, per_packet) && ok)
}

/// rdma_cm's setup rates and TCP's, each run `args.repeat` times, the TCP
/// run beside each rdma_cm run.
fn measure_cm(args: &BenchArgs) -> CmFigures {
    let rows = [1, CM_PARALLEL]
        .into_iter()
        .map(|parallel| {
            eprintln!("rdma_cm and TCP setups, {parallel} in flight ...");
            let (mut ours, mut tcp) = (Vec::new(), Vec::new());
            for _ in 0..args.repeat.max(1) {
                ours.push(cm::rdma_cm_rate(
                    args.server,
                    args.client,
                    parallel,
                    args.cm_secs,
                ));
                tcp.push(cm::tcp_rate(args.server, parallel, args.cm_secs));
            }
            (parallel, median_of(ours), median_of(tcp))
        })
        .collect();
    CmFigures { rows }
}

/// The median of runs; any failed run fails the measure.
fn median_of(runs: Vec<Result<f64, Error>>) -> Figure {
    let mut v = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(median_p99(&mut v).0)
}

/// The raw UDP streams: the limit for goodput and for message rate.
fn measure_raw(args: &BenchArgs) -> Result<Raw, Error> {
    let (server, client) = (args.server, args.client);
    eprintln!("raw UDP streams ...");
    let stream = |size, count, how| {
        repeated(args.repeat, || {
            raw::stream(server, client, size, count, how).map(|(r, g)| [r, g])
        })
    };
    let full_count = args.bytes / 4096;
    let [_, mmsg] = stream(FULL_DATAGRAM, full_count, raw::Batching::Mmsg)?;
    let [_, gso] = stream(FULL_DATAGRAM, full_count, raw::Batching::GsoGro)?;
    let [_, shaped] = stream(FULL_DATAGRAM, full_count, raw::Batching::WriteShaped)?;
    let rate_count = u64::from(args.rate_msgs);
    let [rate_mmsg, _] = stream(RATE_WRITE, rate_count, raw::Batching::Mmsg)?;
    let [rate_gso, _] = stream(RATE_WRITE, rate_count, raw::Batching::GsoGro)?;
    Ok(Raw {
        mmsg,
        gso,
        limit: mmsg.max(gso),
        shaped,
        rate_mmsg,
        rate_gso,
    })
}

/// Every ferroce measure, each run `args.repeat` times on fresh TCP ports.
fn measure_ferroce(args: &BenchArgs) -> Result<Figures, Error> {
    let n = args.repeat;
    let mut port = 18800;
    let mut next_port = || {
        port += 1;
        port
    };
    let mut bandwidth_rows = Vec::new();
    for op in ["write", "read", "send"] {
        for (size, qps) in [(65536, 1), (65536, 8), (1 << 20, 1), (1 << 20, 8)] {
            eprintln!("ferroce perf {op} -s {size} -q {qps} ...");
            let r = repeated(n, || {
                bandwidth(args, op, size, qps, next_port()).map(|(g, _)| [g])
            });
            bandwidth_rows.push((op, size, qps, r.map(|[g]| g)));
        }
    }
    // Latency moves with the machine's load more than anything here, so
    // each run of the raw ping-pong sits right beside a run of each
    // ferroce one.
    eprintln!("raw UDP and ferroce latency 8 B ...");
    let (mut raw_runs, mut write_runs, mut send_runs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n.max(1) {
        let raw = raw::latency(args.server, args.client, SMALL_WRITE, args.lat_iters);
        raw_runs.push(raw);
        write_runs.push(latency(args, "write", next_port()));
        send_runs.push(latency(args, "send", next_port()));
    }
    let raw_latency = medians(raw_runs)?;
    let latency = [("WRITE", write_runs), ("SEND", send_runs)]
        .into_iter()
        .map(|(name, runs)| match medians(runs) {
            Ok([med, p99]) => (name, Ok(med), Ok(p99)),
            Err(e) => (
                name,
                Err(e),
                Err(Error::Run(format!("{name} latency: see above"))),
            ),
        })
        .collect();
    eprintln!("ferroce perf write -s 64 (message rate) ...");
    let per = u64::from(args.rate_msgs).to_string();
    let rate = repeated(n, || {
        perf(
            args,
            &["write", "-s", "64", "-n", &per].map(String::from),
            next_port(),
        )
        .map(|cols| [cols.get(4).copied().unwrap_or(f64::NAN)])
    })
    .map(|[r]| r);
    let mut scale = Vec::new();
    for qps in [1u32, 100, 1000] {
        eprintln!("ferroce perf write -s 65536 -q {qps} ...");
        let r = repeated(n, || {
            bandwidth(args, "write", 65536, qps, next_port()).map(|(g, _)| [g])
        });
        scale.push((qps, r.map(|[g]| g)));
    }
    eprintln!("idle QP memory ...");
    let memory = memory::per_idle_qp(args.server, args.client, args.idle_qps);
    Ok(Figures {
        bandwidth: bandwidth_rows,
        raw_latency,
        latency,
        rate,
        scale,
        memory,
    })
}
