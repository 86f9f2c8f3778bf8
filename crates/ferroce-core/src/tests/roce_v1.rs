//! RoCE v1 paths on the simulated network: packets of a QP whose path is
//! RoCE v1 reach the peer with a GRH ([`Endpoint::handle_v1_packet`]), a UD
//! receive gets that GRH whole, and a connected QP drops packets of the
//! other RoCE version (counted in `rx_wrong_roce`), so a v1 path to a
//! v2 path never connects.
//!
//! [`Endpoint::handle_v1_packet`]: crate::Endpoint::handle_v1_packet

use super::ops::ud_dest;
use super::util::{Faults, Opts, Pair, connect_with, pattern, recv_wr, rmem, send_wr, sge, v1_grh};
use super::{read_mr, write_mr};
use crate::verbs::{Mtu, NetworkHeader, QpType, RoceMode, SendOp, WcStatus};

fn v1_opts(qp_type: QpType) -> Opts {
    Opts {
        roce: [RoceMode::V1; 2],
        ..Opts::new(qp_type, 16384, Mtu::Mtu1024)
    }
}

#[test]
fn rc_write_read_and_atomics_over_v1_through_loss() {
    let mut p = Pair::new(71);
    p.faults = Faults {
        loss: 0.05,
        ..Faults::default()
    };
    let [a, b] = connect_with(&mut p, v1_opts(QpType::Rc));
    let data = pattern(5000, 3);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 5000)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 5000), data);
    let read = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(2, read, &sge(&a, 8192, 5000)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 8192, 5000), data);
    let add = SendOp::FetchAdd {
        remote: rmem(b.mr.addr + 8192, b.mr.rkey),
        add: 5,
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(3, add, &sge(&a, 16000, 8)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 8192, 8), 5u64.to_le_bytes());
    assert!(p.dropped > 0, "the loss was exercised");
    assert_eq!(p.v1_delivered, p.delivered, "every packet went as RoCE v1");
    assert_eq!(p.eps[1].stats().rx_wrong_roce, 0);
}

#[test]
fn uc_send_over_v1() {
    let mut p = Pair::new(72);
    let [a, b] = connect_with(&mut p, v1_opts(QpType::Uc));
    let data = pattern(3000, 4);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(9, &sge(&b, 0, 4096)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 3000)))
        .unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 3000));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 3000), data);
    assert!(p.v1_delivered > 0);
}

#[test]
fn ud_receive_over_v1_holds_the_packets_grh() {
    let mut p = Pair::new(73);
    let [a, b] = connect_with(&mut p, v1_opts(QpType::Ud));
    let data = pattern(700, 5);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(9, &sge(&b, 0, 4096)))
        .unwrap();
    let sg = sge(&a, 0, 700);
    let mut wr = send_wr(1, SendOp::Send, &sg);
    let mut dest = ud_dest(&p, b.qpn);
    dest.path.roce = RoceMode::V1;
    wr.ud = Some(dest);
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 740));
    assert_eq!(r.network, Some(NetworkHeader::Grh));
    // The transport of a 700-byte UD SEND_ONLY: BTH, DETH, payload, ICRC.
    let grh = v1_grh(p.addrs[0], p.addrs[1], 12 + 8 + 700 + 4);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 40), grh);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 700), data);
}

#[test]
fn a_v1_path_to_a_v2_path_does_not_connect() {
    let mut p = Pair::new(74);
    let o = Opts {
        roce: [RoceMode::V1, RoceMode::V2],
        timeout: 1,
        retry_cnt: 2,
        ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
    };
    let [a, b] = connect_with(&mut p, o);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(9, &sge(&b, 0, 4096)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 100)))
        .unwrap();
    let s = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!(s.status, WcStatus::RetryExcErr);
    // The first try and its two retries, each dropped unexecuted.
    assert_eq!(p.eps[1].stats().rx_wrong_roce, 3);
    assert!(p.completions(1, b.cq).is_empty());
}

/// QP1 answers in the version a MAD came in: a MAD sent over v1 reaches
/// the peer as v1 and is handed up marked v1, one over v2 as v2.
#[test]
fn mads_keep_their_roce_version_both_ways() {
    use crate::{GSI_QPN, MAD_LEN};
    let mut p = Pair::new(77);
    let b = p.addrs[1];
    for (n, roce) in [RoceMode::V1, RoceMode::V2, RoceMode::V1]
        .into_iter()
        .enumerate()
    {
        let v1_before = p.v1_delivered;
        let mad = [n as u8 + 1; MAD_LEN];
        p.eps[0].send_mad_via(roce, b, GSI_QPN, &mad).unwrap();
        p.settle(100);
        let got = p.eps[1].poll_mad().expect("the MAD reached QP1");
        assert_eq!((got.roce, got.data[0]), (roce, n as u8 + 1));
        let v1_now = u64::from(roce == RoceMode::V1);
        assert_eq!(p.v1_delivered - v1_before, v1_now, "MAD {n} over {roce:?}");
    }
    assert_eq!(p.eps[1].mad_stats().rx_mads, 3);
}
