//! The notification point over real UDP sockets on loopback: the kernel
//! never marks CE on `lo`, so a peer played by a bare UDP backend sends a
//! WRITE with TOS 0x03 (ECN CE, an `IP_TOS` control message) to a device's
//! RC QP, and the CNP comes back to the peer's QP: opcode 0x81, BECN, PSN
//! 0, 16 zero bytes, a good ICRC, DSCP 48. Run it in a network namespace
//! of its own (it binds 127.0.0.x:4791).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use ferroce::{
    Access, ConnectOptions, Context, DeviceConfig, Mtu, Psn, QpEndpoint, QpInitAttr, QpType,
};
use ferroce_io::{OutDatagram, Receiver, UdpBackend, UdpConfig};
use ferroce_wire::reth::RethRepr;
use ferroce_wire::udp::ROCE_V2_PORT;
use ferroce_wire::{Opcode, TransportPacket};

const DEVICE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 61));
const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 62));
const PEER_QPN: u32 = 0x77;
const PEER_PSN: u32 = 0x100;
const CE: u8 = 0b11;

/// What the peer receives: each datagram's TOS and bytes.
struct Got(Vec<(u8, Vec<u8>)>);

impl Receiver for Got {
    fn accepts(&mut self, _: IpAddr, _: u32) -> bool {
        true
    }
    fn deliver(&mut self, _: IpAddr, _: u16, _: &[u8]) {}
    fn deliver_with_tos(&mut self, _: IpAddr, _: u16, tos: u8, data: &[u8]) {
        self.0.push((tos, data.to_vec()));
    }
}

#[test]
fn a_ce_marked_write_gets_a_cnp_back() {
    let ctx = Context::open_with(DeviceConfig::new(DEVICE)).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let mr = pd
        .reg_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    let peer = QpEndpoint {
        gid: PEER,
        qp_type: QpType::Rc,
        qpn: PEER_QPN,
        psn: Psn::new(PEER_PSN),
        mtu: None,
    };
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu1024),
        ..ConnectOptions::default()
    };
    qp.connect(&peer, &opts).unwrap();

    let mut cfg = UdpConfig::new(PEER);
    cfg.gso = false;
    let mut udp = UdpBackend::bind(cfg).unwrap();
    let mut write = ferroce_wire::samples::transport(Opcode::RC_RDMA_WRITE_ONLY, PEER_PSN, 64);
    write.bth.dest_qp = qp.qpn();
    write.bth.ack_req = true;
    write.reth = Some(RethRepr {
        va: mr.addr(),
        rkey: mr.rkey(),
        dma_len: 64,
    });
    let mut b = vec![0; write.buffer_len()];
    let n = write.emit(&mut b, &[0x5a; 64]).unwrap();
    let mut d = [OutDatagram {
        remote: DEVICE,
        remote_port: ROCE_V2_PORT,
        src_port: 0xc123,
        tos: CE,
        transport: &mut b[..n],
    }];
    assert_eq!(udp.send(&mut d).unwrap(), 1);

    // The ACK and the CNP come back (in either order).
    let mut got = Got(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.0.len() < 2 && Instant::now() < deadline {
        udp.recv_into(&mut got).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let cnp = got.0.iter().find(|(_, d)| d[0] == Opcode::CNP.0);
    let Some((tos, cnp)) = cnp else {
        panic!("no CNP among {:?}; stats {:?}", got.0, ctx.stats());
    };
    assert_eq!(tos >> 2, 48, "CNP DSCP");
    let pkt = TransportPacket::new_checked(&cnp[..]).unwrap();
    let bth = pkt.bth();
    assert_eq!(bth.dest_qp(), PEER_QPN);
    assert_eq!(
        (bth.becn(), bth.fecn(), bth.psn().value()),
        (true, false, 0)
    );
    assert_eq!(pkt.cnp_reserved(), Some(&[0u8; 16][..]));
    let ack = got.0.iter().find(|(_, d)| d[0] == Opcode::RC_ACKNOWLEDGE.0);
    let (ack_tos, _) = ack.expect("the WRITE is acknowledged");
    assert_eq!(ack_tos & 0b11, 0b10, "ACKs leave ECT(0)");
    let s = ctx.stats();
    assert_eq!((s.rx_ce, s.cnps_sent), (1, 1), "{s:?}");
    let q = ctx.qp_congestion(qp.qpn()).unwrap();
    assert_eq!((q.ce_received, q.cnps_sent), (1, 1));
    assert_eq!(udp.stats().rx_bad_icrc, 0, "the CNP's ICRC verifies");
    assert_eq!(ctx.udp_stats().rx_ce, 1);
}
