//! XRC's refusals on the simulated network: XRCETHs naming no SRQ, an SRQ
//! of another domain, a basic SRQ or another SRQ mid-message (NAK invalid
//! request, the target in error, nothing delivered); XRC packets to an RC
//! QP and RC packets or responses to a target (dropped, counted); and the
//! verbs calls XRC refuses, each naming its cause.

use ferroce_wire::aeth::{NakCode, Syndrome};
use ferroce_wire::{Opcode, Psn};

use super::util::{Pair, craft, emit, parse, recv_wr, rmem, sge};
use super::xrc::{Initiator, PSN, Target, ini_side, post_srq, setup, xrc};
use crate::QpInit;
use crate::verbs::{Mtu, QpState, QpType, SendOp, SendWr, VerbsError, WcStatus};

/// The NAK the target answers a request that fails its XRCETH check with,
/// and the state it leaves the target in.
fn bad_xrceth(p: &mut Pair, ini: &Initiator, tgt: &Target, srqn: u32) {
    let side = ini_side(ini);
    let sg = sge(&side, 0, 64);
    p.eps[0]
        .post_send(ini.inis[0], SendWr::send(7, &sg).to_srq(srqn))
        .unwrap();
    let got = p.wait_cqes(0, ini.cq, 1);
    assert_eq!(got[0].status, WcStatus::RemInvReqErr, "srqn {srqn}");
    assert_eq!(p.eps[1].qp_state(tgt.tgts[0]), Ok(QpState::Err));
    assert_eq!(p.eps[1].stats().rx_bad_xrc_srq, 1);
    for &cq in &tgt.cqs {
        assert!(p.completions(1, cq).is_empty(), "nothing delivered");
    }
}

#[test]
fn xrceth_naming_no_srq_is_an_invalid_request() {
    let mut p = Pair::new(0x76);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    post_srq(&mut p, &tgt, 0, 0, 1, 64);
    bad_xrceth(&mut p, &ini, &tgt, 0x00ab_cdef);
}

#[test]
fn xrceth_naming_an_srq_of_another_domain_is_refused() {
    let mut p = Pair::new(0x77);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let e = &mut p.eps[1];
    let other = e.open_xrcd();
    let cq = e.create_cq(4).unwrap();
    let foreign = e.create_xrc_srq(tgt.pd, other, cq, 4, 0).unwrap();
    let sg = [crate::verbs::Sge {
        lkey: tgt.mr.lkey,
        offset: 0,
        len: 64,
    }];
    e.post_srq_recv(foreign, recv_wr(1, &sg)).unwrap();
    bad_xrceth(&mut p, &ini, &tgt, foreign);
    assert!(p.completions(1, cq).is_empty());
}

#[test]
fn xrceth_naming_a_basic_srq_is_refused() {
    let mut p = Pair::new(0x78);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let basic = p.eps[1].create_srq(tgt.pd, 4, 0).unwrap();
    let sg = [crate::verbs::Sge {
        lkey: tgt.mr.lkey,
        offset: 0,
        len: 64,
    }];
    p.eps[1].post_srq_recv(basic, recv_wr(1, &sg)).unwrap();
    bad_xrceth(&mut p, &ini, &tgt, basic);
    assert_eq!(
        p.eps[1].query_srq(basic).unwrap().wqes,
        1,
        "its WQE untouched"
    );
}

#[test]
fn xrc_packets_to_an_rc_qp_and_rc_packets_to_a_target_are_dropped() {
    let mut p = Pair::new(0x79);
    let (_ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    post_srq(&mut p, &tgt, 0, 0, 1, 64);
    let [_, rc] = super::util::connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let psn = Psn::new(PSN);
    // An XRC SEND to the RC QP, an RC SEND to the target, an XRC
    // response (ACK) to the target.
    let mut to_rc = craft(xrc(Opcode::RC_SEND_ONLY), psn, rc.qpn, 8);
    to_rc.xrceth = Some(tgt.srqs[0]);
    let rc_send = craft(Opcode::RC_SEND_ONLY, psn, tgt.tgts[0], 8);
    let mut ack = craft(xrc(Opcode::RC_ACKNOWLEDGE), psn, tgt.tgts[0], 0);
    ack.aeth = Some(ferroce_wire::aeth::AethRepr {
        syndrome: Syndrome::Nak(NakCode::InvalidRequest),
        msn: 0,
    });
    let before = p.eps[1].stats().rx_unexpected;
    for pkt in [
        emit(&to_rc, &[1; 8]),
        emit(&rc_send, &[2; 8]),
        emit(&ack, &[]),
    ] {
        p.deliver(1, &pkt);
    }
    assert_eq!(p.eps[1].stats().rx_unexpected, before + 3);
    assert!(p.take_transmits(1).is_empty(), "no answer");
    assert_eq!(p.eps[1].qp_state(tgt.tgts[0]), Ok(QpState::Rts));
    assert_eq!(p.eps[1].qp_state(rc.qpn), Ok(QpState::Rts));
    assert!(p.completions(1, tgt.cqs[0]).is_empty());
}

#[test]
fn refused_calls_name_the_cause() {
    let mut p = Pair::new(0x7b);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let side = ini_side(&ini);
    let sg = sge(&side, 0, 8);
    let e0 = &mut p.eps[0];
    let msg = |r: Result<(), VerbsError>| r.unwrap_err().to_string();
    let no_srqn = msg(e0.post_send(ini.inis[0], SendWr::send(1, &sg)));
    assert!(no_srqn.contains("remote_srqn"), "{no_srqn}");
    let recv = msg(e0.post_recv(ini.inis[0], recv_wr(1, &sg)));
    assert!(recv.contains("post_srq_recv"), "{recv}");
    let flush = SendWr::flush(
        1,
        rmem(0, 0),
        crate::verbs::FlushType::Global,
        crate::verbs::FlushLevel::Range,
    );
    let refused = e0.post_send(ini.inis[0], flush.to_srq(tgt.srqs[0]));
    assert!(matches!(refused, Err(VerbsError::BadOpForQpType { .. })));
    let e1 = &mut p.eps[1];
    let t_sg = [crate::verbs::Sge {
        lkey: tgt.mr.lkey,
        offset: 0,
        len: 8,
    }];
    let send = msg(e1.post_send(tgt.tgts[0], SendWr::send(1, &t_sg).to_srq(tgt.srqs[0])));
    assert!(send.contains("no send queue"), "{send}");
    let recv = msg(e1.post_recv(tgt.tgts[0], recv_wr(1, &t_sg)));
    assert!(recv.contains("XRC"), "{recv}");
    let basic = e1.create_srq(tgt.pd, 4, 0).unwrap();
    assert_eq!(e1.srq_num(basic), Err(VerbsError::NotXrcSrq(basic)));
    assert_eq!(e1.srq_num(tgt.srqs[0]), Ok(tgt.srqs[0]));
    assert!(matches!(e1.close_xrcd(tgt.xrcd), Err(VerbsError::Busy(_))));
    assert_eq!(e1.create_xrc_tgt_qp(999), Err(VerbsError::NoSuchXrcd(999)));
    let cq = tgt.cqs[0];
    let r = e1.create_xrc_srq(tgt.pd, 999, cq, 4, 0);
    assert_eq!(r, Err(VerbsError::NoSuchXrcd(999)));
    let as_tgt = e1.create_qp(QpInit {
        pd: tgt.pd,
        qp_type: QpType::XrcTgt,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 1,
        max_recv_wr: 1,
        sq_sig_all: false,
        srq: None,
    });
    assert!(
        as_tgt
            .unwrap_err()
            .to_string()
            .contains("create_xrc_tgt_qp")
    );
    // Everything in the domain gone, it closes.
    e1.destroy_qp(tgt.tgts[0]).unwrap();
    e1.destroy_srq(tgt.srqs[0]).unwrap();
    e1.close_xrcd(tgt.xrcd).unwrap();
    assert_eq!(
        e1.close_xrcd(tgt.xrcd),
        Err(VerbsError::NoSuchXrcd(tgt.xrcd))
    );
}

#[test]
fn a_message_may_not_change_srq_midway() {
    let mut p = Pair::new(0x7c);
    let (ini, tgt) = setup(&mut p, 2, 1, Mtu::Mtu1024);
    post_srq(&mut p, &tgt, 0, 0, 1, 4096);
    post_srq(&mut p, &tgt, 1, 1, 1, 4096);
    let side = ini_side(&ini);
    let sg = sge(&side, 0, 2048);
    p.eps[0]
        .post_send(ini.inis[0], SendWr::send(1, &sg).to_srq(tgt.srqs[0]))
        .unwrap();
    let out = p.take_transmits(0);
    assert_eq!(out.len(), 2);
    p.deliver(1, &out[0]);
    // The LAST rewritten to name the other SRQ.
    let mut last = parse(&out[1]);
    last.xrceth = Some(tgt.srqs[1]);
    p.deliver(1, &emit(&last, &read_payload(&out[1])));
    assert_eq!(p.eps[1].stats().rx_bad_xrc_srq, 1);
    assert_eq!(p.eps[1].qp_state(tgt.tgts[0]), Ok(QpState::Err));
    assert!(p.completions(1, tgt.cqs[1]).is_empty());
    let flushed = p.completions(1, tgt.cqs[0]);
    assert_eq!(
        flushed.len(),
        1,
        "the half-filled WQE is flushed on its SRQ's CQ"
    );
    assert_eq!(flushed[0].status, WcStatus::WrFlushErr);
    let _ = SendOp::Send;
}

fn read_payload(data: &[u8]) -> Vec<u8> {
    ferroce_wire::TransportPacket::new_checked(data)
        .unwrap()
        .payload()
        .to_vec()
}
