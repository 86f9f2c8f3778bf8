//! UD multicast on the simulated network (which, as a switch and the
//! kernel's multicast loop, hands a packet sent to a group to both
//! endpoints, the sender's included): attach and detach and their
//! refusals, delivery to every attached QP (each with its own receive and
//! Q_Key), the multicast QPN on the wire, RoCE v1 groups, and hostile
//! packets (the multicast QPN to a unicast GID, a unicast QPN or an RC
//! opcode to a group, a group nobody joined).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::util::{Pair, Side, craft, emit, pattern, recv_wr, send_wr, sge};
use super::{read_mr, write_mr};
use crate::verbs::{
    McastRefusal, Path, QpAttr, QpState, QpType, RoceMode, SendOp, UdDest, VerbsError, WcStatus,
};
use crate::{MULTICAST_QPN, QpInit, multicast_group};
use ferroce_wire::{Opcode, Psn};

const GROUP: IpAddr = IpAddr::V4(Ipv4Addr::new(239, 1, 2, 3));
const QKEY: u32 = 0x0123_4567;

/// A UD QP on endpoint `i` in RTS with Q_Key `qkey`, its own CQ and a
/// 64 KiB region.
fn ud_qp(p: &mut Pair, i: usize, qkey: u32) -> Side {
    let e = &mut p.eps[i];
    let pd = e.alloc_pd();
    let cq = e.create_cq(256).unwrap();
    let qpn = e
        .create_qp(QpInit {
            pd,
            qp_type: QpType::Ud,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 64,
            max_recv_wr: 64,
            sq_sig_all: true,
            srq: None,
        })
        .unwrap();
    let mr = e.reg_mr(pd, 1 << 16, super::util::all_access()).unwrap();
    for attr in [
        QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(1),
            qkey: Some(qkey),
            ..QpAttr::default()
        },
        QpAttr {
            state: Some(QpState::Rtr),
            ..QpAttr::default()
        },
        QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(Psn::new(0)),
            ..QpAttr::default()
        },
    ] {
        e.modify_qp(qpn, &attr).unwrap();
    }
    Side { pd, cq, qpn, mr }
}

/// To `group` over `roce`, posted with remote QPN `qpn`.
fn to_group(group: IpAddr, qpn: u32, roce: RoceMode) -> UdDest {
    UdDest {
        path: Path {
            remote: group,
            udp_src_port: 0xc123,
            traffic_class: 0,
            hop_limit: 64,
            roce,
        },
        qpn,
        qkey: QKEY,
    }
}

/// Sends `data` from `s` (endpoint 0) to `dest`; waits for its completion.
fn send_to(p: &mut Pair, s: &Side, dest: UdDest, data: &[u8]) {
    write_mr(p, 0, s.mr.lkey, 0, data);
    let sg = sge(s, 0, data.len() as u32);
    let mut wr = send_wr(1, SendOp::Send, &sg);
    wr.ud = Some(dest);
    p.eps[0].post_send(s.qpn, wr).unwrap();
    let c = p.wait_cqes(0, s.cq, 1)[0];
    assert_eq!(c.status, WcStatus::Success);
}

fn post_recv(p: &mut Pair, i: usize, s: &Side, wr_id: u64) {
    p.eps[i]
        .post_recv(s.qpn, recv_wr(wr_id, &sge(s, 0, 4096)))
        .unwrap();
}

#[test]
fn multicast_gids_are_ipv4_class_d_mapped_or_not_and_ipv6_ff00() {
    assert_eq!(multicast_group(GROUP), Some(GROUP));
    let mapped = IpAddr::V6(Ipv4Addr::new(239, 1, 2, 3).to_ipv6_mapped());
    assert_eq!(multicast_group(mapped), Some(GROUP));
    let v6: IpAddr = "ff0e::1:2".parse().unwrap();
    assert_eq!(multicast_group(v6), Some(v6));
    for unicast in ["10.0.0.1", "::ffff:10.0.0.1", "fe80::1", "240.0.0.1"] {
        assert_eq!(multicast_group(unicast.parse().unwrap()), None, "{unicast}");
    }
}

#[test]
fn every_attached_qp_takes_its_own_copy_the_senders_too() {
    let mut p = Pair::new(160);
    let tx = ud_qp(&mut p, 0, QKEY);
    let rx: Vec<Side> = (0..3).map(|_| ud_qp(&mut p, 1, QKEY)).collect();
    assert!(
        p.eps[1].attach_mcast(rx[0].qpn, GROUP).unwrap(),
        "new group"
    );
    for s in &rx[1..] {
        assert!(!p.eps[1].attach_mcast(s.qpn, GROUP).unwrap());
    }
    assert!(p.eps[0].attach_mcast(tx.qpn, GROUP).unwrap());
    for (n, s) in rx.iter().enumerate() {
        post_recv(&mut p, 1, s, n as u64);
    }
    post_recv(&mut p, 0, &tx, 9);
    let data = pattern(500, 3);
    // Posted with the sender's idea of a QPN: the wire carries 0xFFFFFF.
    send_to(&mut p, &tx, to_group(GROUP, 0x1234, RoceMode::V2), &data);
    for (n, s) in rx.iter().enumerate() {
        let c = p.wait_cqes(1, s.cq, 1)[0];
        assert_eq!(
            (c.status, c.wr_id, c.byte_len),
            (WcStatus::Success, n as u64, 540)
        );
        assert_eq!((c.qpn, c.src_qp), (s.qpn, tx.qpn));
        assert_eq!(read_mr(&p, 1, s.mr.lkey, 40, 500), data);
        // The GRH's IPv4 header: source, and the group as destination.
        let grh = read_mr(&p, 1, s.mr.lkey, 0, 40);
        assert_eq!(grh[32..36], [127, 0, 0, 1]);
        assert_eq!(grh[36..40], [239, 1, 2, 3]);
    }
    let own = p.wait_cqes(0, tx.cq, 1)[0];
    assert_eq!((own.status, own.wr_id), (WcStatus::Success, 9));
    assert_eq!(p.eps[1].stats().rx_mcast_delivered, 3);
}

#[test]
fn the_wire_carries_the_multicast_qpn() {
    let mut p = Pair::new(161);
    let tx = ud_qp(&mut p, 0, QKEY);
    let data = [7u8; 16];
    write_mr(&mut p, 0, tx.mr.lkey, 0, &data);
    let sg = sge(&tx, 0, 16);
    let mut wr = send_wr(1, SendOp::Send, &sg);
    wr.ud = Some(to_group(GROUP, 0x22, RoceMode::V2));
    p.eps[0].post_send(tx.qpn, wr).unwrap();
    let sent = p.take_transmits(0);
    assert_eq!(sent.len(), 1);
    let t = super::util::parse(&sent[0]);
    assert_eq!(t.bth.dest_qp, MULTICAST_QPN);
    assert_eq!(t.deth.map(|d| d.qkey), Some(QKEY));
}

#[test]
fn each_qp_checks_its_own_qkey_and_a_qp_without_receives_drops() {
    let mut p = Pair::new(162);
    let tx = ud_qp(&mut p, 0, QKEY);
    let good = ud_qp(&mut p, 1, QKEY);
    let other_key = ud_qp(&mut p, 1, 0x7777);
    let no_recv = ud_qp(&mut p, 1, QKEY);
    for s in [&good, &other_key, &no_recv] {
        p.eps[1].attach_mcast(s.qpn, GROUP).unwrap();
    }
    post_recv(&mut p, 1, &good, 1);
    post_recv(&mut p, 1, &other_key, 2);
    send_to(
        &mut p,
        &tx,
        to_group(GROUP, MULTICAST_QPN, RoceMode::V2),
        b"hello",
    );
    assert_eq!(p.wait_cqes(1, good.cq, 1)[0].byte_len, 45);
    p.settle(10_000);
    assert!(p.completions(1, other_key.cq).is_empty());
    assert!(p.completions(1, no_recv.cq).is_empty());
    let s = p.eps[1].stats();
    assert_eq!((s.rx_bad_qkey, s.rx_unexpected), (1, 1));
}

#[test]
fn a_detached_qp_gets_nothing_and_the_last_detach_leaves_the_group() {
    let mut p = Pair::new(163);
    let tx = ud_qp(&mut p, 0, QKEY);
    let [a, b] = [ud_qp(&mut p, 1, QKEY), ud_qp(&mut p, 1, QKEY)];
    p.eps[1].attach_mcast(a.qpn, GROUP).unwrap();
    p.eps[1].attach_mcast(b.qpn, GROUP).unwrap();
    assert!(!p.eps[1].detach_mcast(a.qpn, GROUP).unwrap(), "b is left");
    assert_eq!(p.eps[1].mcast_groups().collect::<Vec<_>>(), [GROUP]);
    post_recv(&mut p, 1, &a, 1);
    post_recv(&mut p, 1, &b, 2);
    send_to(
        &mut p,
        &tx,
        to_group(GROUP, MULTICAST_QPN, RoceMode::V2),
        b"one",
    );
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].wr_id, 2);
    p.settle(10_000);
    assert!(p.completions(1, a.cq).is_empty());
    assert!(p.eps[1].detach_mcast(b.qpn, GROUP).unwrap(), "last one");
    assert_eq!(p.eps[1].mcast_groups().count(), 0);
    post_recv(&mut p, 1, &b, 3);
    send_to(
        &mut p,
        &tx,
        to_group(GROUP, MULTICAST_QPN, RoceMode::V2),
        b"two",
    );
    p.settle(10_000);
    assert!(p.completions(1, b.cq).is_empty());
    // Both endpoints saw it with nobody attached (the sender's loop too).
    assert_eq!(p.eps[1].stats().rx_mcast_unattached, 1);
    assert_eq!(p.eps[0].stats().rx_mcast_unattached, 2);
}

#[test]
fn destroying_a_qp_detaches_it() {
    let mut p = Pair::new(164);
    let a = ud_qp(&mut p, 1, QKEY);
    p.eps[1].attach_mcast(a.qpn, GROUP).unwrap();
    assert_eq!(p.eps[1].mcast_groups_of(a.qpn), [GROUP]);
    p.eps[1].destroy_qp(a.qpn).unwrap();
    assert_eq!(p.eps[1].mcast_groups().count(), 0);
    assert!(!p.eps[1].accepts_group(GROUP));
}

/// A call's result, the error it should be (QPN, group, cause), and a
/// phrase its message should have.
type Case = (
    Result<bool, VerbsError>,
    u32,
    IpAddr,
    McastRefusal,
    &'static str,
);

#[test]
fn attach_and_detach_refusals_name_the_cause() {
    let mut p = Pair::new(165);
    let ud = ud_qp(&mut p, 1, QKEY);
    let [_, rc] = super::util::connect(&mut p, QpType::Rc, 4096, crate::verbs::Mtu::Mtu1024);
    let e = &mut p.eps[1];
    let unicast: IpAddr = "10.1.1.1".parse().unwrap();
    let cases: [Case; 4] = [
        (
            e.attach_mcast(rc.qpn, GROUP),
            rc.qpn,
            GROUP,
            McastRefusal::NotUd(QpType::Rc),
            "only UD QPs",
        ),
        (
            e.attach_mcast(ud.qpn, unicast),
            ud.qpn,
            unicast,
            McastRefusal::NotMulticast,
            "not a multicast GID",
        ),
        (
            e.detach_mcast(ud.qpn, GROUP),
            ud.qpn,
            GROUP,
            McastRefusal::NotAttached,
            "not attached",
        ),
        (
            e.attach_mcast(ud.qpn, GROUP)
                .and(e.attach_mcast(ud.qpn, GROUP)),
            ud.qpn,
            GROUP,
            McastRefusal::AlreadyAttached,
            "attached already",
        ),
    ];
    for (got, qpn, group, why, words) in cases {
        let err = got.expect_err(words);
        assert_eq!(err, VerbsError::Mcast { qpn, group, why });
        assert!(err.to_string().contains(words), "{err}");
    }
    assert_eq!(e.attach_mcast(0x99, GROUP), Err(VerbsError::NoSuchQp(0x99)));
    // The IPv4-mapped GID is the same group.
    let mapped = IpAddr::V6(Ipv4Addr::new(239, 1, 2, 3).to_ipv6_mapped());
    assert!(e.detach_mcast(ud.qpn, mapped).unwrap());
}

#[test]
fn a_group_is_full_at_rxes_limit() {
    let mut p = Pair::new(166);
    let qps: Vec<Side> = (0..=crate::MAX_MCAST_QP_ATTACH)
        .map(|_| ud_qp(&mut p, 1, QKEY))
        .collect();
    for s in &qps[..crate::MAX_MCAST_QP_ATTACH] {
        p.eps[1].attach_mcast(s.qpn, GROUP).unwrap();
    }
    let last = qps[crate::MAX_MCAST_QP_ATTACH].qpn;
    let err = p.eps[1].attach_mcast(last, GROUP).unwrap_err();
    assert_eq!(
        err,
        VerbsError::Mcast {
            qpn: last,
            group: GROUP,
            why: McastRefusal::Full
        }
    );
}

#[test]
fn ipv6_and_roce_v1_groups_deliver() {
    let v6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0x1, 0x2));
    for (seed, group, roce) in [
        (167, v6, RoceMode::V2),
        (168, GROUP, RoceMode::V1),
        (169, v6, RoceMode::V1),
    ] {
        let mut p = Pair::new(seed);
        let tx = ud_qp(&mut p, 0, QKEY);
        let rx = ud_qp(&mut p, 1, QKEY);
        p.eps[1].attach_mcast(rx.qpn, group).unwrap();
        post_recv(&mut p, 1, &rx, 5);
        send_to(&mut p, &tx, to_group(group, MULTICAST_QPN, roce), b"six");
        let c = p.wait_cqes(1, rx.cq, 1)[0];
        assert_eq!(
            (c.status, c.byte_len),
            (WcStatus::Success, 43),
            "{group} {roce:?}"
        );
    }
}

/// Packets that break the multicast addressing rules, or find nobody:
/// dropped, counted, no completion anywhere.
#[test]
fn hostile_multicast_packets_are_dropped_and_counted() {
    let mut p = Pair::new(170);
    let ud = ud_qp(&mut p, 1, QKEY);
    let [_, rc] = super::util::connect(&mut p, QpType::Rc, 4096, crate::verbs::Mtu::Mtu1024);
    p.eps[1].attach_mcast(ud.qpn, GROUP).unwrap();
    post_recv(&mut p, 1, &ud, 1);
    let from = p.addrs[0];
    let ud_send = |dest| {
        let mut t = craft(Opcode::UD_SEND_ONLY, Psn::new(0), dest, 8);
        if let Some(d) = t.deth.as_mut() {
            d.qkey = QKEY;
        }
        emit(&t, &[1; 8])
    };
    let other: IpAddr = "239.9.9.9".parse().unwrap();
    let now = p.now;
    let e = &mut p.eps[1];
    let before = e.stats();
    // The multicast QPN to our unicast address (no group).
    e.handle_datagram(now, from, &ud_send(MULTICAST_QPN));
    // A unicast QPN (the attached QP's own) to the group.
    e.handle_multicast(now, from, GROUP, crate::Ecn::NotEct, &ud_send(ud.qpn));
    // An RC SEND to the group, with the multicast QPN.
    let rc_send = emit(
        &craft(Opcode::RC_SEND_ONLY, Psn::new(0), MULTICAST_QPN, 8),
        &[2; 8],
    );
    e.handle_multicast(now, from, GROUP, crate::Ecn::NotEct, &rc_send);
    // The multicast QPN "to a group" that is a unicast address.
    e.handle_multicast(
        now,
        from,
        p.addrs[1],
        crate::Ecn::NotEct,
        &ud_send(MULTICAST_QPN),
    );
    let s = e.stats();
    assert_eq!(s.rx_mcast_misaddressed - before.rx_mcast_misaddressed, 4);
    // A group nobody here joined.
    e.handle_multicast(
        now,
        from,
        other,
        crate::Ecn::NotEct,
        &ud_send(MULTICAST_QPN),
    );
    assert_eq!(e.stats().rx_mcast_unattached, 1);
    // Truncated and garbage bytes to the group.
    e.handle_multicast(now, from, GROUP, crate::Ecn::NotEct, &[0xff; 5]);
    assert_eq!(e.stats().rx_malformed, before.rx_malformed + 1);
    assert_eq!(e.stats().rx_mcast_delivered, 0);
    assert!(p.completions(1, ud.cq).is_empty());
    assert!(p.completions(1, rc.cq).is_empty());
    // The QP still takes a good one after all that.
    send_good(&mut p, &ud, from);
}

fn send_good(p: &mut Pair, ud: &Side, from: IpAddr) {
    let mut t = craft(Opcode::UD_SEND_ONLY, Psn::new(0), MULTICAST_QPN, 8);
    if let Some(d) = t.deth.as_mut() {
        d.qkey = QKEY;
    }
    let now = p.now;
    p.eps[1].handle_multicast(now, from, GROUP, crate::Ecn::NotEct, &emit(&t, &[3; 8]));
    let c = p.completions(1, ud.cq);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].status, c[0].byte_len), (WcStatus::Success, 48));
}

/// A member whose region the application is scanning gets its copy at
/// once, like every other member, and each member one copy only.
#[test]
fn a_multicast_copy_lands_in_a_region_the_application_is_viewing() {
    let mut p = Pair::new(171);
    let tx = ud_qp(&mut p, 0, QKEY);
    let [a, b] = [ud_qp(&mut p, 1, QKEY), ud_qp(&mut p, 1, QKEY)];
    for s in [&a, &b] {
        p.eps[1].attach_mcast(s.qpn, GROUP).unwrap();
        post_recv(&mut p, 1, s, 1);
    }
    let viewed = p.eps[1].region(a.mr.lkey).unwrap();
    let view = viewed.volatile(0, 1 << 16).unwrap();
    send_to(
        &mut p,
        &tx,
        to_group(GROUP, MULTICAST_QPN, RoceMode::V2),
        b"seen",
    );
    assert_eq!(p.wait_cqes(1, b.cq, 1)[0].status, WcStatus::Success);
    let got = p.completions(1, a.cq);
    assert_eq!(
        got.len(),
        1,
        "the viewed member's copy came with the other's"
    );
    assert_eq!(got[0].status, WcStatus::Success);
    let mut seen = [0u8; 4];
    view.subslice(40, 4).unwrap().copy_to(&mut seen[..]);
    assert_eq!(&seen, b"seen");
    p.settle(10_000);
    assert!(p.completions(1, a.cq).is_empty(), "a got one copy only");
    assert!(p.completions(1, b.cq).is_empty(), "b got one copy only");
}

/// mlx5's `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`: the sender's own copy is
/// not delivered back to it; another QP of its device, and the other
/// endpoint, still get theirs.
#[test]
fn a_qp_may_block_its_own_loopback_only() {
    for roce in [RoceMode::V2, RoceMode::V1] {
        let mut p = Pair::new(172);
        let tx = ud_qp(&mut p, 0, QKEY);
        let neighbour = ud_qp(&mut p, 0, QKEY);
        let far = ud_qp(&mut p, 1, QKEY);
        p.eps[0].block_self_mcast_loopback(tx.qpn, true).unwrap();
        for (i, s) in [(0, &tx), (0, &neighbour), (1, &far)] {
            p.eps[i].attach_mcast(s.qpn, GROUP).unwrap();
            post_recv(&mut p, i, s, 3);
        }
        send_to(
            &mut p,
            &tx,
            to_group(GROUP, MULTICAST_QPN, roce),
            b"not to me",
        );
        assert_eq!(p.wait_cqes(0, neighbour.cq, 1)[0].status, WcStatus::Success);
        assert_eq!(p.wait_cqes(1, far.cq, 1)[0].status, WcStatus::Success);
        p.settle(10_000);
        assert!(p.completions(0, tx.cq).is_empty(), "{roce:?}: its own copy");
        assert_eq!(p.eps[0].stats().rx_mcast_delivered, 1, "{roce:?}");
    }
}

/// Every single-byte corruption of a good multicast packet, and its every
/// truncation, sent to an attached group: no panic, a copy for exactly
/// those still a UD SEND to the multicast QPN, and the QP takes a good
/// packet afterwards.
#[test]
fn corrupted_and_truncated_multicast_packets_are_harmless() {
    let mut p = Pair::new(173);
    let rx = ud_qp(&mut p, 1, QKEY);
    p.eps[1].attach_mcast(rx.qpn, GROUP).unwrap();
    let mut t = craft(Opcode::UD_SEND_ONLY, Psn::new(0), MULTICAST_QPN, 16);
    if let Some(d) = t.deth.as_mut() {
        d.qkey = QKEY;
    }
    let good = emit(&t, &[9; 16]);
    let from = p.addrs[0];
    let now = p.now;
    let mut variants: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
    for i in 0..good.len() {
        for x in [0x01, 0x80, 0xff] {
            let mut v = good.clone();
            v[i] ^= x;
            variants.push(v);
        }
    }
    for v in &variants {
        p.eps[1].handle_multicast(now, from, GROUP, crate::Ecn::NotEct, v);
    }
    // Copies reach the QP exactly for the variants that are still a UD
    // SEND to the multicast QPN in the default partition (no receive is
    // posted: each is then dropped and counted there).
    let still_mcast = |v: &Vec<u8>| {
        ferroce_wire::TransportPacket::new_checked(&v[..]).is_ok_and(|t| {
            let info = t.info();
            t.bth().dest_qp() == MULTICAST_QPN
                && info.transport == ferroce_wire::Transport::Ud
                && !info.response
                && t.deth().is_some()
                && crate::qp::pkey_matches(t.bth().pkey(), 0xffff)
        })
    };
    let expected = variants.iter().filter(|v| still_mcast(v)).count() as u64;
    let s = p.eps[1].stats();
    assert!(
        expected > 0 && expected < variants.len() as u64,
        "{expected}"
    );
    assert_eq!(s.rx_mcast_delivered, expected);
    assert!(p.completions(1, rx.cq).is_empty());
    assert_eq!(p.eps[1].qp_state(rx.qpn).unwrap(), QpState::Rts);
    post_recv(&mut p, 1, &rx, 1);
    p.eps[1].handle_multicast(now, from, GROUP, crate::Ecn::NotEct, &good);
    let c = p.completions(1, rx.cq);
    assert_eq!(
        (c.len(), c[0].status, c[0].byte_len),
        (1, WcStatus::Success, 56)
    );
}
