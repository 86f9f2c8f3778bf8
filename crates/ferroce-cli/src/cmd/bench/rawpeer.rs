//! The raw-Ethernet side of `ferroce bench` (the hidden `ferroce
//! raw-peer`): the raw backend's rings with no RoCE work, set up as a
//! raw device sets them up (frame-by-frame receive ring, port 4791 held,
//! segmentation offload), run in one of the bench's two namespaces.
//!
//! * `flood` sends `--count` prebuilt RDMA WRITE MIDDLE frames (RoCE MTU
//!   1024) to `--peer-mac`, as super-frames of `--train` packets (1: one
//!   frame each), copied into the send ring; no ICRC is computed. With
//!   `--build`, each is built anew by the frame builder instead (payload
//!   copied in, every ICRC computed), as a RoCE sender must at the least.
//! * `sink` counts what arrives (the packets a super-frame carries, by its
//!   segment size), with no parse and no ICRC; prints `frames N bytes B
//!   nanos T` (payload bytes, first to last frame).
//! * `ping` sends one 8-byte WRITE ONLY frame at a time to an `echo`, which
//!   sends every frame back with the addresses swapped; both busy-poll.
//!   Prints `median M p99 P`, half round trips in µs.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ferroce_io::raw::frame::{FrameBuilder, FrameSpec, L3};
use ferroce_io::raw::vnet::VnetHdr;
use ferroce_io::raw::{RawBackend, RawConfig};
use ferroce_wire::{Opcode, samples};

use crate::error::Error;

/// Payload bytes of a full packet at RoCE MTU 1024.
pub(super) const PAYLOAD: usize = 1024;
/// The sink stops this long after its last frame.
const IDLE: Duration = Duration::from_secs(1);
/// The most any mode runs.
const LIMIT: Duration = Duration::from_secs(60);
/// Send-ring slots filled per kick.
const KICK: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RawMode {
    Flood,
    Sink,
    Ping,
    Echo,
}

/// Arguments of the hidden `ferroce raw-peer`.
#[derive(Debug, Args)]
pub(crate) struct RawPeerArgs {
    #[arg(value_enum)]
    mode: RawMode,
    /// The interface (in this process's network namespace).
    #[arg(long, default_value = "eth0")]
    iface: String,
    /// This side's address (its UDP port 4791 is held) and the peer's.
    #[arg(long)]
    local: Ipv4Addr,
    #[arg(long)]
    peer: Ipv4Addr,
    /// The peer's MAC address (flood, ping).
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff")]
    peer_mac: String,
    /// Packets to send or to wait for; round trips for ping.
    #[arg(long)]
    count: u64,
    /// Packets per super-frame (flood).
    #[arg(long, default_value_t = 1)]
    train: usize,
    /// Flood: build every frame anew with the raw device's frame builder
    /// (payload copied in, every ICRC computed), as a RoCE sender must at
    /// the least, instead of copying a prebuilt one.
    #[arg(long)]
    build: bool,
    /// Payload bytes per packet (flood, sink): 1024 fills a RoCE MTU of
    /// 1024 (a 1500-byte link), 4096 one of 4096 (a jumbo link).
    #[arg(long, default_value_t = PAYLOAD)]
    payload: usize,
}

/// The rings of a raw device (see `ferroce::backend::raw`).
fn open(args: &RawPeerArgs) -> Result<RawBackend, Error> {
    let mut cfg = RawConfig::new(&args.iface);
    cfg.rx_frame_by_frame = true;
    cfg.hold_port = vec![IpAddr::V4(args.local)];
    RawBackend::open(&cfg).map_err(|e| Error::Run(e.to_string()))
}

fn mac(text: &str) -> Result<[u8; 6], Error> {
    let bytes: Vec<u8> = text
        .split(':')
        .filter_map(|b| u8::from_str_radix(b, 16).ok())
        .collect();
    bytes
        .try_into()
        .map_err(|_| Error::Run(format!("{text:?} is not a MAC address")))
}

fn spec(args: &RawPeerArgs, b: &RawBackend) -> Result<FrameSpec, Error> {
    Ok(FrameSpec {
        dst_mac: mac(&args.peer_mac)?,
        src_mac: b.mac(),
        vlan: None,
        l3: L3::V2Ipv4 {
            src: args.local,
            dst: args.peer,
            tos: 0,
            ttl: 64,
            src_port: 0xc000,
        },
    })
}

fn transport(op: Opcode, len: usize) -> Result<Vec<u8>, Error> {
    let t = samples::transport(op, 0, len);
    let mut buf = vec![0; t.buffer_len()];
    let n = t
        .emit(&mut buf, &vec![0x5a; len])
        .map_err(|e| Error::Run(format!("sample packet: {e}")))?;
    buf.truncate(n);
    Ok(buf)
}

pub(crate) fn raw_peer(args: &RawPeerArgs) -> Result<bool, Error> {
    let mut b = open(args)?;
    println!("ready");
    match args.mode {
        RawMode::Flood => flood(args, &mut b)?,
        RawMode::Sink => sink(args, &mut b),
        RawMode::Ping => ping(args, &mut b)?,
        RawMode::Echo => echo(args, &mut b),
    }
    Ok(true)
}

/// One frame (or super-frame of `args.train` packets), built once.
fn prebuilt(args: &RawPeerArgs, b: &RawBackend) -> Result<(Vec<u8>, VnetHdr), Error> {
    let spec = spec(args, b)?;
    let t = transport(Opcode::RC_RDMA_WRITE_MIDDLE, args.payload)?;
    let mut out = vec![0; b.max_frame()];
    let mut builder = FrameBuilder::new(0);
    let built = if args.train > 1 {
        builder.build_train(&spec, std::iter::repeat_n(&t[..], args.train), &mut out)
    } else {
        builder
            .build(&spec, &t, &mut out)
            .map(|n| (n, VnetHdr::default()))
    };
    let (n, hdr) = built.map_err(|e| Error::Run(format!("frame: {e}")))?;
    out.truncate(n);
    Ok((out, hdr))
}

fn flood(args: &RawPeerArgs, b: &mut RawBackend) -> Result<(), Error> {
    let (frame, hdr) = prebuilt(args, b)?;
    let train = args.train.max(1) as u64;
    if train > 1 && !b.gso() {
        return Err("the kernel refused virtio-net headers: no super-frames".into());
    }
    let (spec, packet) = (
        spec(args, b)?,
        transport(Opcode::RC_RDMA_WRITE_MIDDLE, args.payload)?,
    );
    let mut builder = FrameBuilder::new(0);
    let mut copy = |slot: &mut [u8]| {
        if args.build {
            let packets = std::iter::repeat_n(&packet[..], train as usize);
            let built = if train > 1 {
                builder.build_train(&spec, packets, slot).map(|(n, _)| n)
            } else {
                builder.build(&spec, &packet, slot)
            };
            return built.unwrap_or(0);
        }
        match slot.get_mut(..frame.len()) {
            Some(s) => {
                s.copy_from_slice(&frame);
                frame.len()
            }
            None => 0,
        }
    };
    let (start, mut sent, mut queued) = (Instant::now(), 0, 0);
    while sent < args.count && start.elapsed() < LIMIT {
        let ok = if train > 1 {
            b.queue_train(train as usize, |slot| Some((copy(slot), hdr)))
        } else {
            b.queue(&mut copy)
        };
        if ok {
            sent += train;
            queued += 1;
        }
        if !ok || queued % KICK == 0 {
            b.flush()?;
        }
        if !ok {
            std::thread::yield_now();
        }
    }
    b.flush()?;
    Ok(())
}

fn sink(args: &RawPeerArgs, b: &mut RawBackend) {
    let (mut frames, mut bytes) = (0u64, 0u64);
    let (start, mut first, mut last) = (Instant::now(), None, Instant::now());
    let headers = 14 + 20 + 8;
    while frames < args.count && start.elapsed() < LIMIT {
        if first.is_some() && last.elapsed() > IDLE {
            break;
        }
        let got = b.recv_frames_vnet(|data, _, _, hdr| {
            let n = if hdr.is_gso() && hdr.gso_size > 0 {
                data.len()
                    .saturating_sub(headers)
                    .div_ceil(usize::from(hdr.gso_size))
            } else {
                1
            };
            frames += n as u64;
            bytes += (n * args.payload) as u64;
        });
        if got > 0 {
            last = Instant::now();
            first.get_or_insert(last);
        }
    }
    let span = first.map_or(Duration::ZERO, |f| last.duration_since(f));
    println!("frames {frames} bytes {bytes} nanos {}", span.as_nanos());
}

fn ping(args: &RawPeerArgs, b: &mut RawBackend) -> Result<(), Error> {
    let spec = spec(args, b)?;
    let t = transport(Opcode::RC_RDMA_WRITE_ONLY, 8)?;
    let mut frame = vec![0; 256];
    let n = FrameBuilder::new(0)
        .build(&spec, &t, &mut frame)
        .map_err(|e| Error::Run(format!("frame: {e}")))?;
    frame.truncate(n);
    let mut samples = crate::cmd::limits::samples(args.count as u32)?;
    for _ in 0..args.count {
        let t0 = Instant::now();
        if !b.queue_frame(&frame) {
            return Err("the send ring is full".into());
        }
        b.flush()?;
        let mut back = false;
        while !back {
            b.recv_frames(|_, _, _| back = true);
            if t0.elapsed() > Duration::from_secs(5) {
                return Err("the raw echo lost a frame".into());
            }
        }
        samples.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    let (median, p99) = super::median_p99(&mut samples);
    println!("median {median} p99 {p99}");
    Ok(())
}

fn echo(args: &RawPeerArgs, b: &mut RawBackend) {
    let (start, mut echoed, mut last) = (Instant::now(), 0, Instant::now());
    let mut back = Vec::new();
    while echoed < args.count && start.elapsed() < LIMIT && last.elapsed() < LIMIT / 4 {
        b.recv_frames(|data, _, _| {
            let mut f = data.to_vec();
            if f.len() >= 12 {
                let (dst, src) = f.split_at_mut(6);
                dst.swap_with_slice(&mut src[..6]);
            }
            back.push(f);
        });
        for f in back.drain(..) {
            if b.queue_frame(&f) {
                echoed += 1;
                last = Instant::now();
            }
        }
        let _ = b.flush();
    }
}
