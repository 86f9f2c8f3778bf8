//! Verbs calls the endpoint refuses, through its public API: `modify_qp`
//! with a missing, unexpected or out-of-range attribute or an illegal
//! transition, and `post_send` / `post_recv` in the wrong state, on a full
//! queue, with a bad scatter/gather element or an operation the QP type does
//! not have. Each error's message must name what is wrong.

use super::ops::ud_dest;
use super::util::{Opts, Pair, Side, connect, connect_with, recv_wr, rmem, send_wr, sge};
use crate::verbs::{
    Access, Mtu, QpAttr, QpState, QpType, RemoteSlice, SendOp, Sge, VerbsError, WcOpcode, WcStatus,
};
use crate::{Endpoint, EndpointConfig, MAX_MSG_SIZE, QpInit};

/// Asserts `r` failed with `want`, whose message contains each of `words`.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: Result<T, VerbsError>, want: VerbsError, words: &[&str]) {
    let err = r.expect_err("the call should be refused");
    assert_eq!(err, want);
    let text = err.to_string();
    for w in words {
        assert!(text.contains(w), "{text:?} does not say {w:?}");
    }
}

/// An endpoint with one QP of `qp_type` in RESET (send and receive queues
/// of 4), and a 4 KiB region with LOCAL_WRITE only.
fn fresh(qp_type: QpType) -> (Endpoint, u32, crate::MrInfo) {
    fresh_with(qp_type, 4)
}

/// [`fresh`] with queues of `depth`.
pub(super) fn fresh_with(qp_type: QpType, depth: u32) -> (Endpoint, u32, crate::MrInfo) {
    let mut e = Endpoint::new(EndpointConfig { seed: 7 });
    let pd = e.alloc_pd();
    let cq = e.create_cq(64).unwrap();
    let qpn = e
        .create_qp(QpInit {
            pd,
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: depth,
            max_recv_wr: depth,
            sq_sig_all: false,
            srq: None,
        })
        .unwrap();
    let mr = e.reg_mr(pd, 4096, Access::LOCAL_WRITE).unwrap();
    (e, qpn, mr)
}

fn to(state: QpState) -> QpAttr {
    QpAttr {
        state: Some(state),
        ..QpAttr::default()
    }
}

#[test]
fn modify_qp_refusals_name_the_problem_and_change_nothing() {
    let (mut e, q, _) = fresh(QpType::Rc);
    refused(
        e.modify_qp(q, &to(QpState::Rts)),
        VerbsError::BadTransition {
            from: QpState::Reset,
            to: QpState::Rts,
        },
        &["no transition", "Reset", "Rts"],
    );
    refused(
        e.modify_qp(q, &to(QpState::Err)),
        VerbsError::BadTransition {
            from: QpState::Reset,
            to: QpState::Err,
        },
        &["Reset", "Err"],
    );
    let init = QpAttr {
        pkey_index: Some(0),
        port: Some(1),
        ..to(QpState::Init)
    };
    refused(
        e.modify_qp(q, &init),
        VerbsError::MissingAttr {
            to: QpState::Init,
            attr: "access",
        },
        &["Init", "access", "missing"],
    );
    refused(
        e.modify_qp(
            q,
            &QpAttr {
                port: Some(2),
                access: Some(Access::NONE),
                ..init
            },
        ),
        VerbsError::BadValue {
            what: "port",
            value: 2,
        },
        &["port", "2"],
    );
    assert_eq!(e.qp_state(q).unwrap(), QpState::Reset);
    e.modify_qp(
        q,
        &QpAttr {
            access: Some(Access::NONE),
            ..init
        },
    )
    .unwrap();
    // Init -> RTR with everything but dest_qpn: refused, and the path given
    // along with it is not applied.
    let mut p = Pair::new(200);
    let rtr = QpAttr {
        path: Some(crate::verbs::Path {
            remote: p.addrs[1],
            udp_src_port: 0xc000,
            traffic_class: 0,
            hop_limit: 64,
            roce: crate::verbs::RoceMode::V2,
        }),
        path_mtu: Some(Mtu::Mtu1024),
        rq_psn: Some(ferroce_wire::Psn::new(0)),
        max_dest_rd_atomic: Some(1),
        min_rnr_timer: Some(1),
        ..to(QpState::Rtr)
    };
    refused(
        e.modify_qp(q, &rtr),
        VerbsError::MissingAttr {
            to: QpState::Rtr,
            attr: "dest_qpn",
        },
        &["dest_qpn", "missing"],
    );
    assert_eq!(e.qp_state(q).unwrap(), QpState::Init);
    assert_eq!(e.qps[&q].cfg.path, None);
    refused(
        e.modify_qp(
            q,
            &QpAttr {
                dest_qpn: Some(1),
                timeout: Some(3),
                ..rtr
            },
        ),
        VerbsError::UnexpectedAttr {
            to: QpState::Rtr,
            attr: "timeout",
        },
        &["timeout", "not allowed"],
    );
    refused(
        e.modify_qp(0xab_cdef, &to(QpState::Init)),
        VerbsError::NoSuchQp(0xab_cdef),
        &["0xabcdef"],
    );
    // A connected QP refuses to go back to Init, and RTS -> RTS takes only
    // what it allows.
    let [a, _] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    refused(
        p.eps[0].modify_qp(a.qpn, &to(QpState::Init)),
        VerbsError::BadTransition {
            from: QpState::Rts,
            to: QpState::Init,
        },
        &["Rts", "Init"],
    );
    refused(
        p.eps[0].modify_qp(
            a.qpn,
            &QpAttr {
                retry_cnt: Some(3),
                ..to(QpState::Rts)
            },
        ),
        VerbsError::UnexpectedAttr {
            to: QpState::Rts,
            attr: "retry_cnt",
        },
        &["retry_cnt"],
    );
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Rts);
}

fn write_op(side: &Side) -> SendOp {
    SendOp::Write {
        remote: rmem(side.mr.addr, side.mr.rkey),
    }
}

#[test]
fn post_send_and_post_recv_before_the_qp_is_ready() {
    let (mut e, q, mr) = fresh(QpType::Rc);
    let sg = vec![Sge {
        lkey: mr.lkey,
        offset: 0,
        len: 8,
    }];
    let state = |state| VerbsError::WrongState {
        qpn: q,
        state,
        call: "post_send",
    };
    refused(
        e.post_send(q, send_wr(1, SendOp::Send, &sg.clone())),
        state(QpState::Reset),
        &["post_send", "0x11", "Reset"],
    );
    refused(
        e.post_recv(q, recv_wr(1, &sg.clone())),
        VerbsError::WrongState {
            qpn: q,
            state: QpState::Reset,
            call: "post_recv",
        },
        &["post_recv", "Reset"],
    );
    let init = QpAttr {
        pkey_index: Some(0),
        port: Some(1),
        access: Some(Access::NONE),
        ..to(QpState::Init)
    };
    e.modify_qp(q, &init).unwrap();
    refused(
        e.post_send(q, send_wr(1, SendOp::Send, &sg.clone())),
        state(QpState::Init),
        &["Init"],
    );
    // A receive may be posted from Init on.
    e.post_recv(q, recv_wr(1, &sg.clone())).unwrap();
    refused(
        e.post_send(0x77, send_wr(1, SendOp::Send, &sg)),
        VerbsError::NoSuchQp(0x77),
        &["no queue pair 0x77"],
    );
}

#[test]
fn full_queues_are_refused() {
    let mut p = Pair::new(201);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            max_send_wr: 2,
            max_recv_wr: 3,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    for id in 0..2 {
        p.eps[0]
            .post_send(a.qpn, send_wr(id, write_op(&b), &sge(&a, 0, 8)))
            .unwrap();
    }
    refused(
        p.eps[0].post_send(a.qpn, send_wr(2, write_op(&b), &sge(&a, 0, 8))),
        VerbsError::QueueFull {
            qpn: a.qpn,
            queue: "send queue",
            depth: 2,
        },
        &["send queue full", "2 entries"],
    );
    for id in 0..3 {
        p.eps[1]
            .post_recv(b.qpn, recv_wr(id, &sge(&b, 0, 8)))
            .unwrap();
    }
    refused(
        p.eps[1].post_recv(b.qpn, recv_wr(3, &sge(&b, 0, 8))),
        VerbsError::QueueFull {
            qpn: b.qpn,
            queue: "receive queue",
            depth: 3,
        },
        &["receive queue full", "3 entries"],
    );
    // Completing the sends makes room again.
    assert_eq!(p.wait_cqes(0, a.cq, 2).len(), 2);
    p.eps[0]
        .post_send(a.qpn, send_wr(2, write_op(&b), &sge(&a, 0, 8)))
        .unwrap();
}

#[test]
fn bad_scatter_gather_elements_are_refused_with_the_reason() {
    let mut p = Pair::new(202);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let bad = |lkey, offset, len, why| {
        (
            vec![Sge { lkey, offset, len }],
            VerbsError::BadSge {
                lkey,
                offset,
                len,
                why,
            },
        )
    };
    let other_pd = p.eps[0].alloc_pd();
    let foreign = p.eps[0]
        .reg_mr(other_pd, 4096, Access::LOCAL_WRITE)
        .unwrap();
    let read_only = p.eps[0].reg_mr(a.pd, 4096, Access::NONE).unwrap();
    let cases = [
        (
            bad(a.mr.lkey, 4000, 200, "outside the region"),
            "outside the region",
        ),
        (
            bad(a.mr.lkey, u64::MAX, 2, "outside the region"),
            "outside the region",
        ),
        (bad(0x1234_5678, 0, 8, "no such region"), "no such region"),
        (
            bad(foreign.lkey, 0, 8, "region in another protection domain"),
            "another protection domain",
        ),
    ];
    for ((sg, want), words) in cases {
        refused(
            p.eps[0].post_send(a.qpn, send_wr(1, write_op(&b), &sg.clone())),
            want.clone(),
            &[words],
        );
        refused(p.eps[0].post_recv(a.qpn, recv_wr(1, &sg)), want, &[words]);
    }
    // Local writes (a receive, a READ's or an atomic's destination) need
    // LOCAL_WRITE; sending from the same region is fine.
    let (sg, want) = bad(read_only.lkey, 0, 8, "region without LOCAL_WRITE");
    refused(
        p.eps[0].post_recv(a.qpn, recv_wr(1, &sg.clone())),
        want.clone(),
        &["LOCAL_WRITE"],
    );
    let read = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    refused(
        p.eps[0].post_send(a.qpn, send_wr(1, read, &sg.clone())),
        want,
        &["LOCAL_WRITE"],
    );
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write_op(&b), &sg))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
}

#[test]
fn operations_the_qp_type_lacks_are_refused() {
    let read = |s: &Side| SendOp::Read {
        remote: rmem(s.mr.addr, s.mr.rkey),
    };
    let add = |s: &Side| SendOp::FetchAdd {
        remote: rmem(s.mr.addr, s.mr.rkey),
        add: 1,
    };
    for (seed, qp_type) in [(203, QpType::Uc), (204, QpType::Ud)] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, qp_type, 4096, Mtu::Mtu1024);
        let mut ops = vec![
            (read(&b), "RDMA_READ"),
            (add(&b), "ATOMIC_FETCH_AND_ADD"),
            (SendOp::SendWithInv(b.mr.rkey), "SEND_WITH_INV"),
        ];
        if qp_type == QpType::Ud {
            ops.push((write_op(&b), "RDMA_WRITE"));
        }
        for (op, name) in ops {
            let sg = sge(&a, 0, 8);
            let mut wr = send_wr(1, op, &sg);
            wr.ud = (qp_type == QpType::Ud).then(|| ud_dest(&p, b.qpn));
            refused(
                p.eps[0].post_send(a.qpn, wr),
                VerbsError::BadOpForQpType { op: name, qp_type },
                &[name, "not supported", &format!("{qp_type:?}")],
            );
        }
    }
    // UD needs a destination, and a message that fits one packet.
    let mut p = Pair::new(205);
    let [a, b] = connect(&mut p, QpType::Ud, 4096, Mtu::Mtu1024);
    refused(
        p.eps[0].post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 8))),
        VerbsError::BadValue {
            what: "UD send without a destination (ud)",
            value: 0,
        },
        &["without a destination"],
    );
    let sg = sge(&a, 0, 1025);
    let mut wr = send_wr(1, SendOp::Send, &sg);
    wr.ud = Some(ud_dest(&p, b.qpn));
    refused(
        p.eps[0].post_send(a.qpn, wr),
        VerbsError::TooLong {
            len: 1025,
            max: 1024,
        },
        &["1025", "exceeds 1024"],
    );
}

#[test]
fn malformed_work_requests_are_refused() {
    let mut p = Pair::new(206);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 22, Mtu::Mtu1024);
    let add = SendOp::FetchAdd {
        remote: rmem(b.mr.addr, b.mr.rkey),
        add: 1,
    };
    refused(
        p.eps[0].post_send(a.qpn, send_wr(1, add, &sge(&a, 0, 4))),
        VerbsError::BadValue {
            what: "atomic local buffer length (must be 8)",
            value: 4,
        },
        &["atomic", "must be 8", "4"],
    );
    let read = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    let mut wr = send_wr(1, read, &[]);
    wr.inline = Some(&[0; 8]);
    refused(
        p.eps[0].post_send(a.qpn, wr),
        VerbsError::BadValue {
            what: "inline data on a READ or atomic",
            value: 0,
        },
        &["inline", "READ"],
    );
    // Two 4 MiB elements and one byte more: past the largest message.
    let mut sg = sge(&a, 0, 1 << 22);
    sg.extend(sge(&a, 0, 1 << 22));
    sg.extend(sge(&a, 0, 1));
    refused(
        p.eps[0].post_send(a.qpn, send_wr(1, write_op(&b), &sg)),
        VerbsError::TooLong {
            len: MAX_MSG_SIZE + 1,
            max: MAX_MSG_SIZE,
        },
        &["8388609", "exceeds 8388608"],
    );
    // A WRITE longer than its remote slice, an atomic on a slice of 4.
    let short = RemoteSlice::new(b.mr.addr, b.mr.rkey, 7);
    refused(
        p.eps[0].post_send(
            a.qpn,
            send_wr(1, SendOp::Write { remote: short }, &sge(&a, 0, 8)),
        ),
        VerbsError::RemoteTooShort {
            len: 8,
            remote: short,
        },
        &["8 bytes", "remote slice of 7 bytes", "longer slice"],
    );
    let add = SendOp::FetchAdd {
        remote: RemoteSlice::new(b.mr.addr, b.mr.rkey, 4),
        add: 1,
    };
    assert!(matches!(
        p.eps[0].post_send(a.qpn, send_wr(1, add, &sge(&a, 0, 8))),
        Err(VerbsError::RemoteTooShort { len: 8, .. })
    ));
    // None of these reached the send queue.
    assert!(p.eps[0].qps[&a.qpn].sq.is_empty());
}

#[test]
fn work_requests_posted_to_a_qp_in_error_are_flushed() {
    let mut p = Pair::new(207);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.eps[0].modify_qp(a.qpn, &to(QpState::Err)).unwrap();
    let sg = sge(&a, 0, 8);
    let mut wr = send_wr(5, write_op(&b), &sg);
    wr.signaled = false; // error completions are always signaled
    p.eps[0].post_send(a.qpn, wr).unwrap();
    p.eps[0]
        .post_recv(a.qpn, recv_wr(6, &sge(&a, 0, 8)))
        .unwrap();
    p.settle(100);
    let got: Vec<_> = p
        .completions(0, a.cq)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect();
    assert_eq!(
        got,
        [
            (5, WcStatus::WrFlushErr, WcOpcode::RdmaWrite),
            (6, WcStatus::WrFlushErr, WcOpcode::Recv),
        ]
    );
    // Nothing was sent, and the QP recovers through Reset.
    assert_eq!(p.eps[0].stats().tx_packets, 0);
    p.eps[0].modify_qp(a.qpn, &to(QpState::Reset)).unwrap();
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Reset);
}

#[test]
fn impossible_region_size_is_refused_not_aborted() {
    let mut e = Endpoint::new(EndpointConfig { seed: 7 });
    let pd = e.alloc_pd();
    for len in [1usize << 62, usize::MAX] {
        refused(
            e.reg_mr(pd, len, Access::LOCAL_WRITE),
            VerbsError::BadValue {
                what: "MR length (no memory for that many bytes)",
                value: len as u64,
            },
            &["MR length"],
        );
    }
    assert!(e.reg_mr(pd, 4096, Access::LOCAL_WRITE).is_ok());
}

#[test]
fn qpns_start_where_asked_and_never_below_0x11() {
    let (mut e, first, _) = fresh(QpType::Rc);
    assert_eq!(first, 0x11, "rxe's first QPN until told otherwise");
    let init = |e: &mut Endpoint| {
        let pd = e.alloc_pd();
        let cq = e.create_cq(4).unwrap();
        e.create_qp(QpInit {
            pd,
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 4,
            max_recv_wr: 4,
            sq_sig_all: false,
            srq: None,
        })
        .unwrap()
    };
    e.start_qpns_at(0x1234);
    assert_eq!((init(&mut e), init(&mut e)), (0x1234, 0x1235));
    for outside in [0, 1, 0x10, 0x100_0000] {
        e.start_qpns_at(outside);
        let qpn = init(&mut e);
        assert!((0x11..0x20).contains(&qpn), "{outside:#x} gave {qpn:#x}");
    }
}

#[test]
fn resize_cq_keeps_what_the_cq_holds() {
    let mut p = Pair::new(91);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    for i in 0..3 {
        p.eps[1]
            .post_recv(b.qpn, recv_wr(i, &sge(&b, 0, 64)))
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(i, SendOp::Send, &sge(&a, 0, 8)))
            .unwrap();
    }
    p.settle(100_000);
    // A holds 3 send completions: not below that, not 0 or past MAX_CQE.
    let e = &mut p.eps[0];
    let err = e.resize_cq(a.cq, 2).unwrap_err();
    assert!(err.to_string().contains("poll them first"), "{err}");
    assert!(e.resize_cq(a.cq, 0).is_err());
    assert!(e.resize_cq(a.cq, crate::MAX_CQE + 1).is_err());
    assert_eq!(e.resize_cq(999, 8), Err(VerbsError::NoSuchCq(999)));
    e.resize_cq(a.cq, 3).unwrap();
    assert_eq!(p.completions(0, a.cq).len(), 3);
    // Shrunk to 1, the CQ overflows at the second completion.
    p.eps[0].resize_cq(a.cq, 1).unwrap();
    for i in 0..2 {
        p.eps[1]
            .post_recv(b.qpn, recv_wr(i, &sge(&b, 0, 64)))
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(i, SendOp::Send, &sge(&a, 0, 8)))
            .unwrap();
    }
    p.settle(100_000);
    assert!(p.eps[0].cq_overflowed(a.cq).unwrap());
}

#[test]
fn rereg_mr_changes_access_and_pd_in_place() {
    let mut p = Pair::new(92);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let e = &mut p.eps[1];
    let mr = e.reg_mr(b.pd, 4096, Access::LOCAL_WRITE).unwrap();
    // Write access added: the peer's WRITE lands, under the same rkey.
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    e.rereg_mr(mr.lkey, None, Some(rw)).unwrap();
    let write = SendOp::Write {
        remote: rmem(mr.addr + 8, mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 8)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    // The checks of registration, and the objects named.
    let e = &mut p.eps[1];
    assert!(matches!(
        e.rereg_mr(mr.lkey, None, Some(Access::REMOTE_WRITE)),
        Err(VerbsError::BadValue { .. })
    ));
    assert_eq!(
        e.rereg_mr(mr.lkey, Some(777), None),
        Err(VerbsError::NoSuchPd(777))
    );
    assert_eq!(e.rereg_mr(3, None, Some(rw)), Err(VerbsError::NoSuchMr(3)));
    let pd2 = e.alloc_pd();
    e.rereg_mr(mr.lkey, Some(pd2), None).unwrap();
    assert!(matches!(e.dealloc_pd(pd2), Err(VerbsError::Busy(_))));
    e.dereg_mr(mr.lkey).unwrap();
    e.dealloc_pd(pd2).unwrap();
}
