//! Reliable datagram on the simulated network: each endpoint has a
//! reliable datagram domain, EE contexts connected pairwise, and RD QPs.
//! One RD QP reaches several RD QPs of the peer through one EEC and
//! through two; two RD QPs share an EEC; SEND, WRITE, READ and atomics;
//! loss, duplication and reordering; a wrong Q_Key, an RD QP of another
//! domain, a missing one; and the refused calls.

use ferroce_wire::{Opcode, Psn};

use super::util::{Faults, Pair, all_access, craft, emit, parse, pattern, recv_wr, rmem};
use super::{read_mr, write_mr};
use crate::verbs::{
    Mtu, Path, QpAttr, QpState, QpType, RdDest, RoceMode, SendOp, SendWr, VerbsError, WcOpcode,
    WcStatus,
};
use crate::{MrInfo, QpInit};

const MR_LEN: usize = 1 << 18;
pub(super) const QKEY: u32 = 0x1234_5678;
/// First PSN of each EEC, close to the wrap.
pub(super) const PSN: u32 = 0xff_fff0;

/// One endpoint's RD objects.
pub(super) struct Host {
    pub(super) pd: u32,
    pub(super) rdd: u32,
    pub(super) cq: u32,
    pub(super) mr: MrInfo,
    pub(super) eecs: Vec<u32>,
    pub(super) qps: Vec<u32>,
}

/// On each endpoint: `n_eecs` EECs (the i-th connected to the peer's i-th)
/// and `n_qps` RD QPs, all in one RDD, RTS.
pub(super) fn setup(p: &mut Pair, n_eecs: usize, n_qps: usize, mtu: Mtu) -> [Host; 2] {
    let hosts = [0, 1].map(|i| {
        let e = &mut p.eps[i];
        let pd = e.alloc_pd();
        let rdd = e.alloc_rdd();
        let cq = e.create_cq(4096).unwrap();
        let mr = e.reg_mr(pd, MR_LEN, all_access()).unwrap();
        let eecs = (0..n_eecs).map(|_| e.create_eec(rdd).unwrap()).collect();
        let qps = (0..n_qps)
            .map(|_| {
                let q = e.create_rd_qp(rd_init(pd, cq), rdd).unwrap();
                rd_ready(e, q);
                q
            })
            .collect();
        Host {
            pd,
            rdd,
            cq,
            mr,
            eecs,
            qps,
        }
    });
    for k in 0..n_eecs {
        connect_eecs(p, hosts[0].eecs[k], hosts[1].eecs[k], mtu);
    }
    hosts
}

fn rd_init(pd: u32, cq: u32) -> QpInit {
    QpInit {
        pd,
        qp_type: QpType::Rd,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 256,
        max_recv_wr: 256,
        sq_sig_all: false,
        srq: None,
    }
}

/// An RD QP to RTS: UD's attributes, and remote access.
fn rd_ready(e: &mut crate::Endpoint, q: u32) {
    let init = QpAttr {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(1),
        qkey: Some(QKEY),
        access: Some(all_access()),
        ..QpAttr::default()
    };
    e.modify_qp(q, &init).unwrap();
    e.modify_qp(
        q,
        &QpAttr {
            state: Some(QpState::Rtr),
            ..QpAttr::default()
        },
    )
    .unwrap();
    e.modify_qp(
        q,
        &QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(Psn::new(0)),
            ..QpAttr::default()
        },
    )
    .unwrap();
}

/// EEC `a` (endpoint 0) and `b` (endpoint 1) to RTS against each other,
/// with RC's attributes.
fn connect_eecs(p: &mut Pair, a: u32, b: u32, mtu: Mtu) {
    for (i, (me, peer)) in [(a, b), (b, a)].into_iter().enumerate() {
        let path = Path {
            remote: p.addrs[1 - i],
            udp_src_port: 0xc000 | (me as u16 & 0x3fff),
            traffic_class: 0,
            hop_limit: 64,
            roce: RoceMode::V2,
        };
        let e = &mut p.eps[i];
        let steps = [
            QpAttr {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                access: Some(all_access()),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rtr),
                path: Some(path),
                path_mtu: Some(mtu),
                dest_qpn: Some(peer),
                rq_psn: Some(Psn::new(PSN)),
                max_dest_rd_atomic: Some(16),
                min_rnr_timer: Some(1),
                ..QpAttr::default()
            },
            QpAttr {
                state: Some(QpState::Rts),
                sq_psn: Some(Psn::new(PSN)),
                timeout: Some(4),
                retry_cnt: Some(7),
                rnr_retry: Some(7),
                max_rd_atomic: Some(16),
                ..QpAttr::default()
            },
        ];
        for s in &steps {
            e.modify_eec(me, s).unwrap();
        }
    }
}

pub(super) fn dest(eec: u32, qpn: u32) -> RdDest {
    RdDest {
        eec,
        qpn,
        qkey: QKEY,
    }
}

/// Posts a receive of `len` bytes at `slot` * 4096 of B's region to RD QP
/// `q` of endpoint 1.
pub(super) fn post_recv(p: &mut Pair, b: &Host, q: u32, slot: u64, len: u32) {
    let sg = [crate::verbs::Sge {
        lkey: b.mr.lkey,
        offset: slot * 4096,
        len,
    }];
    p.eps[1].post_recv(q, recv_wr(slot, &sg)).unwrap();
}

#[test]
fn one_rd_qp_reaches_several_peers_through_one_and_two_eecs() {
    let mut p = Pair::new(301);
    let [a, b] = setup(&mut p, 2, 3, Mtu::Mtu1024);
    // A's QP 0 sends to B's QPs 0 and 1 through EEC 0 and to B's QP 2
    // through EEC 1; A's QP 1 shares EEC 0 with it. Messages of 3 packets.
    let sends = [
        (0, 0, 0),
        (0, 0, 1),
        (0, 1, 2),
        (1, 0, 0),
        (0, 1, 2),
        (1, 0, 1),
    ];
    for (n, &(_, _, to)) in sends.iter().enumerate() {
        post_recv(&mut p, &b, b.qps[to], n as u64, 4096);
    }
    for (n, &(from, eec, to)) in sends.iter().enumerate() {
        let data = pattern(2500, n as u8);
        write_mr(&mut p, 0, a.mr.lkey, n * 4096, &data);
        let sg = sge_of(&a, n as u64 * 4096, 2500);
        let wr = SendWr::send(n as u64, &sg).via(dest(a.eecs[eec], b.qps[to]));
        p.eps[0].post_send(a.qps[from], wr).unwrap();
    }
    let sent = p.wait_cqes(0, a.cq, sends.len());
    assert!(
        sent.iter().all(|c| c.status == WcStatus::Success),
        "{sent:?}"
    );
    // Each RD QP's completions in the order it posted, under its number.
    for from in [0, 1] {
        let ids: Vec<u64> = sent
            .iter()
            .filter(|c| c.qpn == a.qps[from])
            .map(|c| c.wr_id)
            .collect();
        let want: Vec<u64> = (0..sends.len() as u64)
            .filter(|&n| sends[n as usize].0 == from)
            .collect();
        assert_eq!(ids, want);
    }
    let got = p.wait_cqes(1, b.cq, sends.len());
    for c in &got {
        let (from, _, to) = sends[c.wr_id as usize];
        assert_eq!(
            (c.status, c.opcode, c.byte_len, c.qpn, c.src_qp),
            (
                WcStatus::Success,
                WcOpcode::Recv,
                2500,
                b.qps[to],
                a.qps[from]
            )
        );
        let at = c.wr_id as usize * 4096;
        assert!(read_mr(&p, 1, b.mr.lkey, at, 2500) == pattern(2500, c.wr_id as u8));
    }
    // Everything goes: the EECs that took messages for the QPs, the QPs
    // (and the receive queues made for them), the domains.
    p.settle(100_000);
    for (i, h) in [a, b].iter().enumerate() {
        let e = &mut p.eps[i];
        assert!(matches!(e.dealloc_rdd(h.rdd), Err(VerbsError::Busy(_))));
        for &q in &h.qps {
            e.destroy_qp(q).unwrap();
        }
        for &eec in &h.eecs {
            e.destroy_eec(eec).unwrap();
        }
        e.dealloc_rdd(h.rdd).unwrap();
        e.dereg_mr(h.mr.lkey).unwrap();
        e.dealloc_pd(h.pd).unwrap();
    }
}

pub(super) fn sge_of(h: &Host, offset: u64, len: u32) -> Vec<crate::verbs::Sge> {
    vec![crate::verbs::Sge {
        lkey: h.mr.lkey,
        offset,
        len,
    }]
}

#[test]
fn write_read_and_atomics_over_rd() {
    let mut p = Pair::new(302);
    let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let to = dest(a.eecs[0], b.qps[0]);
    let data = pattern(5000, 9);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let sg = sge_of(&a, 0, 5000);
    let write = SendWr::write(1, &sg, rmem(b.mr.addr + 8192, b.mr.rkey)).via(to);
    p.eps[0].post_send(a.qps[0], write).unwrap();
    let sg = sge_of(&a, 16384, 5000);
    let read = SendWr::read(2, &sg, rmem(b.mr.addr + 8192, b.mr.rkey)).via(to);
    p.eps[0].post_send(a.qps[0], read).unwrap();
    let sg = sge_of(&a, 32768, 8);
    let add = SendWr::fetch_add(3, &sg, rmem(b.mr.addr + 65536, b.mr.rkey), 5).via(to);
    p.eps[0].post_send(a.qps[0], add).unwrap();
    let c = p.wait_cqes(0, a.cq, 3);
    assert_eq!(
        c.iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect::<Vec<_>>(),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaRead),
            (3, WcStatus::Success, WcOpcode::FetchAdd)
        ]
    );
    assert!(read_mr(&p, 1, b.mr.lkey, 8192, 5000) == data);
    assert!(read_mr(&p, 0, a.mr.lkey, 16384, 5000) == data);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 65536, 8), 5u64.to_ne_bytes());
}

#[test]
fn rd_survives_loss_duplication_and_reordering() {
    for seed in [303u64, 304, 305] {
        let mut p = Pair::new(seed);
        p.faults = Faults {
            loss: 0.05,
            duplicate: 0.05,
            reorder: 0.1,
            ..Faults::default()
        };
        let [a, b] = setup(&mut p, 2, 2, Mtu::Mtu1024);
        let n = 40u64;
        for k in 0..n {
            post_recv(&mut p, &b, b.qps[(k % 2) as usize], k, 4096);
        }
        for k in 0..n {
            let data = pattern(3000, k as u8);
            write_mr(&mut p, 0, a.mr.lkey, k as usize * 3000, &data);
            let sg = sge_of(&a, k * 3000, 3000);
            let to = dest(a.eecs[(k / 2 % 2) as usize], b.qps[(k % 2) as usize]);
            let wr = SendWr::send(k, &sg).via(to);
            p.eps[0].post_send(a.qps[(k % 2) as usize], wr).unwrap();
        }
        let sent = p.wait_cqes(0, a.cq, n as usize);
        assert!(
            sent.iter().all(|c| c.status == WcStatus::Success),
            "seed {seed}: {sent:?}"
        );
        let got = p.wait_cqes(1, b.cq, n as usize);
        assert_eq!(got.len(), n as usize, "seed {seed}");
        for c in &got {
            assert_eq!(c.status, WcStatus::Success, "seed {seed}");
            let k = c.wr_id;
            assert!(
                read_mr(&p, 1, b.mr.lkey, k as usize * 4096, 3000) == pattern(3000, k as u8),
                "seed {seed} message {k}"
            );
        }
    }
}

#[test]
fn rd_requests_go_out_with_rdeth_and_deth() {
    let mut p = Pair::new(306);
    let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
    post_recv(&mut p, &b, b.qps[0], 0, 4096);
    let sg = sge_of(&a, 0, 1500);
    let wr = SendWr::send(1, &sg).via(dest(a.eecs[0], b.qps[0]));
    p.eps[0].post_send(a.qps[0], wr).unwrap();
    let out = p.take_transmits(0);
    let first = parse(&out[0]);
    assert_eq!(first.bth.opcode, Opcode::RD_SEND_FIRST);
    assert_eq!(first.bth.dest_qp, b.qps[0]);
    assert_eq!(first.rdeth, Some(b.eecs[0]));
    let deth = first.deth.unwrap();
    assert_eq!((deth.qkey, deth.src_qp), (QKEY, a.qps[0]));
    assert_eq!(parse(&out[1]).bth.opcode, Opcode::RD_SEND_LAST);
    for pkt in out {
        p.deliver(1, &pkt);
    }
    let acks = p.take_transmits(1);
    let ack = parse(&acks[0]);
    assert_eq!(ack.bth.opcode, Opcode::RD_ACKNOWLEDGE);
    assert_eq!((ack.bth.dest_qp, ack.rdeth), (a.qps[0], Some(a.eecs[0])));
}

#[test]
fn a_wrong_q_key_or_destination_is_nak_invalid_rd_request() {
    for (seed, case) in [(307u64, "qkey"), (308, "no qp"), (309, "other rdd")] {
        let mut p = Pair::new(seed);
        let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
        post_recv(&mut p, &b, b.qps[0], 0, 4096);
        let e = &mut p.eps[1];
        let other_rdd = e.alloc_rdd();
        let stray = e.create_rd_qp(rd_init(b.pd, b.cq), other_rdd).unwrap();
        rd_ready(e, stray);
        let to = match case {
            "qkey" => RdDest {
                qkey: 0x1111,
                ..dest(a.eecs[0], b.qps[0])
            },
            "no qp" => dest(a.eecs[0], 0xab_cdef),
            _ => dest(a.eecs[0], stray),
        };
        let sg = sge_of(&a, 0, 64);
        p.eps[0]
            .post_send(a.qps[0], SendWr::send(1, &sg).via(to))
            .unwrap();
        let c = p.wait_cqes(0, a.cq, 1)[0];
        assert_eq!(c.status, WcStatus::RemInvRdReqErr, "{case}");
        assert_eq!(p.eps[1].stats().rx_bad_rd, 1, "{case}");
        // The requester's QP goes to the error state with its EEC.
        assert_eq!(p.eps[0].qp_state(a.qps[0]).unwrap(), QpState::Err, "{case}");
        assert_eq!(
            p.eps[0].eec_state(a.eecs[0]).unwrap(),
            QpState::Err,
            "{case}"
        );
        // Nothing reached the RD QP.
        assert!(p.completions(1, b.cq).is_empty(), "{case}");
    }
}

#[test]
fn rd_calls_are_checked() {
    let mut p = Pair::new(310);
    let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let e = &mut p.eps[0];
    let sg = sge_of(&a, 0, 8);
    // A send with no destination, an EEC that is not one, an EEC of
    // another domain, an operation RD has no opcode for.
    let err = e.post_send(a.qps[0], SendWr::send(1, &sg)).unwrap_err();
    assert!(err.to_string().contains("SendWr::via"), "{err}");
    let not_eec = dest(a.qps[0], b.qps[0]);
    assert_eq!(
        e.post_send(a.qps[0], SendWr::send(1, &sg).via(not_eec)),
        Err(VerbsError::NoSuchEec(a.qps[0]))
    );
    let rdd2 = e.alloc_rdd();
    let eec2 = e.create_eec(rdd2).unwrap();
    let err = e
        .post_send(a.qps[0], SendWr::send(1, &sg).via(dest(eec2, b.qps[0])))
        .unwrap_err();
    assert!(
        err.to_string().contains("reliable datagram domain"),
        "{err}"
    );
    let inv = SendWr::new(1, SendOp::SendWithInv(5), &sg).via(dest(a.eecs[0], b.qps[0]));
    assert!(matches!(
        e.post_send(a.qps[0], inv),
        Err(VerbsError::BadOpForQpType { .. })
    ));
    // An EEC is not a QP to the QP calls, nor a QP an EEC.
    assert_eq!(
        e.modify_qp(a.eecs[0], &QpAttr::default()),
        Err(VerbsError::NoSuchQp(a.eecs[0]))
    );
    assert_eq!(
        e.destroy_qp(a.eecs[0]),
        Err(VerbsError::NoSuchQp(a.eecs[0]))
    );
    assert_eq!(e.eec_state(a.qps[0]), Err(VerbsError::NoSuchEec(a.qps[0])));
    // Domains in use stay; an unused one goes.
    assert!(matches!(e.dealloc_rdd(a.rdd), Err(VerbsError::Busy(_))));
    e.destroy_eec(eec2).unwrap();
    e.dealloc_rdd(rdd2).unwrap();
    assert_eq!(e.dealloc_rdd(rdd2), Err(VerbsError::NoSuchRdd(rdd2)));
    assert!(matches!(
        e.create_rd_qp(rd_init(a.pd, a.cq), rdd2),
        Err(VerbsError::NoSuchRdd(_))
    ));
    let _ = b;
}

#[test]
fn an_eec_answers_rnr_and_the_message_goes_when_a_receive_comes() {
    let mut p = Pair::new(311);
    let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let sg = sge_of(&a, 0, 100);
    p.eps[0]
        .post_send(
            a.qps[0],
            SendWr::send(7, &sg).via(dest(a.eecs[0], b.qps[0])),
        )
        .unwrap();
    // No receive yet: RNR NAKs, then the receive is posted.
    for _ in 0..20 {
        p.step();
    }
    assert!(p.eps[1].stats().rnr_naks_sent > 0);
    post_recv(&mut p, &b, b.qps[0], 0, 4096);
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].byte_len, 100);
}

#[test]
fn stray_rd_packets_are_dropped_and_counted() {
    let mut p = Pair::new(312);
    let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let psn = Psn::new(PSN);
    let send_to = |rdeth: u32, dest: u32| {
        let mut t = craft(Opcode::RD_SEND_ONLY, psn, dest, 8);
        t.rdeth = Some(rdeth);
        emit(&t, &[1; 8])
    };
    // An RDETH naming no EEC, or naming an RD QP rather than an EEC.
    p.deliver(1, &send_to(0xab_cdef, b.qps[0]));
    p.deliver(1, &send_to(b.qps[0], b.qps[0]));
    assert_eq!(p.eps[1].stats().rx_unknown_qp, 2);
    // A RESYNC (neither sent nor served), and RC's SEND to the EEC's
    // number (another transport).
    let mut resync = craft(Opcode::RD_RESYNC, psn, b.qps[0], 0);
    resync.rdeth = Some(b.eecs[0]);
    p.deliver(1, &emit(&resync, &[]));
    p.deliver(
        1,
        &emit(&craft(Opcode::RC_SEND_ONLY, psn, b.eecs[0], 8), &[1; 8]),
    );
    assert_eq!(p.eps[1].stats().rx_unexpected, 2);
    // None of it reached the QP or moved the EEC: a real message goes.
    assert!(p.completions(1, b.cq).is_empty());
    post_recv(&mut p, &b, b.qps[0], 0, 4096);
    let sg = sge_of(&a, 0, 64);
    p.eps[0]
        .post_send(
            a.qps[0],
            SendWr::send(1, &sg).via(dest(a.eecs[0], b.qps[0])),
        )
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].byte_len, 64);
}

#[test]
fn an_rd_qp_moved_to_error_leaves_its_carried_request_to_the_eec() {
    let mut p = Pair::new(313);
    let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
    // No receive at B: the first SEND waits on RNR on the EEC; the second
    // waits in A's QP.
    let sg = sge_of(&a, 0, 64);
    for id in [1, 2] {
        let wr = SendWr::send(id, &sg).via(dest(a.eecs[0], b.qps[0]));
        p.eps[0].post_send(a.qps[0], wr).unwrap();
    }
    for _ in 0..10 {
        p.step();
    }
    let err = QpAttr {
        state: Some(QpState::Err),
        ..QpAttr::default()
    };
    p.eps[0].modify_qp(a.qps[0], &err).unwrap();
    // The waiting one is flushed now; the carried one completes once, when
    // the EEC is done with it (B posts a receive).
    let c = p.wait_cqes(0, a.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (2, WcStatus::WrFlushErr));
    post_recv(&mut p, &b, b.qps[0], 0, 4096);
    let c = p.wait_cqes(0, a.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::Success));
    p.settle(100_000);
    assert!(p.completions(0, a.cq).is_empty(), "completed twice");
}
