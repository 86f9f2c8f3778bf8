//! IBA rules checked against crafted packets where the engine once broke
//! them: zero-length RDMA operations carry no key to check (C9-88), a
//! P_Key of another partition is dropped (the BTH key check), and the
//! responder's record of the READs and atomics it served (its "responder
//! resources") bounds what duplicates it answers.

use ferroce_wire::aeth::Syndrome;
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, TransportPacket};

use super::read_mr;
use super::util::{Pair, Side, connect, craft, emit, send_wr, sge};
use crate::verbs::{Mtu, QpState, QpType, SendOp, WcOpcode, WcStatus};

/// An R_Key and address that name no region of the peer.
const NO_SUCH_RKEY: u32 = 0x0bad_0bad;
const NO_SUCH_VA: u64 = 0xdead_0000_0000;

#[test]
fn zero_length_write_and_read_skip_the_key_check() {
    let mut p = Pair::new(900);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let write = SendOp::Write {
        remote_addr: NO_SUCH_VA,
        rkey: NO_SUCH_RKEY,
    };
    let read = SendOp::Read {
        remote_addr: NO_SUCH_VA,
        rkey: NO_SUCH_RKEY,
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, Vec::new()))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, read, Vec::new()))
        .unwrap();
    let wcs = p.wait_cqes(0, a.cq, 2);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaRead)
        ]
    );
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Rts);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 4096), vec![0; 4096]);
}

#[test]
fn zero_length_write_is_acknowledged_on_the_wire() {
    let mut p = Pair::new(901);
    let [_, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let mut t = craft(Opcode::RC_RDMA_WRITE_ONLY, epsn, b.qpn, 0);
    t.bth.ack_req = true;
    t.reth = Some(RethRepr {
        va: NO_SUCH_VA,
        rkey: NO_SUCH_RKEY,
        dma_len: 0,
    });
    p.deliver(1, &emit(&t, &[]));
    let out = p.take_transmits(1);
    assert_eq!(out.len(), 1, "one answer");
    let ack = TransportPacket::new_checked(&out[0][..]).unwrap();
    assert_eq!(ack.bth().opcode(), Opcode::RC_ACKNOWLEDGE);
    assert_eq!(ack.bth().psn(), epsn);
    let syndrome = ack.aeth().unwrap().syndrome();
    assert!(matches!(syndrome, Syndrome::Ack { .. }), "{syndrome:?}");
    assert_eq!(p.eps[1].qps[&b.qpn].resp.epsn, epsn + 1);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
    // A WRITE of one byte with the same keys is refused, as before.
    let mut t = craft(Opcode::RC_RDMA_WRITE_ONLY, epsn + 1, b.qpn, 1);
    t.reth = Some(RethRepr {
        va: NO_SUCH_VA,
        rkey: NO_SUCH_RKEY,
        dma_len: 1,
    });
    p.deliver(1, &emit(&t, &[1]));
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
}

/// The WRITE of 8 bytes into `b`'s region at its expected PSN, with `pkey`.
fn write_with_pkey(p: &Pair, b: &Side, pkey: u16) -> Vec<u8> {
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let mut t = craft(Opcode::RC_RDMA_WRITE_ONLY, epsn, b.qpn, 8);
    t.bth.pkey = pkey;
    t.reth = Some(RethRepr {
        va: b.mr.addr,
        rkey: b.mr.rkey,
        dma_len: 8,
    });
    emit(&t, &[0xee; 8])
}

#[test]
fn a_packet_of_another_partition_is_dropped_and_counted() {
    let mut p = Pair::new(902);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    for pkey in [0x1234, 0x9234, 0x0000, 0x8000, 0x7ffe] {
        let before = p.eps[1].stats();
        p.deliver(1, &write_with_pkey(&p, &b, pkey));
        let after = p.eps[1].stats();
        assert_eq!(after.rx_bad_pkey, before.rx_bad_pkey + 1, "{pkey:#06x}");
        assert!(p.take_transmits(1).is_empty(), "{pkey:#06x}: answered");
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8), [0; 8], "{pkey:#06x}");
    }
    // A response of another partition does not complete a request either.
    let write = SendOp::Write {
        remote_addr: b.mr.addr,
        rkey: b.mr.rkey,
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, sge(&a, 0, 8)))
        .unwrap();
    let request = p.take_transmits(0);
    let mut ack = craft(
        Opcode::RC_ACKNOWLEDGE,
        p.eps[0].qps[&a.qpn].req.next_psn - 1,
        a.qpn,
        0,
    );
    ack.bth.pkey = 0x1234;
    p.deliver(0, &emit(&ack, &[]));
    assert_eq!(p.eps[0].stats().rx_bad_pkey, 1);
    assert!(
        p.completions(0, a.cq).is_empty(),
        "completed by a stray ACK"
    );
    for r in request {
        p.deliver(1, &r);
    }
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
}

#[test]
fn a_limited_member_of_the_default_partition_is_served() {
    // The QP's key is the full member 0xFFFF: a limited member's 0x7FFF
    // may talk to it (only two limited members may not).
    let mut p = Pair::new(903);
    let [_, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.deliver(1, &write_with_pkey(&p, &b, 0x7fff));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8), [0xee; 8]);
    assert_eq!(p.eps[1].stats().rx_bad_pkey, 0);
}
