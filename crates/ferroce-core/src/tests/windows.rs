//! Memory windows on the simulated network: type 2 windows bound by a
//! BIND_MW request and type 1 windows by `bind_mw`; access through a window
//! bounded by its range and rights; a new key byte on every bind;
//! invalidation by LOCAL_INV and by a peer's SEND with invalidate; the
//! rules of binding, at post and when the QP reaches the bind; and windows
//! rebound while WRITEs through them cross a lossy network.

use super::read_mr;
use super::util::{Faults, Opts, Pair, Side, bring_up, connect, recv_wr, rmem, send_wr, sge};
use crate::verbs::{
    Access, LocalErrors, Mtu, MwBind, MwType, QpState, QpType, SendOp, SendWr, VerbsError,
    WcOpcode, WcStatus, inc_rkey,
};
use crate::{MrInfo, QpInit};

/// A region of 8 KiB on side `b` that windows may be bound to, with no
/// remote rights of its own.
fn bindable(p: &mut Pair, b: &Side) -> MrInfo {
    p.eps[1]
        .reg_mr(b.pd, 8192, Access::LOCAL_WRITE | Access::MW_BIND)
        .unwrap()
}

fn window(mr: &MrInfo, offset: u64, len: u64, access: Access) -> MwBind {
    MwBind {
        lkey: mr.lkey,
        addr: mr.addr + offset,
        len,
        access,
    }
}

fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

/// Binds type 2 window `mw` on side 1's QP with the next key byte and
/// waits for the completion; returns the window's R_Key.
fn bind2(p: &mut Pair, b: &Side, mw: u32, bind: MwBind) -> u32 {
    let rkey = inc_rkey(mw);
    p.eps[1]
        .post_send(b.qpn, SendWr::bind_mw(90, mw, rkey, bind))
        .unwrap();
    let c = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!(
        (c.wr_id, c.status, c.opcode),
        (90, WcStatus::Success, WcOpcode::BindMw)
    );
    rkey
}

/// Posts `op` from side 0 with `sg` and returns its completion status.
fn run(p: &mut Pair, a: &Side, op: SendOp, sg: &[crate::verbs::Sge]) -> WcStatus {
    p.eps[0].post_send(a.qpn, send_wr(1, op, sg)).unwrap();
    p.wait_cqes(0, a.cq, 1)[0].status
}

#[test]
fn a_type_2_window_opens_its_range_with_its_rights_only() {
    let mut p = Pair::new(201);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    let rkey = bind2(&mut p, &b, mw.rkey, window(&mr, 1024, 2048, rw()));
    assert_ne!(rkey, mw.rkey, "a bind gives a new key byte");
    assert_eq!(p.eps[1].query_mw(mw.rkey).unwrap().rkey, rkey);
    // WRITE then READ through the window (a region without remote rights).
    super::write_mr(&mut p, 0, a.mr.lkey, 0, &[0x5a; 100]);
    let win = mr.addr + 1024;
    let sg = sge(&a, 0, 100);
    let write = SendOp::Write {
        remote: rmem(win + 16, rkey),
    };
    assert_eq!(run(&mut p, &a, write, &sg), WcStatus::Success);
    assert_eq!(read_mr(&p, 1, mr.lkey, 1040, 100), vec![0x5a; 100]);
    let sg = sge(&a, 200, 100);
    let read = SendOp::Read {
        remote: rmem(win + 16, rkey),
    };
    assert_eq!(run(&mut p, &a, read, &sg), WcStatus::Success);
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 200, 100), vec![0x5a; 100]);
    // The window's last byte is in; one past it is out, though the region
    // goes on (rxe bounds only by the region: IBA bounds by the window).
    let sg = sge(&a, 0, 1);
    let last = SendOp::Write {
        remote: rmem(win + 2047, rkey),
    };
    assert_eq!(run(&mut p, &a, last, &sg), WcStatus::Success);
    let sg = sge(&a, 0, 2);
    let over = SendOp::Write {
        remote: rmem(win + 2047, rkey),
    };
    assert_eq!(run(&mut p, &a, over, &sg), WcStatus::RemAccessErr);
    assert_eq!(read_mr(&p, 1, mr.lkey, 1024 + 2048, 1), [0]);
}

#[test]
fn a_window_refuses_a_right_it_was_not_given_and_an_old_key() {
    for (seed, case) in [(202u64, "atomic"), (203, "old key"), (204, "region key")] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
        let mr = bindable(&mut p, &b);
        let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
        let rkey = bind2(&mut p, &b, mw.rkey, window(&mr, 0, 64, rw()));
        let sg = sge(&a, 0, 8);
        let op = match case {
            "atomic" => SendOp::FetchAdd {
                remote: rmem(mr.addr, rkey),
                add: 1,
            },
            "old key" => SendOp::Write {
                remote: rmem(mr.addr, mw.rkey),
            },
            // The region itself grants no remote access.
            _ => SendOp::Write {
                remote: rmem(mr.addr, mr.rkey),
            },
        };
        assert_eq!(run(&mut p, &a, op, &sg), WcStatus::RemAccessErr, "{case}");
        assert_eq!(read_mr(&p, 1, mr.lkey, 0, 8), [0; 8], "{case}");
    }
}

#[test]
fn a_zero_based_window_is_addressed_from_zero() {
    let mut p = Pair::new(205);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    let access = rw() | Access::REMOTE_ATOMIC | Access::ZERO_BASED;
    let rkey = bind2(&mut p, &b, mw.rkey, window(&mr, 4096, 512, access));
    super::write_mr(&mut p, 0, a.mr.lkey, 0, &[7; 16]);
    let sg = sge(&a, 0, 16);
    let write = SendOp::Write {
        remote: rmem(8, rkey),
    };
    assert_eq!(run(&mut p, &a, write, &sg), WcStatus::Success);
    assert_eq!(read_mr(&p, 1, mr.lkey, 4096 + 8, 16), vec![7; 16]);
    let sg = sge(&a, 64, 8);
    let add = SendOp::FetchAdd {
        remote: rmem(504, rkey),
        add: 3,
    };
    assert_eq!(run(&mut p, &a, add, &sg), WcStatus::Success);
    assert_eq!(read_mr(&p, 1, mr.lkey, 4096 + 504, 8), 3u64.to_ne_bytes());
    let over = SendOp::Write {
        remote: rmem(512, rkey),
    };
    let sg = sge(&a, 0, 1);
    assert_eq!(run(&mut p, &a, over, &sg), WcStatus::RemAccessErr);
}

#[test]
fn local_inv_and_send_with_invalidate_close_a_type_2_window() {
    let mut p = Pair::new(206);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    let rkey = bind2(&mut p, &b, mw.rkey, window(&mr, 0, 256, rw()));
    // LOCAL_INV by the owner; binding again is then allowed, with a new
    // key, and a BIND_MW can follow the LOCAL_INV at once.
    p.eps[1]
        .post_send(b.qpn, SendWr::local_inv(91, rkey))
        .unwrap();
    let rkey2 = inc_rkey(rkey);
    p.eps[1]
        .post_send(
            b.qpn,
            SendWr::bind_mw(92, rkey, rkey2, window(&mr, 0, 256, rw())),
        )
        .unwrap();
    let c = p.wait_cqes(1, b.cq, 2);
    assert_eq!(
        c.iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect::<Vec<_>>(),
        [
            (91, WcStatus::Success, WcOpcode::LocalInv),
            (92, WcStatus::Success, WcOpcode::BindMw)
        ]
    );
    // The peer invalidates it with its SEND.
    let sg = sge(&b, 0, 64);
    p.eps[1].post_recv(b.qpn, recv_wr(5, &sg)).unwrap();
    let sg = sge(&a, 0, 8);
    assert_eq!(
        run(&mut p, &a, SendOp::SendWithInv(rkey2), &sg),
        WcStatus::Success
    );
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!(
        (r.status, r.invalidated_rkey),
        (WcStatus::Success, Some(rkey2))
    );
    let write = SendOp::Write {
        remote: rmem(mr.addr, rkey2),
    };
    assert_eq!(run(&mut p, &a, write, &sg), WcStatus::RemAccessErr);
}

#[test]
fn binding_a_bound_type_2_window_fails_the_bind_and_the_qp() {
    let mut p = Pair::new(207);
    let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    let rkey = bind2(&mut p, &b, mw.rkey, window(&mr, 0, 256, rw()));
    // Accepted at post (a LOCAL_INV could come first), refused when run.
    let again = SendWr::bind_mw(93, rkey, inc_rkey(rkey), window(&mr, 0, 128, rw()));
    p.eps[1].post_send(b.qpn, again).unwrap();
    p.eps[1]
        .post_send(b.qpn, SendWr::local_inv(94, rkey))
        .unwrap();
    let c = p.wait_cqes(1, b.cq, 2);
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(93, WcStatus::MwBindErr), (94, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
    // The window kept its binding and key.
    assert_eq!(p.eps[1].query_mw(mw.rkey).unwrap().rkey, rkey);
}

#[test]
fn a_type_1_window_moves_with_each_bind() {
    let mut p = Pair::new(208);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::One).unwrap();
    let k1 = p.eps[1]
        .bind_mw(b.qpn, mw.rkey, window(&mr, 0, 64, rw()), 95, true)
        .unwrap();
    assert_eq!(k1, inc_rkey(mw.rkey));
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].opcode, WcOpcode::BindMw);
    let sg = sge(&a, 0, 8);
    let at = |addr, rkey| SendOp::Write {
        remote: rmem(addr, rkey),
    };
    assert_eq!(run(&mut p, &a, at(mr.addr, k1), &sg), WcStatus::Success);
    // Bound elsewhere, with no invalidation first: the new key reaches the
    // new range, and the old key is refused.
    let k2 = p.eps[1]
        .bind_mw(b.qpn, mw.rkey, window(&mr, 512, 64, rw()), 96, true)
        .unwrap();
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(
        run(&mut p, &a, at(mr.addr + 512, k2), &sg),
        WcStatus::Success
    );
    // A zero-based type 1 window is refused.
    let zb = window(&mr, 0, 8, rw() | Access::ZERO_BASED);
    let err = p.eps[1].bind_mw(b.qpn, k2, zb, 0, true).unwrap_err();
    assert!(err.to_string().contains("zero-based"), "{err}");
    assert_eq!(
        run(&mut p, &a, at(mr.addr, k1), &sg),
        WcStatus::RemAccessErr
    );
}

#[test]
fn an_unbound_type_1_window_refuses_access() {
    let mut p = Pair::new(209);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::One).unwrap();
    let k1 = p.eps[1]
        .bind_mw(b.qpn, mw.rkey, window(&mr, 0, 64, rw()), 1, true)
        .unwrap();
    let k2 = p.eps[1]
        .bind_mw(b.qpn, k1, window(&mr, 0, 0, rw()), 2, true)
        .unwrap();
    assert_eq!(p.wait_cqes(1, b.cq, 2).len(), 2);
    let sg = sge(&a, 0, 8);
    let write = SendOp::Write {
        remote: rmem(mr.addr, k2),
    };
    assert_eq!(run(&mut p, &a, write, &sg), WcStatus::RemAccessErr);
}

#[test]
fn a_type_1_window_is_never_invalidated() {
    let mut p = Pair::new(215);
    let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::One).unwrap();
    let k1 = p.eps[1]
        .bind_mw(b.qpn, mw.rkey, window(&mr, 0, 64, rw()), 1, true)
        .unwrap();
    p.eps[1].post_send(b.qpn, SendWr::local_inv(2, k1)).unwrap();
    let c = p.wait_cqes(1, b.cq, 2);
    assert_eq!(
        c.iter().map(|c| (c.opcode, c.status)).collect::<Vec<_>>(),
        [
            (WcOpcode::BindMw, WcStatus::Success),
            (WcOpcode::LocalInv, WcStatus::LocQpOpErr)
        ]
    );
    assert_eq!(p.eps[1].query_mw(k1).unwrap().rkey, k1);
}

#[test]
fn binds_that_break_a_rule_are_refused_at_post_naming_it() {
    let mut p = Pair::new(210);
    let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let e = &mut p.eps[1];
    let mr = e
        .reg_mr(b.pd, 4096, Access::LOCAL_WRITE | Access::MW_BIND)
        .unwrap();
    let read_only = e.reg_mr(b.pd, 4096, Access::MW_BIND).unwrap();
    let plain = e.reg_mr(b.pd, 4096, Access::LOCAL_WRITE).unwrap();
    let other_pd = e.alloc_pd();
    let mw = e.alloc_mw(b.pd, MwType::Two).unwrap();
    let foreign = e.alloc_mw(other_pd, MwType::Two).unwrap();
    let cases: [(u32, MwBind, &str); 6] = [
        (mw.rkey, window(&plain, 0, 64, rw()), "MW_BIND"),
        (mw.rkey, window(&read_only, 0, 64, rw()), "LOCAL_WRITE"),
        (mw.rkey, window(&mr, 4000, 200, rw()), "outside the region"),
        (mw.rkey, window(&mr, 0, 0, rw()), "length 0"),
        (
            foreign.rkey,
            window(&mr, 0, 64, rw()),
            "another protection domain",
        ),
        (
            mw.rkey,
            window(&mr, 0, 64, Access::LOCAL_WRITE),
            "window access",
        ),
    ];
    for (key, bind, says) in cases {
        let err = e
            .post_send(b.qpn, SendWr::bind_mw(1, key, inc_rkey(key), bind))
            .unwrap_err();
        assert!(
            matches!(err, VerbsError::BadMwBind { .. }) && err.to_string().contains(says),
            "{says}: {err}"
        );
    }
    let err = e
        .post_send(
            b.qpn,
            SendWr::bind_mw(1, 0x1234_5600, 1, window(&mr, 0, 8, rw())),
        )
        .unwrap_err();
    assert!(matches!(err, VerbsError::NoSuchMw(_)), "{err}");
    // A bind carries no data.
    let sg = sge(&b, 0, 8);
    let mut wr = SendWr::bind_mw(1, mw.rkey, 1, window(&mr, 0, 8, rw()));
    wr.sg = &sg;
    assert!(matches!(
        e.post_send(b.qpn, wr),
        Err(VerbsError::BadValue { .. })
    ));
    // Only read and write/atomic rights are checked at post; with errors
    // reported in completions, nothing is.
    e.set_local_errors(b.qpn, LocalErrors::Completion).unwrap();
    e.post_send(
        b.qpn,
        SendWr::bind_mw(7, mw.rkey, 1, window(&plain, 0, 8, rw())),
    )
    .unwrap();
    let c = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((c.wr_id, c.status), (7, WcStatus::MwBindErr));
}

#[test]
fn windows_hold_their_region_and_protection_domain() {
    let mut p = Pair::new(211);
    let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    bind2(&mut p, &b, mw.rkey, window(&mr, 0, 64, rw()));
    // A LOCAL_INV of the region itself is refused while a window is bound
    // (rxe refuses it too); it fails the QP, so on a QP of its own.
    let [_c, d] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr_d = bindable(&mut p, &d);
    let mw_d = p.eps[1].alloc_mw(d.pd, MwType::Two).unwrap();
    bind2(&mut p, &d, mw_d.rkey, window(&mr_d, 0, 64, rw()));
    p.eps[1]
        .post_send(d.qpn, SendWr::local_inv(3, mr_d.rkey))
        .unwrap();
    assert_eq!(p.wait_cqes(1, d.cq, 1)[0].status, WcStatus::LocQpOpErr);
    let e = &mut p.eps[1];
    assert!(matches!(e.dereg_mr(mr.lkey), Err(VerbsError::Busy(_))));
    e.dealloc_mw(mw.rkey).unwrap();
    assert!(matches!(
        e.dealloc_mw(mw.rkey),
        Err(VerbsError::NoSuchMw(_))
    ));
    e.dereg_mr(mr.lkey).unwrap();
    let pd = e.alloc_pd();
    let w = e.alloc_mw(pd, MwType::One).unwrap();
    let err = e.dealloc_pd(pd).unwrap_err();
    assert!(err.to_string().contains("memory windows"), "{err}");
    e.dealloc_mw(w.rkey).unwrap();
    e.dealloc_pd(pd).unwrap();
    // UD has no windows.
    let mut u = Pair::new(212);
    let [_ua, ub] = connect(&mut u, QpType::Ud, 4096, Mtu::Mtu1024);
    let w = u.eps[1].alloc_mw(ub.pd, MwType::Two).unwrap();
    assert!(matches!(
        u.eps[1].post_send(ub.qpn, SendWr::local_inv(1, w.rkey)),
        Err(VerbsError::BadOpForQpType { .. })
    ));
}

#[test]
fn a_type_2_window_is_reached_only_through_its_qp() {
    let mut p = Pair::new(213);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    // A second connection between the same two protection domains.
    let o = Opts::new(QpType::Rc, 4096, Mtu::Mtu1024);
    let [c, d] = [0, 1].map(|i| {
        let side = if i == 0 { a } else { b };
        let qpn = p.eps[i]
            .create_qp(QpInit {
                pd: side.pd,
                qp_type: QpType::Rc,
                send_cq: side.cq,
                recv_cq: side.cq,
                max_send_wr: o.max_send_wr,
                max_recv_wr: o.max_recv_wr,
                sq_sig_all: o.sq_sig_all,
                srq: None,
            })
            .unwrap();
        Side { qpn, ..side }
    });
    bring_up(&mut p, [c, d], o);
    let mr = bindable(&mut p, &b);
    // A type 1 window serves both connections; a type 2 window bound on
    // b's QP serves only a's.
    let one = p.eps[1].alloc_mw(b.pd, MwType::One).unwrap();
    let k1 = p.eps[1]
        .bind_mw(b.qpn, one.rkey, window(&mr, 0, 64, rw()), 1, true)
        .unwrap();
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].status, WcStatus::Success);
    let two = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    let k2 = bind2(&mut p, &b, two.rkey, window(&mr, 64, 64, rw()));
    let write = |addr, rkey| SendOp::Write {
        remote: rmem(addr, rkey),
    };
    let sg = sge(&a, 0, 8);
    assert_eq!(run(&mut p, &a, write(mr.addr, k1), &sg), WcStatus::Success);
    assert_eq!(run(&mut p, &c, write(mr.addr, k1), &sg), WcStatus::Success);
    assert_eq!(
        run(&mut p, &a, write(mr.addr + 64, k2), &sg),
        WcStatus::Success
    );
    assert_eq!(
        run(&mut p, &c, write(mr.addr + 64, k2), &sg),
        WcStatus::RemAccessErr
    );
}

#[test]
fn writes_through_windows_rebound_under_loss_land_where_each_key_points() {
    let mut p = Pair::new(214);
    p.faults = Faults {
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.1,
        ..Faults::default()
    };
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mr = bindable(&mut p, &b);
    let mw = p.eps[1].alloc_mw(b.pd, MwType::Two).unwrap();
    let mut key = mw.rkey;
    for round in 0..16u64 {
        // The owner moves the window to slot `round` (invalidating it
        // first after the first round), then the peer writes 3 KiB into it.
        let bind = window(&mr, round * 256, 3072, rw());
        if round > 0 {
            p.eps[1]
                .post_send(b.qpn, SendWr::local_inv(89, key))
                .unwrap();
            assert_eq!(p.wait_cqes(1, b.cq, 1)[0].opcode, WcOpcode::LocalInv);
        }
        key = bind2(&mut p, &b, key, bind);
        let byte = round as u8 + 1;
        super::write_mr(&mut p, 0, a.mr.lkey, 0, &[byte; 3072]);
        let sg = sge(&a, 0, 3072);
        let write = SendOp::Write {
            remote: rmem(bind.addr, key),
        };
        assert_eq!(
            run(&mut p, &a, write, &sg),
            WcStatus::Success,
            "round {round}"
        );
        assert_eq!(
            read_mr(&p, 1, mr.lkey, (round * 256) as usize, 3072),
            vec![byte; 3072],
            "round {round}"
        );
    }
}
