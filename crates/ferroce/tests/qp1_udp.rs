//! QP1 over real UDP: one engine's MAD goes through the UDP backend on
//! loopback (127.0.0.1 to 127.0.0.2, test ports) to another engine, past
//! the backend's cheap filter (`Endpoint::accepts`) and ICRC check, from
//! rxe's QP1 source port. The API has no MAD calls yet (the CM layer will
//! use the engine's), so this drives the two layers directly, as the
//! driver does.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant as WallClock};

use ferroce_core::{Endpoint, EndpointConfig, GSI_QPN, Instant, MAD_LEN};
use ferroce_io::{OutDatagram, Receiver, UdpBackend, UdpConfig};

/// The engine as the backend's receiver, noting the source ports seen.
struct EngineRx<'a> {
    ep: &'a mut Endpoint,
    src_ports: Vec<u16>,
}

impl Receiver for EngineRx<'_> {
    fn accepts(&mut self, from: IpAddr, dest_qp: u32) -> bool {
        self.ep.accepts(from, dest_qp)
    }
    fn deliver(&mut self, from: IpAddr, src_port: u16, transport: &[u8]) {
        self.src_ports.push(src_port);
        self.ep.handle_datagram(Instant::ZERO, from, transport);
    }
}

#[test]
fn a_mad_crosses_real_udp_from_qp1_to_qp1() {
    const PORT: u16 = 18_791;
    let (a, b) = (
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
    );
    let mut cfg_a = UdpConfig::new(a);
    cfg_a.port = PORT;
    let mut cfg_b = UdpConfig::new(b);
    cfg_b.port = PORT + 1;
    let mut io_a = UdpBackend::bind(cfg_a).expect("bind 127.0.0.1 (run in a netns with lo up)");
    let mut io_b = UdpBackend::bind(cfg_b).expect("bind 127.0.0.2");
    let mut ep_a = Endpoint::new(EndpointConfig { seed: 1 });
    let mut ep_b = Endpoint::new(EndpointConfig { seed: 2 });

    let mad: Vec<u8> = (0..MAD_LEN).map(|i| (i * 13) as u8).collect();
    ep_a.send_mad(b, GSI_QPN, &mad).unwrap();
    let mut t = ep_a
        .poll_transmit(Instant::ZERO)
        .expect("the MAD as a packet");
    let mut batch = [OutDatagram {
        remote: t.path.remote,
        remote_port: PORT + 1,
        src_port: t.path.udp_src_port,
        tos: 0,
        transport: &mut t.data,
    }];
    assert_eq!(io_a.send(&mut batch).unwrap(), 1);

    let mut rx = EngineRx {
        ep: &mut ep_b,
        src_ports: Vec::new(),
    };
    let deadline = WallClock::now() + Duration::from_secs(5);
    while rx.src_ports.is_empty() && WallClock::now() < deadline {
        io_b.recv_into(&mut rx).unwrap();
    }
    assert_eq!(
        rx.src_ports,
        [55410],
        "rxe's QP1 source port; {:?}",
        io_b.stats()
    );
    let got = ep_b.poll_mad().expect("the MAD reached QP1");
    assert_eq!((got.from, got.src_qp), (a, GSI_QPN));
    assert_eq!(&got.data[..], &mad[..]);
    assert_eq!(io_b.stats().rx_bad_icrc, 0);
}
