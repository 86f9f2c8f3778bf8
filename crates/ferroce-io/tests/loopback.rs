//! Two UDP backends on loopback (127.0.0.1 and 127.0.0.2, test ports)
//! exchange every sample transport packet; the receiver verifies each ICRC
//! and gets the bytes unchanged. A corrupted datagram is counted and dropped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::samples;

fn pair(a: IpAddr, b: IpAddr, port: u16) -> (UdpBackend, UdpBackend) {
    let mut ca = UdpConfig::new(a);
    ca.port = port;
    let mut cb = UdpConfig::new(b);
    cb.port = port + 1;
    (UdpBackend::bind(ca).unwrap(), UdpBackend::bind(cb).unwrap())
}

fn transports() -> Vec<Vec<u8>> {
    samples::all()
        .iter()
        .filter(|s| matches!(s.repr.network, ferroce_wire::Network::V2Ipv4 { .. }))
        .map(|s| {
            let bytes = s.to_bytes();
            let start = s.repr.ethernet.map_or(0, |e| e.header_len()) + 28;
            bytes[start..].to_vec()
        })
        .collect()
}

/// `body` behind the BTH of an RC SEND_MIDDLE (no pad, version 0): the
/// backend drops what is not structurally a RoCE packet before its ICRC.
fn send_middle(mut body: Vec<u8>) -> Vec<u8> {
    body[0] = ferroce_wire::Opcode::RC_SEND_MIDDLE.0;
    body[1] = 0;
    body
}

fn exchange(a: IpAddr, b: IpAddr, port: u16) {
    let (mut tx, mut rx) = pair(a, b, port);
    let sent = transports();
    let mut bufs = sent.clone();
    // Scramble the ICRCs: the backend must fill them in.
    for t in &mut bufs {
        let n = t.len();
        t[n - 4..].fill(0);
    }
    let mut batch: Vec<OutDatagram<'_>> = bufs
        .iter_mut()
        .map(|t| OutDatagram {
            remote: b,
            remote_port: port + 1,
            src_port: 0xc000 | (port & 0x3fff),
            tos: 0,
            transport: t,
        })
        .collect();
    assert_eq!(tx.send(&mut batch).unwrap(), sent.len());
    let mut got: Vec<Vec<u8>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < sent.len() && Instant::now() < deadline {
        rx.recv(|from, _, data| {
            assert_eq!(from, a);
            got.push(data.to_vec());
        })
        .unwrap();
    }
    assert_eq!(got.len(), sent.len(), "stats {:?}", rx.stats());
    for (g, s) in got.iter().zip(&sent) {
        let n = s.len();
        // Same transport; the ICRC differs from the sample's (other IP header).
        assert_eq!(g[..n - 4], s[..n - 4]);
    }
    assert_eq!(rx.stats().rx_bad_icrc, 0);

    // A corrupted payload byte fails the check.
    let mut bad = sent[0].clone();
    let mut d = [OutDatagram {
        remote: b,
        remote_port: port + 1,
        src_port: 0xc000,
        tos: 0,
        transport: &mut bad,
    }];
    tx.send(&mut d).unwrap();
    // Corrupt after the ICRC was computed: resend the bytes by hand.
    bad[13] ^= 1;
    let sock = std::net::UdpSocket::bind((a, 0)).unwrap();
    sock.send_to(&bad, (b, port + 1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut good = 0;
    while rx.stats().rx_bad_icrc == 0 && Instant::now() < deadline {
        rx.recv(|_, _, _| good += 1).unwrap();
    }
    assert_eq!(rx.stats().rx_bad_icrc, 1);
}

#[test]
fn ipv4_loopback_exchange() {
    exchange(
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        47100,
    );
}

#[test]
fn ipv6_loopback_exchange() {
    exchange(
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        47200,
    );
}

/// Runs of equal-size datagrams go out as GSO trains (each segment with the
/// ICRC of its own Identification and length) and arrive, coalesced by GRO
/// or cut by the kernel, as datagrams that all verify, in order and intact.
fn trains(gro: bool, port: u16) {
    let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
    let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4));
    let mut ca = UdpConfig::new(a);
    ca.port = port;
    let mut cb = UdpConfig::new(b);
    cb.port = port + 1;
    cb.gro = gro;
    let (mut tx, mut rx) = (UdpBackend::bind(ca).unwrap(), UdpBackend::bind(cb).unwrap());
    // 100 full datagrams then a short one, then 3 of another length: at
    // least three trains (64 is the most per train).
    let mut sent: Vec<Vec<u8>> = (0..100u32)
        .map(|i| send_middle((0..1036u32).map(|j| (i * 7 + j) as u8).collect()))
        .collect();
    sent.push(send_middle(vec![0xab; 300]));
    sent.extend((0..3u8).map(|i| send_middle(vec![i; 520])));
    let mut bufs = sent.clone();
    let mut batch: Vec<OutDatagram<'_>> = bufs
        .iter_mut()
        .map(|t| OutDatagram {
            remote: b,
            remote_port: port + 1,
            src_port: 0xc123,
            tos: 0,
            transport: t,
        })
        .collect();
    assert_eq!(tx.send(&mut batch).unwrap(), sent.len());
    assert!(tx.stats().tx_gso_datagrams >= 100, "{:?}", tx.stats());
    let mut got: Vec<Vec<u8>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < sent.len() && Instant::now() < deadline {
        rx.recv(|_, _, data| got.push(data.to_vec())).unwrap();
    }
    let stats = rx.stats();
    assert_eq!(stats.rx_bad_icrc, 0, "{stats:?}");
    assert_eq!(got.len(), sent.len(), "{stats:?}");
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g[..g.len() - 4], s[..s.len() - 4]);
    }
    if gro {
        assert!(stats.rx_gro_trains > 0, "{stats:?}");
    } else {
        assert_eq!(stats.rx_gro_trains, 0, "{stats:?}");
    }
    // Each datagram's ICRC was computed for the Identification the kernel
    // gives it when it cuts the train: the train's (0) plus its index. The
    // trains here: 63 datagrams of 1036 bytes (as many as 64 KiB holds),
    // then 37 more and the short one, then the 3 of another length.
    let idents = (0..63u16).chain(0..38).chain(0..3);
    for ((g, _), ident) in got.iter().zip(&sent).zip(idents) {
        let udp_len = 8 + g.len();
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&ident.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[127, 0, 0, 3]);
        ip[16..20].copy_from_slice(&[127, 0, 0, 4]);
        let mut udp = [0u8; 8];
        udp[0..2].copy_from_slice(&0xc123u16.to_be_bytes());
        udp[2..4].copy_from_slice(&(port + 1).to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let want = ferroce_wire::icrc::compute_v2_parts(&ip, &udp, &g[..g.len() - 4]).unwrap();
        assert_eq!(
            g[g.len() - 4..],
            want.to_le_bytes(),
            "Identification {ident}"
        );
    }
}

#[test]
fn gso_trains_to_a_gro_receiver() {
    trains(true, 47300);
}

#[test]
fn gso_trains_to_a_plain_receiver() {
    trains(false, 47400);
}

/// Past `max_tx_sockets`, new source ports share the sockets already open:
/// each asked-for port keeps one port on the wire, and the ICRC is computed
/// for that port (the receiver verifies every datagram).
#[test]
fn source_ports_past_the_socket_limit_share_open_ones() {
    let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 5));
    let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 6));
    let port = 47500;
    let mut ca = UdpConfig::new(a);
    ca.port = port;
    ca.max_tx_sockets = 2;
    let mut cb = UdpConfig::new(b);
    cb.port = port + 1;
    let (mut tx, mut rx) = (UdpBackend::bind(ca).unwrap(), UdpBackend::bind(cb).unwrap());
    let asked: Vec<u16> = (1..=6).map(|i| 0xd000 + i).collect();
    // Each asked-for port sends twice, tagged with its index (after the BTH).
    const TAG: usize = 12;
    let mut bufs: Vec<Vec<u8>> = (0..12)
        .map(|k| send_middle(vec![(k % 6) as u8; 64]))
        .collect();
    let mut batch: Vec<OutDatagram<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(k, t)| OutDatagram {
            remote: b,
            remote_port: port + 1,
            src_port: asked[k % 6],
            tos: 0,
            transport: t,
        })
        .collect();
    assert_eq!(tx.send(&mut batch).unwrap(), 12);
    assert_eq!(tx.tx_sockets(), 2);
    let mut seen: Vec<(u8, u16)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < 12 && Instant::now() < deadline {
        rx.recv(|_, from_port, data| seen.push((data[TAG], from_port)))
            .unwrap();
    }
    assert_eq!(seen.len(), 12, "{:?}", rx.stats());
    assert_eq!(rx.stats().rx_bad_icrc, 0);
    for tag in 0..6u8 {
        let ports: Vec<u16> = seen
            .iter()
            .filter(|(t, _)| *t == tag)
            .map(|&(_, p)| p)
            .collect();
        assert_eq!(ports.len(), 2);
        assert_eq!(
            ports[0],
            ports[1],
            "port {:#x} moved",
            asked[usize::from(tag)]
        );
        assert!(ports[0] == 0xd001 || ports[0] == 0xd002, "{ports:x?}");
        if tag < 2 {
            assert_eq!(ports[0], asked[usize::from(tag)], "its own socket");
        }
    }
}

/// Takes QP 0x42's datagrams from one address; counts what it was asked.
struct OnlyQp {
    peer: IpAddr,
    asked: usize,
    got: Vec<Vec<u8>>,
}

impl ferroce_io::Receiver for OnlyQp {
    fn accepts(&mut self, from: IpAddr, dest_qp: u32) -> bool {
        self.asked += 1;
        from == self.peer && dest_qp == 0x42
    }
    fn deliver(&mut self, _: IpAddr, _: u16, transport: &[u8]) {
        self.got.push(transport.to_vec());
    }
}

/// Garbage is dropped by the cheapest check it fails, each cause counted,
/// and only structurally sound datagrams reach the receiver's filter; a
/// good datagram among them still arrives.
#[test]
fn garbage_is_dropped_by_cause_before_the_icrc() {
    let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7));
    let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 8));
    let (mut tx, mut rx) = pair(a, b, 47600);
    let to = (b, 47601);
    let with_qp = |mut t: Vec<u8>, qp: u32| {
        t[5..8].copy_from_slice(&qp.to_be_bytes()[1..]);
        t
    };
    let unknown = (0..=255u8)
        .find(|&op| ferroce_wire::Opcode(op).info().is_none())
        .unwrap();
    let mut bad_opcode = send_middle(vec![0; 64]);
    bad_opcode[0] = unknown;
    // RDMA WRITE FIRST needs a 16-byte RETH: 8 bytes are not enough.
    let mut short_reth = vec![0u8; 12 + 8 + 4];
    short_reth[0] = ferroce_wire::Opcode::RC_RDMA_WRITE_FIRST.0;
    let mut bad_icrc = with_qp(send_middle(vec![7; 64]), 0x42);
    bad_icrc[63] ^= 0xff;
    let garbage: Vec<Vec<u8>> = vec![
        vec![1; 10],                             // too short
        vec![0; 5000],                           // too long
        bad_opcode,                              // unknown opcode
        short_reth,                              // headers past the end
        with_qp(send_middle(vec![7; 64]), 0x43), // no such QP
        bad_icrc,                                // the ICRC fails
    ];
    let sock = std::net::UdpSocket::bind((a, 0)).unwrap();
    for g in &garbage {
        sock.send_to(g, to).unwrap();
    }
    let mut good = with_qp(send_middle(vec![9; 100]), 0x42);
    let mut d = [OutDatagram {
        remote: b,
        remote_port: to.1,
        src_port: 0xc001,
        tos: 0,
        transport: &mut good,
    }];
    assert_eq!(tx.send(&mut d).unwrap(), 1);
    let mut sink = OnlyQp {
        peer: a,
        asked: 0,
        got: Vec::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while rx.stats().rx_datagrams < 7 && Instant::now() < deadline {
        rx.recv_into(&mut sink).unwrap();
    }
    let s = rx.stats();
    assert_eq!(
        (
            s.rx_too_short,
            s.rx_truncated,
            s.rx_bad_opcode,
            s.rx_bad_length
        ),
        (1, 1, 1, 1),
        "{s:?}"
    );
    assert_eq!((s.rx_unwanted, s.rx_bad_icrc), (1, 1), "{s:?}");
    // Asked about the three sound ones: the unknown QP, the bad ICRC, the good.
    assert_eq!(sink.asked, 3);
    assert_eq!(sink.got.len(), 1);
    assert_eq!(sink.got[0][..96], good[..96]);
}

/// The send and receive calls share the backend's scratch space. A send of
/// exactly as many datagrams as the receive takes at once (16 with GRO)
/// used to leave the receive's control buffers unsized, and the next
/// receive indexed past them (a panic in the driver thread).
#[test]
fn a_send_as_long_as_a_receive_batch_then_a_receive() {
    let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
    let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let mut ca = UdpConfig::new(a);
    ca.port = 47700;
    ca.gso = false; // one message per datagram, so 16 in one sendmmsg
    ca.gro = true; // 16 receive slots
    let mut cb = UdpConfig::new(b);
    cb.port = 47701;
    let (mut tx, mut rx) = (UdpBackend::bind(ca).unwrap(), UdpBackend::bind(cb).unwrap());
    let mut bufs: Vec<Vec<u8>> = (0..16).map(|_| send_middle(vec![0u8; 64])).collect();
    let mut batch: Vec<OutDatagram<'_>> = bufs
        .iter_mut()
        .map(|t| OutDatagram {
            remote: b,
            remote_port: 47701,
            src_port: 0xc000,
            tos: 0,
            transport: t,
        })
        .collect();
    assert_eq!(tx.send(&mut batch).unwrap(), 16);
    // Nothing waits for `tx`; the call must simply return.
    assert_eq!(tx.recv(|_, _, _| {}).unwrap(), 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0;
    while got < 16 && Instant::now() < deadline {
        got += rx.recv(|_, _, _| {}).unwrap();
    }
    assert_eq!(got, 16, "every datagram reaches the other backend");
}
