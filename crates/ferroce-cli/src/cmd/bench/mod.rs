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
//! * resident memory per idle RC QP.
//!
//! The ferroce figures come from `ferroce perf` runs (a client and a server
//! process); the raw side is `ferroce udp-peer`. The machine is shared:
//! compare ratios within one run.

mod memory;
mod raw;

use std::net::IpAddr;
use std::process::Command;

use clap::Args;

pub(crate) use raw::{UdpPeerArgs, udp_peer};

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
    /// Runs of each measure; the table shows their median.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// The two loopback addresses (server, client).
    #[arg(long, default_value = "127.0.0.61")]
    server: IpAddr,
    #[arg(long, default_value = "127.0.0.62")]
    client: IpAddr,
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
    mut f: impl FnMut() -> Result<[f64; K], String>,
) -> Result<[f64; K], String> {
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
fn medians(runs: Vec<Result<(f64, f64), String>>) -> Result<[f64; 2], String> {
    let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    let (mut m, mut p): (Vec<f64>, Vec<f64>) = runs.into_iter().unzip();
    Ok([median_p99(&mut m).0, median_p99(&mut p).0])
}

/// One `ferroce perf` run (client here, server in a child process); returns
/// the numbers of its data row.
fn perf(args: &BenchArgs, extra: &[String], port: u16) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .arg("perf")
        .args(extra)
        .args(["--quiet", "-p", &port.to_string()])
        .args(["-L", &args.client.to_string()])
        .args(["--server-local", &args.server.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "ferroce perf {} failed: {text}{}",
            extra.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
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
) -> Result<(f64, f64), String> {
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
fn latency(args: &BenchArgs, op: &str, port: u16) -> Result<(f64, f64), String> {
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

/// The table: one row per measure.
struct Table;

impl Table {
    fn header() {
        println!(
            "| {:<40} | {:>14} | {:>24} | {:>7} | {:<14} |",
            "measure", "ferroce", "baseline", "ratio", "goal"
        );
        println!(
            "|{}|{}|{}|{}|{}|",
            "-".repeat(42),
            "-".repeat(16),
            "-".repeat(26),
            "-".repeat(9),
            "-".repeat(16)
        );
    }

    fn row(name: &str, ours: &str, base: &str, ratio: f64, goal: &str) {
        let ratio = if ratio.is_finite() {
            format!("{:.0}%", ratio * 100.0)
        } else {
            String::new()
        };
        println!("| {name:<40} | {ours:>14} | {base:>24} | {ratio:>7} | {goal:<14} |");
    }
}

pub(crate) fn run(args: &BenchArgs) -> Result<bool, String> {
    let (server, client) = (args.server, args.client);
    let full_count = args.bytes / 4096;
    let n = args.repeat;
    eprintln!("raw UDP streams ...");
    let stream = |size, count, how| {
        repeated(n, || {
            raw::stream(server, client, size, count, how).map(|(r, g)| [r, g])
        })
    };
    let [_, raw_mmsg] = stream(FULL_DATAGRAM, full_count, raw::Batching::Mmsg)?;
    let [_, raw_gso] = stream(FULL_DATAGRAM, full_count, raw::Batching::GsoGro)?;
    let [_, raw_shaped] = stream(FULL_DATAGRAM, full_count, raw::Batching::WriteShaped)?;
    let limit = raw_mmsg.max(raw_gso);
    let rate_count = u64::from(args.rate_msgs);
    let [rate_mmsg, _] = stream(RATE_WRITE, rate_count, raw::Batching::Mmsg)?;
    let [rate_gso, _] = stream(RATE_WRITE, rate_count, raw::Batching::GsoGro)?;

    let mut port = 18800;
    let mut next_port = || {
        port += 1;
        port
    };
    let mut bw_rows = Vec::new();
    for (op, size, qps) in [
        ("write", 65536, 1),
        ("write", 65536, 8),
        ("write", 1 << 20, 1),
        ("write", 1 << 20, 8),
        ("read", 65536, 1),
        ("read", 65536, 8),
        ("read", 1 << 20, 1),
        ("read", 1 << 20, 8),
        ("send", 65536, 1),
        ("send", 65536, 8),
        ("send", 1 << 20, 1),
        ("send", 1 << 20, 8),
    ] {
        eprintln!("ferroce perf {op} -s {size} -q {qps} ...");
        let r = repeated(n, || {
            bandwidth(args, op, size, qps, next_port()).map(|(g, _)| [g])
        });
        bw_rows.push((op, size, qps, r.map(|[g]| g)));
    }
    // Latency moves with the machine's load more than anything here, so
    // each run of the raw ping-pong sits right beside a run of each
    // ferroce one.
    eprintln!("raw UDP and ferroce latency 8 B ...");
    let (mut raw_runs, mut write_runs, mut send_runs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n.max(1) {
        raw_runs.push(raw::latency(server, client, SMALL_WRITE, args.lat_iters));
        write_runs.push(latency(args, "write", next_port()));
        send_runs.push(latency(args, "send", next_port()));
    }
    let [raw_med, raw_p99] = medians(raw_runs)?;
    let wl = medians(write_runs);
    let sl = medians(send_runs);
    eprintln!("ferroce perf write -s 64 (message rate) ...");
    let per = u64::from(args.rate_msgs);
    let rate = repeated(n, || {
        perf(
            args,
            &["write", "-s", "64", "-n", &per.to_string()].map(String::from),
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
    let mem = memory::per_idle_qp(server, client, args.idle_qps);
    // A failed run leaves its row empty; why is printed under the table.
    let mut failures = Vec::new();
    let mut ok = |r: Result<f64, String>| {
        r.unwrap_or_else(|e| {
            failures.push(e);
            f64::NAN
        })
    };

    println!(
        "ferroce bench: {client} -> {server}, two processes each side; median of {} runs \
         of each measure; {} MiB per bandwidth run",
        n.max(1),
        args.bytes >> 20
    );
    Table::header();
    let gbs = |v: f64| format!("{v:.2} GB/s");
    Table::row(
        "raw UDP 4112 B datagrams, sendmmsg",
        "",
        &gbs(raw_mmsg),
        f64::NAN,
        "",
    );
    Table::row(
        "raw UDP 4112 B datagrams, GSO + GRO",
        "",
        &gbs(raw_gso),
        f64::NAN,
        "",
    );
    Table::row(
        "raw UDP, shaped as 64 KiB WRITEs",
        "",
        &gbs(raw_shaped),
        f64::NAN,
        "",
    );
    for (op, size, qps, r) in bw_rows {
        let gb = ok(r);
        let goal_row = op == "write" && size == 65536 && qps == 1;
        let size = if size == 65536 { "64 KiB" } else { "1 MiB" };
        Table::row(
            &format!("RC {} goodput, {size}, {qps} QP", op.to_uppercase()),
            &gbs(gb),
            &format!("{} (raw limit)", gbs(limit)),
            gb / limit,
            if goal_row { ">= 80%" } else { "" },
        );
        if goal_row {
            Table::row(
                "",
                "",
                &format!("{} (raw, shaped)", gbs(raw_shaped)),
                gb / raw_shaped,
                "",
            );
        }
    }
    let us = |v: f64| format!("{v:.2} us");
    for (name, r) in [("WRITE", wl), ("SEND", sl)] {
        let med = ok(r.clone().map(|l| l[0]));
        let p99 = ok(r.map(|l| l[1]));
        Table::row(
            &format!("RC {name} latency 8 B, median"),
            &us(med),
            &format!("{} (raw half RTT)", us(raw_med)),
            med / raw_med,
            "<= 150%",
        );
        Table::row(
            &format!("RC {name} latency 8 B, p99"),
            &us(p99),
            &format!("{} (raw half RTT)", us(raw_p99)),
            p99 / raw_p99,
            "",
        );
    }
    let mps = |v: f64| format!("{:.2} M/s", v / 1e6);
    let rate = ok(rate);
    Table::row(
        "64 B WRITE message rate, 1 QP",
        &mps(rate * 1e6),
        &format!("{} (raw, sendmmsg)", mps(rate_mmsg)),
        rate * 1e6 / rate_mmsg,
        ">= 1.00 M/s",
    );
    Table::row(
        "",
        "",
        &format!("{} (raw, GSO+GRO)", mps(rate_gso)),
        rate * 1e6 / rate_gso,
        "",
    );
    let scale: Vec<(u32, f64)> = scale.into_iter().map(|(q, r)| (q, ok(r))).collect();
    let one = scale.first().map_or(f64::NAN, |s| s.1);
    for (qps, gb) in scale {
        Table::row(
            &format!("RC WRITE goodput, 64 KiB, {qps} QPs"),
            &gbs(gb),
            &format!("{} (1 QP)", gbs(one)),
            gb / one,
            if qps == 1000 { ">= 70%" } else { "" },
        );
    }
    let mem = ok(mem);
    Table::row(
        "resident memory per idle RC QP",
        &format!("{mem:.0} B"),
        &format!("{} QPs at RTS", args.idle_qps),
        f64::NAN,
        "<= 4096 B",
    );
    println!(
        "ratio: ferroce / baseline (for latency: ferroce / raw, lower is better). \
         raw: {FULL_DATAGRAM}-byte (or {RATE_WRITE}-byte) datagrams between the same two \
         addresses; GSO trains of up to 64 KiB; shaped: per 16 datagrams one of \
         {} bytes alone (a WRITE's FIRST packet, with its RETH) and a train of 15; latency: a {SMALL_WRITE}-byte datagram \
         echoed, half the round trip. Bandwidth runs keep 128 messages in flight in all \
         (-t 128/QPs, at least 2 per QP).",
        FULL_DATAGRAM + 16
    );
    for f in &failures {
        println!("failed: {f}");
    }
    Ok(failures.is_empty())
}
