//! Parse + ICRC verify, and emit + ICRC, of RoCE v2 packets, each beside a
//! plain CRC-32 (crc32fast, the same engine) over the same bytes, measured in
//! the same run. Run with `cargo bench -p ferroce-wire --bench wire`.
//!
//! Each case is timed in several rounds of a fixed batch; the median round is
//! reported. The machine is shared and noisy: compare the ratios, which are
//! measured side by side, rather than the absolute figures.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use ferroce_wire::udp::{flow_label_from_qpns, source_port_from_flow_label};
use ferroce_wire::{LinkType, Opcode, RoceRepr, locate, samples};

const ROUNDS: usize = 15;
const TARGET_ROUND: Duration = Duration::from_millis(40);

/// An IPv4 + UDP + BTH + RETH + payload + ICRC RDMA WRITE ONLY.
fn packet(payload_len: usize) -> (RoceRepr, Vec<u8>, Vec<u8>) {
    let t = samples::transport(Opcode::RC_RDMA_WRITE_ONLY, 77, payload_len);
    let sport = source_port_from_flow_label(flow_label_from_qpns(0x11, 0x12));
    let repr = RoceRepr::v2_ipv4(
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 0, 0, 2),
        1,
        sport,
        t,
    );
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    let mut buf = vec![0u8; repr.buffer_len()];
    let n = repr.emit(&mut buf, &payload).expect("emit");
    buf.truncate(n);
    (repr, payload, buf)
}

/// Times `case` and `base` in alternating rounds (so that both see the same
/// machine load) and returns the median ns per call of each and the median
/// of the per-round ratios base/case.
fn time_pair(mut case: impl FnMut(), mut base: impl FnMut()) -> (f64, f64, f64) {
    // Calibrate the batch so one round of `base` takes about TARGET_ROUND.
    let mut batch = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            base();
        }
        if t.elapsed() >= TARGET_ROUND / 4 || batch >= 1 << 30 {
            break;
        }
        batch *= 2;
    }
    batch *= 4;
    let round = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        t.elapsed().as_nanos() as f64 / batch as f64
    };
    let mut cases = Vec::with_capacity(ROUNDS);
    let mut bases = Vec::with_capacity(ROUNDS);
    let mut ratios = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let c = round(&mut case);
        let b = round(&mut base);
        cases.push(c);
        bases.push(b);
        ratios.push(b / c);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut cases), median(&mut bases), median(&mut ratios))
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too,
    // with fewer rounds being pointless: just check it works then.
    let quick = !std::env::args().any(|a| a == "--bench");
    println!("ferroce-wire: RoCE v2/IPv4 RDMA WRITE ONLY, median of {ROUNDS} rounds");
    println!(
        "{:<26} {:>7} {:>10} {:>10} {:>12} {:>12} {:>7}",
        "case", "bytes", "ns/pkt", "GB/s", "base ns", "base GB/s", "ratio"
    );
    for payload_len in [4096usize, 64] {
        let (repr, payload, wire) = packet(payload_len);
        // What the ICRC covers, as one contiguous slice: the plain-CRC baseline.
        let covered = &wire[..wire.len() - 4];
        if quick {
            let f = locate(LinkType::RawIp, &wire).unwrap().parse().unwrap();
            assert!(f.icrc_ok());
            continue;
        }
        let plain = || {
            black_box(crc32fast::hash(black_box(covered)));
        };
        let fast = time_pair(
            || {
                let t = locate(LinkType::RawIp, black_box(&wire))
                    .map(|l| l.parse_transport_verified())
                    .expect("RoCE")
                    .expect("valid");
                black_box(t.bth().psn());
            },
            plain,
        );
        let parse = time_pair(
            || {
                let f = locate(LinkType::RawIp, black_box(&wire))
                    .and_then(|l| l.parse().ok())
                    .expect("valid");
                black_box(f.verify_icrc().is_ok());
            },
            plain,
        );
        let mut out = vec![0u8; wire.len()];
        // The baseline for emit is a copy of the payload plus the CRC: the
        // least any emitter must do.
        let mut copy = vec![0u8; payload.len()];
        let emit = time_pair(
            || {
                black_box(repr.emit(black_box(&mut out), black_box(&payload)).ok());
            },
            || {
                copy.copy_from_slice(black_box(&payload));
                black_box(crc32fast::hash(black_box(covered)));
            },
        );
        let gbs = |ns: f64| wire.len() as f64 / ns;
        for (name, (ns, base, ratio)) in [
            (format!("parse+verify {payload_len} B"), fast),
            (format!("  full reprs {payload_len} B"), parse),
            (format!("emit+icrc {payload_len} B"), emit),
        ] {
            println!(
                "{:<26} {:>7} {:>10.1} {:>10.2} {:>12.1} {:>12.2} {:>6.0}%",
                name,
                wire.len(),
                ns,
                gbs(ns),
                base,
                gbs(base),
                100.0 * ratio
            );
        }
    }
    if !quick {
        println!(
            "ratio = throughput as a share of the baseline, median of per-round ratios (baseline: plain CRC-32 of the same bytes; for emit, payload copy + CRC-32)"
        );
    }
}
