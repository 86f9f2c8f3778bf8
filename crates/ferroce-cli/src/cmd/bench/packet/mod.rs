//! `ferroce bench --packet-only`: where the time of one RC WRITE packet
//! goes, for a 1 KiB and a 64-byte WRITE (one packet per message).
//!
//! Each phase is timed alone in this process (a warm-up run, then the
//! median of several), beside the least it could cost where there is such
//! a baseline: parsing ([`micro::parse`]), the engine's QP work on the
//! requester's and the responder's side and the emitting of the packet
//! ([`engine`]), the payload copy and the ICRC, and the system calls
//! ([`micro::syscalls`]). Beside their sum stands what `ferroce perf write`
//! reaches per packet between two processes in the same run (1 / its
//! message rate): the difference is what no phase accounts for (locks,
//! wake-ups, scheduling, the ACKs' own system calls).

mod engine;
mod micro;
mod print;

use std::net::IpAddr;

use super::{BenchArgs, Figure, perf, raw, repeated};
use crate::error::Error;

use engine::BATCH;
use micro::{PARSES, Parse};
pub(super) use print::print_packet;

/// The WRITE sizes measured: 1 KiB, the engine goal's packet, and 64 B,
/// the message-rate goal's.
pub(super) const SIZES: [u32; 2] = [1024, 64];

/// Micro-benchmark runs of each phase (after one to warm up).
const MICRO_RUNS: u32 = 7;

/// Packets per micro-benchmark run.
const MICRO_PACKETS: u64 = 200_000;

/// A WRITE ONLY datagram's bytes for a `len`-byte payload: BTH, RETH,
/// payload, ICRC.
pub(super) fn datagram(len: u32) -> usize {
    12 + 16 + len as usize + 4
}

/// The phases timed in this process, ns per packet.
#[derive(Debug, Clone, Copy)]
struct Micro {
    parse: Parse,
    requester: f64,
    responder: f64,
    /// `poll_transmit` of the WRITE, payload copy included.
    emit: f64,
    /// `poll_transmit` of a 0-byte WRITE ONLY: the same headers, no copy.
    emit_headers: f64,
    /// The engine's rounds timed whole, no clock read inside.
    engine_whole: f64,
    /// (region copy, plain copy).
    copy: (f64, f64),
    /// The backend's ICRC seal (send) and check (receive), and one plain
    /// CRC-32 pass over the packet.
    icrc: [f64; 3],
    /// The backend's system calls per datagram: sendmmsg, GSO + GRO.
    calls_mmsg: f64,
    calls_gso: f64,
}

/// One WRITE size's figures.
pub(super) struct SizeFigures {
    len: u32,
    micro: Result<Micro, Error>,
    /// Raw UDP between two processes (`ferroce udp-peer`), ns per datagram
    /// of the same size: sendmmsg, GSO + GRO.
    raw_mmsg: Figure,
    raw_gso: Figure,
    /// `ferroce perf write -s len`: ns per packet (1 / message rate).
    total: Figure,
}

/// The group's figures, one entry per [`SIZES`].
pub(super) struct PacketFigures {
    sizes: Vec<SizeFigures>,
}

/// A warm-up run of `f`, then the median of [`MICRO_RUNS`].
fn steady<const K: usize>(
    mut f: impl FnMut() -> Result<[f64; K], Error>,
) -> Result<[f64; K], Error> {
    f()?;
    repeated(MICRO_RUNS, f)
}

/// The phases of a `len`-byte WRITE, each in this process.
fn micro(len: u32, server: IpAddr, client: IpAddr) -> Result<Micro, Error> {
    let n = MICRO_PACKETS;
    let [backend, endpoint] = steady(|| micro::parse(len, n).map(|p| [p.backend, p.endpoint]))?;
    let [requester, emit, responder] =
        steady(|| engine::split(len, n).map(|s| [s.requester, s.emit, s.responder]))?;
    let [emit_headers] = steady(|| engine::split(0, n).map(|s| [s.emit]))?;
    let [engine_whole] = steady(|| engine::whole(len, n).map(|w| [w]))?;
    let copy = steady(|| micro::copy(len, n).map(<[f64; 2]>::from))?;
    let icrc = steady(|| micro::icrc(len, n, client, server))?;
    let size = datagram(len);
    let calls = |how| steady(|| micro::syscalls(server, client, size, n, how).map(|c| [c]));
    let [calls_mmsg] = calls(micro::Calls::Mmsg)?;
    let [calls_gso] = calls(micro::Calls::GsoGro)?;
    Ok(Micro {
        parse: Parse { backend, endpoint },
        requester,
        responder,
        emit,
        emit_headers,
        engine_whole,
        copy: copy.into(),
        icrc,
        calls_mmsg,
        calls_gso,
    })
}

/// Every figure of the group; TCP ports from `next_port`.
pub(super) fn measure(args: &BenchArgs, mut next_port: impl FnMut() -> u16) -> PacketFigures {
    let (server, client) = (args.server, args.client);
    let sizes = SIZES
        .into_iter()
        .map(|len| {
            eprintln!("per-packet phases, {len}-byte WRITE ...");
            let micro = micro(len, server, client);
            eprintln!("raw UDP streams of {} B datagrams ...", datagram(len));
            let count = u64::from(args.rate_msgs);
            let raw = |how| {
                repeated(args.repeat, || {
                    raw::stream(server, client, datagram(len), count, how).map(|(r, _)| [1e9 / r])
                })
                .map(|[ns]| ns)
            };
            let raw_mmsg = raw(raw::Batching::Mmsg);
            let raw_gso = raw(raw::Batching::GsoGro);
            eprintln!("ferroce perf write -s {len} ...");
            let a = ["write", "-s", &len.to_string(), "-n", &count.to_string()].map(String::from);
            let total = repeated(args.repeat, || {
                // #bytes #iterations BW-peak BW-average[MB/s] MsgRate[Mpps]
                let mpps = perf(args, &a, next_port())?.get(4).copied();
                Ok([1e3 / mpps.unwrap_or(f64::NAN)])
            })
            .map(|[ns]| ns);
            SizeFigures {
                len,
                micro,
                raw_mmsg,
                raw_gso,
                total,
            }
        })
        .collect();
    PacketFigures { sizes }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn datagram_is_a_write_only() {
        assert_eq!(datagram(64), super::super::RATE_WRITE);
        assert_eq!(datagram(8), super::super::SMALL_WRITE);
    }

    #[test]
    fn engine_rounds_complete_every_write() {
        for len in [0, 64, 1024] {
            let s = engine::split(len, 4 * BATCH as u64).unwrap();
            assert!(
                s.requester > 0.0 && s.emit > 0.0 && s.responder > 0.0,
                "{s:?}"
            );
            assert!(engine::whole(len, 4 * BATCH as u64).unwrap() > 0.0);
        }
    }

    #[test]
    fn the_sample_write_parses_copies_and_checks() {
        let p = micro::parse(1024, 16).unwrap();
        assert!(p.backend > 0.0 && p.endpoint > 0.0);
        let (ours, plain) = micro::copy(64, 16).unwrap();
        assert!(ours > 0.0 && plain > 0.0);
        let (a, b) = (Ipv4Addr::new(127, 0, 93, 1), Ipv4Addr::new(127, 0, 93, 2));
        let figures = micro::icrc(1024, 16, a.into(), b.into()).unwrap();
        assert!(figures.iter().all(|&ns| ns > 0.0), "{figures:?}");
    }

    #[test]
    fn system_calls_carry_every_datagram() {
        let (server, client) = (Ipv4Addr::new(127, 0, 93, 3), Ipv4Addr::new(127, 0, 93, 4));
        for how in [micro::Calls::Mmsg, micro::Calls::GsoGro] {
            let ns = micro::syscalls(server.into(), client.into(), datagram(64), 256, how);
            assert!(ns.unwrap() > 0.0);
        }
    }
}
