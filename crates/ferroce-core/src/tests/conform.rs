//! IBA rules checked against crafted packets where the engine once broke
//! them: zero-length RDMA operations carry no key to check (C9-88), a
//! P_Key of another partition is dropped (the BTH key check), and the
//! responder's record of the READs and atomics it served (its "responder
//! resources") bounds what duplicates it answers.

use ferroce_wire::aeth::Syndrome;
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, Psn, TransportPacket};

use super::read_mr;
use super::util::{Pair, Side, connect, craft, emit, rmem, send_wr, sge};
use crate::verbs::{Mtu, QpState, QpType, SendOp, WcOpcode, WcStatus};

/// An R_Key and address that name no region of the peer.
const NO_SUCH_RKEY: u32 = 0x0bad_0bad;
const NO_SUCH_VA: u64 = 0xdead_0000_0000;

#[test]
fn zero_length_write_and_read_skip_the_key_check() {
    let mut p = Pair::new(900);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let write = SendOp::Write {
        remote: rmem(NO_SUCH_VA, NO_SUCH_RKEY),
    };
    let read = SendOp::Read {
        remote: rmem(NO_SUCH_VA, NO_SUCH_RKEY),
    };
    p.eps[0].post_send(a.qpn, send_wr(1, write, &[])).unwrap();
    p.eps[0].post_send(a.qpn, send_wr(2, read, &[])).unwrap();
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
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 8)))
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

/// A READ response of `op` at `psn` for QP `dest` carrying `data`.
fn read_response(op: Opcode, psn: Psn, dest: u32, data: &[u8]) -> Vec<u8> {
    emit(&craft(op, psn, dest, data.len()), data)
}

/// A READ of 4 packets loses response `lost`; the requester asks for the
/// rest from that PSN, and the responder's answer begins either as a new
/// response (FIRST, or ONLY for one packet: ferroce's responder) or in the
/// middle of the original one (MIDDLE/LAST: rxe 6.1's). Both complete it.
#[test]
fn a_resumed_read_accepts_both_first_and_middle_openings() {
    use Opcode as O;
    for (lost, rxe_style) in [(1, false), (1, true), (3, false), (3, true)] {
        let mut p = Pair::new(904);
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        let data = super::util::pattern(4096, 7);
        let read = SendOp::Read {
            remote: rmem(b.mr.addr, b.mr.rkey),
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(1, read, &sge(&a, 0, 4096)))
            .unwrap();
        let request = p.take_transmits(0);
        let first = TransportPacket::new_checked(&request[0][..])
            .unwrap()
            .bth()
            .psn();
        let original = [
            O::RC_RDMA_READ_RESPONSE_FIRST,
            O::RC_RDMA_READ_RESPONSE_MIDDLE,
        ];
        let chunk = |k: usize| &data[k * 1024..(k + 1) * 1024];
        let op = |k: usize| match k {
            3 => O::RC_RDMA_READ_RESPONSE_LAST,
            _ => original[k.min(1)],
        };
        for k in (0..4).filter(|&k| k != lost) {
            p.deliver(0, &read_response(op(k), first + k as u32, a.qpn, chunk(k)));
        }
        // The gap (or for the last packet, the timeout) made the requester
        // ask for the rest.
        let mut again = p.take_transmits(0);
        if again.is_empty() {
            let at = p.eps[0].poll_timeout().expect("a retransmission timer");
            p.now = at;
            p.eps[0].handle_timeout(at);
            again = p.take_transmits(0);
        }
        assert_eq!(again.len(), 1, "lost {lost}");
        let resume = TransportPacket::new_checked(&again[0][..]).unwrap();
        assert_eq!(resume.bth().psn(), first + lost as u32);
        let reth = resume.reth().unwrap();
        assert_eq!(reth.va(), b.mr.addr + 1024 * lost as u64);
        assert_eq!(reth.dma_len(), 4096 - 1024 * lost as u32);
        for k in lost..4 {
            let op = match (rxe_style, k == lost, k == 3) {
                (true, ..) => op(k),
                (false, true, true) => O::RC_RDMA_READ_RESPONSE_ONLY,
                (false, true, false) => O::RC_RDMA_READ_RESPONSE_FIRST,
                (false, false, _) => op(k),
            };
            p.deliver(0, &read_response(op, first + k as u32, a.qpn, chunk(k)));
        }
        let wcs = p.completions(0, a.cq);
        let what = format!("lost {lost}, rxe's opening {rxe_style}");
        assert_eq!(wcs.len(), 1, "{what}");
        assert_eq!(wcs[0].status, WcStatus::Success, "{what}");
        assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, 4096), data, "{what}");
    }
}

/// ferroce's own responder opens the answer to a resumed READ with FIRST
/// (ONLY for one packet): the re-issued request is a READ of its own.
#[test]
fn the_responder_answers_a_resumed_read_as_a_new_response() {
    let mut p = Pair::new(905);
    let [_, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let mut t = craft(Opcode::RC_RDMA_READ_REQUEST, epsn, b.qpn, 0);
    t.reth = Some(RethRepr {
        va: b.mr.addr,
        rkey: b.mr.rkey,
        dma_len: 4096,
    });
    p.deliver(1, &emit(&t, &[]));
    assert_eq!(p.take_transmits(1).len(), 4);
    for (skip, ops) in [
        (
            1,
            &[
                Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
                Opcode::RC_RDMA_READ_RESPONSE_LAST,
            ][..],
        ),
        (3, &[Opcode::RC_RDMA_READ_RESPONSE_ONLY][..]),
    ] {
        t.bth.psn = epsn + skip;
        t.reth = Some(RethRepr {
            va: b.mr.addr + 1024 * u64::from(skip),
            rkey: b.mr.rkey,
            dma_len: 4096 - 1024 * skip,
        });
        p.deliver(1, &emit(&t, &[]));
        let got: Vec<_> = p
            .take_transmits(1)
            .iter()
            .map(|d| TransportPacket::new_checked(&d[..]).unwrap().bth().opcode())
            .collect();
        assert_eq!(got, ops, "from packet {skip}");
    }
}

/// IBA C9-105: a duplicate SEND or WRITE is acknowledged again, AckReq or
/// not. Duplicates that arrive before the responder sends share one ACK
/// (an ACK covers every PSN before it); rxe sends one per packet.
#[test]
fn duplicate_writes_are_acknowledged_once_per_sending_round() {
    let mut p = Pair::new(906);
    let [_, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let write = write_with_pkey(&p, &b, 0xffff);
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    p.deliver(1, &write);
    assert_eq!(p.take_transmits(1).len(), 1);
    for _ in 0..3 {
        p.deliver(1, &write);
    }
    let acks = p.take_transmits(1);
    assert_eq!(acks.len(), 1, "three duplicates in one round");
    for _ in 0..3 {
        p.deliver(1, &write);
        let ack = p.take_transmits(1);
        assert_eq!(ack.len(), 1, "one duplicate per round");
        assert_eq!(
            TransportPacket::new_checked(&ack[0][..])
                .unwrap()
                .bth()
                .psn(),
            epsn
        );
    }
    assert_eq!(p.eps[1].stats().rx_duplicate, 6);
}
