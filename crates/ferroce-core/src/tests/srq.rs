//! Shared receive queues on the simulated network: QPs of endpoint 1 take
//! their receive WQEs from one SRQ while QPs of endpoint 0 (the peers) send
//! to them.

use super::ops::ud_dest;
use super::util::{Opts, Pair, Side, all_access, bring_up, pattern, recv_wr, rmem, send_wr, sge};
use crate::verbs::{
    AsyncEvent, Mtu, QpAttr, QpState, QpType, SendOp, SrqAttr, SrqInfo, VerbsError, WcOpcode,
    WcStatus, WorkCompletion,
};
use crate::{MrInfo, QpInit};

/// Endpoint 1's side: one PD, CQ, region and SRQ, and the QPs using it.
pub(super) struct Shared {
    pub(super) pd: u32,
    pub(super) cq: u32,
    pub(super) mr: MrInfo,
    pub(super) srq: u32,
    pub(super) qps: Vec<u32>,
}

/// Bytes per receive buffer in the server's region.
const SLOT: u64 = 8192;

/// A QP of `qp_type` on endpoint `i` completing on `cq`, taking its
/// receives from `srq` if given.
fn qp_on(p: &mut Pair, i: usize, qp_type: QpType, pd: u32, cq: u32, srq: Option<u32>) -> u32 {
    p.eps[i]
        .create_qp(QpInit {
            pd,
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 64,
            max_recv_wr: 64,
            sq_sig_all: false,
            srq,
        })
        .unwrap()
}

/// An SRQ of `depth` WQEs (limit `limit`) on endpoint 1 and `n` QPs of
/// `qp_type` using it, each brought up against its own peer QP on endpoint
/// 0 (each peer with its own CQ and region). Returns the server side and
/// the peers, in the same order as `Shared::qps`.
pub(super) fn shared_srq(
    p: &mut Pair,
    qp_type: QpType,
    n: usize,
    depth: u32,
    limit: u32,
) -> (Shared, Vec<Side>) {
    let e = &mut p.eps[1];
    let pd = e.alloc_pd();
    let cq = e.create_cq(256).unwrap();
    let mr = e.reg_mr(pd, 64 * SLOT as usize, all_access()).unwrap();
    let srq = e.create_srq(pd, depth, limit).unwrap();
    let mut server = Shared {
        pd,
        cq,
        mr,
        srq,
        qps: Vec::new(),
    };
    let mut peers = Vec::new();
    for _ in 0..n {
        let e = &mut p.eps[0];
        let apd = e.alloc_pd();
        let acq = e.create_cq(256).unwrap();
        let amr = e.reg_mr(apd, 1 << 16, all_access()).unwrap();
        let a = qp_on(p, 0, qp_type, apd, acq, None);
        let b = qp_on(p, 1, qp_type, pd, cq, Some(srq));
        let peer = Side {
            pd: apd,
            cq: acq,
            qpn: a,
            mr: amr,
        };
        let me = Side { pd, cq, qpn: b, mr };
        bring_up(p, [peer, me], Opts::new(qp_type, 1 << 16, Mtu::Mtu1024));
        server.qps.push(b);
        peers.push(peer);
    }
    (server, peers)
}

/// Posts receive `wr_id` to the SRQ, into slot `wr_id` of the region.
fn post_slot(p: &mut Pair, s: &Shared, wr_id: u64, len: u32) {
    let sg = vec![crate::verbs::Sge {
        lkey: s.mr.lkey,
        offset: wr_id * SLOT,
        len,
    }];
    p.eps[1].post_srq_recv(s.srq, recv_wr(wr_id, &sg)).unwrap();
}

/// Sends `data` (written at offset 0 of the peer's region) as one SEND.
fn send_from(p: &mut Pair, peer: &Side, wr_id: u64, data: &[u8]) {
    p.eps[0].write_mr(peer.mr.lkey, |b| b[..data.len()].copy_from_slice(data));
    p.eps[0]
        .post_send(
            peer.qpn,
            send_wr(wr_id, SendOp::Send, &sge(peer, 0, data.len() as u32)),
        )
        .unwrap();
}

fn slot_bytes(p: &Pair, s: &Shared, wr_id: u64, len: usize) -> Vec<u8> {
    let off = (wr_id * SLOT) as usize;
    p.eps[1].mr_bytes(s.mr.lkey).unwrap()[off..off + len].to_vec()
}

fn events(p: &mut Pair, i: usize) -> Vec<AsyncEvent> {
    std::iter::from_fn(|| p.eps[i].poll_async_event()).collect()
}

fn info(p: &Pair, srq: u32) -> SrqInfo {
    p.eps[1].query_srq(srq).unwrap()
}

#[test]
fn two_rc_qps_share_an_srq_and_completions_name_the_qp() {
    let mut p = Pair::new(71);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 2, 16, 0);
    for wr_id in 0..4 {
        post_slot(&mut p, &s, wr_id, SLOT as u32);
    }
    assert_eq!(info(&p, s.srq).wqes, 4);
    // Multi-packet messages from both peers at once: each QP holds its WQE
    // while the other's packets arrive between its own.
    let msgs: Vec<Vec<u8>> = (0..4).map(|n| pattern(2500 + 100 * n, n as u8)).collect();
    for (n, m) in msgs.iter().enumerate() {
        let peer = &peers[n % 2];
        // Each message from its own offset of the peer's region.
        let off = 8192 * (n / 2) as u64;
        p.eps[0].write_mr(peer.mr.lkey, |b| {
            b[off as usize..off as usize + m.len()].copy_from_slice(m)
        });
        p.eps[0]
            .post_send(
                peer.qpn,
                send_wr(n as u64, SendOp::Send, &sge(peer, off, m.len() as u32)),
            )
            .unwrap();
    }
    let got = p.wait_cqes(1, s.cq, 4);
    assert_eq!(got.len(), 4, "{got:?}");
    let mut seen = [false; 4];
    for wc in &got {
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "{wc:?}"
        );
        // Which message landed in this WQE's slot, and from which peer?
        let n = msgs
            .iter()
            .position(|m| {
                m.len() == wc.byte_len as usize && slot_bytes(&p, &s, wc.wr_id, m.len()) == *m
            })
            .unwrap_or_else(|| panic!("slot {} holds no message whole", wc.wr_id));
        assert!(!seen[n], "message {n} delivered twice");
        seen[n] = true;
        assert_eq!(wc.qpn, s.qps[n % 2], "message {n} completes on its QP");
        assert_eq!(wc.src_qp, peers[n % 2].qpn);
    }
    // The WQEs were taken in posting order, one per message.
    let mut ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3]);
    assert_eq!(info(&p, s.srq).wqes, 0);
    for peer in &peers {
        let sent = p.wait_cqes(0, peer.cq, 2);
        assert!(
            sent.iter().all(|w| w.status == WcStatus::Success),
            "{sent:?}"
        );
    }
    assert_eq!(events(&mut p, 1), []);
}

#[test]
fn an_empty_srq_is_rnr_then_the_send_completes_once_posted() {
    let mut p = Pair::new(72);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 1, 4, 0);
    send_from(&mut p, &peers[0], 9, &pattern(3000, 5));
    p.drive_until(10_000, |p| p.eps[1].stats().rnr_naks_sent >= 3);
    assert!(p.completions(1, s.cq).is_empty());
    assert!(p.completions(0, peers[0].cq).is_empty());
    post_slot(&mut p, &s, 0, SLOT as u32);
    let r = p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len, r[0].qpn),
        (0, WcStatus::Success, 3000, s.qps[0])
    );
    assert_eq!(slot_bytes(&p, &s, 0, 3000), pattern(3000, 5));
    let w = p.wait_cqes(0, peers[0].cq, 1);
    assert_eq!((w[0].wr_id, w[0].status), (9, WcStatus::Success));
}

#[test]
fn write_with_immediate_takes_its_wqe_from_the_srq() {
    let mut p = Pair::new(73);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 1, 4, 0);
    let a = &peers[0];
    let data = pattern(2000, 8);
    p.eps[0].write_mr(a.mr.lkey, |b| b[..2000].copy_from_slice(&data));
    let op = SendOp::WriteWithImm {
        remote: rmem(s.mr.addr + 5 * SLOT, s.mr.rkey),
        imm: 0x1234,
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, op, &sge(a, 0, 2000)))
        .unwrap();
    // No WQE yet: RNR, and the data waits for one.
    p.drive_until(10_000, |p| p.eps[1].stats().rnr_naks_sent >= 1);
    post_slot(&mut p, &s, 0, 16);
    let r = p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].opcode, r[0].imm, r[0].byte_len, r[0].qpn),
        (0, WcOpcode::RecvRdmaWithImm, Some(0x1234), 2000, s.qps[0])
    );
    assert_eq!(slot_bytes(&p, &s, 5, 2000), data);
    assert_eq!(info(&p, s.srq).wqes, 0);
}

#[test]
fn the_limit_event_fires_once_when_armed_and_crossed() {
    let mut p = Pair::new(74);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 2, 8, 0);
    for wr_id in 0..6 {
        post_slot(&mut p, &s, wr_id, SLOT as u32);
    }
    // Not armed: nothing, however low it goes.
    send_from(&mut p, &peers[0], 1, &pattern(100, 1));
    p.wait_cqes(1, s.cq, 1);
    assert_eq!(events(&mut p, 1), []);
    p.eps[1]
        .modify_srq(
            s.srq,
            &SrqAttr {
                srq_limit: Some(3),
                ..SrqAttr::default()
            },
        )
        .unwrap();
    assert_eq!(
        info(&p, s.srq),
        SrqInfo {
            max_wr: 8,
            srq_limit: 3,
            wqes: 5
        }
    );
    // 5 -> 4 -> 3: not below the limit yet.
    for n in 0..2 {
        send_from(&mut p, &peers[n % 2], 2 + n as u64, &pattern(100, 2));
        p.wait_cqes(1, s.cq, 1);
    }
    assert_eq!(events(&mut p, 1), []);
    assert_eq!(info(&p, s.srq).srq_limit, 3);
    // 3 -> 2: below. One event; the limit disarms.
    send_from(&mut p, &peers[1], 4, &pattern(100, 3));
    p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        events(&mut p, 1),
        [AsyncEvent::SrqLimitReached { srq: s.srq }]
    );
    assert_eq!(info(&p, s.srq).srq_limit, 0);
    // 2 -> 1: disarmed, nothing more.
    send_from(&mut p, &peers[0], 5, &pattern(100, 4));
    p.wait_cqes(1, s.cq, 1);
    assert_eq!(events(&mut p, 1), []);
    // Armed above the count: checked when the next WQE is taken, as rxe.
    p.eps[1]
        .modify_srq(
            s.srq,
            &SrqAttr {
                srq_limit: Some(4),
                ..SrqAttr::default()
            },
        )
        .unwrap();
    assert_eq!(events(&mut p, 1), []);
    send_from(&mut p, &peers[1], 6, &pattern(100, 5));
    p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        events(&mut p, 1),
        [AsyncEvent::SrqLimitReached { srq: s.srq }]
    );
    assert_eq!(events(&mut p, 0), []);
}

#[test]
fn a_limit_given_at_creation_is_armed() {
    let mut p = Pair::new(75);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 1, 4, 2);
    assert_eq!(info(&p, s.srq).srq_limit, 2);
    for wr_id in 0..3 {
        post_slot(&mut p, &s, wr_id, SLOT as u32);
    }
    send_from(&mut p, &peers[0], 1, &pattern(10, 1));
    p.wait_cqes(1, s.cq, 1);
    assert_eq!(events(&mut p, 1), []);
    send_from(&mut p, &peers[0], 2, &pattern(10, 2));
    p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        events(&mut p, 1),
        [AsyncEvent::SrqLimitReached { srq: s.srq }]
    );
}

/// Delivers only the first packet endpoint 0 has queued; drops the rest.
fn deliver_first_packet(p: &mut Pair) {
    let pkts = p.take_transmits(0);
    assert!(pkts.len() > 1, "a multi-packet message");
    p.deliver(1, &pkts[0]);
}

#[test]
fn a_qp_moved_to_error_flushes_only_the_wqe_it_was_filling() {
    let mut p = Pair::new(76);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 2, 8, 0);
    for wr_id in 0..4 {
        post_slot(&mut p, &s, wr_id, SLOT as u32);
    }
    // QP 0 starts a 3-packet SEND into WQE 0 and gets only its first packet.
    send_from(&mut p, &peers[0], 1, &pattern(3000, 1));
    deliver_first_packet(&mut p);
    assert_eq!(info(&p, s.srq).wqes, 3);
    p.eps[1]
        .modify_qp(
            s.qps[0],
            &QpAttr {
                state: Some(QpState::Err),
                ..QpAttr::default()
            },
        )
        .unwrap();
    let flushed = p.completions(1, s.cq);
    assert_eq!(flushed.len(), 1, "{flushed:?}");
    assert_eq!(
        (flushed[0].wr_id, flushed[0].status, flushed[0].qpn),
        (0, WcStatus::WrFlushErr, s.qps[0])
    );
    // The SRQ keeps the rest; asked-for errors raise no QP_FATAL, but an
    // SRQ user reports its last WQE.
    assert_eq!(info(&p, s.srq).wqes, 3);
    assert_eq!(
        events(&mut p, 1),
        [AsyncEvent::QpLastWqeReached { qpn: s.qps[0] }]
    );
    // QP 1 goes on receiving into them.
    for n in 0..3u8 {
        send_from(&mut p, &peers[1], u64::from(n), &pattern(1500, 10 + n));
        let r = p.wait_cqes(1, s.cq, 1);
        assert_eq!(
            (r[0].wr_id, r[0].status, r[0].qpn),
            (1 + u64::from(n), WcStatus::Success, s.qps[1])
        );
        assert_eq!(slot_bytes(&p, &s, r[0].wr_id, 1500), pattern(1500, 10 + n));
    }
    assert_eq!(info(&p, s.srq).wqes, 0);
}

#[test]
fn a_fatal_error_reports_qp_fatal_and_leaves_the_srq_to_the_others() {
    let mut p = Pair::new(77);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 2, 8, 0);
    // WQE 0 is too small for what QP 0 is sent: local length error, NAK,
    // QP 0 to the error state.
    post_slot(&mut p, &s, 0, 1000);
    for wr_id in 1..4 {
        post_slot(&mut p, &s, wr_id, SLOT as u32);
    }
    send_from(&mut p, &peers[0], 1, &pattern(3000, 1));
    let r = p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].qpn),
        (0, WcStatus::LocLenErr, s.qps[0])
    );
    let w = p.wait_cqes(0, peers[0].cq, 1);
    assert_eq!(w[0].status, WcStatus::RemInvReqErr);
    assert_eq!(p.eps[1].qp_state(s.qps[0]).unwrap(), QpState::Err);
    assert_eq!(
        events(&mut p, 1),
        [
            AsyncEvent::QpFatal { qpn: s.qps[0] },
            AsyncEvent::QpLastWqeReached { qpn: s.qps[0] }
        ]
    );
    // The requester's QP failed too, on the other endpoint.
    assert_eq!(
        events(&mut p, 0),
        [AsyncEvent::QpFatal { qpn: peers[0].qpn }]
    );
    assert_eq!(info(&p, s.srq).wqes, 3);
    p.settle(10_000);
    assert!(p.completions(1, s.cq).is_empty(), "nothing flushed");
    for n in 0..3u8 {
        send_from(&mut p, &peers[1], u64::from(n), &pattern(3000, n));
        let r = p.wait_cqes(1, s.cq, 1);
        assert_eq!((r[0].status, r[0].qpn), (WcStatus::Success, s.qps[1]));
    }
    // Back through Reset, the QP reports its next error again.
    let q = s.qps[0];
    for state in [QpState::Reset, QpState::Init] {
        let attr = QpAttr {
            state: Some(state),
            pkey_index: (state == QpState::Init).then_some(0),
            port: (state == QpState::Init).then_some(1),
            access: (state == QpState::Init).then_some(all_access()),
            ..QpAttr::default()
        };
        p.eps[1].modify_qp(q, &attr).unwrap();
    }
    p.eps[1]
        .modify_qp(
            q,
            &QpAttr {
                state: Some(QpState::Err),
                ..QpAttr::default()
            },
        )
        .unwrap();
    assert_eq!(events(&mut p, 1), [AsyncEvent::QpLastWqeReached { qpn: q }]);
}

#[test]
fn ud_qps_share_an_srq() {
    let mut p = Pair::new(78);
    let (s, peers) = shared_srq(&mut p, QpType::Ud, 2, 8, 0);
    let data = pattern(600, 3);
    // Nothing posted: UD drops the message.
    let sg = sge(&peers[0], 0, 600);
    let mut wr = send_wr(1, SendOp::Send, &sg);
    wr.ud = Some(ud_dest(&p, s.qps[0]));
    p.eps[0].write_mr(peers[0].mr.lkey, |b| b[..600].copy_from_slice(&data));
    p.eps[0].post_send(peers[0].qpn, wr).unwrap();
    p.settle(10_000);
    assert!(p.completions(1, s.cq).is_empty());
    assert_eq!(p.eps[1].stats().rx_unexpected, 1);
    for wr_id in 0..2 {
        post_slot(&mut p, &s, wr_id, 1024);
    }
    // Peer 0 sends to both QPs of endpoint 1.
    p.eps[0].post_send(peers[0].qpn, wr).unwrap();
    wr.ud = Some(ud_dest(&p, s.qps[1]));
    p.eps[0].post_send(peers[0].qpn, wr).unwrap();
    let got = p.wait_cqes(1, s.cq, 2);
    let mut qpns: Vec<u32> = got.iter().map(|w| w.qpn).collect();
    qpns.sort_unstable();
    let mut want = s.qps.clone();
    want.sort_unstable();
    assert_eq!(qpns, want);
    for wc in &got {
        assert_eq!(
            (wc.status, wc.byte_len, wc.src_qp),
            (WcStatus::Success, 640, peers[0].qpn)
        );
        assert_eq!(slot_bytes(&p, &s, wc.wr_id, 640)[40..], data[..]);
    }
    assert_eq!(info(&p, s.srq).wqes, 0);
}

#[test]
fn a_uc_message_cut_short_gives_its_wqe_back() {
    let mut p = Pair::new(79);
    let (s, peers) = shared_srq(&mut p, QpType::Uc, 1, 4, 0);
    post_slot(&mut p, &s, 0, SLOT as u32);
    post_slot(&mut p, &s, 1, SLOT as u32);
    // The first packet of 3 arrives; the rest are lost. UC drops the
    // message when the next one starts, and the WQE is used for that one.
    send_from(&mut p, &peers[0], 1, &pattern(3000, 1));
    deliver_first_packet(&mut p);
    assert_eq!(info(&p, s.srq).wqes, 1);
    send_from(&mut p, &peers[0], 2, &pattern(1200, 2));
    let r = p.wait_cqes(1, s.cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (0, WcStatus::Success, 1200)
    );
    assert_eq!(slot_bytes(&p, &s, 0, 1200), pattern(1200, 2));
    assert_eq!(info(&p, s.srq).wqes, 1);
}

#[test]
fn a_full_cq_reports_its_overflow_once() {
    let mut p = Pair::new(80);
    let (s, peers) = shared_srq(&mut p, QpType::Rc, 1, 8, 0);
    let small = p.eps[1].create_cq(1).unwrap();
    let q = qp_on(&mut p, 1, QpType::Rc, s.pd, small, Some(s.srq));
    let peer_qp = qp_on(&mut p, 0, QpType::Rc, peers[0].pd, peers[0].cq, None);
    let peer = Side {
        qpn: peer_qp,
        ..peers[0]
    };
    let me = Side {
        pd: s.pd,
        cq: small,
        qpn: q,
        mr: s.mr,
    };
    bring_up(
        &mut p,
        [peer, me],
        Opts::new(QpType::Rc, 1 << 16, Mtu::Mtu1024),
    );
    for wr_id in 0..3 {
        post_slot(&mut p, &s, wr_id, SLOT as u32);
    }
    for n in 0..3 {
        send_from(&mut p, &peer, n, &pattern(10, n as u8));
    }
    p.drive_until(100_000, |p| p.eps[1].cq_overflowed(small).unwrap());
    p.settle(100_000);
    assert_eq!(events(&mut p, 1), [AsyncEvent::CqOverflow { cq: small }]);
    let kept: Vec<WorkCompletion> = p.completions(1, small);
    assert_eq!(kept.len(), 1);
}

#[test]
fn srq_calls_are_checked() {
    let mut p = Pair::new(81);
    let (s, _peers) = shared_srq(&mut p, QpType::Rc, 1, 4, 0);
    let e = &mut p.eps[1];
    let q = s.qps[0];
    // post_recv on a QP with an SRQ is refused, naming the SRQ.
    let err = e.post_recv(q, recv_wr(1, &[])).unwrap_err();
    assert_eq!(err, VerbsError::QpHasSrq { qpn: q, srq: s.srq });
    let text = err.to_string();
    assert!(text.contains("post_srq_recv"), "{text}");
    assert!(text.contains(&format!("{q:#x}")), "{text}");
    // The SRQ in use cannot go, nor can its PD.
    let err = e.destroy_srq(s.srq).unwrap_err();
    assert!(matches!(err, VerbsError::Busy(_)), "{err:?}");
    assert!(err.to_string().contains("shared receive queue"), "{err}");
    assert!(matches!(e.dealloc_pd(s.pd), Err(VerbsError::Busy(_))));
    // Full, a WQE from another PD, no such SRQ.
    for wr_id in 0..4 {
        let sg = vec![crate::verbs::Sge {
            lkey: s.mr.lkey,
            offset: 0,
            len: 8,
        }];
        e.post_srq_recv(s.srq, recv_wr(wr_id, &sg)).unwrap();
    }
    assert_eq!(
        e.post_srq_recv(s.srq, recv_wr(9, &[])),
        Err(VerbsError::SrqFull {
            srq: s.srq,
            depth: 4
        })
    );
    let other_pd = e.alloc_pd();
    let other = e.reg_mr(other_pd, 64, all_access()).unwrap();
    let srq2 = e.create_srq(s.pd, 4, 0).unwrap();
    let foreign = vec![crate::verbs::Sge {
        lkey: other.lkey,
        offset: 0,
        len: 8,
    }];
    assert!(matches!(
        e.post_srq_recv(srq2, recv_wr(1, &foreign)),
        Err(VerbsError::BadSge { .. })
    ));
    assert_eq!(
        e.post_srq_recv(999, recv_wr(1, &[])),
        Err(VerbsError::NoSuchSrq(999))
    );
    // Creation limits.
    for (max_wr, limit) in [(0, 0), (1 << 15 | 1, 0), (4, 5)] {
        assert!(matches!(
            e.create_srq(s.pd, max_wr, limit),
            Err(VerbsError::BadValue { .. })
        ));
    }
    assert_eq!(e.create_srq(777, 4, 0), Err(VerbsError::NoSuchPd(777)));
    let init = QpInit {
        pd: s.pd,
        qp_type: QpType::Ud,
        send_cq: s.cq,
        recv_cq: s.cq,
        max_send_wr: 4,
        // Ignored with an SRQ, as ibverbs ignores it.
        max_recv_wr: 0,
        sq_sig_all: false,
        srq: Some(999),
    };
    assert_eq!(e.create_qp(init), Err(VerbsError::NoSuchSrq(999)));
    let ud = e
        .create_qp(QpInit {
            srq: Some(srq2),
            ..init
        })
        .unwrap();
    // Resizing: not below the WQEs held, not below an armed limit.
    let resize = |m| SrqAttr {
        max_wr: Some(m),
        srq_limit: None,
    };
    assert!(matches!(
        e.modify_srq(s.srq, &resize(3)),
        Err(VerbsError::BadValue { .. })
    ));
    e.modify_srq(s.srq, &resize(6)).unwrap();
    e.post_srq_recv(s.srq, recv_wr(5, &[])).unwrap();
    let arm = SrqAttr {
        max_wr: None,
        srq_limit: Some(4),
    };
    e.modify_srq(srq2, &arm).unwrap();
    let err = e.modify_srq(srq2, &resize(3)).unwrap_err();
    assert!(err.to_string().contains("srq_limit"), "{err}");
    assert_eq!(
        e.query_srq(srq2).unwrap(),
        SrqInfo {
            max_wr: 4,
            srq_limit: 4,
            wqes: 0
        }
    );
    // Once no QP uses them, they go (with the WQEs they hold).
    e.destroy_qp(q).unwrap();
    e.destroy_srq(s.srq).unwrap();
    assert_eq!(e.destroy_srq(s.srq), Err(VerbsError::NoSuchSrq(s.srq)));
    assert!(matches!(e.destroy_srq(srq2), Err(VerbsError::Busy(_))));
    e.destroy_qp(ud).unwrap();
    e.destroy_srq(srq2).unwrap();
}
