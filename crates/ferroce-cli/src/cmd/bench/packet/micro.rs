//! The phases of a packet outside the engine's QP code, each timed alone
//! in a loop over the same real packet (or the same bytes), beside the
//! least any implementation does for it:
//!
//! * parse: the structural parses a received datagram goes through;
//! * copy: the payload out of a region ([`ferroce_core::Region::read`], what
//!   the requester's gather calls) against `copy_from_slice`;
//! * ICRC: the UDP backend's seal on send and check on receive (its own
//!   code, through `ferroce_io::icrc::BenchIcrc`), each against a plain
//!   CRC-32 pass over the packet (`crc32fast`);
//! * system calls: the UDP backend's `sendmmsg` / `recvmmsg` batching
//!   (plain, or GSO trains and GRO) between two of its sockets in this
//!   process, a batch sent then received, no RoCE work.

use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant as Clock};

use ferroce_io::icrc::BenchIcrc;
use ferroce_io::{UdpBackend, UdpConfig};
use ferroce_wire::TransportPacket;
use ferroce_wire::bth::Bth;
use ferroce_wire::udp::ROCE_V2_PORT;

use super::engine::{Side, sample_packet};
use crate::error::Error;

/// Nanoseconds per call of `f`, over `n` calls.
fn per_call(n: u64, mut f: impl FnMut(u64)) -> f64 {
    let start = Clock::now();
    for i in 0..n {
        f(i);
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// What the receive side parses of a datagram today, in ns per packet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Parse {
    /// The UDP backend's check: `TransportPacket::new_checked`, then the
    /// engine's `accepts` (a QP lookup) on the BTH's QP.
    pub(super) backend: f64,
    /// The endpoint's own, in `handle_datagram`: the BTH alone (is it
    /// multicast?), then `TransportPacket::new_checked` again.
    pub(super) endpoint: f64,
}

/// How many times a received unicast datagram is parsed: the backend's
/// check, the endpoint's multicast test (the BTH alone), the endpoint's
/// receive; the QP code takes the endpoint's view and parses nothing more
/// (ferroce-core's trace span parses once more, only when enabled).
pub(super) const PARSES: u32 = 3;

/// The parses of a `len`-byte WRITE as received.
pub(super) fn parse(len: u32, n: u64) -> Result<Parse, Error> {
    let (packet, a, b): (Vec<u8>, Side, Side) = sample_packet(len)?;
    let from = a.addr;
    if !TransportPacket::new_checked(&packet[..])
        .is_ok_and(|p| b.ep.accepts(from, p.bth().dest_qp()))
    {
        return Err("packet bench: the sample WRITE does not parse".into());
    }
    let backend = per_call(n, |_| {
        let data = black_box(&packet[..]);
        let ok =
            TransportPacket::new_checked(data).is_ok_and(|p| b.ep.accepts(from, p.bth().dest_qp()));
        black_box(ok);
    });
    let endpoint = per_call(n, |_| {
        let data = black_box(&packet[..]);
        let unicast =
            Bth::new_checked(data).is_ok_and(|b| b.dest_qp() != ferroce_core::MULTICAST_QPN);
        let qpn = TransportPacket::new_checked(data).map(|p| p.bth().dest_qp());
        black_box((unicast, qpn.ok()));
    });
    Ok(Parse { backend, endpoint })
}

/// Copy offsets cycle through this many bytes (the region's size in the
/// engine harness), so that the copies hit cache as a reused buffer does.
const COPY_SPAN: usize = 64 << 10;

/// ns per `len`-byte copy out of a region, and per plain `copy_from_slice`
/// of the same bytes.
pub(super) fn copy(len: u32, n: u64) -> Result<(f64, f64), Error> {
    let (_, a, _) = sample_packet(len)?;
    let region =
        a.ep.region(a.mr.lkey)
            .map_err(|e| format!("packet bench: region: {e:?}"))?;
    let len = len as usize;
    let slots = (COPY_SPAN / len.max(1)).max(1);
    let mut out = vec![0u8; len];
    let ours = per_call(n, |i| {
        let at = (i as usize % slots * len) as u64;
        let ok = region.read(at, &mut out).is_ok();
        black_box((&mut out, ok));
    });
    let src = vec![0x5au8; COPY_SPAN];
    let plain = per_call(n, |i| {
        let at = i as usize % slots * len;
        out.copy_from_slice(&src[at..at + len]);
        black_box(&mut out);
    });
    Ok((ours, plain))
}

/// ns per packet of the backend's ICRC seal (send) and check (receive)
/// of a `len`-byte WRITE between `src` and `dst`, and of one plain CRC-32
/// pass over it.
pub(super) fn icrc(len: u32, n: u64, src: IpAddr, dst: IpAddr) -> Result<[f64; 3], Error> {
    let (mut packet, _, _) = sample_packet(len)?;
    let mut work = BenchIcrc::default();
    let port = ROCE_V2_PORT;
    let sealed = work.seal(src, dst, 0xc000, port, &mut packet);
    if !sealed || !work.check(src, dst, 0xc000, port, &packet) {
        return Err("packet bench: the sample WRITE's ICRC does not check".into());
    }
    let seal = per_call(n, |_| {
        black_box(work.seal(src, dst, 0xc000, port, black_box(&mut packet[..])));
    });
    let check = per_call(n, |_| {
        black_box(work.check(src, dst, 0xc000, port, black_box(&packet[..])));
    });
    let plain = per_call(n, |_| {
        black_box(crc32fast::hash(black_box(&packet[..])));
    });
    Ok([seal, check, plain])
}

/// How the UDP backend batches system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Calls {
    /// `sendmmsg` / `recvmmsg`, a datagram each.
    Mmsg,
    /// GSO trains on send, GRO on receive (the backend's default on IPv4).
    GsoGro,
}

/// Datagrams per send call, the backend's `recvmmsg` batch.
const SYSCALL_BATCH: usize = 64;

/// ns per datagram of `size`-byte datagrams from a backend on `client` to
/// one on `server`, in this process: a batch sent, then received.
pub(super) fn syscalls(
    server: IpAddr,
    client: IpAddr,
    size: usize,
    count: u64,
    how: Calls,
) -> Result<f64, Error> {
    let bind = |local, gro| {
        let mut cfg = UdpConfig::new(local);
        (cfg.gro, cfg.gso) = (gro, false);
        UdpBackend::bind(cfg).map_err(|e| Error::Run(format!("binding {local}: {e}")))
    };
    let mut rx = bind(server, how == Calls::GsoGro)?;
    let mut tx = bind(client, false)?;
    let data = vec![0x5au8; size];
    let batch: Vec<&[u8]> = vec![&data[..]; SYSCALL_BATCH];
    let per_train = (ferroce_io::udp::MAX_TRAIN / size.max(1)).clamp(1, SYSCALL_BATCH);
    let to = SocketAddr::new(server, ROCE_V2_PORT);
    let (mut got, mut busy) = (0u64, Duration::ZERO);
    let deadline = Clock::now() + Duration::from_secs(30);
    while got < count {
        let start = Clock::now();
        let sent = match how {
            Calls::Mmsg => tx.send_raw(to, 0xc000, &batch),
            Calls::GsoGro => tx.send_raw_gso(to, 0xc000, &batch, per_train),
        }? as u64;
        let mut here = 0;
        while here < sent {
            here += rx.recv_raw(|_, d| {
                black_box(d);
            })? as u64;
            if Clock::now() > deadline {
                return Err("packet bench: loopback datagrams were lost".into());
            }
        }
        busy += start.elapsed();
        got += here;
    }
    Ok(busy.as_nanos() as f64 / got.max(1) as f64)
}
