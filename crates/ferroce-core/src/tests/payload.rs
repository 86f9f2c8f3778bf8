//! The payload's CRC, taken while the payload is copied into the packet
//! (`transmit::CrcCopy`): every packet the simulated network carries has
//! it checked against its bytes (`util::check_payload_crc`); these tests
//! make sure the paths that copy differently are among them: a payload
//! gathered across regions and elements that packet boundaries cut, inline
//! data, packets sent again after a loss, and READ responses.

use super::util::{Pair, connect, pattern, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::verbs::{Mtu, QpType, SendOp, Sge, WcStatus};

/// A WRITE gathered from three elements in two regions, with element
/// boundaries inside packets (MTU 1024: 700 + 1500 + 900 bytes).
#[test]
fn a_payload_gathered_across_regions_carries_the_crc_of_its_bytes() {
    let mut p = Pair::new(90);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    let pd = a.pd;
    let second = p.eps[0]
        .reg_mr(pd, 8192, super::util::all_access())
        .unwrap();
    let (x, y, z) = (pattern(700, 1), pattern(1500, 2), pattern(900, 3));
    write_mr(&mut p, 0, a.mr.lkey, 100, &x);
    write_mr(&mut p, 0, second.lkey, 3000, &y);
    write_mr(&mut p, 0, a.mr.lkey, 5000, &z);
    let sg = [
        Sge {
            lkey: a.mr.lkey,
            offset: 100,
            len: 700,
        },
        Sge {
            lkey: second.lkey,
            offset: 3000,
            len: 1500,
        },
        Sge {
            lkey: a.mr.lkey,
            offset: 5000,
            len: 900,
        },
    ];
    let op = SendOp::Write {
        remote: rmem(b.mr.addr + 10, b.mr.rkey),
    };
    p.eps[0].post_send(a.qpn, send_wr(1, op, &sg)).unwrap();
    let wc = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!(wc.status, WcStatus::Success);
    let all: Vec<u8> = [x, y, z].concat();
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 10, all.len()), all);
    // FIRST, MIDDLE, LAST: each checked on its way.
    assert!(
        p.payload_crcs >= 3,
        "{} payload CRCs checked",
        p.payload_crcs
    );
}

/// Inline data, lost packets sent again (each rebuilt from the region),
/// and READ responses under loss: all checked, and the data arrives.
#[test]
fn inline_resent_and_read_response_payloads_carry_their_crc() {
    let mut p = Pair::new(91);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    let data = pattern(9000, 9);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    write_mr(&mut p, 1, b.mr.lkey, 20_000, &data);
    p.faults.loss = 0.2;
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 40_000, 4096)))
        .unwrap();
    let mut inline = send_wr(1, SendOp::Send, &[]);
    inline.inline = Some(&data[..300]);
    p.eps[0].post_send(a.qpn, inline).unwrap();
    let op = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(2, op, &sge(&a, 0, 9000)))
        .unwrap();
    let op = SendOp::Read {
        remote: rmem(b.mr.addr + 20_000, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(3, op, &sge(&a, 30_000, 9000)))
        .unwrap();
    let wcs = p.wait_cqes(0, a.cq, 3);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40_000, 300), data[..300]);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 9000), data);
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 30_000, 9000), data);
    assert!(p.dropped > 0, "the test needs losses");
    assert!(
        p.eps[0].stats().retransmits > 0,
        "the test needs packets sent again"
    );
    // 1 inline + 9 WRITE + 9 READ responses at the least, plus resends.
    assert!(
        p.payload_crcs > 19,
        "{} payload CRCs checked",
        p.payload_crcs
    );
}
