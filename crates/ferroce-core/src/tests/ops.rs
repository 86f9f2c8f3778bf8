//! Every operation the engine offers, end to end on the simulated network:
//! SEND with immediate and with invalidate, RDMA WRITE with immediate,
//! inline data, signaled and unsignaled completions, messages across the
//! PSN wrap and messages longer than the send window.

use super::util::{
    Faults, Opts, Pair, connect, connect_with, pattern, recv_wr, rmem, send_wr, sge,
};
use super::{read_mr, write_mr};
use crate::verbs::{
    INLINE_SGES, Mtu, Path, QpState, QpType, QueuedRecv, QueuedSend, SendOp, SgList, Sge, UdDest,
    WcOpcode, WcStatus,
};
use ferroce_wire::Psn;

#[test]
fn send_with_immediate_delivers_the_imm_on_rc_uc_and_ud() {
    for (seed, qp_type, len) in [
        (20, QpType::Rc, 0usize),
        (21, QpType::Rc, 900),
        (22, QpType::Rc, 2500), // FIRST, MIDDLE, LAST_WITH_IMMEDIATE
        (23, QpType::Uc, 2500),
        (24, QpType::Ud, 900),
    ] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, qp_type, 8192, Mtu::Mtu1024);
        let data = pattern(len, 9);
        write_mr(&mut p, 0, a.mr.lkey, 0, &data);
        p.eps[1]
            .post_recv(b.qpn, recv_wr(3, &sge(&b, 0, 4096)))
            .unwrap();
        let sg = sge(&a, 0, len as u32);
        let mut wr = send_wr(4, SendOp::SendWithImm(0xdead_beef), &sg);
        if qp_type == QpType::Ud {
            wr.ud = Some(ud_dest(&p, b.qpn));
        }
        p.eps[0].post_send(a.qpn, wr).unwrap();
        let r = p.wait_cqes(1, b.cq, 1)[0];
        let s = p.wait_cqes(0, a.cq, 1)[0];
        let grh = if qp_type == QpType::Ud { 40 } else { 0 };
        assert_eq!(
            (r.wr_id, r.status, r.opcode, r.imm, r.byte_len),
            (
                3,
                WcStatus::Success,
                WcOpcode::Recv,
                Some(0xdead_beef),
                (grh + len) as u32
            ),
            "{qp_type:?} {len}"
        );
        assert_eq!(
            (s.wr_id, s.status, s.opcode),
            (4, WcStatus::Success, WcOpcode::Send)
        );
        assert_eq!(read_mr(&p, 1, b.mr.lkey, grh, len), data);
    }
}

pub(crate) fn ud_dest(p: &Pair, qpn: u32) -> UdDest {
    UdDest {
        path: Path {
            remote: p.addrs[1],
            udp_src_port: 0xd000,
            traffic_class: 0,
            hop_limit: 64,
            roce: crate::verbs::RoceMode::V2,
        },
        qpn,
        qkey: 0x1111_1111,
    }
}

fn write_to(b_addr: u64, rkey: u32) -> SendOp {
    SendOp::Write {
        remote: rmem(b_addr, rkey),
    }
}

#[test]
fn send_with_invalidate_revokes_the_rkey() {
    for len in [100u32, 3000] {
        let mut p = Pair::new(30 + u64::from(len));
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(4096, 1));
        // The rkey works before it is invalidated...
        p.eps[0]
            .post_send(
                a.qpn,
                send_wr(1, write_to(b.mr.addr + 4096, b.mr.rkey), &sge(&a, 0, 64)),
            )
            .unwrap();
        p.eps[1]
            .post_recv(b.qpn, recv_wr(10, &sge(&b, 0, 4096)))
            .unwrap();
        p.eps[0]
            .post_send(
                a.qpn,
                send_wr(2, SendOp::SendWithInv(b.mr.rkey), &sge(&a, 0, len)),
            )
            .unwrap();
        let r = p.wait_cqes(1, b.cq, 1)[0];
        assert_eq!(
            (
                r.wr_id,
                r.status,
                r.opcode,
                r.byte_len,
                r.invalidated_rkey,
                r.imm
            ),
            (
                10,
                WcStatus::Success,
                WcOpcode::Recv,
                len,
                Some(b.mr.rkey),
                None
            )
        );
        let s = p.wait_cqes(0, a.cq, 2);
        let ids: Vec<_> = s.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(ids, [(1, WcStatus::Success), (2, WcStatus::Success)]);
        assert_eq!(
            read_mr(&p, 1, b.mr.lkey, 0, len as usize),
            pattern(4096, 1)[..len as usize]
        );
        // ...and refuses remote access afterwards.
        let before = read_mr(&p, 1, b.mr.lkey, 0, 8192);
        p.eps[0]
            .post_send(
                a.qpn,
                send_wr(3, write_to(b.mr.addr, b.mr.rkey), &sge(&a, 0, 64)),
            )
            .unwrap();
        let s = p.wait_cqes(0, a.cq, 1)[0];
        assert_eq!((s.wr_id, s.status), (3, WcStatus::RemAccessErr));
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8192), before);
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
        assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Err);
    }
}

#[test]
fn send_with_invalidate_of_an_unknown_rkey_fails_both_sides() {
    let mut p = Pair::new(33);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(10, &sge(&b, 0, 4096)))
        .unwrap();
    let bogus = b.mr.rkey ^ 0x0101_0101;
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(2, SendOp::SendWithInv(bogus), &sge(&a, 0, 64)),
        )
        .unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.wr_id, r.status), (10, WcStatus::LocProtErr));
    let s = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!((s.wr_id, s.status), (2, WcStatus::RemInvReqErr));
}

#[test]
fn write_with_immediate_consumes_a_receive() {
    let mut p = Pair::new(40);
    let [a, b] = connect(&mut p, QpType::Rc, 16384, Mtu::Mtu1024);
    let data = pattern(3000, 4);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    // The receive's buffer is not written: the data goes where the RETH says.
    p.eps[1]
        .post_recv(b.qpn, recv_wr(7, &sge(&b, 0, 64)))
        .unwrap();
    let op = |imm| SendOp::WriteWithImm {
        remote: rmem(b.mr.addr + 8192, b.mr.rkey),
        imm,
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, op(0x1234), &sge(&a, 0, 3000)))
        .unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    // byte_len is the length of the WRITE (rxe: qp->resp.length).
    assert_eq!(
        (r.wr_id, r.status, r.opcode, r.imm, r.byte_len),
        (
            7,
            WcStatus::Success,
            WcOpcode::RecvRdmaWithImm,
            Some(0x1234),
            3000
        )
    );
    let s = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!(
        (s.wr_id, s.status, s.opcode),
        (1, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 8192, 3000), data);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 64), [0; 64]);

    // Without a receive posted, it waits (RNR) until one is.
    p.eps[0]
        .post_send(a.qpn, send_wr(2, op(0x5678), &sge(&a, 0, 1)))
        .unwrap();
    p.drive_until(10_000, |p| p.eps[1].stats().rnr_naks_sent >= 3);
    assert!(p.completions(0, a.cq).is_empty());
    p.eps[1]
        .post_recv(b.qpn, recv_wr(8, &sge(&b, 0, 64)))
        .unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.wr_id, r.imm, r.byte_len), (8, Some(0x5678), 1));
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
}

#[test]
fn inline_data_is_sent_without_a_local_region() {
    let mut p = Pair::new(50);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(1500, 5); // two packets at this MTU
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 4096)))
        .unwrap();
    let mut wr = send_wr(1, SendOp::SendWithImm(9), &[]);
    wr.inline = Some(&data);
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let mut wr = send_wr(2, write_to(b.mr.addr + 4096, b.mr.rkey), &[]);
    wr.inline = Some(&data[..100]);
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let s = p.wait_cqes(0, a.cq, 2);
    assert!(s.iter().all(|w| w.status == WcStatus::Success), "{s:?}");
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.byte_len, r.imm), (1500, Some(9)));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 1500), data);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 4096, 100), data[..100]);

    let mut p = Pair::new(51);
    let [a, b] = connect(&mut p, QpType::Ud, 8192, Mtu::Mtu1024);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 4096)))
        .unwrap();
    let mut wr = send_wr(1, SendOp::Send, &[]);
    wr.inline = Some(&data[..700]);
    wr.ud = Some(ud_dest(&p, b.qpn));
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 740));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 700), data[..700]);
}

/// Posts a mix in which only some WRs are signaled; returns the send
/// completions' ids once every WR is done, checking the data moved.
/// A queued request keeps up to [`INLINE_SGES`] elements in place (no
/// heap allocation per post), a longer list on the heap, both in order.
#[test]
fn short_scatter_lists_are_queued_in_place() {
    let sges: Vec<Sge> = (0..6u32)
        .map(|i| Sge {
            lkey: i,
            offset: u64::from(i) * 100,
            len: i + 1,
        })
        .collect();
    for n in 0..=6 {
        let wr = send_wr(1, SendOp::Send, &sges[..n]);
        let queued = QueuedSend::from(&wr);
        assert_eq!(&*queued.sg, &sges[..n]);
        let in_place = matches!(queued.sg, SgList::Inline { .. });
        assert_eq!(in_place, n <= INLINE_SGES, "{n} elements");
        let recv = QueuedRecv::from(&recv_wr(2, &sges[..n]));
        assert_eq!(&*recv.sg, &sges[..n]);
    }
}

/// Six elements each side (two past the ones a queued request keeps in
/// place): a WRITE gathers them in order, a SEND scatters into six.
#[test]
fn long_scatter_gather_lists_keep_their_order() {
    let mut p = Pair::new(53);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(6 * 300, 7);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    // Pieces of the source taken back to front, so order matters.
    let gather: Vec<_> = (0..6u64)
        .rev()
        .flat_map(|i| sge(&a, i * 300, 300))
        .collect();
    let scatter: Vec<_> = (0..6u64)
        .flat_map(|i| sge(&b, 4096 + i * 500, 300))
        .collect();
    p.eps[1].post_recv(b.qpn, recv_wr(1, &scatter)).unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write_to(b.mr.addr, b.mr.rkey), &gather))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, SendOp::Send, &gather))
        .unwrap();
    let s = p.wait_cqes(0, a.cq, 2);
    assert!(s.iter().all(|w| w.status == WcStatus::Success), "{s:?}");
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 1800));
    let reversed: Vec<u8> = data.chunks(300).rev().flatten().copied().collect();
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 1800), reversed);
    for (i, piece) in reversed.chunks(300).enumerate() {
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 4096 + i * 500, 300), piece);
    }
}

fn signaled_mix(seed: u64, sq_sig_all: bool, faults: Faults) -> Vec<u64> {
    let mut p = Pair::new(seed);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            sq_sig_all,
            ..Opts::new(QpType::Rc, 1 << 16, Mtu::Mtu1024)
        },
    );
    p.faults = faults;
    let src = pattern(4000, 6);
    write_mr(&mut p, 0, a.mr.lkey, 0, &src);
    write_mr(&mut p, 1, b.mr.lkey, 32768, &pattern(4000, 7));
    for id in [1, 6] {
        p.eps[1]
            .post_recv(b.qpn, recv_wr(id, &sge(&b, 8192 * id, 4096)))
            .unwrap();
    }
    let read = SendOp::Read {
        remote: rmem(b.mr.addr + 32768, b.mr.rkey),
    };
    let add = SendOp::FetchAdd {
        remote: rmem(b.mr.addr + 65528, b.mr.rkey),
        add: 3,
    };
    let wrs = [
        (1, true, SendOp::Send, sge(&a, 0, 4000)),
        (
            2,
            false,
            write_to(b.mr.addr + 20000, b.mr.rkey),
            sge(&a, 0, 3000),
        ),
        (3, false, read, sge(&a, 16384, 4000)),
        (4, true, add, sge(&a, 24576, 8)),
        (
            5,
            false,
            write_to(b.mr.addr + 24000, b.mr.rkey),
            sge(&a, 0, 10),
        ),
        (6, false, SendOp::Send, sge(&a, 100, 50)),
        (
            7,
            true,
            write_to(b.mr.addr + 28000, b.mr.rkey),
            sge(&a, 0, 1),
        ),
    ];
    for (id, signaled, op, sg) in wrs {
        let mut wr = send_wr(id, op, &sg);
        wr.signaled = signaled;
        p.eps[0].post_send(a.qpn, wr).unwrap();
    }
    let mut ids = Vec::new();
    let mut recvs = 0;
    // The last WR is signaled: once it completes, so has everything before.
    p.drive_until(1_000_000, |p| {
        for w in p.completions(0, a.cq) {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
            ids.push(w.wr_id);
        }
        recvs += p.completions(1, b.cq).len();
        ids.last() == Some(&7) && recvs == 2
    });
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 8192, 4000), src);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 20000, 3000), src[..3000]);
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 16384, 4000), pattern(4000, 7));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 65528, 8), 3u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 6 * 8192, 50), src[100..150]);
    ids
}

#[test]
fn unsignaled_wrs_give_no_completion_and_the_rest_stay_in_order() {
    assert_eq!(signaled_mix(60, false, Faults::default()), [1, 4, 7]);
    let lossy = Faults {
        loss: 0.1,
        duplicate: 0.1,
        reorder: 0.2,
        corrupt: 0.0,
        ecn_mark: 0.0,
        ce_mark: 0.0,
    };
    for seed in 61..69 {
        assert_eq!(signaled_mix(seed, false, lossy), [1, 4, 7], "seed {seed}");
    }
}

#[test]
fn sq_sig_all_signals_every_wr() {
    assert_eq!(
        signaled_mix(70, true, Faults::default()),
        (1..=7).collect::<Vec<_>>()
    );
}

/// One operation across the PSN wrap: `op` 0 WRITE, 1 READ, 2 SEND, of
/// 8 KiB (eight packets at 1 KiB) starting three PSNs before 0xFFFFFF.
fn across_the_wrap(seed: u64, op: usize, faults: Faults) {
    let mut p = Pair::new(seed);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            psn: 0xff_fffd,
            ..Opts::new(QpType::Rc, 1 << 15, Mtu::Mtu1024)
        },
    );
    p.faults = faults;
    let (src, remote) = (pattern(8192, 11), pattern(8192, 12));
    write_mr(&mut p, 0, a.mr.lkey, 0, &src);
    write_mr(&mut p, 1, b.mr.lkey, 0, &remote);
    let (sg_out, sg_in) = (sge(&a, 0, 8192), sge(&a, 8192, 8192));
    let wr = match op {
        0 => send_wr(1, write_to(b.mr.addr + 8192, b.mr.rkey), &sg_out),
        1 => send_wr(
            1,
            SendOp::Read {
                remote: rmem(b.mr.addr, b.mr.rkey),
            },
            &sg_in,
        ),
        _ => {
            p.eps[1]
                .post_recv(b.qpn, recv_wr(1, &sge(&b, 16384, 8192)))
                .unwrap();
            send_wr(1, SendOp::Send, &sg_out)
        }
    };
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let s = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!(s.status, WcStatus::Success, "op {op} seed {seed}");
    let moved = match op {
        0 => read_mr(&p, 1, b.mr.lkey, 8192, 8192) == src,
        1 => read_mr(&p, 0, a.mr.lkey, 8192, 8192) == remote,
        _ => read_mr(&p, 1, b.mr.lkey, 16384, 8192) == src,
    };
    assert!(moved, "op {op} seed {seed}: data differs");
    // The message did cross the wrap: PSNs 0xFFFFFD ..= 0x000004.
    assert_eq!(p.eps[0].qps[&a.qpn].req.next_psn, Psn::new(5));
    assert_eq!(p.eps[1].qps[&b.qpn].resp.epsn, Psn::new(5));
}

#[test]
fn multi_packet_messages_cross_the_psn_wrap() {
    let lossy = Faults {
        loss: 0.15,
        duplicate: 0.1,
        reorder: 0.2,
        corrupt: 0.0,
        ecn_mark: 0.0,
        ce_mark: 0.0,
    };
    for op in 0..3 {
        across_the_wrap(80, op, Faults::default());
        for seed in 81..89 {
            across_the_wrap(seed, op, lossy);
        }
    }
}

/// Messages of more packets than the send window (512 PSNs): the requester
/// must get acknowledgements inside the message to keep sending.
#[test]
fn messages_longer_than_the_send_window_complete() {
    const LEN: usize = 1 << 20; // 1024 packets at 1 KiB
    for (seed, loss) in [(90, 0.0), (91, 0.02)] {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, QpType::Rc, 2 * LEN, Mtu::Mtu1024);
        p.faults.loss = loss;
        let src = pattern(LEN, 13);
        write_mr(&mut p, 0, a.mr.lkey, 0, &src);
        p.eps[1]
            .post_recv(b.qpn, recv_wr(1, &sge(&b, LEN as u64, LEN as u32)))
            .unwrap();
        p.eps[0]
            .post_send(
                a.qpn,
                send_wr(1, write_to(b.mr.addr, b.mr.rkey), &sge(&a, 0, LEN as u32)),
            )
            .unwrap();
        p.eps[0]
            .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, 0, LEN as u32)))
            .unwrap();
        let s = p.wait_cqes(0, a.cq, 2);
        let got: Vec<_> = s.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(
            got,
            [(1, WcStatus::Success), (2, WcStatus::Success)],
            "loss {loss}"
        );
        assert_eq!(p.wait_cqes(1, b.cq, 1)[0].byte_len, LEN as u32);
        assert!(
            read_mr(&p, 1, b.mr.lkey, 0, LEN) == src,
            "WRITE data differs"
        );
        assert!(
            read_mr(&p, 1, b.mr.lkey, LEN, LEN) == src,
            "SEND data differs"
        );
    }
}

/// A READ of many response packets under loss: each gap re-requests the
/// rest, and the transfer must still finish in reasonable work.
#[test]
fn long_read_under_loss_completes() {
    const LEN: usize = 1 << 19;
    for seed in 95..98 {
        let mut p = Pair::new(seed);
        let [a, b] = connect(&mut p, QpType::Rc, 2 * LEN, Mtu::Mtu1024);
        p.faults.loss = 0.02;
        let remote = pattern(LEN, 14);
        write_mr(&mut p, 1, b.mr.lkey, 0, &remote);
        let read = SendOp::Read {
            remote: rmem(b.mr.addr, b.mr.rkey),
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(1, read, &sge(&a, 0, LEN as u32)))
            .unwrap();
        let s = p.wait_cqes(0, a.cq, 1)[0];
        assert_eq!(s.status, WcStatus::Success);
        assert!(
            read_mr(&p, 0, a.mr.lkey, 0, LEN) == remote,
            "READ data differs"
        );
        // 512 response packets. Go-back-N resends the rest of the READ
        // after each loss, about 512 + 512^2 x 2% / 2 = 3100 packets; each
        // response after a gap asking again cost some 195,000.
        let sent = p.eps[1].stats().tx_packets;
        assert!(
            sent < 16 * 512,
            "seed {seed}: {sent} packets for a 512-packet READ"
        );
    }
}

/// A UD message may be as large as the port's active MTU (`set_port_mtu`),
/// as rxe's: 4096 bytes go through on a 4096-byte port, one more is
/// refused naming the limit.
#[test]
fn ud_messages_take_the_ports_mtu() {
    let mut p = Pair::new(240);
    for e in &mut p.eps {
        e.set_port_mtu(Mtu::Mtu4096);
    }
    let [a, b] = connect(&mut p, QpType::Ud, 16384, Mtu::Mtu1024);
    let data = pattern(4096, 3);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 8192)))
        .unwrap();
    let sg = sge(&a, 0, 4096);
    let mut wr = send_wr(2, SendOp::Send, &sg);
    wr.ud = Some(ud_dest(&p, b.qpn));
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 40 + 4096));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 4096), data);
    let sg = sge(&a, 0, 4097);
    let mut wr = send_wr(3, SendOp::Send, &sg);
    wr.ud = Some(ud_dest(&p, b.qpn));
    assert_eq!(
        p.eps[0].post_send(a.qpn, wr),
        Err(crate::verbs::VerbsError::TooLong {
            len: 4097,
            max: 4096
        })
    );
}
