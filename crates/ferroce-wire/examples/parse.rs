//! Parses one RoCE frame given as hex and prints its headers and whether its
//! ICRC checks.
//!
//! ```text
//! cargo run -p ferroce-wire --example parse                 # a built-in frame
//! cargo run -p ferroce-wire --example parse -- 02 00 00 ... # your own
//! ```
//!
//! The hex is an Ethernet frame without its FCS, as a capture holds it
//! (Wireshark: "Copy as Hex Stream"); spaces, colons and a `0x` prefix are
//! ignored. The exit status is 0 when the frame is RoCE, well formed and its
//! ICRC matches, 1 otherwise.

use std::process::ExitCode;

use ferroce_wire::{LinkType, Network, RoceFrame, RoceRepr, TransportRepr, locate};

/// An RC RDMA WRITE ONLY with immediate over RoCE v2/IPv4 (one of the
/// crate's samples): 127.0.0.1 -> 127.0.0.2, QPN 0x12, PSN 5, 13 bytes.
const BUILT_IN: &str = "
    02 00 00 00 00 0b 02 00 00 00 00 0a 08 00 45 00
    00 50 40 0b 40 00 40 11 fc 8e 7f 00 00 01 7f 00
    00 02 c1 32 12 b7 00 3c 00 00 0b 30 ff ff 00 00
    00 12 80 00 00 05 00 00 7f 12 34 56 70 00 00 00
    09 1e 00 00 00 0d de ad be ef 0b 2a 49 68 87 a6
    c5 e4 03 22 41 60 7f 00 00 00 97 ee 09 2e";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let text = if args.is_empty() {
        BUILT_IN.to_string()
    } else {
        args.join(" ")
    };
    let bytes = match decode_hex(&text) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bad hex: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(located) = locate(LinkType::Ethernet, &bytes) else {
        eprintln!("not a RoCE frame ({} bytes)", bytes.len());
        return ExitCode::FAILURE;
    };
    let frame = match located.parse() {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "malformed {} packet: {e} ({})",
                located.version.name(),
                e.code()
            );
            return ExitCode::FAILURE;
        }
    };
    print_frame(&frame);
    match frame.verify_icrc() {
        Ok(()) => {
            let icrc = frame.transport.icrc_bytes();
            println!("ICRC      {} ok", hex(&icrc, " "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("ICRC      {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_frame(frame: &RoceFrame<'_>) {
    println!("RoCE      {}", frame.version().name());
    if let Some(eth) = frame.ethernet {
        print!("Ethernet  {} -> {}", mac(eth.src), mac(eth.dst));
        match eth.vlan {
            Some(tag) => println!(" vlan {} pcp {}", tag.vid, tag.pcp),
            None => println!(),
        }
    }
    match frame.network {
        Network::V1 { grh } => println!("GRH       {} -> {}", grh.src, grh.dst),
        Network::V2Ipv4 { ip, udp } => {
            println!("IPv4      {} -> {} ecn {}", ip.src, ip.dst, ip.ecn);
            println!("UDP       {} -> {}", udp.src_port, udp.dst_port);
        }
        Network::V2Ipv6 { ip, udp } => {
            println!("IPv6      {} -> {} ecn {}", ip.src, ip.dst, ip.ecn());
            println!("UDP       {} -> {}", udp.src_port, udp.dst_port);
        }
    }
    let bth = frame.transport.bth();
    println!(
        "BTH       {} QPN {:#x} PSN {} P_Key {:#06x} pad {}{}{}",
        bth.opcode(),
        bth.dest_qp(),
        bth.psn(),
        bth.pkey(),
        bth.pad_count(),
        if bth.ack_req() { " AckReq" } else { "" },
        if bth.solicited() { " SE" } else { "" },
    );
    // The values of every extension header; parsing a checked frame again
    // cannot fail, but a failure is printed rather than unwrapped.
    match RoceRepr::parse(frame) {
        Ok(r) => print_extensions(&r.transport),
        Err(e) => println!("headers   {e}"),
    }
    println!("payload   {} bytes", frame.transport.payload().len());
}

fn print_extensions(t: &TransportRepr) {
    if let Some(v) = t.rdeth {
        println!("RDETH     EE context {v:#x}");
    }
    if let Some(d) = t.deth {
        println!("DETH      Q_Key {:#x} source QP {:#x}", d.qkey, d.src_qp);
    }
    if let Some(v) = t.xrceth {
        println!("XRCETH    XRC SRQ {v:#x}");
    }
    if let Some(r) = t.reth {
        println!(
            "RETH      VA {:#x} R_Key {:#x} length {}",
            r.va, r.rkey, r.dma_len
        );
    }
    if let Some(a) = t.atomic_eth {
        println!(
            "AtomicETH VA {:#x} R_Key {:#x} swap/add {:#x} compare {:#x}",
            a.va, a.rkey, a.swap_add, a.compare
        );
    }
    if let Some(a) = t.aeth {
        println!("AETH      {} MSN {}", a.syndrome, a.msn);
    }
    if let Some(v) = t.atomic_ack {
        println!("AtomicAck original {v:#x}");
    }
    if let Some(v) = t.imm {
        println!("ImmDt     {v:#010x}");
    }
    if let Some(v) = t.ieth {
        println!("IETH      R_Key {v:#x}");
    }
}

fn mac(m: [u8; 6]) -> String {
    hex(&m, ":")
}

fn hex(bytes: &[u8], sep: &str) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(sep)
}

/// The bytes of `text`: pairs of hex digits, separators and `0x` ignored.
fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text
        .split_whitespace()
        .map(|w| w.trim_start_matches("0x"))
        .flat_map(|w| w.bytes())
        .filter(|c| *c != b':')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("an odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).map_err(|e| e.to_string())?;
            u8::from_str_radix(s, 16).map_err(|_| format!("{s:?} is not a hex byte"))
        })
        .collect()
}
