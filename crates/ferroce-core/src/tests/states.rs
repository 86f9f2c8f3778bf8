//! The QP life cycle with work in flight: SQD drains what was started and
//! starts nothing new, `modify_qp` to Err flushes in order, and a QP in
//! error comes back through Reset.

use super::util::{Opts, Pair, bring_up, connect, pattern, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::verbs::{Mtu, QpAttr, QpState, QpType, SendOp, WcOpcode, WcStatus};

fn to(state: QpState) -> QpAttr {
    QpAttr {
        state: Some(state),
        ..QpAttr::default()
    }
}

/// In SQD the requester finishes (and retransmits) the messages it has
/// begun, and begins none; back in RTS it goes on.
#[test]
fn sqd_drains_started_messages_and_starts_none() {
    let mut p = Pair::new(400);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 15, Mtu::Mtu1024);
    let src = pattern(8192, 1);
    write_mr(&mut p, 0, a.mr.lkey, 0, &src);
    let write = |off: u64| SendOp::Write {
        remote: rmem(b.mr.addr + off, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write(0), &sge(&a, 0, 8192)))
        .unwrap();
    // The first three packets go out, and are lost.
    for _ in 0..3 {
        assert!(p.eps[0].poll_transmit(p.now).is_some());
    }
    p.eps[0].modify_qp(a.qpn, &to(QpState::Sqd)).unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, write(16384), &sge(&a, 0, 100)))
        .unwrap();
    // The started WRITE is finished and retransmitted until acknowledged.
    let wcs = p.wait_cqes(0, a.cq, 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8192), src);
    // The WR posted in SQD has not begun.
    p.settle(10_000);
    assert!(p.completions(0, a.cq).is_empty());
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 16384, 100), [0; 100]);
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Sqd);
    p.eps[0].modify_qp(a.qpn, &to(QpState::Rts)).unwrap();
    let wcs = p.wait_cqes(0, a.cq, 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (2, WcStatus::Success));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 16384, 100), src[..100]);
}

#[test]
fn modify_qp_to_err_flushes_outstanding_work_in_order() {
    let mut p = Pair::new(401);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_recv(a.qpn, recv_wr(10, &sge(&a, 0, 64)))
        .unwrap();
    for id in 1..=3 {
        let sg = sge(&a, 0, 64);
        let mut wr = send_wr(id, write, &sg);
        wr.signaled = id == 2; // flushes are reported signaled or not
        p.eps[0].post_send(a.qpn, wr).unwrap();
    }
    // One of them is on the wire already.
    let first = p.eps[0].poll_transmit(p.now).unwrap().data;
    p.eps[0].modify_qp(a.qpn, &to(QpState::Err)).unwrap();
    let got: Vec<_> = p
        .completions(0, a.cq)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect();
    let flush = WcStatus::WrFlushErr;
    assert_eq!(
        got,
        [
            (1, flush, WcOpcode::RdmaWrite),
            (2, flush, WcOpcode::RdmaWrite),
            (3, flush, WcOpcode::RdmaWrite),
            (10, flush, WcOpcode::Recv),
        ]
    );
    assert_eq!(p.eps[0].poll_timeout(), None);
    // The ACK of the WRITE that got out finds a QP in error and is dropped.
    p.deliver(1, &first);
    p.settle(1000);
    assert!(p.completions(0, a.cq).is_empty());
    assert_eq!(p.eps[0].stats().rx_wrong_state, 1);
}

#[test]
fn a_qp_in_error_recovers_through_reset() {
    let mut p = Pair::new(402);
    let opts = Opts::new(QpType::Rc, 4096, Mtu::Mtu1024);
    let sides = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let [a, b] = sides;
    // A receive too small puts both QPs in error.
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 8)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 64)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].status, WcStatus::LocLenErr);
    for (i, side) in sides.iter().enumerate() {
        p.eps[i].modify_qp(side.qpn, &to(QpState::Reset)).unwrap();
        assert_eq!(p.eps[i].qp_state(side.qpn).unwrap(), QpState::Reset);
    }
    // Connected again, on PSNs far from the old ones, everything works.
    bring_up(
        &mut p,
        sides,
        Opts {
            psn: 0x12_3456,
            ..opts
        },
    );
    write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(3000, 9));
    p.eps[1]
        .post_recv(b.qpn, recv_wr(2, &sge(&b, 0, 4096)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, 0, 3000)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!(
        (r.wr_id, r.status, r.byte_len),
        (2, WcStatus::Success, 3000)
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 3000), pattern(3000, 9));
}
