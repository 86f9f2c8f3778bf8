//! Local protection errors in both reporting modes ([`LocalErrors`]): a send
//! or receive request whose scatter/gather list names no region, a region
//! of another PD, bytes outside its region, or a region without
//! LOCAL_WRITE for data coming in; and a region deregistered between the
//! post and the request's execution. `Immediate` refuses the post with the
//! named cause; `Completion` (IBA, rdma-core) takes it and fails it with
//! `LocProtErr` when it executes, the QP then in ERR and the rest flushed.

use super::ops::ud_dest;
use super::srq::shared_srq;
use super::util::{Pair, Side, connect, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::verbs::{
    Access, LocalErrors, Mtu, QpState, QpType, SendOp, Sge, VerbsError, WcStatus, WorkCompletion,
};

fn ids(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// The ways a scatter/gather element of endpoint `i`'s side `s` can fail
/// the local checks, each with the cause `BadSge` names.
#[derive(Debug, Clone, Copy)]
enum Bad {
    UnknownKey,
    OtherPd,
    OutOfRange,
    NoLocalWrite,
}

impl Bad {
    const ALL: [Self; 4] = [
        Self::UnknownKey,
        Self::OtherPd,
        Self::OutOfRange,
        Self::NoLocalWrite,
    ];

    /// A bad element on endpoint `i`, for side `s`.
    fn sge(self, p: &mut Pair, i: usize, s: &Side) -> Sge {
        let e = &mut p.eps[i];
        let lkey = match self {
            Self::UnknownKey => s.mr.lkey ^ 0x5a5a_5a5a,
            Self::OtherPd => {
                let pd = e.alloc_pd();
                e.reg_mr(pd, 4096, Access::LOCAL_WRITE).unwrap().lkey
            }
            Self::OutOfRange => s.mr.lkey,
            Self::NoLocalWrite => e.reg_mr(s.pd, 4096, Access::NONE).unwrap().lkey,
        };
        let offset = match self {
            Self::OutOfRange => s.mr.len as u64 - 8,
            _ => 0,
        };
        Sge {
            lkey,
            offset,
            len: 64,
        }
    }

    fn why(self) -> &'static str {
        match self {
            Self::UnknownKey => "no such region",
            Self::OtherPd => "region in another protection domain",
            Self::OutOfRange => "outside the region",
            Self::NoLocalWrite => "region without LOCAL_WRITE",
        }
    }

    /// A send request that trips this check: a READ (which writes its
    /// local elements) for the missing LOCAL_WRITE, else a SEND.
    fn op(self, b: &Side) -> SendOp {
        match self {
            Self::NoLocalWrite => SendOp::Read {
                remote: rmem(b.mr.addr, b.mr.rkey),
            },
            _ => SendOp::Send,
        }
    }
}

fn cause(e: VerbsError) -> &'static str {
    match e {
        VerbsError::BadSge { why, .. } => why,
        other => panic!("expected BadSge, got {other:?}"),
    }
}

#[test]
fn a_bad_send_list_is_refused_at_post_by_default() {
    for (n, bad) in Bad::ALL.into_iter().enumerate() {
        let mut p = Pair::new(500 + n as u64);
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        let sg = [bad.sge(&mut p, 0, &a)];
        let err = p.eps[0]
            .post_send(a.qpn, send_wr(1, bad.op(&b), &sg))
            .unwrap_err();
        assert_eq!(cause(err), bad.why(), "{bad:?}");
        // The QP is unharmed: the next request goes through.
        p.eps[1]
            .post_recv(b.qpn, recv_wr(9, &sge(&b, 0, 64)))
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, 0, 64)))
            .unwrap();
        assert_eq!(
            ids(&p.wait_cqes(0, a.cq, 1)),
            [(2, WcStatus::Success)],
            "{bad:?}"
        );
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Rts);
    }
}

#[test]
fn a_bad_send_list_completes_with_loc_prot_err_in_completion_mode() {
    for (n, bad) in Bad::ALL.into_iter().enumerate() {
        let mut p = Pair::new(520 + n as u64);
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        p.eps[0]
            .set_local_errors(a.qpn, LocalErrors::Completion)
            .unwrap();
        for id in [1, 2] {
            p.eps[1]
                .post_recv(b.qpn, recv_wr(id, &sge(&b, 0, 64)))
                .unwrap();
        }
        let sg = [bad.sge(&mut p, 0, &a)];
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 64)))
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(2, bad.op(&b), &sg))
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(3, SendOp::Send, &sge(&a, 0, 64)))
            .unwrap();
        assert_eq!(
            ids(&p.wait_cqes(0, a.cq, 3)),
            [
                (1, WcStatus::Success),
                (2, WcStatus::LocProtErr),
                (3, WcStatus::WrFlushErr)
            ],
            "{bad:?}"
        );
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        // Nothing of the failed request went out: the peer received the
        // first SEND only, and is unharmed.
        p.settle(10_000);
        assert_eq!(ids(&p.completions(1, b.cq)), [(1, WcStatus::Success)]);
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
    }
}

#[test]
fn a_region_deregistered_after_the_post_fails_the_send_in_both_modes() {
    for (seed, mode) in [
        (540, LocalErrors::Immediate),
        (541, LocalErrors::Completion),
    ] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        p.eps[0].set_local_errors(a.qpn, mode).unwrap();
        let extra = p.eps[0].reg_mr(a.pd, 4096, Access::LOCAL_WRITE).unwrap();
        let sg = [Sge {
            lkey: extra.lkey,
            offset: 0,
            len: 64,
        }];
        p.eps[1]
            .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 64)))
            .unwrap();
        // Posted and deregistered before the engine sends anything.
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sg))
            .unwrap();
        p.eps[0].dereg_mr(extra.lkey).unwrap();
        assert_eq!(
            ids(&p.wait_cqes(0, a.cq, 1)),
            [(1, WcStatus::LocProtErr)],
            "{mode:?}"
        );
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        p.settle(10_000);
        assert!(p.completions(1, b.cq).is_empty(), "{mode:?}: nothing sent");
    }
}

#[test]
fn a_bad_receive_list_is_refused_at_post_by_default() {
    for (n, bad) in Bad::ALL.into_iter().enumerate() {
        let mut p = Pair::new(560 + n as u64);
        let [_, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        let sg = [bad.sge(&mut p, 1, &b)];
        let err = p.eps[1].post_recv(b.qpn, recv_wr(1, &sg)).unwrap_err();
        assert_eq!(cause(err), bad.why(), "{bad:?}");
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
    }
}

/// A SEND from `a` into a receive request of `b` whose list is `bad`
/// (posted with another good one behind it): the completions on both sides.
fn send_into_bad_receive(p: &mut Pair, a: &Side, b: &Side, sg: &[Sge]) {
    p.eps[1].post_recv(b.qpn, recv_wr(1, sg)).unwrap();
    p.eps[1]
        .post_recv(b.qpn, recv_wr(2, &sge(b, 0, 64)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(7, SendOp::Send, &sge(a, 0, 64)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(8, SendOp::Send, &sge(a, 0, 64)))
        .unwrap();
}

#[test]
fn a_send_into_a_bad_receive_fails_both_sides_in_completion_mode() {
    for (n, bad) in Bad::ALL.into_iter().enumerate() {
        let mut p = Pair::new(580 + n as u64);
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        p.eps[1]
            .set_local_errors(b.qpn, LocalErrors::Completion)
            .unwrap();
        let sg = [bad.sge(&mut p, 1, &b)];
        send_into_bad_receive(&mut p, &a, &b, &sg);
        // The receive fails with a local protection error; the responder
        // NAKs (remote operational error) and both QPs end in ERR.
        assert_eq!(
            ids(&p.wait_cqes(1, b.cq, 2)),
            [(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)],
            "{bad:?}"
        );
        assert_eq!(
            ids(&p.wait_cqes(0, a.cq, 2)),
            [(7, WcStatus::RemOpErr), (8, WcStatus::WrFlushErr)],
            "{bad:?}"
        );
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
    }
}

#[test]
fn a_receive_region_deregistered_after_the_post_fails_in_both_modes() {
    for (seed, mode) in [
        (600, LocalErrors::Immediate),
        (601, LocalErrors::Completion),
    ] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        p.eps[1].set_local_errors(b.qpn, mode).unwrap();
        let extra = p.eps[1].reg_mr(b.pd, 4096, Access::LOCAL_WRITE).unwrap();
        let sg = [Sge {
            lkey: extra.lkey,
            offset: 0,
            len: 64,
        }];
        send_into_bad_receive(&mut p, &a, &b, &sg);
        p.eps[1].dereg_mr(extra.lkey).unwrap();
        assert_eq!(
            ids(&p.wait_cqes(1, b.cq, 2)),
            [(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)],
            "{mode:?}"
        );
        assert_eq!(
            ids(&p.wait_cqes(0, a.cq, 2)),
            [(7, WcStatus::RemOpErr), (8, WcStatus::WrFlushErr)],
            "{mode:?}"
        );
    }
}

#[test]
fn a_ud_receive_with_a_bad_list_fails_and_moves_the_qp_to_error() {
    let mut p = Pair::new(620);
    let [a, b] = connect(&mut p, QpType::Ud, 8192, Mtu::Mtu1024);
    p.eps[1]
        .set_local_errors(b.qpn, LocalErrors::Completion)
        .unwrap();
    let bad = [Bad::UnknownKey.sge(&mut p, 1, &b)];
    p.eps[1].post_recv(b.qpn, recv_wr(1, &bad)).unwrap();
    p.eps[1]
        .post_recv(b.qpn, recv_wr(2, &sge(&b, 0, 4096)))
        .unwrap();
    let sg = sge(&a, 0, 64);
    let mut wr = send_wr(7, SendOp::Send, &sg);
    wr.ud = Some(ud_dest(&p, b.qpn));
    p.eps[0].post_send(a.qpn, wr).unwrap();
    assert_eq!(
        ids(&p.wait_cqes(1, b.cq, 2)),
        [(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
}

#[test]
fn an_srq_in_completion_mode_takes_a_bad_list_and_fails_the_qp_that_uses_it() {
    let mut p = Pair::new(640);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 1, 8, 0);
    let (a, b) = (
        peers[0],
        Side {
            pd: s.pd,
            cq: s.cq,
            qpn: s.qps[0],
            mr: s.mr,
        },
    );
    let bad = [Bad::OutOfRange.sge(&mut p, 1, &b)];
    let refused = p.eps[1].post_srq_recv(s.srq, recv_wr(1, &bad)).unwrap_err();
    assert_eq!(cause(refused), Bad::OutOfRange.why());
    p.eps[1]
        .set_srq_local_errors(s.srq, LocalErrors::Completion)
        .unwrap();
    p.eps[1].post_srq_recv(s.srq, recv_wr(1, &bad)).unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(7, SendOp::Send, &sge(&a, 0, 64)))
        .unwrap();
    assert_eq!(ids(&p.wait_cqes(1, b.cq, 1)), [(1, WcStatus::LocProtErr)]);
    assert_eq!(ids(&p.wait_cqes(0, a.cq, 1)), [(7, WcStatus::RemOpErr)]);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
}

#[test]
fn a_region_deregistered_in_the_middle_of_a_message_stops_it_there() {
    let mut p = Pair::new(660);
    // 256 packets at MTU 256: the first window (128) goes out at once, the
    // rest only after ACKs, by when the source region is gone.
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu256);
    let extra = p.eps[0].reg_mr(a.pd, 1 << 16, Access::LOCAL_WRITE).unwrap();
    let sg = [Sge {
        lkey: extra.lkey,
        offset: 0,
        len: 1 << 16,
    }];
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 1 << 16)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sg))
        .unwrap();
    p.step();
    assert!(p.eps[0].packets_in_flight() > 0, "the message has begun");
    p.eps[0].dereg_mr(extra.lkey).unwrap();
    assert_eq!(ids(&p.wait_cqes(0, a.cq, 1)), [(1, WcStatus::LocProtErr)]);
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
    // The rest was not sent (not even as bytes of nothing): the receive
    // never completes.
    p.settle(10_000);
    assert!(p.completions(1, b.cq).is_empty());
}

#[test]
fn a_read_whose_sink_is_deregistered_midway_fails_with_loc_prot_err() {
    let mut p = Pair::new(680);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu256);
    let sink = p.eps[0].reg_mr(a.pd, 1 << 16, Access::LOCAL_WRITE).unwrap();
    let sg = [Sge {
        lkey: sink.lkey,
        offset: 0,
        len: 1 << 16,
    }];
    let op = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    write_mr(&mut p, 1, b.mr.lkey, 0, &[7; 256]);
    p.eps[0].post_send(a.qpn, send_wr(1, op, &sg)).unwrap();
    // Until the first response has landed (and not the last: 256 of them).
    while read_mr(&p, 0, sink.lkey, 0, 256) != [7; 256] {
        assert!(p.step(), "the READ stalled");
    }
    p.eps[0].dereg_mr(sink.lkey).unwrap();
    assert_eq!(ids(&p.wait_cqes(0, a.cq, 1)), [(1, WcStatus::LocProtErr)]);
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
}

#[test]
fn a_receive_region_deregistered_in_the_middle_of_a_message_fails_it() {
    let mut p = Pair::new(700);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu256);
    let sink = p.eps[1].reg_mr(b.pd, 1 << 16, Access::LOCAL_WRITE).unwrap();
    let sg = [Sge {
        lkey: sink.lkey,
        offset: 0,
        len: 1 << 16,
    }];
    p.eps[1].post_recv(b.qpn, recv_wr(1, &sg)).unwrap();
    write_mr(&mut p, 0, a.mr.lkey, 0, &[9; 256]);
    p.eps[0]
        .post_send(a.qpn, send_wr(7, SendOp::Send, &sge(&a, 0, 1 << 16)))
        .unwrap();
    while read_mr(&p, 1, sink.lkey, 0, 256) != [9; 256] {
        assert!(p.step(), "the SEND stalled");
    }
    p.eps[1].dereg_mr(sink.lkey).unwrap();
    assert_eq!(ids(&p.wait_cqes(1, b.cq, 1)), [(1, WcStatus::LocProtErr)]);
    assert_eq!(ids(&p.wait_cqes(0, a.cq, 1)), [(7, WcStatus::RemOpErr)]);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
}
