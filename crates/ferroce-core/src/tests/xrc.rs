//! XRC on the simulated network: endpoint 0 holds the initiators, endpoint
//! 1 an XRC domain with its SRQs and target QPs. One initiator reaches
//! several SRQs through its target; two targets share the domain and its
//! SRQs; WRITE, READ and atomics check memory against the named SRQ's PD;
//! an empty SRQ's RNR; faults on the wire; the packets as sent. The
//! refusals are in `xrc_hostile`, random packets in `xrc_fuzz`.

use ferroce_wire::{Opcode, Psn};

use super::util::{Faults, Pair, all_access, parse, pattern, recv_wr, rmem, sge};
use super::{read_mr, write_mr};
use crate::verbs::{Mtu, Path, QpAttr, QpState, QpType, RoceMode, SendWr, WcOpcode, WcStatus};
use crate::{MrInfo, QpInit};

/// The target host's objects (endpoint 1).
pub(super) struct Target {
    pub(super) pd: u32,
    pub(super) xrcd: u32,
    pub(super) mr: MrInfo,
    /// XRC SRQs and their CQs, pairwise.
    pub(super) srqs: Vec<u32>,
    pub(super) cqs: Vec<u32>,
    pub(super) tgts: Vec<u32>,
}

/// The initiator host's objects (endpoint 0).
pub(super) struct Initiator {
    pub(super) cq: u32,
    pub(super) mr: MrInfo,
    pub(super) inis: Vec<u32>,
}

const MR_LEN: usize = 1 << 17;
/// First PSN of each direction: close to the wrap, as the RC tests.
pub(super) const PSN: u32 = 0xff_fff0;

/// `n_srqs` XRC SRQs (each with its own CQ) and `n_qps` connected
/// initiator/target pairs.
pub(super) fn setup(p: &mut Pair, n_srqs: usize, n_qps: usize, mtu: Mtu) -> (Initiator, Target) {
    let e = &mut p.eps[1];
    let pd = e.alloc_pd();
    let xrcd = e.open_xrcd();
    let mr = e.reg_mr(pd, MR_LEN, all_access()).unwrap();
    let mut cqs = Vec::new();
    let mut srqs = Vec::new();
    for _ in 0..n_srqs {
        let cq = e.create_cq(1024).unwrap();
        srqs.push(e.create_xrc_srq(pd, xrcd, cq, 256, 0).unwrap());
        cqs.push(cq);
    }
    let tgts: Vec<u32> = (0..n_qps)
        .map(|_| p.eps[1].create_xrc_tgt_qp(xrcd).unwrap())
        .collect();
    let e = &mut p.eps[0];
    let ipd = e.alloc_pd();
    let icq = e.create_cq(1024).unwrap();
    let imr = e.reg_mr(ipd, MR_LEN, all_access()).unwrap();
    let inis: Vec<u32> = (0..n_qps)
        .map(|_| {
            p.eps[0]
                .create_qp(QpInit {
                    pd: ipd,
                    qp_type: QpType::XrcIni,
                    send_cq: icq,
                    recv_cq: icq,
                    max_send_wr: 256,
                    max_recv_wr: 0,
                    sq_sig_all: false,
                    srq: None,
                })
                .unwrap()
        })
        .collect();
    for (&i, &t) in inis.iter().zip(&tgts) {
        connect_xrc(p, i, t, mtu);
    }
    let ini = Initiator {
        cq: icq,
        mr: imr,
        inis,
    };
    let tgt = Target {
        pd,
        xrcd,
        mr,
        srqs,
        cqs,
        tgts,
    };
    (ini, tgt)
}

/// Takes initiator `ini` (endpoint 0) and target `tgt` (endpoint 1) to RTS
/// against each other, with the attributes `ibv_xsrq_pingpong` gives each.
pub(super) fn connect_xrc(p: &mut Pair, ini: u32, tgt: u32, mtu: Mtu) {
    for (i, (me, peer)) in [(ini, tgt), (tgt, ini)].into_iter().enumerate() {
        let path = Path {
            remote: p.addrs[1 - i],
            udp_src_port: 0xc000 | (me as u16 & 0x3fff),
            traffic_class: 0,
            hop_limit: 64,
            roce: RoceMode::V2,
        };
        let is_tgt = i == 1;
        let e = &mut p.eps[i];
        let init = QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(1),
            access: Some(all_access()),
            ..QpAttr::default()
        };
        e.modify_qp(me, &init).unwrap();
        let rtr = QpAttr {
            state: Some(QpState::Rtr),
            path: Some(path),
            path_mtu: Some(mtu),
            dest_qpn: Some(peer),
            rq_psn: Some(Psn::new(PSN)),
            max_dest_rd_atomic: is_tgt.then_some(16),
            min_rnr_timer: is_tgt.then_some(1),
            ..QpAttr::default()
        };
        e.modify_qp(me, &rtr).unwrap();
        let rts = QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(Psn::new(PSN)),
            timeout: Some(4),
            retry_cnt: (!is_tgt).then_some(7),
            rnr_retry: (!is_tgt).then_some(7),
            max_rd_atomic: (!is_tgt).then_some(16),
            ..QpAttr::default()
        };
        e.modify_qp(me, &rts).unwrap();
    }
}

/// Posts `n` receives of `len` bytes to SRQ `k`, at slots from `first`.
pub(super) fn post_srq(p: &mut Pair, t: &Target, k: usize, first: u64, n: u64, len: u32) {
    for s in first..first + n {
        let sg = [crate::verbs::Sge {
            lkey: t.mr.lkey,
            offset: s * u64::from(len),
            len,
        }];
        p.eps[1].post_srq_recv(t.srqs[k], recv_wr(s, &sg)).unwrap();
    }
}

pub(super) fn ini_side(i: &Initiator) -> super::util::Side {
    super::util::Side {
        pd: 0,
        cq: i.cq,
        qpn: 0,
        mr: i.mr,
    }
}

#[test]
fn one_initiator_reaches_several_srqs() {
    let mut p = Pair::new(0x71);
    let (ini, tgt) = setup(&mut p, 3, 1, Mtu::Mtu1024);
    let len = 3000u32; // three packets at MTU 1024
    for k in 0..3 {
        post_srq(&mut p, &tgt, k, 10 * k as u64, 2, len);
    }
    let data = pattern(6 * len as usize, 9);
    write_mr(&mut p, 0, ini.mr.lkey, 0, &data);
    let side = ini_side(&ini);
    for m in 0..6u64 {
        let sg = sge(&side, m * u64::from(len), len);
        let wr = SendWr::send(m, &sg).to_srq(tgt.srqs[(m % 3) as usize]);
        p.eps[0].post_send(ini.inis[0], wr).unwrap();
    }
    let sent = p.wait_cqes(0, ini.cq, 6);
    assert!(
        sent.iter()
            .all(|c| c.status == WcStatus::Success && c.opcode == WcOpcode::Send)
    );
    for k in 0..3 {
        let got = p.wait_cqes(1, tgt.cqs[k], 2);
        for (j, c) in got.iter().enumerate() {
            assert_eq!(c.status, WcStatus::Success);
            assert_eq!(c.opcode, WcOpcode::Recv);
            assert_eq!(c.byte_len, len);
            assert_eq!(c.qpn, tgt.tgts[0], "completes with the target QP's number");
            assert_eq!(c.src_qp, ini.inis[0]);
            let slot = 10 * k as u64 + j as u64;
            assert_eq!(c.wr_id, slot);
            let m = (3 * j + k) * len as usize;
            let at = slot as usize * len as usize;
            assert_eq!(
                read_mr(&p, 1, tgt.mr.lkey, at, len as usize),
                data[m..m + len as usize]
            );
        }
    }
}

#[test]
fn two_targets_share_a_domain_and_its_srqs() {
    let mut p = Pair::new(0x72);
    let (ini, tgt) = setup(&mut p, 2, 2, Mtu::Mtu1024);
    post_srq(&mut p, &tgt, 0, 0, 4, 512);
    post_srq(&mut p, &tgt, 1, 8, 4, 512);
    let side = ini_side(&ini);
    for m in 0..8u64 {
        let sg = sge(&side, 0, 100 + m as u32);
        let qp = ini.inis[(m % 2) as usize];
        let wr = SendWr::send(m, &sg).to_srq(tgt.srqs[(m / 4) as usize]);
        p.eps[0].post_send(qp, wr).unwrap();
    }
    p.wait_cqes(0, ini.cq, 8);
    for k in 0..2 {
        let got = p.wait_cqes(1, tgt.cqs[k], 4);
        let mut from: Vec<u32> = got.iter().map(|c| c.qpn).collect();
        from.sort_unstable();
        let mut both = tgt.tgts.clone();
        both.extend(tgt.tgts.iter());
        both.sort_unstable();
        assert_eq!(from, both, "each SRQ fed by both targets");
    }
    assert_eq!(p.eps[1].query_srq(tgt.srqs[0]).unwrap().wqes, 0);
}

#[test]
fn write_read_and_atomics_use_the_srqs_pd() {
    let mut p = Pair::new(0x73);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    // A second PD on the target with its own region and XRC SRQ.
    let e = &mut p.eps[1];
    let pd2 = e.alloc_pd();
    let mr2 = e.reg_mr(pd2, 4096, all_access()).unwrap();
    let cq2 = e.create_cq(16).unwrap();
    let srq2 = e.create_xrc_srq(pd2, tgt.xrcd, cq2, 16, 0).unwrap();
    let side = ini_side(&ini);
    let qp = ini.inis[0];
    let data = pattern(5000, 3);
    write_mr(&mut p, 0, ini.mr.lkey, 0, &data);
    let sg = sge(&side, 0, 5000);
    let wr = SendWr::write(1, &sg, rmem(tgt.mr.addr + 64, tgt.mr.rkey)).to_srq(tgt.srqs[0]);
    p.eps[0].post_send(qp, wr).unwrap();
    let back = sge(&side, 8192, 5000);
    let wr = SendWr::read(2, &back, rmem(tgt.mr.addr + 64, tgt.mr.rkey)).to_srq(tgt.srqs[0]);
    p.eps[0].post_send(qp, wr).unwrap();
    write_mr(&mut p, 1, tgt.mr.lkey, 16384, &40u64.to_ne_bytes());
    let old = sge(&side, 16384, 8);
    let wr = SendWr::fetch_add(3, &old, rmem(tgt.mr.addr + 16384, tgt.mr.rkey), 2);
    p.eps[0].post_send(qp, wr.to_srq(tgt.srqs[0])).unwrap();
    let old2 = sge(&side, 16392, 8);
    let wr = SendWr::compare_swap(4, &old2, rmem(tgt.mr.addr + 16384, tgt.mr.rkey), 42, 7);
    p.eps[0].post_send(qp, wr.to_srq(tgt.srqs[0])).unwrap();
    // The second region through the second SRQ: its PD.
    let wr = SendWr::write(5, &sg[..], rmem(mr2.addr, mr2.rkey));
    let small = sge(&side, 0, 100);
    let wr = SendWr { sg: &small, ..wr }.to_srq(srq2);
    p.eps[0].post_send(qp, wr).unwrap();
    let got = p.wait_cqes(0, ini.cq, 5);
    let st: Vec<_> = got.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect();
    assert_eq!(
        st,
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaRead),
            (3, WcStatus::Success, WcOpcode::FetchAdd),
            (4, WcStatus::Success, WcOpcode::CompSwap),
            (5, WcStatus::Success, WcOpcode::RdmaWrite),
        ]
    );
    assert_eq!(read_mr(&p, 1, tgt.mr.lkey, 64, 5000), data);
    assert_eq!(read_mr(&p, 0, ini.mr.lkey, 8192, 5000), data);
    assert_eq!(read_mr(&p, 0, ini.mr.lkey, 16384, 8), 40u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 0, ini.mr.lkey, 16392, 8), 42u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 1, tgt.mr.lkey, 16384, 8), 7u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 1, mr2.lkey, 0, 100), data[..100]);
    // The second PD's region named through the first SRQ: another PD,
    // refused as RC refuses a foreign rkey.
    let wr = SendWr::write(6, &small, rmem(mr2.addr, mr2.rkey)).to_srq(tgt.srqs[0]);
    p.eps[0].post_send(qp, wr).unwrap();
    let got = p.wait_cqes(0, ini.cq, 1);
    assert_eq!(got[0].status, WcStatus::RemAccessErr);
    assert_eq!(p.eps[1].qp_state(tgt.tgts[0]), Ok(QpState::Err));
    let _ = tgt.pd;
}

#[test]
fn rnr_on_an_empty_srq_then_delivered() {
    let mut p = Pair::new(0x74);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    let side = ini_side(&ini);
    let sg = sge(&side, 0, 64);
    p.eps[0]
        .post_send(ini.inis[0], SendWr::send(1, &sg).to_srq(tgt.srqs[0]))
        .unwrap();
    p.drive_until(10_000, |p| p.eps[1].stats().rnr_naks_sent > 0);
    post_srq(&mut p, &tgt, 0, 0, 1, 64);
    assert_eq!(p.wait_cqes(1, tgt.cqs[0], 1)[0].status, WcStatus::Success);
    assert_eq!(p.wait_cqes(0, ini.cq, 1)[0].status, WcStatus::Success);
}

/// An XRC SRQ's limit event is raised when a target takes its WQEs below
/// the armed limit, once, naming the SRQ.
#[test]
fn an_xrc_srqs_limit_event_is_raised_through_its_target() {
    let mut p = Pair::new(0x7d);
    let (ini, tgt) = setup(&mut p, 1, 1, Mtu::Mtu1024);
    post_srq(&mut p, &tgt, 0, 0, 4, 64);
    let limit = crate::verbs::SrqAttr {
        max_wr: None,
        srq_limit: Some(3),
    };
    p.eps[1].modify_srq(tgt.srqs[0], &limit).unwrap();
    let side = ini_side(&ini);
    let sg = sge(&side, 0, 64);
    for m in 0..2 {
        let wr = SendWr::send(m, &sg).to_srq(tgt.srqs[0]);
        p.eps[0].post_send(ini.inis[0], wr).unwrap();
    }
    p.wait_cqes(1, tgt.cqs[0], 2);
    let events: Vec<_> = std::iter::from_fn(|| p.eps[1].poll_async_event()).collect();
    let srq = tgt.srqs[0];
    assert_eq!(events, [crate::verbs::AsyncEvent::SrqLimitReached { srq }]);
}

#[test]
fn survives_loss_reordering_and_duplication() {
    for seed in 0..4u64 {
        let mut p = Pair::new(0x7500 + seed);
        p.faults = Faults {
            loss: 0.05,
            duplicate: 0.05,
            reorder: 0.1,
            corrupt: 0.01,
            ..Faults::default()
        };
        let (ini, tgt) = setup(&mut p, 2, 1, Mtu::Mtu1024);
        let len = 2500u32;
        post_srq(&mut p, &tgt, 0, 0, 20, len);
        post_srq(&mut p, &tgt, 1, 20, 20, len);
        let data = pattern(40 * len as usize, seed as u8);
        write_mr(&mut p, 0, ini.mr.lkey, 0, &data);
        let side = ini_side(&ini);
        for m in 0..40u64 {
            let sg = sge(&side, m * u64::from(len), len);
            let wr = SendWr::send(m, &sg).to_srq(tgt.srqs[(m / 20) as usize]);
            p.eps[0].post_send(ini.inis[0], wr).unwrap();
        }
        let sent = p.wait_cqes(0, ini.cq, 40);
        assert!(
            sent.iter().all(|c| c.status == WcStatus::Success),
            "{sent:?}"
        );
        for k in 0..2 {
            let got = p.wait_cqes(1, tgt.cqs[k], 20);
            for (j, c) in got.iter().enumerate() {
                assert_eq!(
                    (c.status, c.wr_id),
                    (WcStatus::Success, (20 * k + j) as u64)
                );
            }
        }
        let all = read_mr(&p, 1, tgt.mr.lkey, 0, 40 * len as usize);
        assert_eq!(all, data, "seed {seed}");
        assert!(p.dropped > 0 && p.eps[0].stats().retransmits > 0);
    }
}

#[test]
fn packets_on_the_wire_are_xrc_with_the_srq_number() {
    let mut p = Pair::new(0x7a);
    let (ini, tgt) = setup(&mut p, 2, 1, Mtu::Mtu1024);
    post_srq(&mut p, &tgt, 1, 0, 1, 2048);
    let side = ini_side(&ini);
    let sg = sge(&side, 0, 2048);
    p.eps[0]
        .post_send(ini.inis[0], SendWr::send(1, &sg).to_srq(tgt.srqs[1]))
        .unwrap();
    let out = p.take_transmits(0);
    let reqs: Vec<_> = out.iter().map(|d| parse(d)).collect();
    let ops: Vec<_> = reqs.iter().map(|t| t.bth.opcode).collect();
    assert_eq!(ops, [xrc(Opcode::RC_SEND_FIRST), xrc(Opcode::RC_SEND_LAST)]);
    assert!(reqs.iter().all(|t| t.xrceth == Some(tgt.srqs[1])));
    for d in &out {
        p.deliver(1, d);
    }
    let answers: Vec<_> = p.take_transmits(1).iter().map(|d| parse(d)).collect();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].bth.opcode, xrc(Opcode::RC_ACKNOWLEDGE));
    assert_eq!(answers[0].xrceth, None);
}

/// The XRC opcode of an RC operation.
pub(super) fn xrc(rc: Opcode) -> Opcode {
    rc.in_transport(ferroce_wire::Transport::Xrc)
}
