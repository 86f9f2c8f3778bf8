//! `ferroce bench`: ferroce's goodput and latency between two processes on
//! loopback, each beside raw UDP between the same two addresses with the
//! same datagram size and the same `sendmmsg`/`recvmmsg` batching, measured
//! in the same run, with the ratio. The raw side runs `ferroce udp-peer`
//! (a sink or an echo) in a second process.

use std::net::{IpAddr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ferroce_io::{UdpBackend, UdpConfig};

/// Datagram payload of a full RoCE packet at MTU 4096: BTH + 4096 + ICRC.
const DATAGRAM: usize = 12 + 4096 + 4;
const ROCE_PORT: u16 = 4791;

/// Arguments of `ferroce bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Messages per bandwidth run (64 KiB each).
    #[arg(long, default_value_t = 4000)]
    iters: u32,
    /// Round trips per latency run.
    #[arg(long, default_value_t = 5000)]
    lat_iters: u32,
    /// The two loopback addresses (server, client).
    #[arg(long, default_value = "127.0.0.61")]
    server: IpAddr,
    #[arg(long, default_value = "127.0.0.62")]
    client: IpAddr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PeerMode {
    /// Count what arrives; print bytes and the first-to-last time.
    Sink,
    /// Send every datagram back to its sender's RoCE port.
    Echo,
}

/// Arguments of the hidden `ferroce udp-peer` (the raw UDP side of `bench`).
#[derive(Debug, Args)]
pub(crate) struct UdpPeerArgs {
    #[arg(value_enum)]
    mode: PeerMode,
    #[arg(long, short = 'L')]
    local: IpAddr,
    /// Stop after this many datagrams.
    #[arg(long)]
    count: u64,
}

pub(crate) fn udp_peer(args: &UdpPeerArgs) -> Result<bool, String> {
    let mut b = UdpBackend::bind(UdpConfig::new(args.local))
        .map_err(|e| format!("binding {}: {e}", args.local))?;
    println!("ready");
    let (mut n, mut bytes) = (0u64, 0u64);
    let (mut first, mut last) = (None, Instant::now());
    let mut echo: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while n < args.count && Instant::now() < deadline {
        if first.is_some() && last.elapsed() > Duration::from_secs(1) {
            break; // the sender is done; some datagrams were lost
        }
        let got = b
            .recv_raw(|from, data| {
                bytes += data.len() as u64;
                if args.mode == PeerMode::Echo {
                    echo.push((SocketAddr::new(from.ip(), ROCE_PORT), data.to_vec()));
                }
            })
            .map_err(|e| e.to_string())?;
        if got > 0 {
            n += got as u64;
            last = Instant::now();
            first.get_or_insert(last);
        }
        for (to, data) in echo.drain(..) {
            b.send_raw(to, 0xc000, &[&data])
                .map_err(|e| e.to_string())?;
        }
    }
    let span = first.map_or(Duration::ZERO, |f| last.duration_since(f));
    println!("datagrams {n} bytes {bytes} nanos {}", span.as_nanos());
    Ok(true)
}

fn spawn_peer(mode: &str, local: IpAddr, count: u64) -> Result<std::process::Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args([
            "udp-peer",
            mode,
            "-L",
            &local.to_string(),
            "--count",
            &count.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Wait for "ready" so that nothing is sent before the socket is bound.
    let mut first = [0u8; 6];
    use std::io::Read;
    if let Some(out) = child.stdout.as_mut() {
        out.read_exact(&mut first)
            .map_err(|e| format!("udp-peer did not start: {e}"))?;
    }
    Ok(child)
}

fn peer_result(child: std::process::Child) -> Result<(u64, u64, f64), String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = text.split_whitespace().collect();
    let num = |k: &str| {
        w.iter()
            .position(|x| *x == k)
            .and_then(|i| w.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("udp-peer said {text:?}"))
    };
    Ok((num("datagrams")?, num("bytes")?, num("nanos")? as f64 / 1e9))
}

/// Raw UDP goodput in GB/s (payload bytes the receiver got per second).
fn raw_goodput(args: &BenchArgs) -> Result<f64, String> {
    let count = u64::from(args.iters) * 16; // 16 datagrams per 64 KiB message
    let child = spawn_peer("sink", args.server, count)?;
    let mut b = UdpBackend::bind(UdpConfig::new(args.client)).map_err(|e| e.to_string())?;
    let data = vec![0x5au8; DATAGRAM];
    let batch: Vec<&[u8]> = vec![&data[..]; 64];
    let to = SocketAddr::new(args.server, ROCE_PORT);
    let mut sent = 0u64;
    while sent < count {
        let n = (count - sent).min(64) as usize;
        sent += b
            .send_raw(to, 0xc000, &batch[..n])
            .map_err(|e| e.to_string())? as u64;
    }
    let (_, bytes, secs) = peer_result(child)?;
    Ok(bytes as f64 / secs.max(1e-9) / 1e9)
}

/// Raw UDP half round trip, busy-polling both sides: (median, p99) in us.
fn raw_latency(args: &BenchArgs) -> Result<(f64, f64), String> {
    let child = spawn_peer("echo", args.server, u64::from(args.lat_iters))?;
    let mut b = UdpBackend::bind(UdpConfig::new(args.client)).map_err(|e| e.to_string())?;
    let msg = [0u8; 8 + 28]; // 8 bytes of payload behind BTH, RETH and ICRC
    let to = SocketAddr::new(args.server, ROCE_PORT);
    let mut samples = Vec::with_capacity(args.lat_iters as usize);
    for _ in 0..args.lat_iters {
        let t = Instant::now();
        b.send_raw(to, 0xc000, &[&msg]).map_err(|e| e.to_string())?;
        let mut got = false;
        while !got {
            b.recv_raw(|_, _| got = true).map_err(|e| e.to_string())?;
            if t.elapsed() > Duration::from_secs(5) {
                return Err("raw UDP echo lost a datagram".into());
            }
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    peer_result(child)?;
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    Ok((samples[n / 2], samples[(n * 99 / 100).min(n - 1)]))
}

/// Runs `ferroce perf` and returns its data row's columns.
fn perf(args: &BenchArgs, extra: &[&str], port: u16) -> Result<Vec<f64>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .arg("perf")
        .args(extra)
        .args([
            "--quiet",
            "-p",
            &port.to_string(),
            "-L",
            &args.client.to_string(),
        ])
        .args(["--server-local", &args.server.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "ferroce perf {extra:?} failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let row = text.lines().nth(2).unwrap_or_default();
    Ok(row
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect())
}

pub(crate) fn run(args: &BenchArgs) -> Result<bool, String> {
    const MB: f64 = 1_048_576.0;
    let n = args.iters.to_string();
    let ln = args.lat_iters.to_string();
    eprintln!("raw UDP goodput ...");
    let raw_bw = raw_goodput(args)?;
    eprintln!("raw UDP latency ...");
    let (raw_med, raw_p99) = raw_latency(args)?;
    eprintln!("ferroce perf write / send 64 KiB ...");
    let w = perf(args, &["write", "-s", "65536", "-n", &n], 18801)?;
    let s = perf(args, &["send", "-s", "65536", "-n", &n], 18802)?;
    eprintln!("ferroce perf latency 8 B ...");
    // Latency columns: bytes, iters, min, max, typical, avg, stdev, p99, p99.9.
    let wl = perf(args, &["write", "--lat", "-s", "8", "-n", &ln], 18803)?;
    let sl = perf(args, &["send", "--lat", "-s", "8", "-n", &ln], 18804)?;
    let gb = |cols: &[f64]| cols.get(3).copied().unwrap_or(0.0) * MB / 1e9;
    let row = |name: &str, ours: f64, raw: f64, unit: &str, higher_better: bool| {
        let ratio = if higher_better {
            ours / raw
        } else {
            raw / ours
        };
        println!(
            "| {name:<34} | {ours:>10.2} {unit:<5} | {raw:>10.2} {unit:<5} | {:>6.0}% |",
            ratio * 100.0
        );
    };
    println!(
        "ferroce vs raw UDP, {} <-> {}, two processes, one run",
        args.client, args.server
    );
    println!(
        "| {:<34} | {:>16} | {:>16} | {:>7} |",
        "measure", "ferroce", "raw UDP", "ratio"
    );
    println!(
        "|{}|{}|{}|{}|",
        "-".repeat(36),
        "-".repeat(18),
        "-".repeat(18),
        "-".repeat(9)
    );
    row(
        "RC WRITE goodput, 64 KiB messages",
        gb(&w),
        raw_bw,
        "GB/s",
        true,
    );
    row(
        "RC SEND goodput, 64 KiB messages",
        gb(&s),
        raw_bw,
        "GB/s",
        true,
    );
    row(
        "RC WRITE latency 8 B, median",
        wl.get(4).copied().unwrap_or(f64::NAN),
        raw_med,
        "us",
        false,
    );
    row(
        "RC WRITE latency 8 B, p99",
        wl.get(7).copied().unwrap_or(f64::NAN),
        raw_p99,
        "us",
        false,
    );
    row(
        "RC SEND latency 8 B, median",
        sl.get(4).copied().unwrap_or(f64::NAN),
        raw_med,
        "us",
        false,
    );
    row(
        "RC SEND latency 8 B, p99",
        sl.get(7).copied().unwrap_or(f64::NAN),
        raw_p99,
        "us",
        false,
    );
    println!(
        "raw UDP: {DATAGRAM}-byte datagrams in sendmmsg batches of 64 (goodput counts the bytes that arrived); \
         latency: 36-byte datagram echoed, half round trip. ratio: ferroce as a share of raw \
         (for latency, raw/ferroce)."
    );
    Ok(true)
}
