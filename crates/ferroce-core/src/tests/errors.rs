//! Error paths between two endpoints: a receive too small, RNR retries
//! exhausted (and never exhausted at rnr_retry = 7), remote access errors of
//! every kind, misaligned atomics, and duplicate atomics answered from the
//! responder resources.

use ferroce_wire::Opcode;
use ferroce_wire::aeth::{NakCode, Syndrome};
use ferroce_wire::atomic_eth::AtomicEthRepr;

use super::util::{
    Faults, Opts, Pair, Side, all_access, connect, connect_with, craft, emit, parse, pattern,
    recv_wr, rmem, send_wr, sge,
};
use super::{read_mr, write_mr};
use crate::verbs::{Access, Mtu, QpState, QpType, SendOp, Sge, VerbsError, WcStatus};

fn ids(wcs: &[crate::verbs::WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

#[test]
fn receive_too_small_is_local_length_error_and_flushes_both_sides() {
    // One packet too long, and a second packet that overflows the buffer.
    for (seed, recv_len, send_len) in [(100, 64u32, 200u32), (101, 1500, 3000)] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, QpType::Rc, 16384, Mtu::Mtu1024);
        p.eps[1]
            .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, recv_len)))
            .unwrap();
        for id in [2, 3] {
            p.eps[1]
                .post_recv(b.qpn, recv_wr(id, &sge(&b, 4096 * id, 4096)))
                .unwrap();
        }
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, send_len)))
            .unwrap();
        for id in [2, 3] {
            p.eps[0]
                .post_send(a.qpn, send_wr(id, SendOp::Send, &sge(&a, 0, 10)))
                .unwrap();
        }
        let flushed = |first| {
            vec![
                (1, first),
                (2, WcStatus::WrFlushErr),
                (3, WcStatus::WrFlushErr),
            ]
        };
        assert_eq!(ids(&p.wait_cqes(1, b.cq, 3)), flushed(WcStatus::LocLenErr));
        assert_eq!(
            ids(&p.wait_cqes(0, a.cq, 3)),
            flushed(WcStatus::RemInvReqErr)
        );
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
    }
}

#[test]
fn rnr_retries_exhausted_fail_with_rnr_retry_exc_err() {
    for (seed, rnr_retry) in [(110, 0u8), (111, 2)] {
        let mut p = Pair::new(seed);
        let [a, b] = connect_with(
            &mut p,
            Opts {
                rnr_retry,
                min_rnr_timer: 14, // 1.28 ms
                ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
            },
        );
        for id in [1, 2] {
            p.eps[0]
                .post_send(a.qpn, send_wr(id, SendOp::Send, &sge(&a, 0, 64)))
                .unwrap();
        }
        let wcs = p.wait_cqes(0, a.cq, 2);
        assert_eq!(
            ids(&wcs),
            [(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
        );
        // One try and `rnr_retry` retries, each after the RNR timer.
        assert_eq!(p.eps[1].stats().rnr_naks_sent, u64::from(rnr_retry) + 1);
        assert!(p.now.as_nanos() >= u64::from(rnr_retry) * 1_280_000);
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        // RNR is not an error at the responder.
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
    }
}

#[test]
fn rnr_retry_7_waits_until_a_receive_is_posted() {
    let mut p = Pair::new(112);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            rnr_retry: 7,
            min_rnr_timer: 20, // 10.24 ms
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 64)))
        .unwrap();
    // Two seconds of virtual time: some 200 RNR NAKs, far past any count.
    p.drive_until(100_000, |p| p.now.as_nanos() >= 2_000_000_000);
    assert!(p.completions(0, a.cq).is_empty());
    assert!(p.eps[1].stats().rnr_naks_sent > 100);
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Rts);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(9, &sge(&b, 0, 4096)))
        .unwrap();
    assert_eq!(ids(&p.wait_cqes(0, a.cq, 1)), [(1, WcStatus::Success)]);
    assert_eq!(ids(&p.wait_cqes(1, b.cq, 1)), [(9, WcStatus::Success)]);
}

/// An RNR NAK acknowledges every PSN before its own: when the ACK of a
/// WRITE before the SEND is lost, the WRITE still succeeds and only the
/// SEND fails.
#[test]
fn rnr_nak_acknowledges_what_came_before_it() {
    let mut p = Pair::new(113);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            rnr_retry: 0,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 64)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, 0, 64)))
        .unwrap();
    for pkt in p.take_transmits(0) {
        p.deliver(1, &pkt);
    }
    let responses = p.take_transmits(1);
    let kinds: Vec<_> = responses
        .iter()
        .map(|r| parse(r).aeth.map(|a| a.syndrome.kind()))
        .collect();
    assert_eq!(kinds, [Some("ACK"), Some("RNR_NAK")]);
    p.deliver(0, &responses[1]); // the ACK is lost
    assert_eq!(
        ids(&p.completions(0, a.cq)),
        [(1, WcStatus::Success), (2, WcStatus::RnrRetryExcErr)]
    );
}

/// A sequence NAK that acknowledges nothing new is no progress: it must not
/// give the retry budget another round.
#[test]
fn a_nak_acknowledging_nothing_new_leaves_the_retry_budget_alone() {
    let mut p = Pair::new(114);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            retry_cnt: 1,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    for id in [1, 2] {
        p.eps[1]
            .post_recv(b.qpn, recv_wr(id, &sge(&b, 0, 64)))
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(id, SendOp::Send, &sge(&a, 0, 64)))
            .unwrap();
    }
    let timeout = |p: &mut Pair| {
        p.now = p.eps[0].poll_timeout().expect("a retransmit timer");
        p.eps[0].handle_timeout(p.now);
    };
    assert_eq!(p.take_transmits(0).len(), 2); // both lost
    timeout(&mut p); // the one retry
    let resent = p.take_transmits(0);
    p.deliver(1, &resent[1]); // only the second arrives
    let nak = p.take_transmits(1);
    assert_eq!(
        parse(&nak[0]).aeth.map(|a| a.syndrome),
        Some(Syndrome::Nak(NakCode::PsnSequenceError))
    );
    p.deliver(0, &nak[0]);
    assert_eq!(p.take_transmits(0).len(), 2); // resent, and lost again
    timeout(&mut p);
    assert_eq!(
        ids(&p.completions(0, a.cq)),
        [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]
    );
}

/// What a remote access test sets up on endpoint 1 and asks of endpoint 0.
enum Target {
    /// The connected region, at an offset from its start, with a key.
    Region { offset: i64, rkey_xor: u32 },
    /// A new region on endpoint 1 with these rights, in the QP's PD or not.
    Other { access: Access, same_pd: bool },
}

fn remote_op(kind: usize, addr: u64, rkey: u32) -> SendOp {
    match kind {
        0 => SendOp::Write {
            remote: rmem(addr, rkey),
        },
        1 => SendOp::Read {
            remote: rmem(addr, rkey),
        },
        _ => SendOp::FetchAdd {
            remote: rmem(addr, rkey),
            add: 1,
        },
    }
}

/// Runs `kind` (0 WRITE of 64 bytes, 1 READ of 64, 2 FETCH_ADD) against
/// `target`, with `qp_access` on the QPs; returns the statuses of it and of
/// a good WRITE behind it, having checked that a refused operation touched
/// neither side's memory.
fn remote_access(seed: u64, kind: usize, target: Target, qp_access: Access) -> [WcStatus; 2] {
    let mut p = Pair::new(seed);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            qp_access,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(64, 1));
    let (lkey, addr, rkey) = match target {
        Target::Region { offset, rkey_xor } => (
            b.mr.lkey,
            b.mr.addr.wrapping_add_signed(offset),
            b.mr.rkey ^ rkey_xor,
        ),
        Target::Other { access, same_pd } => {
            let pd = if same_pd { b.pd } else { p.eps[1].alloc_pd() };
            let mr = p.eps[1].reg_mr(pd, 4096, access).unwrap();
            (mr.lkey, mr.addr, mr.rkey)
        }
    };
    write_mr(&mut p, 1, lkey, 0, &pattern(4096, 2));
    let len = if kind == 2 { 8 } else { 64 };
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(1, remote_op(kind, addr, rkey), &sge(&a, 1024, len)),
        )
        .unwrap();
    // A good WRITE behind it (to the last 8 bytes of the connected region).
    let behind = remote_op(0, b.mr.addr + 4088, b.mr.rkey);
    p.eps[0]
        .post_send(a.qpn, send_wr(2, behind, &sge(&a, 0, 8)))
        .unwrap();
    let wcs = p.wait_cqes(0, a.cq, 2);
    if wcs[0].status != WcStatus::Success {
        let untouched = read_mr(&p, 1, lkey, 0, 4096) == pattern(4096, 2);
        assert!(untouched, "remote memory changed");
    }
    if wcs[0].status != WcStatus::Success {
        assert_eq!(
            read_mr(&p, 0, a.mr.lkey, 1024, 64),
            [0; 64],
            "local memory changed"
        );
        // A NAK other than RNR or sequence error is fatal on both sides.
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
    }
    [wcs[0].status, wcs[1].status]
}

#[test]
fn remote_access_errors() {
    let refused = [WcStatus::RemAccessErr, WcStatus::WrFlushErr];
    let all = all_access();
    let no_write = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let no_read = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    let no_atomic = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let region = |offset, rkey_xor| Target::Region { offset, rkey_xor };
    let other = |access, same_pd| Target::Other { access, same_pd };
    for kind in 0..3 {
        let seed = 120 + 10 * kind as u64;
        let s = |n| seed + n;
        // Sanity: the same operation succeeds when nothing is wrong.
        let ok = [WcStatus::Success; 2];
        assert_eq!(remote_access(s(0), kind, region(8, 0), all), ok);
        assert_eq!(remote_access(s(1), kind, other(all, true), all), ok);
        // A bad rkey.
        assert_eq!(remote_access(s(2), kind, region(8, 0x40), all), refused);
        // Out of bounds: across the end (an aligned atomic can only start
        // past it), before the start.
        let across_end = if kind == 2 { 4096 } else { 4096 - 32 };
        assert_eq!(
            remote_access(s(3), kind, region(across_end, 0), all),
            refused
        );
        assert_eq!(remote_access(s(4), kind, region(-8, 0), all), refused);
        // A region in another PD than the QP's.
        assert_eq!(remote_access(s(5), kind, other(all, false), all), refused);
        // A region registered without the right.
        let (mr_lacks, qp_lacks) = match kind {
            0 => (no_write, no_write),
            1 => (no_read, no_read),
            _ => (no_atomic, no_atomic),
        };
        assert_eq!(
            remote_access(s(6), kind, other(mr_lacks, true), all),
            refused
        );
        // A QP whose access flags lack the right (rxe NAKs this one
        // INVALID_REQUEST; this engine reports it as an access error, as
        // ConnectX hardware does).
        assert_eq!(remote_access(s(7), kind, region(8, 0), qp_lacks), refused);
    }
}

#[test]
fn uc_drops_a_write_with_a_bad_rkey_silently() {
    let mut p = Pair::new(150);
    let [a, b] = connect(&mut p, QpType::Uc, 4096, Mtu::Mtu1024);
    let op = remote_op(0, b.mr.addr, b.mr.rkey ^ 1);
    p.eps[0]
        .post_send(a.qpn, send_wr(1, op, &sge(&a, 0, 64)))
        .unwrap();
    // UC completes on sending; the responder drops the message and counts it.
    assert_eq!(ids(&p.wait_cqes(0, a.cq, 1)), [(1, WcStatus::Success)]);
    p.settle(1000);
    assert_eq!(p.eps[1].stats().rx_unexpected, 1);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 64), [0; 64]);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
}

fn fetch_add(remote_addr: u64, rkey: u32, add: u64) -> SendOp {
    SendOp::FetchAdd {
        remote: rmem(remote_addr, rkey),
        add,
    }
}

/// An atomic request as the peer would send it to `b`, at `b`'s expected PSN.
fn crafted_atomic(p: &Pair, b: &Side, op: Opcode, va: u64, swap_add: u64, compare: u64) -> Vec<u8> {
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let mut t = craft(op, epsn, b.qpn, 0);
    t.atomic_eth = Some(AtomicEthRepr {
        va,
        rkey: b.mr.rkey,
        swap_add,
        compare,
    });
    emit(&t, &[])
}

#[test]
fn misaligned_atomics_are_refused_by_post_send_and_naked_by_the_responder() {
    let mut p = Pair::new(160);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let cas = SendOp::CompareSwap {
        remote: rmem(b.mr.addr + 12, b.mr.rkey),
        compare: 0,
        swap: 1,
    };
    for op in [fetch_add(b.mr.addr + 4, b.mr.rkey, 1), cas] {
        let err = p.eps[0]
            .post_send(a.qpn, send_wr(1, op, &sge(&a, 0, 8)))
            .unwrap_err();
        let (SendOp::FetchAdd { remote, .. } | SendOp::CompareSwap { remote, .. }) = op else {
            unreachable!()
        };
        assert_eq!(err, VerbsError::Unaligned(remote.addr()));
        assert!(err.to_string().contains("not 8-byte aligned"), "{err}");
    }
    // A peer that sends one anyway gets NAK INVALID_REQUEST.
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let pkt = crafted_atomic(&p, &b, Opcode::RC_FETCH_ADD, b.mr.addr + 4, 1, 0);
    p.deliver(1, &pkt);
    let out: Vec<_> = p.take_transmits(1).iter().map(|d| parse(d)).collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bth.opcode, Opcode::RC_ACKNOWLEDGE);
    assert_eq!(out[0].bth.psn, epsn);
    assert_eq!(
        out[0].aeth.map(|a| a.syndrome),
        Some(Syndrome::Nak(NakCode::InvalidRequest))
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 16), [0; 16]);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
}

#[test]
fn a_duplicate_atomic_is_answered_from_the_responder_resources() {
    let mut p = Pair::new(170);
    let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    write_mr(&mut p, 1, b.mr.lkey, 16, &100u64.to_ne_bytes());
    let va = b.mr.addr + 16;
    let add = crafted_atomic(&p, &b, Opcode::RC_FETCH_ADD, va, 5, 0);
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    // Compare-and-swap would give a different answer if executed again.
    let mut acks = Vec::new();
    for _ in 0..2 {
        p.deliver(1, &add);
        acks.extend(p.take_transmits(1).iter().map(|d| parse(d)));
    }
    let cas = crafted_atomic(&p, &b, Opcode::RC_COMPARE_SWAP, va, 1, 105);
    for _ in 0..3 {
        p.deliver(1, &cas);
        acks.extend(p.take_transmits(1).iter().map(|d| parse(d)));
    }
    let got: Vec<_> = acks
        .iter()
        .map(|t| (t.bth.opcode, t.bth.psn, t.atomic_ack))
        .collect();
    let ack = Opcode::RC_ATOMIC_ACKNOWLEDGE;
    let (first, second) = (epsn, epsn + 1);
    assert_eq!(
        got,
        [
            (ack, first, Some(100)),
            (ack, first, Some(100)),
            (ack, second, Some(105)),
            (ack, second, Some(105)),
            (ack, second, Some(105)),
        ]
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 16, 8), 1u64.to_ne_bytes());
    assert_eq!(p.eps[1].stats().rx_duplicate, 3);
}

#[test]
fn every_packet_duplicated_still_executes_each_atomic_once() {
    let mut p = Pair::new(171);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.faults = Faults {
        duplicate: 1.0,
        ..Faults::default()
    };
    let va = b.mr.addr + 8;
    // The value each atomic should find, computed as they are posted.
    let (mut value, mut before) = (0u64, Vec::new());
    for i in 0..20u64 {
        before.push(value);
        let op = if i % 4 == 3 {
            // Matches only if no atomic before it ran twice (or not at all).
            value += 1000;
            SendOp::CompareSwap {
                remote: rmem(va, b.mr.rkey),
                compare: value - 1000,
                swap: value,
            }
        } else {
            value += i;
            fetch_add(va, b.mr.rkey, i)
        };
        let sg = vec![Sge {
            lkey: a.mr.lkey,
            offset: 8 * i,
            len: 8,
        }];
        p.eps[0].post_send(a.qpn, send_wr(i, op, &sg)).unwrap();
    }
    let wcs = p.wait_cqes(0, a.cq, 20);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    for (i, want) in before.iter().enumerate() {
        let got = read_mr(&p, 0, a.mr.lkey, 8 * i, 8);
        assert_eq!(got, want.to_ne_bytes(), "atomic {i}");
    }
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 8, 8), value.to_ne_bytes());
    assert!(p.eps[1].stats().rx_duplicate >= 20);
}
