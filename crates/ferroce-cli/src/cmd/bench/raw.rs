//! The raw UDP baselines of `ferroce bench`: the same two loopback
//! addresses, no RoCE processing. A second process (`ferroce udp-peer`)
//! is the sink or the echo.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::Error;
use clap::{Args, ValueEnum};
use ferroce_io::{UdpBackend, UdpConfig};

pub(super) const ROCE_PORT: u16 = 4791;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PeerMode {
    /// Count what arrives; print datagrams, bytes and the first-to-last time.
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
    /// Receive with UDP GRO (coalesced trains).
    #[arg(long)]
    gro: bool,
}

fn backend(local: IpAddr, gro: bool) -> Result<UdpBackend, Error> {
    let mut cfg = UdpConfig::new(local);
    cfg.gro = gro;
    cfg.gso = false;
    UdpBackend::bind(cfg).map_err(|e| Error::Run(format!("binding {local}: {e}")))
}

pub(crate) fn udp_peer(args: &UdpPeerArgs) -> Result<bool, Error> {
    let mut b = backend(args.local, args.gro)?;
    println!("ready");
    let (mut n, mut bytes) = (0u64, 0u64);
    let (mut first, mut last) = (None, Instant::now());
    let mut echo: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while n < args.count && Instant::now() < deadline {
        if first.is_some() && last.elapsed() > Duration::from_secs(1) {
            break; // the sender is done; some datagrams were lost
        }
        let got = b.recv_raw(|from, data| {
            bytes += data.len() as u64;
            if args.mode == PeerMode::Echo {
                echo.push((SocketAddr::new(from.ip(), ROCE_PORT), data.to_vec()));
            }
        })?;
        if got > 0 {
            n += got as u64;
            last = Instant::now();
            first.get_or_insert(last);
        }
        for (to, data) in echo.drain(..) {
            b.send_raw(to, 0xc000, &[&data])?;
        }
    }
    let span = first.map_or(Duration::ZERO, |f| last.duration_since(f));
    println!("datagrams {n} bytes {bytes} nanos {}", span.as_nanos());
    Ok(true)
}

fn spawn_peer(mode: &str, local: IpAddr, count: u64, gro: bool) -> Result<Child, Error> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["udp-peer", mode, "-L", &local.to_string()])
        .args(["--count", &count.to_string()]);
    if gro {
        cmd.arg("--gro");
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn()?;
    // Wait for "ready" so that nothing is sent before the socket is bound.
    let mut first = [0u8; 6];
    if let Some(out) = child.stdout.as_mut() {
        out.read_exact(&mut first)
            .map_err(|e| format!("udp-peer did not start: {e}"))?;
    }
    Ok(child)
}

/// What the sink saw: datagrams, bytes, seconds from first to last.
fn peer_result(child: Child) -> Result<(u64, u64, f64), Error> {
    let out = child.wait_with_output()?;
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

/// How the raw sender batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Batching {
    /// `sendmmsg`/`recvmmsg`, 64 datagrams per call.
    Mmsg,
    /// UDP GSO trains on send (as long as 64 KiB allows, at most 64
    /// datagrams), UDP GRO on receive.
    GsoGro,
    /// Shaped as 64 KiB RDMA WRITEs at MTU 4096 go out: per 16 datagrams,
    /// one 16 bytes longer (the FIRST packet carries a RETH), which cannot
    /// join a train of the shorter ones, then a train of the 15 others;
    /// GRO on receive.
    WriteShaped,
}

/// A one-way stream of `count` datagrams of `size` bytes from `client` to
/// `server`: (datagrams per second, payload GB/s) as the receiver saw them.
pub(super) fn stream(
    server: IpAddr,
    client: IpAddr,
    size: usize,
    count: u64,
    how: Batching,
) -> Result<(f64, f64), Error> {
    let child = spawn_peer("sink", server, count, how != Batching::Mmsg)?;
    let mut b = backend(client, false)?;
    let data = vec![0x5au8; size];
    let first = vec![0x5au8; size + 16];
    let mut batch: Vec<&[u8]> = vec![&data[..]; 64];
    if how == Batching::WriteShaped {
        for k in (0..64).step_by(16) {
            batch[k] = &first[..];
        }
    }
    let shaped = [1, 15, 1, 15, 1, 15, 1, 15];
    let per_train = (ferroce_io::udp::MAX_TRAIN / size).clamp(1, 64);
    let to = SocketAddr::new(server, ROCE_PORT);
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while sent < count && Instant::now() < deadline {
        let n = (count - sent).min(64) as usize;
        sent += match how {
            Batching::Mmsg => b.send_raw(to, 0xc000, &batch[..n]),
            Batching::GsoGro => b.send_raw_gso(to, 0xc000, &batch[..n], per_train),
            Batching::WriteShaped => b.send_raw_trains(to, 0xc000, &batch[..n], &shaped),
        }? as u64;
    }
    let (got, bytes, secs) = peer_result(child)?;
    let secs = secs.max(1e-9);
    Ok((got as f64 / secs, bytes as f64 / secs / 1e9))
}

/// Raw UDP half round trip of a `size`-byte datagram, busy-polling both
/// sides: (median, p99) in µs.
pub(super) fn latency(
    server: IpAddr,
    client: IpAddr,
    size: usize,
    iters: u32,
) -> Result<(f64, f64), Error> {
    let child = spawn_peer("echo", server, u64::from(iters), false)?;
    let mut b = backend(client, false)?;
    let msg = vec![0u8; size];
    let to = SocketAddr::new(server, ROCE_PORT);
    let mut samples = crate::cmd::limits::samples(iters)?;
    for _ in 0..iters {
        let t = Instant::now();
        b.send_raw(to, 0xc000, &[&msg])?;
        let mut got = false;
        while !got {
            b.recv_raw(|_, _| got = true)?;
            if t.elapsed() > Duration::from_secs(5) {
                return Err("raw UDP echo lost a datagram".into());
            }
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    peer_result(child)?;
    Ok(super::median_p99(&mut samples))
}
