//! The raw-Ethernet backend's rows of `ferroce bench`, on a veth pair
//! between two network namespaces the bench makes (`fgs-bench-PID-a` and
//! `-b`, eth0 at MTU 1500 in each, RoCE MTU 1024) and removes after, also
//! when a run fails. Needs root; the rows are skipped with a line saying
//! so otherwise. Everything runs from `b` to `a`:
//!
//! * the rings' own limit: `ferroce raw-peer flood` into a `sink` with the
//!   rings a raw device opens and no RoCE work (no engine, no ICRC), once
//!   as super-frames of [`TRAIN`] packets (a 64 KiB WRITE leaves as two:
//!   the FIRST packet, longer by its RETH, with one MIDDLE, then the 62
//!   others) and once frame by frame; packets per second and payload GB/s;
//! * the same flood with every super-frame built anew by the raw device's
//!   frame builder (`--build`: payload copied in, every ICRC computed):
//!   the least work a RoCE sender has, so the ceiling of the next row for
//!   an engine that cost nothing;
//! * RC WRITE 64 KiB goodput (`ferroce perf write --raw`) against that
//!   limit, and against the UDP backend (`ferroce perf write`) over the
//!   same veth;
//! * 8-byte WRITE latency on the raw backend against a raw ping-pong of
//!   the same rings (`raw-peer ping` and `echo`), half round trips.
//!
//! Each repeat runs every measure once, in turn, so that the machine's
//! load moves them together; the table shows medians.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::rawpeer::PAYLOAD;
use super::{BenchArgs, Figure, median_of};
use crate::error::Error;

const A: &str = "10.79.0.1";
const B: &str = "10.79.0.2";
/// Packets per super-frame in the limit's flood (see the module docs).
pub(super) const TRAIN: usize = 32;
/// The path MTU the veth's 1500 bytes allow.
const MTU: &str = "1024";

/// What the rows measured, or why they were skipped.
pub(super) enum VethRows {
    Measured(Box<VethFigures>),
    Skipped(String),
}

pub(super) struct VethFigures {
    /// (packets/s, GB/s) of the rings with super-frames and frame by frame.
    pub(super) limit_gso: (Figure, Figure),
    pub(super) limit_frames: (Figure, Figure),
    /// (packets/s, GB/s) of super-frames built anew each (`--build`).
    pub(super) limit_built: (Figure, Figure),
    /// RC WRITE 64 KiB GB/s on the raw and on the UDP backend.
    pub(super) write_raw: Figure,
    pub(super) write_udp: Figure,
    /// 8-byte WRITE latency on raw and the rings' ping-pong (median, p99) µs.
    pub(super) lat_raw: (Figure, Figure),
    pub(super) lat_ping: (Figure, Figure),
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

/// The two namespaces; removed on drop.
struct Pair {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    )
    .into())
}

impl Pair {
    fn new() -> Result<Self, Error> {
        let pid = std::process::id();
        let pair = Self {
            a: format!("fgs-bench-{pid}-a"),
            b: format!("fgs-bench-{pid}-b"),
        };
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        ip(&[
            "-n", &pair.a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns",
            &pair.b,
        ])?;
        for (ns, addr) in [(&pair.a, A), (&pair.b, B)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }

    /// `ferroce ARGS` in namespace `ns`.
    fn ferroce(ns: &str, args: &[String]) -> Result<Command, Error> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "timeout", "120"])
            .arg(std::env::current_exe()?)
            .args(args);
        Ok(c)
    }

    fn mac(ns: &str) -> Result<String, Error> {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat", "/sys/class/net/eth0/address"])
            .output()?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A server in `a` (printing "ready" first when `ready`), then the client
/// in `b`; returns both outputs, the client's first.
fn run_pair(
    pair: &Pair,
    server: &[String],
    client: &[String],
    ready: bool,
) -> Result<(Output, Output), Error> {
    let mut s: Child = Pair::ferroce(&pair.a, server)?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if ready {
        let mut first = [0u8; 6];
        if let Some(out) = s.stdout.as_mut() {
            out.read_exact(&mut first)
                .map_err(|e| format!("raw-peer did not start: {e}"))?;
        }
    } else {
        std::thread::sleep(Duration::from_millis(400));
    }
    let c = Pair::ferroce(&pair.b, client)?.output()?;
    if !c.status.success() {
        let _ = s.kill();
    }
    let s = s.wait_with_output()?;
    for (who, out) in [("client", &c), ("server", &s)] {
        if !out.status.success() {
            return Err(format!(
                "{} {who}: {}{}",
                client.first().map_or("", String::as_str),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
    }
    Ok((c, s))
}

/// The number after `key` in `text`.
fn field(text: &str, key: &str) -> Result<f64, Error> {
    let w: Vec<&str> = text.split_whitespace().collect();
    w.iter()
        .position(|x| *x == key)
        .and_then(|i| w.get(i + 1))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no {key} in {text:?}").into())
}

/// The rings' limit: (packets/s, payload GB/s); `build`: every frame
/// built anew by the frame builder rather than copied.
fn limit(
    pair: &Pair,
    mac: &str,
    count: u64,
    train: usize,
    build: bool,
) -> Result<(f64, f64), Error> {
    let peer = |mode: &str, local, peer| {
        strings(&[
            "raw-peer", mode, "--local", local, "--peer", peer, "--count",
        ])
        .into_iter()
        .chain([count.to_string()])
        .collect::<Vec<_>>()
    };
    let mut flood = [
        peer("flood", B, A),
        strings(&["--peer-mac", mac, "--train", &train.to_string()]),
    ]
    .concat();
    if build {
        flood.push("--build".into());
    }
    let (_, sink) = run_pair(pair, &peer("sink", A, B), &flood, true)?;
    let text = String::from_utf8_lossy(&sink.stdout);
    let secs = (field(&text, "nanos")? / 1e9).max(1e-9);
    Ok((
        field(&text, "frames")? / secs,
        field(&text, "bytes")? / secs / 1e9,
    ))
}

/// One `ferroce perf write` run (`raw`: on the raw backend); the numbers
/// of the client's data row.
fn perf(pair: &Pair, raw: bool, extra: &[&str], port: u16) -> Result<Vec<f64>, Error> {
    let mut common = strings(&["perf", "write", "--quiet", "-m", MTU, "-p"]);
    common.push(port.to_string());
    common.extend(strings(extra));
    if raw {
        common.push("--raw".into());
    }
    let server = [common.clone(), strings(&["--listen", "-L", A])].concat();
    let client = [common, strings(&["-L", B, A])].concat();
    let (c, _) = run_pair(pair, &server, &client, false)?;
    let text = String::from_utf8_lossy(&c.stdout);
    let row = text.lines().nth(2).unwrap_or_default();
    Ok(row
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect())
}

/// 64 KiB WRITE goodput in GB/s.
fn write_bw(pair: &Pair, raw: bool, args: &BenchArgs, port: u16) -> Figure {
    let n = (args.bytes / 65536).max(1).to_string();
    let cols = perf(pair, raw, &["-s", "65536", "-n", &n], port)?;
    // #bytes #iterations BW-peak BW-average[MB/s] MsgRate[Mpps]
    Ok(cols.get(3).copied().unwrap_or(f64::NAN) * 1_048_576.0 / 1e9)
}

/// 8-byte WRITE latency on the raw backend: (median, p99) µs.
fn write_lat(pair: &Pair, args: &BenchArgs, port: u16) -> Result<(f64, f64), Error> {
    let n = args.lat_iters.to_string();
    let cols = perf(pair, true, &["--lat", "-s", "8", "-n", &n], port)?;
    // #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    let col = |i: usize| cols.get(i).copied().unwrap_or(f64::NAN);
    Ok((col(4), col(7)))
}

/// The rings' ping-pong: (median, p99) µs, half round trips.
fn ping(pair: &Pair, mac: &str, iters: u32) -> Result<(f64, f64), Error> {
    let n = iters.to_string();
    let echo = strings(&["raw-peer", "echo", "--local", A, "--peer", B, "--count", &n]);
    let ping = strings(&[
        "raw-peer",
        "ping",
        "--local",
        B,
        "--peer",
        A,
        "--count",
        &n,
        "--peer-mac",
        mac,
    ]);
    let (c, _) = run_pair(pair, &echo, &ping, true)?;
    let text = String::from_utf8_lossy(&c.stdout);
    Ok((field(&text, "median")?, field(&text, "p99")?))
}

/// Every row, `args.repeat` times in turn.
pub(super) fn measure(args: &BenchArgs) -> VethRows {
    if !is_root() {
        return VethRows::Skipped(
            "the raw backend's rows need root (network namespaces, CAP_NET_RAW): \
             run `ferroce bench --raw-only` as root"
                .into(),
        );
    }
    match measure_in(args) {
        Ok(f) => VethRows::Measured(Box::new(f)),
        Err(e) => VethRows::Skipped(format!("the veth pair could not be set up: {e}")),
    }
}

fn measure_in(args: &BenchArgs) -> Result<VethFigures, Error> {
    let pair = Pair::new()?;
    let mac = Pair::mac(&pair.a)?;
    let count = (args.bytes / PAYLOAD as u64).max(1);
    let mut port = 18900;
    let (mut gso, mut frames, mut lat, mut pp) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut built = Vec::new();
    let (mut raw, mut udp) = (Vec::new(), Vec::new());
    for run in 1..=args.repeat.max(1) {
        eprintln!("raw backend over a veth, run {run} ...");
        gso.push(limit(&pair, &mac, count, TRAIN, false));
        frames.push(limit(&pair, &mac, count, 1, false));
        built.push(limit(&pair, &mac, count, TRAIN, true));
        port += 1;
        raw.push(write_bw(&pair, true, args, port));
        port += 1;
        udp.push(write_bw(&pair, false, args, port));
        port += 1;
        lat.push(write_lat(&pair, args, port));
        pp.push(ping(&pair, &mac, args.lat_iters));
    }
    let split = |v: Vec<Result<(f64, f64), Error>>| {
        let (a, b): (Vec<Figure>, Vec<Figure>) = v
            .into_iter()
            .map(|r| match r {
                Ok((x, y)) => (Ok(x), Ok(y)),
                Err(e) => {
                    let again = Error::Run(format!("{e} (as above)"));
                    (Err(e), Err(again))
                }
            })
            .unzip();
        (median_of(a), median_of(b))
    };
    Ok(VethFigures {
        limit_gso: split(gso),
        limit_frames: split(frames),
        limit_built: split(built),
        write_raw: median_of(raw),
        write_udp: median_of(udp),
        lat_raw: split(lat),
        lat_ping: split(pp),
    })
}
