//! The ECN field of received datagrams: the receive socket asks for each
//! datagram's TOS / traffic class, and the backend hands it on with the
//! datagram ([`ferroce_io::Receiver::deliver_with_tos`]) and counts CE
//! marks. The sender sets each codepoint per datagram (`OutDatagram::tos`,
//! an `IP_TOS` / `IPV6_TCLASS` control message); the kernel passes ECN
//! bits of a UDP socket through unchanged, so CE can be sent on loopback.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use ferroce_io::{OutDatagram, Receiver, UdpBackend, UdpConfig};

/// Records the TOS of each datagram.
struct Tos(Vec<u8>);

impl Receiver for Tos {
    fn accepts(&mut self, _: IpAddr, _: u32) -> bool {
        true
    }
    fn deliver(&mut self, _: IpAddr, _: u16, _: &[u8]) {
        panic!("deliver_with_tos is the one called");
    }
    fn deliver_with_tos(&mut self, _: IpAddr, _: u16, tos: u8, _: &[u8]) {
        self.0.push(tos);
    }
}

fn each_codepoint_arrives(a: IpAddr, b: IpAddr, port: u16) {
    let mut ca = UdpConfig::new(a);
    ca.port = port;
    let mut cb = UdpConfig::new(b);
    cb.port = port + 1;
    let (mut tx, mut rx) = (UdpBackend::bind(ca).unwrap(), UdpBackend::bind(cb).unwrap());
    // DSCP 26 with each ECN codepoint, then DSCP 0 and CE alone.
    let sent = [0x68, 0x69, 0x6a, 0x6b, 0x03];
    let sample = ferroce_wire::samples::transport(ferroce_wire::Opcode::RC_SEND_ONLY, 0x42, 16);
    let mut bufs: Vec<Vec<u8>> = sent
        .iter()
        .map(|_| {
            let mut b = vec![0; sample.buffer_len()];
            sample.emit(&mut b, &[7; 16]).unwrap();
            b
        })
        .collect();
    for (buf, tos) in bufs.iter_mut().zip(sent) {
        // One at a time, so that no train or coalescing mixes them.
        let mut d = [OutDatagram {
            remote: b,
            remote_port: port + 1,
            src_port: 0xc000,
            tos,
            transport: buf,
        }];
        assert_eq!(tx.send(&mut d).unwrap(), 1);
    }
    let mut got = Tos(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.0.len() < sent.len() && Instant::now() < deadline {
        rx.recv_into(&mut got).unwrap();
    }
    assert_eq!(got.0, sent, "stats {:?}", rx.stats());
    assert_eq!(rx.stats().rx_ce, 2);
    assert_eq!(rx.stats().rx_bad_icrc, 0, "the ICRC masks the TOS");
}

#[test]
fn ipv4_datagrams_carry_their_tos() {
    each_codepoint_arrives(
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        47600,
    );
}

#[test]
fn ipv6_datagrams_carry_their_traffic_class() {
    each_codepoint_arrives(
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        47700,
    );
}
