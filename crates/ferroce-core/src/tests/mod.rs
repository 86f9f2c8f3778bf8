//! Scenario tests on the simulated network (see `util`).
//!
//! | file | what |
//! |---|---|
//! | this one | the basic operations, and a random mix under loss |
//! | `ops` | SEND/WRITE with immediate, SEND with invalidate, inline, (un)signaled, PSN wrap, long messages |
//! | `rules` | fences, initiator depth, UD Q_Keys, UC gaps, RETH length |
//! | `errors` | receive too small, RNR, remote access errors, misaligned and duplicate atomics |
//! | `local` | local protection errors (bad lkeys, PDs, ranges, a region deregistered after the post), at post or as completions |
//! | `states` | SQD drain, modify to Err with work outstanding, recovery through Reset |
//! | `calls` | refused verbs calls and their messages |
//! | `hostile` | stray packets: dropped, counted, harmless |
//! | `conform` | IBA rules where rxe or an older ferroce differed: zero-length RDMA, P_Keys, resumed READs, duplicate ACKs |
//! | `resources` | the responder resources: which duplicate READs and atomics are answered, forged READs under load |
//! | `fuzz` | random packets into a connected pair: no panic, no harm |
//! | `gsi` | QP1: MADs between endpoints, drops by cause, the queue bound, QPN 1 reserved, rxe's CM MADs from rping.pcap |
//! | `soak` | a long WRITE stream through loss, reordering and duplication (FERROCE_SOAK_BYTES) |
//! | `many` | many QPs at once: the endpoint's cap on packets in flight, fair turns |
//! | `interop` | sequences met against the kernel's rxe, replayed |
//! | `srq` | shared receive queues: QPs sharing one, RNR, the limit event, errors, UD and UC, refused calls |
//! | `xrc` | XRC: one initiator to several SRQs, targets sharing a domain, the SRQ's PD, RNR, faults, the packets on the wire |
//! | `xrc_hostile` | XRC's refusals: XRCETHs naming a wrong SRQ, mixed transports, refused calls |
//! | `xrc_fuzz` | random XRC packets into an initiator and a target: no panic, no harm |
//! | `mcast` | UD multicast: attach/detach and refusals, every attached QP's copy, Q_Keys, RoCE v1 and IPv6 groups, hostile packets |
//! | `log` | the `tracing` events of errors, RNR waits, losses, timeouts and drops |
//! | `posters` | posting without the engine's lock: the same refusals, order with locked posts, a posting thread, room, Reset and destroy races |
//! | `shared` | region memory shared with the application: the engine holds nothing back while it reads, writes or scans the same bytes |

mod atomic_write;
mod calls;
mod conform;
mod dcqcn;
mod ecn;
mod errors;
mod flush;
mod fuzz;
mod gsi;
mod hostile;
mod interop;
mod local;
mod log;
mod many;
mod mcast;
mod ops;
mod posters;
mod rd;
mod rd_fuzz;
mod resources;
mod roce_v1;
mod rules;
mod shared;
mod soak;
mod srq;
mod states;
mod ud_grh;
mod util;
mod windows;
mod xrc;
mod xrc_fuzz;
mod xrc_hostile;

use util::{Faults, Pair, connect, pattern, recv_wr, rmem, send_wr, sge};

use crate::verbs::{Mtu, QpState, QpType, SendOp, UdDest, WcOpcode, WcStatus};

fn write_mr(p: &mut Pair, i: usize, lkey: u32, off: usize, data: &[u8]) {
    p.eps[i].write_mr(lkey, |b| b[off..off + data.len()].copy_from_slice(data));
}

fn read_mr(p: &Pair, i: usize, lkey: u32, off: usize, len: usize) -> Vec<u8> {
    p.eps[i].mr_bytes(lkey).unwrap()[off..off + len].to_vec()
}

#[test]
fn rc_send_single_and_multi_packet() {
    let mut p = Pair::new(1);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    for (n, len) in [1usize, 1024, 3000, 4096, 0].into_iter().enumerate() {
        let data = pattern(len, n as u8);
        write_mr(&mut p, 0, a.mr.lkey, 0, &data);
        p.eps[1]
            .post_recv(b.qpn, recv_wr(n as u64, &sge(&b, 8192, 8192)))
            .unwrap();
        p.eps[0]
            .post_send(
                a.qpn,
                send_wr(100 + n as u64, SendOp::Send, &sge(&a, 0, len as u32)),
            )
            .unwrap();
        let mut got = (None, None);
        p.drive_until(10_000, |p| {
            for wc in p.completions(0, a.cq) {
                got.0 = Some(wc);
            }
            for wc in p.completions(1, b.cq) {
                got.1 = Some(wc);
            }
            got.0.is_some() && got.1.is_some()
        });
        let (s, r) = (got.0.unwrap(), got.1.unwrap());
        assert_eq!(
            (s.wr_id, s.status, s.opcode),
            (100 + n as u64, WcStatus::Success, WcOpcode::Send)
        );
        assert_eq!(
            (r.wr_id, r.status, r.byte_len),
            (n as u64, WcStatus::Success, len as u32)
        );
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 8192, len), data, "len {len}");
    }
}

#[test]
fn rc_write_read_and_atomics() {
    let mut p = Pair::new(2);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    let data = pattern(5000, 7);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let remote = b.mr.addr;
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(
                1,
                SendOp::Write {
                    remote: rmem(remote + 100, b.mr.rkey),
                },
                &sge(&a, 0, 5000),
            ),
        )
        .unwrap();
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(
                2,
                SendOp::Read {
                    remote: rmem(remote + 100, b.mr.rkey),
                },
                &sge(&a, 10_000, 5000),
            ),
        )
        .unwrap();
    write_mr(&mut p, 1, b.mr.lkey, 16, &41u64.to_ne_bytes());
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(
                3,
                SendOp::FetchAdd {
                    remote: rmem(remote + 16, b.mr.rkey),
                    add: 1,
                },
                &sge(&a, 20_000, 8),
            ),
        )
        .unwrap();
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(
                4,
                SendOp::CompareSwap {
                    remote: rmem(remote + 16, b.mr.rkey),
                    compare: 42,
                    swap: 7,
                },
                &sge(&a, 20_008, 8),
            ),
        )
        .unwrap();
    let mut wcs = Vec::new();
    p.drive_until(10_000, |p| {
        wcs.extend(p.completions(0, a.cq));
        wcs.len() == 4
    });
    let ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        ids,
        (1..=4).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>()
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 100, 5000), data);
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 10_000, 5000), data);
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 20_000, 8), 41u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 20_008, 8), 42u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 16, 8), 7u64.to_ne_bytes());
}

#[test]
fn rnr_then_receive_posted_completes() {
    let mut p = Pair::new(3);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.eps[0]
        .post_send(a.qpn, send_wr(9, SendOp::Send, &sge(&a, 0, 100)))
        .unwrap();
    // Let the RNR NAKs flow for a while without a receive posted.
    p.drive_until(200, |p| p.eps[1].stats().rnr_naks_sent >= 2);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 4096)))
        .unwrap();
    let mut done = false;
    p.drive_until(10_000, |p| {
        done |= p
            .completions(0, a.cq)
            .iter()
            .any(|w| w.wr_id == 9 && w.status == WcStatus::Success);
        done
    });
}

#[test]
fn bad_rkey_is_remote_access_error_and_flushes() {
    let mut p = Pair::new(4);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let bad = b.mr.rkey ^ 0x5a5a;
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(
                1,
                SendOp::Write {
                    remote: rmem(b.mr.addr, bad),
                },
                &sge(&a, 0, 64),
            ),
        )
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, 0, 64)))
        .unwrap();
    let mut wcs = Vec::new();
    p.drive_until(10_000, |p| {
        wcs.extend(p.completions(0, a.cq));
        wcs.len() == 2
    });
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::RemAccessErr));
    assert_eq!((wcs[1].wr_id, wcs[1].status), (2, WcStatus::WrFlushErr));
    assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Err);
    // Out of bounds and without permission are refused the same way.
    let mut p = Pair::new(5);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(
                1,
                SendOp::Read {
                    remote: rmem(b.mr.addr + 4000, b.mr.rkey),
                },
                &sge(&a, 0, 200),
            ),
        )
        .unwrap();
    let mut wcs = Vec::new();
    p.drive_until(10_000, |p| {
        wcs.extend(p.completions(0, a.cq));
        !wcs.is_empty()
    });
    assert_eq!(wcs[0].status, WcStatus::RemAccessErr);
}

#[test]
fn retry_exhausted_when_the_network_drops_everything() {
    let mut p = Pair::new(6);
    let [a, _b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.faults.loss = 1.0;
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 64)))
        .unwrap();
    let mut wcs = Vec::new();
    p.drive_until(100_000, |p| {
        wcs.extend(p.completions(0, a.cq));
        !wcs.is_empty()
    });
    assert_eq!(wcs[0].status, WcStatus::RetryExcErr);
    // 1 + retry_cnt (7) transmissions, each after a timeout of 4.096 us x 2^8.
    assert_eq!(p.eps[0].stats().tx_packets, 8);
    assert!(p.now.as_nanos() >= 8 * 4096 * 256);
}

#[test]
fn uc_and_ud_deliver() {
    let mut p = Pair::new(7);
    let [a, b] = connect(&mut p, QpType::Uc, 8192, Mtu::Mtu1024);
    let data = pattern(3000, 3);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(5, &sge(&b, 4096, 4096)))
        .unwrap();
    p.eps[0]
        .post_send(
            a.qpn,
            send_wr(6, SendOp::SendWithImm(0xabcd), &sge(&a, 0, 3000)),
        )
        .unwrap();
    let mut r = None;
    p.drive_until(1000, |p| {
        r = r.or(p.completions(1, b.cq).pop());
        r.is_some()
    });
    let r = r.unwrap();
    assert_eq!(
        (r.status, r.byte_len, r.imm),
        (WcStatus::Success, 3000, Some(0xabcd))
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 4096, 3000), data);

    let mut p = Pair::new(8);
    let [a, b] = connect(&mut p, QpType::Ud, 8192, Mtu::Mtu1024);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data[..512]);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(5, &sge(&b, 0, 4096)))
        .unwrap();
    let sg = sge(&a, 0, 512);
    let mut wr = send_wr(6, SendOp::Send, &sg);
    let path = crate::verbs::Path {
        remote: p.addrs[1],
        udp_src_port: 0xd000,
        traffic_class: 0,
        hop_limit: 64,
        roce: crate::verbs::RoceMode::V2,
    };
    wr.ud = Some(UdDest {
        path,
        qpn: b.qpn,
        qkey: 0x1111_1111,
    });
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let mut r = None;
    p.drive_until(1000, |p| {
        r = r.or(p.completions(1, b.cq).pop());
        r.is_some()
    });
    let r = r.unwrap();
    assert_eq!(
        (r.status, r.byte_len, r.src_qp),
        (WcStatus::Success, 552, a.qpn)
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 512), &data[..512]);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 32, 4), [127, 0, 0, 1]);
}

/// One operation of a random mix.
#[derive(Debug, Clone, Copy)]
enum Op {
    Send(usize),
    Write(usize),
    Read(usize),
    FetchAdd(u64),
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0usize..5000).prop_map(Op::Send),
        (1usize..5000).prop_map(Op::Write),
        (1usize..5000).prop_map(Op::Read),
        (1u64..1000).prop_map(Op::FetchAdd),
    ]
}

/// Runs `ops` from endpoint 0 to endpoint 1 under `faults`; checks every
/// byte and that each work request completes once, successfully, in order.
fn run_mix(seed: u64, faults: Faults, ops: &[Op]) {
    const SLOT: usize = 5000;
    let mut p = Pair::new(seed);
    let n = ops.len();
    let [a, b] = connect(&mut p, QpType::Rc, SLOT * (2 * n + 2), Mtu::Mtu1024);
    p.faults = faults;
    let counter = (SLOT * 2 * n) as u64; // 8-aligned
    let mut expect_counter = 0u64;
    let mut recv_ids = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let slot = (i * SLOT) as u64;
        let src = pattern(SLOT, i as u8);
        write_mr(&mut p, 0, a.mr.lkey, slot as usize, &src);
        write_mr(
            &mut p,
            1,
            b.mr.lkey,
            slot as usize,
            &pattern(SLOT, 100 + i as u8),
        );
        let local_len = match *op {
            Op::Send(len) | Op::Write(len) | Op::Read(len) => len as u32,
            Op::FetchAdd(_) => 8,
        };
        let sg = sge(&a, slot, local_len);
        let wr = match *op {
            Op::Send(_) => {
                p.eps[1]
                    .post_recv(
                        b.qpn,
                        recv_wr(i as u64, &sge(&b, (n * SLOT) as u64 + slot, SLOT as u32)),
                    )
                    .unwrap();
                recv_ids.push(i as u64);
                send_wr(i as u64, SendOp::Send, &sg)
            }
            Op::Write(_) => send_wr(
                i as u64,
                SendOp::Write {
                    remote: rmem(b.mr.addr + slot, b.mr.rkey),
                },
                &sg,
            ),
            Op::Read(_) => send_wr(
                i as u64,
                SendOp::Read {
                    remote: rmem(b.mr.addr + slot, b.mr.rkey),
                },
                &sg,
            ),
            Op::FetchAdd(add) => {
                expect_counter += add;
                send_wr(
                    i as u64,
                    SendOp::FetchAdd {
                        remote: rmem(b.mr.addr + counter, b.mr.rkey),
                        add,
                    },
                    &sg,
                )
            }
        };
        p.eps[0].post_send(a.qpn, wr).unwrap();
    }
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    p.drive_until(2_000_000, |p| {
        sends.extend(p.completions(0, a.cq));
        recvs.extend(p.completions(1, b.cq));
        sends.len() >= n && recvs.len() >= recv_ids.len()
    });
    let got: Vec<_> = sends.iter().map(|w| (w.wr_id, w.status)).collect();
    let want: Vec<_> = (0..n as u64).map(|i| (i, WcStatus::Success)).collect();
    assert_eq!(got, want, "send completions");
    let got: Vec<_> = recvs.iter().map(|w| (w.wr_id, w.status)).collect();
    let want: Vec<_> = recv_ids.iter().map(|&i| (i, WcStatus::Success)).collect();
    assert_eq!(got, want, "receive completions");
    for (i, op) in ops.iter().enumerate() {
        let slot = i * SLOT;
        let src = pattern(SLOT, i as u8);
        let remote = pattern(SLOT, 100 + i as u8);
        match *op {
            Op::Send(len) => assert_eq!(
                read_mr(&p, 1, b.mr.lkey, n * SLOT + slot, len),
                src[..len],
                "send {i}"
            ),
            Op::Write(len) => assert_eq!(
                read_mr(&p, 1, b.mr.lkey, slot, len),
                src[..len],
                "write {i}"
            ),
            Op::Read(len) => assert_eq!(
                read_mr(&p, 0, a.mr.lkey, slot, len),
                remote[..len],
                "read {i}"
            ),
            Op::FetchAdd(_) => {}
        }
    }
    let c = read_mr(&p, 1, b.mr.lkey, counter as usize, 8);
    assert_eq!(
        u64::from_ne_bytes(c.try_into().unwrap()),
        expect_counter,
        "atomics executed once each"
    );
}

#[test]
fn clean_network_mix() {
    let ops = [
        Op::Send(10),
        Op::Write(3000),
        Op::Read(4500),
        Op::FetchAdd(5),
        Op::Send(4999),
        Op::Read(1),
    ];
    run_mix(11, Faults::default(), &ops);
}

proptest::proptest! {
    // FERROCE_SOAK_CASES raises the count for a soak run (default 48).
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("FERROCE_SOAK_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
    ))]

    #[test]
    fn random_mix_survives_loss_reorder_duplication(
        seed in proptest::prelude::any::<u64>(),
        ops in proptest::collection::vec(op_strategy(), 1..24),
        loss in 0.0f64..0.1,
        duplicate in 0.0f64..0.1,
        reorder in 0.0f64..0.3,
        ecn_mark in 0.0f64..0.3,
    ) {
        run_mix(seed, Faults { loss, duplicate, reorder, corrupt: 0.0, ecn_mark, ce_mark: 0.0 }, &ops);
    }
}
