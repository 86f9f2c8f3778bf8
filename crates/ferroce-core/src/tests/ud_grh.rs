//! The GRH area of a UD receive over RoCE v2: the packet's IPv4 header in
//! its last 20 bytes, as rxe and mlx5 write it (the source and the
//! destination, which UCX's UD transport checks against the device's own
//! GIDs), and the completion saying which header the area holds.

use std::net::IpAddr;

use ferroce_wire::ipv4::{self, Ipv4Repr};

use super::ops::ud_dest;
use super::read_mr;
use super::util::{Opts, Pair, connect_with, pattern, recv_wr, send_wr, sge};
use super::write_mr;
use crate::verbs::{Mtu, NetworkHeader, QpType, SendOp, WcStatus};

/// A UD SEND_ONLY of `len` bytes on the wire after IP: UDP, BTH, DETH,
/// payload, ICRC.
fn udp_datagram_len(len: usize) -> usize {
    8 + 12 + 8 + len + 4
}

#[test]
fn a_v2_ud_receive_holds_the_ipv4_header_with_source_and_destination() {
    let mut p = Pair::new(181);
    let [a, b] = connect_with(&mut p, Opts::new(QpType::Ud, 16384, Mtu::Mtu1024));
    let data = pattern(700, 7);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    // The receive buffer starts dirty: every byte of the area is written.
    write_mr(&mut p, 1, b.mr.lkey, 0, &[0xee; 40]);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(3, &sge(&b, 0, 4096)))
        .unwrap();
    let sg = sge(&a, 0, 700);
    let mut wr = send_wr(1, SendOp::Send, &sg);
    wr.ud = Some(ud_dest(&p, b.qpn));
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 740));
    assert_eq!(r.network, Some(NetworkHeader::Ipv4));
    assert_eq!(NetworkHeader::Ipv4.roce_sl() & 0x7, 2, "mlx5's L3 type");

    let area = read_mr(&p, 1, b.mr.lkey, 0, 40);
    assert_eq!(area[..20], [0; 20], "the first 20 bytes are zero, as rxe's");
    let hdr = Ipv4Repr::parse(&area[20..]).unwrap();
    let v4 = |a: IpAddr| match a {
        IpAddr::V4(a) => a,
        IpAddr::V6(_) => unreachable!("the pair is IPv4"),
    };
    assert_eq!((hdr.src, hdr.dst), (v4(p.addrs[0]), v4(p.addrs[1])));
    assert_eq!(hdr.header_len as usize, ipv4::MIN_HEADER_LEN);
    assert_eq!(hdr.protocol, ipv4::PROTO_UDP);
    assert_eq!(
        usize::from(hdr.total_len),
        ipv4::MIN_HEADER_LEN + udp_datagram_len(700)
    );
    assert!(hdr.dont_frag && !hdr.is_fragment());
    assert!(hdr.ttl > 0);
    assert_eq!(ipv4::checksum(&area[20..]), 0, "a valid header checksum");
    // UCX reads the destination from the area's last 4 bytes.
    assert_eq!(area[36..], [127, 0, 0, 2]);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 700), data);
}
