//! Throughput of the raw backend beside the UDP backend over the same veth
//! pair between two network namespaces: RoCE v2 SEND_ONLY packets with
//! 4 KiB of payload (4,150-byte frames, veth MTU 9000), sent as fast as
//! each backend goes, counted by a receiver of the same backend in the
//! other namespace, which checks every ICRC.
//!
//! ```sh
//! cargo run --release -p ferroce-io --example raw_veth_bench          # as root
//! cargo run --release -p ferroce-io --example raw_veth_bench -- 200000
//! ```
//!
//! The argument is the packets sent per backend (default 100,000, at most
//! 1,000,000). The program makes namespaces `fraw19-bench-PID-{a,b}`,
//! runs its halves there (`ip netns exec`, as child processes) and deletes
//! them at the end. The rate is the receiver's, from its first packet to
//! its last; packets the receiver had no room for are lost and reported,
//! not retried. Prints one line per backend (raw with its default block
//! ring, `raw`, and frame by frame, `rawf`, both one frame per packet;
//! raw with segmentation offload, `raw-gso`: super-frames of
//! [`TRAIN`] packets, cut by a frame-by-frame receiver; UDP as the driver
//! runs it, with GSO/GRO trains; UDP datagram by datagram) and the ratios.

use std::net::IpAddr;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ferroce_io::raw::frame::{FrameBuilder, FrameSpec, L3};
use ferroce_io::raw::{RawBackend, RawConfig, RawReceiver};
use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::{Opcode, samples};

#[path = "common/veth.rs"]
mod veth;
use veth::{A4, B4, IFACE, Namespaces, Res, parse_mac};

const PAYLOAD: usize = 4096;
/// The receiver stops after this long without a packet.
const IDLE: Duration = Duration::from_secs(1);
/// The most the whole run may take per backend.
const LIMIT: Duration = Duration::from_secs(60);
/// Raw frames queued per `send` kick.
const KICK: u64 = 64;
/// Packets per super-frame (`raw-gso`): as many 4,150-byte frames' worth
/// as fit a super-frame.
const TRAIN: usize = 15;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("recv-raw") => recv_raw(false),
        Some("recv-rawf" | "recv-raw-gso") => recv_raw(true),
        Some("recv-udp") => recv_udp(true),
        Some("recv-udp-plain") => recv_udp(false),
        Some("send-raw" | "send-rawf") => send_raw(&args[1..], 1),
        Some("send-raw-gso") => send_raw(&args[1..], TRAIN),
        Some("send-udp") => send_udp(&args[1..], true),
        Some("send-udp-plain") => send_udp(&args[1..], false),
        other => orchestrate(other),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_veth_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One SEND_ONLY transport with 4 KiB of payload (ICRC filled in later).
fn transport() -> Vec<u8> {
    let t = samples::transport(Opcode::RC_SEND_ONLY, 0, PAYLOAD);
    let mut buf = vec![0; t.buffer_len()];
    let n = t.emit(&mut buf, &[0xab; PAYLOAD]).expect("a valid sample");
    buf.truncate(n);
    buf
}

/// Runs both backends' halves and prints the comparison.
fn orchestrate(count: Option<&str>) -> Res<()> {
    let count: u64 = count.map_or(Ok(100_000), str::parse)?;
    if !(1..=1_000_000).contains(&count) {
        return Err("the packet count is 1 .. 1,000,000".into());
    }
    let ns = Namespaces::new("bench")?;
    let exe = std::env::current_exe()?;
    let exe = exe.to_str().ok_or("the program's path is not UTF-8")?;
    // The receiver's MAC, for the raw sender's frames.
    let mac = Namespaces::mac(&ns.1)?;
    let mut rates = Vec::new();
    for kind in ["raw", "rawf", "raw-gso", "udp", "udp-plain"] {
        let mut rx = Command::new("ip")
            .args(["netns", "exec", &ns.1, exe, &format!("recv-{kind}")])
            .stdout(Stdio::piped())
            .spawn()?;
        // Give the receiver time to open its sockets.
        std::thread::sleep(Duration::from_millis(300));
        let tx = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                exe,
                &format!("send-{kind}"),
                &count.to_string(),
                &mac,
            ])
            .output()?;
        if !tx.status.success() {
            let _ = rx.kill();
            return Err(format!("{kind} sender: {}", String::from_utf8_lossy(&tx.stderr)).into());
        }
        let out = rx.wait_with_output()?;
        let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut f = line
            .split_whitespace()
            .map(|w| w.parse::<f64>().unwrap_or(0.0));
        let (got, secs) = (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0));
        let rate = if secs > 0.0 { got / secs } else { 0.0 };
        println!(
            "{kind:>9}: {got:>8.0} of {count} packets received in {secs:.3} s: {:>9.0} packets/s, {:.2} GB/s of 4 KiB payloads",
            rate,
            rate * PAYLOAD as f64 / 1e9
        );
        rates.push(rate);
    }
    if rates[3] > 0.0 && rates[4] > 0.0 {
        for (name, raw) in [("raw", rates[0]), ("rawf", rates[1]), ("raw-gso", rates[2])] {
            println!(
                "{name}/udp: {:.2}x (UDP with GSO/GRO), {:.2}x (UDP datagram by datagram)",
                raw / rates[3],
                raw / rates[4]
            );
        }
    }
    Ok(())
}

/// Prints `received seconds` (first to last packet).
fn report(got: u64, first: Option<Instant>, last: Instant) {
    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    println!("{got} {secs}");
}

struct Count(u64);

impl RawReceiver for Count {
    fn deliver(&mut self, _: &ferroce_io::raw::frame::RxPacket<'_>) {
        self.0 += 1;
    }
}

/// `frames`: a frame-by-frame receive ring (`RawConfig::rx_frame_by_frame`).
fn recv_raw(frames: bool) -> Res<()> {
    let mut cfg = RawConfig::new(IFACE);
    cfg.rx_frame_by_frame = frames;
    cfg.hold_port = vec![B4.into()];
    cfg.rx_blocks = 64;
    let mut b = RawBackend::open(&cfg)?;
    let mut got = Count(0);
    let (start, mut first, mut last) = (Instant::now(), None, Instant::now());
    while last.elapsed() < IDLE && start.elapsed() < LIMIT {
        let before = got.0;
        if b.recv(&mut got) == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
        if got.0 > before {
            last = Instant::now();
            first.get_or_insert(last);
        } else if first.is_none() {
            last = Instant::now();
        }
    }
    let s = b.stats();
    eprintln!("raw receiver: {s:?}");
    report(got.0, first, last);
    Ok(())
}

/// `offload`: UDP GRO on (the backend's default) or off.
fn recv_udp(offload: bool) -> Res<()> {
    let mut cfg = UdpConfig::new(B4.into());
    cfg.gro = offload;
    let mut b = UdpBackend::bind(cfg)?;
    let mut got = 0u64;
    let (start, mut first, mut last) = (Instant::now(), None, Instant::now());
    while last.elapsed() < IDLE && start.elapsed() < LIMIT {
        let before = got;
        if b.recv(|_, _, _| got += 1)? == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
        if got > before {
            last = Instant::now();
            first.get_or_insert(last);
        } else if first.is_none() {
            last = Instant::now();
        }
    }
    report(got, first, last);
    Ok(())
}

/// `train`: packets per super-frame (1: one frame each).
fn send_raw(args: &[String], train: usize) -> Res<()> {
    let count: u64 = args.first().ok_or("count")?.parse()?;
    let dst_mac = parse_mac(args.get(1).ok_or("MAC")?)?;
    let mut a = RawBackend::open(&RawConfig::new(IFACE))?;
    let l3 = L3::V2Ipv4 {
        src: A4,
        dst: B4,
        tos: 0,
        ttl: 64,
        src_port: 0xc000,
    };
    let spec = FrameSpec {
        dst_mac,
        src_mac: a.mac(),
        vlan: None,
        l3,
    };
    let mut builder = FrameBuilder::default();
    let t = transport();
    let start = Instant::now();
    let (mut sent, mut queued) = (0, 0u64);
    while sent < count && start.elapsed() < LIMIT {
        let n = train.min((count - sent) as usize);
        let ok = if n > 1 {
            let packets = std::iter::repeat_n(&t[..], n);
            a.queue_train(n, |slot| builder.build_train(&spec, packets, slot).ok())
        } else {
            a.queue(|slot| builder.build(&spec, &t, slot).unwrap_or(0))
        };
        if ok {
            sent += n as u64;
            queued += 1;
            if queued % KICK == 0 {
                a.flush()?;
            }
        } else {
            a.flush()?;
            std::thread::yield_now();
        }
    }
    a.flush()?;
    eprintln!("raw sender: {:?}", a.stats());
    Ok(())
}

/// `offload`: UDP GSO on (the backend's default) or off.
fn send_udp(args: &[String], offload: bool) -> Res<()> {
    let count: u64 = args.first().ok_or("count")?.parse()?;
    let mut cfg = UdpConfig::new(A4.into());
    cfg.gso = offload;
    let mut a = UdpBackend::bind(cfg)?;
    let template = transport();
    const BATCH: usize = 64;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| template.clone()).collect();
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < count && start.elapsed() < LIMIT {
        let n = BATCH.min((count - sent) as usize);
        let mut batch: Vec<OutDatagram<'_>> = bufs[..n]
            .iter_mut()
            .map(|b| OutDatagram {
                remote: IpAddr::V4(B4),
                remote_port: 4791,
                src_port: 0xc000,
                tos: 0,
                transport: b,
            })
            .collect();
        let done = a.send(&mut batch)?;
        sent += done as u64;
        if done < n {
            std::thread::yield_now();
        }
    }
    Ok(())
}
