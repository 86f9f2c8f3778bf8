//! Round-trip time of one small RoCE v2 packet across a veth between two
//! network namespaces, raw backend beside UDP backend: a ping process in
//! one namespace sends a SEND_ONLY with 8 bytes of payload and busy-polls
//! for the answer, which a pong process in the other sends back at once;
//! both ends check every ICRC.
//!
//! ```sh
//! cargo run --release -p ferroce-io --example raw_veth_latency          # as root
//! cargo run --release -p ferroce-io --example raw_veth_latency -- 2000
//! ```
//!
//! The argument is the round trips per backend (default 1,000, at most
//! 100,000). The raw backend runs twice: with its default receive ring,
//! whose blocks are handed over when full or when a 1 ms timer fires
//! (`RawConfig::rx_block_timeout_ms`: at one packet in flight that timer,
//! not the wire, sets the latency), and frame by frame
//! (`RawConfig::rx_frame_by_frame`). Prints the median, p99 and maximum
//! per run.

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ferroce_io::raw::frame::{FrameBuilder, FrameSpec, L3, RxPacket};
use ferroce_io::raw::{RawBackend, RawConfig, RawReceiver};
use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::{Opcode, samples};

#[path = "common/veth.rs"]
mod veth;
use veth::{A4, B4, IFACE, Namespaces, Res, parse_mac};

/// How long either side waits for a packet before giving up.
const WAIT: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some(role @ ("ping-raw" | "pong-raw")) => raw(role == "ping-raw", false, &args[1..]),
        Some(role @ ("ping-rawf" | "pong-rawf")) => raw(role == "ping-rawf", true, &args[1..]),
        Some(role @ ("ping-udp" | "pong-udp")) => udp(role == "ping-udp", &args[1..]),
        other => orchestrate(other),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_veth_latency: {e}");
            ExitCode::FAILURE
        }
    }
}

fn transport() -> Vec<u8> {
    let t = samples::transport(Opcode::RC_SEND_ONLY, 0, 8);
    let mut buf = vec![0; t.buffer_len()];
    let n = t.emit(&mut buf, &[7; 8]).expect("a valid sample");
    buf.truncate(n);
    buf
}

fn orchestrate(count: Option<&str>) -> Res<()> {
    let count: u64 = count.map_or(Ok(1000), str::parse)?;
    if !(1..=100_000).contains(&count) {
        return Err("the round-trip count is 1 .. 100,000".into());
    }
    let ns = Namespaces::new("lat")?;
    let exe = std::env::current_exe()?;
    let exe = exe.to_str().ok_or("the program's path is not UTF-8")?;
    let (mac_a, mac_b) = (Namespaces::mac(&ns.0)?, Namespaces::mac(&ns.1)?);
    let n = count.to_string();
    for kind in ["raw", "rawf", "udp"] {
        let role = format!("pong-{kind}");
        let mut pong = Command::new("ip")
            .args(["netns", "exec", &ns.1, exe, &role, &n, &mac_a])
            .stdout(Stdio::piped())
            .spawn()?;
        // The pong says when its sockets are open.
        let mut ready = String::new();
        let out = pong.stdout.take().ok_or("no pong output")?;
        BufReader::new(out).read_line(&mut ready)?;
        let ping = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                exe,
                &format!("ping-{kind}"),
                &n,
                &mac_b,
            ])
            .output()?;
        let pong = pong.wait_with_output()?;
        if !ping.status.success() || !pong.status.success() {
            return Err(format!("{kind}: {}", String::from_utf8_lossy(&ping.stderr)).into());
        }
        let name = match kind {
            "raw" => "raw, block ring (V3)",
            "rawf" => "raw, frame ring (V2)",
            _ => "UDP backend",
        };
        print!("{name:>20}: {}", String::from_utf8_lossy(&ping.stdout));
    }
    Ok(())
}

/// Prints the median, p99 and maximum of `rtts`.
fn report(mut rtts: Vec<Duration>) {
    rtts.sort();
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize];
    println!(
        "{} round trips: median {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        rtts.len(),
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        at(1.0).as_secs_f64() * 1e6
    );
}

struct Count(u64);

impl RawReceiver for Count {
    fn deliver(&mut self, _: &RxPacket<'_>) {
        self.0 += 1;
    }
}

/// Busy-polls the raw backend until one more packet, or [`WAIT`].
fn raw_wait(b: &mut RawBackend, got: &mut Count) -> Res<()> {
    let (start, have) = (Instant::now(), got.0);
    while got.0 == have {
        b.recv(got);
        if start.elapsed() > WAIT {
            return Err(
                "no answer within 5 s (a lost packet: the run has no retransmission)".into(),
            );
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// Busy-polls the UDP backend until one more datagram, or [`WAIT`].
fn udp_wait(b: &mut UdpBackend) -> Res<()> {
    let start = Instant::now();
    while b.recv(|_, _, _| {})? == 0 {
        if start.elapsed() > WAIT {
            return Err(
                "no answer within 5 s (a lost packet: the run has no retransmission)".into(),
            );
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// `frames`: receive frame by frame (`RawConfig::rx_frame_by_frame`).
fn raw(ping: bool, frames: bool, args: &[String]) -> Res<()> {
    let count: u64 = args.first().ok_or("count")?.parse()?;
    let peer = parse_mac(args.get(1).ok_or("MAC")?)?;
    let mut cfg = RawConfig::new(IFACE);
    cfg.hold_port = vec![if ping { A4 } else { B4 }.into()];
    cfg.rx_frame_by_frame = frames;
    let mut b = RawBackend::open(&cfg)?;
    if !ping {
        println!("ready");
    }
    let (src, dst) = if ping { (A4, B4) } else { (B4, A4) };
    let l3 = L3::V2Ipv4 {
        src,
        dst,
        tos: 0,
        ttl: 64,
        src_port: 0xc000,
    };
    let spec = FrameSpec {
        dst_mac: peer,
        src_mac: b.mac(),
        vlan: None,
        l3,
    };
    let mut builder = FrameBuilder::default();
    let t = transport();
    let mut got = Count(0);
    let mut rtts = Vec::new();
    for _ in 0..count {
        if !ping {
            raw_wait(&mut b, &mut got)?;
        }
        let start = Instant::now();
        if !b.queue(|slot| builder.build(&spec, &t, slot).unwrap_or(0)) {
            return Err("send ring full".into());
        }
        b.flush()?;
        if ping {
            raw_wait(&mut b, &mut got)?;
            rtts.push(start.elapsed());
        }
    }
    if ping {
        report(rtts);
    }
    Ok(())
}

fn udp(ping: bool, args: &[String]) -> Res<()> {
    let count: u64 = args.first().ok_or("count")?.parse()?;
    let (local, peer) = if ping { (A4, B4) } else { (B4, A4) };
    let mut b = UdpBackend::bind(UdpConfig::new(local.into()))?;
    if !ping {
        println!("ready");
    }
    let mut buf = transport();
    let mut rtts = Vec::new();
    for _ in 0..count {
        if !ping {
            udp_wait(&mut b)?;
        }
        let start = Instant::now();
        let mut d = [OutDatagram {
            remote: peer.into(),
            remote_port: 4791,
            src_port: 0xc000,
            tos: 0,
            transport: &mut buf,
        }];
        b.send(&mut d)?;
        if ping {
            udp_wait(&mut b)?;
            rtts.push(start.elapsed());
        }
    }
    if ping {
        report(rtts);
    }
    Ok(())
}
