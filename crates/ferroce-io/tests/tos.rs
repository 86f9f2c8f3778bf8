//! The IP header's TOS (IPv4) / traffic class (IPv6) of every datagram is
//! the one its `OutDatagram` asks for, GSO trains included (a train is cut
//! where the TOS changes), and it never spoils the ICRC.
//!
//! The wire is read with a packet capture (an `AF_PACKET` socket, as
//! tcpdump takes it) in the test's network namespace, so the test needs
//! root (CAP_NET_RAW), as CI has; it fails otherwise. Run it in a
//! namespace of its own: `ip netns exec NAME cargo test -p ferroce-io
//! --test tos`.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::{Opcode, ethernet, ipv4, ipv6, udp};
use socket2::{Domain, Protocol, Socket, Type};

/// The BTH is 12 bytes; the PSN is its last 3.
const BTH_LEN: usize = 12;
const ICRC_LEN: usize = 4;

/// A UDP datagram seen on the wire: its TOS / traffic class, UDP
/// destination port, and UDP payload.
struct Seen {
    tos: u8,
    dst_port: u16,
    payload: Vec<u8>,
}

/// Every frame (Ethernet, as loopback shows them) of the namespace.
fn capture() -> Socket {
    let all = Protocol::from(i32::from((libc::ETH_P_ALL as u16).to_be()));
    let s = Socket::new(Domain::PACKET, Type::RAW, Some(all))
        .unwrap_or_else(|e| panic!("a packet capture needs root (CAP_NET_RAW), as CI has: {e}"));
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s
}

/// The UDP datagram in an Ethernet frame, if it holds one.
fn parse(frame: &[u8]) -> Option<Seen> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let ip = frame.get(ethernet::HEADER_LEN..)?;
    let (tos, udp_at) = match ethertype {
        ethernet::ETHERTYPE_IPV4 => {
            let header_len = usize::from(ip.first()? & 0x0f) * 4;
            (*ip.get(9)? == ipv4::PROTO_UDP).then_some((ip[1], header_len))?
        }
        ethernet::ETHERTYPE_IPV6 => {
            let tclass = (ip.first()? & 0x0f) << 4 | ip.get(1)? >> 4;
            (*ip.get(6)? == ipv4::PROTO_UDP).then_some((tclass, ipv6::HEADER_LEN))?
        }
        _ => return None,
    };
    let u = ip.get(udp_at..)?;
    let dst_port = u16::from_be_bytes(u.get(2..4)?.try_into().ok()?);
    let len = usize::from(u16::from_be_bytes(u.get(4..6)?.try_into().ok()?));
    let payload = u.get(udp::HEADER_LEN..len.max(udp::HEADER_LEN))?.to_vec();
    Some(Seen {
        tos,
        dst_port,
        payload,
    })
}

/// An RC SEND_MIDDLE of `payload` bytes whose PSN is `index`.
fn transport(index: u32, payload: usize) -> Vec<u8> {
    let mut t = vec![0u8; BTH_LEN + payload + ICRC_LEN];
    t[0] = Opcode::RC_SEND_MIDDLE.0;
    t[2..4].copy_from_slice(&0xffffu16.to_be_bytes());
    t[5..8].copy_from_slice(&[0, 0, 0x11]);
    t[9..12].copy_from_slice(&index.to_be_bytes()[1..]);
    t
}

/// Sends datagrams of the given (length, TOS) from `a` to a backend on `b`
/// and checks that the capture shows each with its TOS, and that the
/// receiver verifies every ICRC.
fn check(a: IpAddr, b: IpAddr, port: u16, plan: &[(usize, u8)]) {
    let cap = capture();
    let mut ca = UdpConfig::new(a);
    ca.port = port;
    let mut cb = UdpConfig::new(b);
    cb.port = port + 1;
    let (mut tx, mut rx) = (UdpBackend::bind(ca).unwrap(), UdpBackend::bind(cb).unwrap());
    let mut bufs: Vec<Vec<u8>> = (0u32..)
        .zip(plan)
        .map(|(i, &(len, _))| transport(i, len))
        .collect();
    let mut batch: Vec<OutDatagram<'_>> = bufs
        .iter_mut()
        .zip(plan)
        .map(|(t, &(_, tos))| OutDatagram {
            remote: b,
            remote_port: port + 1,
            src_port: 0xc000 | (port & 0x3fff),
            tos,
            transport: t,
        })
        .collect();
    assert_eq!(tx.send(&mut batch).unwrap(), plan.len());

    // The receiver takes every datagram: the TOS is outside the ICRC.
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while got < plan.len() && Instant::now() < deadline {
        rx.recv(|_, _, _| got += 1).unwrap();
    }
    assert_eq!(got, plan.len(), "{:?}", rx.stats());
    assert_eq!(rx.stats().rx_bad_icrc, 0, "{:?}", rx.stats());

    // Each captured datagram (on loopback a GSO train stays one) covers
    // the datagrams from its first PSN on; every one of them must have
    // been asked for with the TOS it carried.
    let mut seen = vec![false; plan.len()];
    let mut frame = vec![0u8; 70_000];
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.contains(&false) && Instant::now() < deadline {
        let n = match (&cap).read(&mut frame) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => panic!("capture: {e}"),
        };
        let Some(d) = parse(&frame[..n]) else {
            continue;
        };
        if d.dst_port != port + 1 || d.payload.len() < BTH_LEN {
            continue;
        }
        let first = u32::from_be_bytes([0, d.payload[9], d.payload[10], d.payload[11]]) as usize;
        let segment = BTH_LEN + plan[first].0 + ICRC_LEN;
        let count = d.payload.len().div_ceil(segment);
        for (i, &(_, tos)) in plan.iter().enumerate().skip(first).take(count) {
            assert_eq!(
                d.tos, tos,
                "datagram {i} asked for TOS {tos:#04x}, left with {:#04x} (in a send of {count} from {first})",
                d.tos
            );
            seen[i] = true;
        }
    }
    let missing: Vec<usize> = (0..plan.len()).filter(|&i| !seen[i]).collect();
    assert!(missing.is_empty(), "not captured: {missing:?}");
}

/// Singles of several classes (DSCP 24 + ECT(0), none, EF + ECT(1), CE
/// alone), then equal-size runs that GSO would join but for their TOS.
fn plan() -> Vec<(usize, u8)> {
    let mut plan = vec![(64, 0x62), (64, 0x00), (100, 0xb9), (32, 0x03)];
    plan.extend([(1024, 0x61); 10]);
    plan.extend([(1024, 0x02); 5]);
    plan.extend([(1024, 0x00); 3]);
    plan.push((1024, 0xfc));
    plan
}

#[test]
fn ipv4_tos_on_the_wire() {
    let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 31));
    let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 32));
    check(a, b, 47600, &plan());
}

#[test]
fn ipv6_traffic_class_on_the_wire() {
    let l = IpAddr::V6(Ipv6Addr::LOCALHOST);
    check(l, l, 47700, &plan());
}
