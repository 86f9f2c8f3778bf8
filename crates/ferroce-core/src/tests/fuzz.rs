//! Random transport packets fed into a connected pair of endpoints: they
//! never panic the engine, never change registered memory or complete
//! anything unless they carry the expected PSN, and never spoil a later
//! clean transfer (or, when they do hit the expected PSN, other QPs).

use std::net::IpAddr;

use ferroce_wire::aeth::Syndrome;
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, Psn, Transport};
use proptest::prelude::*;

use super::hostile::STRANGER;
use super::util::{Pair, Side, connect, craft, emit, pattern, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::verbs::{Mtu, QpState, QpType, SendOp, WcStatus};

/// One random packet for the proptest below.
#[derive(Debug, Clone)]
enum Junk {
    Bytes { to: usize, data: Vec<u8> },
    Packet(Fields),
}

#[derive(Debug, Clone)]
struct Fields {
    to: usize,
    real_dest: bool,
    stranger: bool,
    op: usize,
    /// Added to the target's expected PSN: 0 (executed) only with `any_psn`.
    psn_off: u32,
    len: usize,
    real_key: bool,
    va_off: u64,
    dma_len: u32,
    syndrome: u8,
    words: (u32, u64, u64),
    flags: (bool, bool),
    /// A byte to flip (outside the PSN) and how.
    flip: Option<(usize, u8)>,
}

/// Random packets; `any_psn` lets them hit the expected PSN (and so be
/// executed), else they never do.
fn junk(any_psn: bool) -> impl Strategy<Value = Junk> {
    let psn_off = if any_psn {
        prop_oneof![1 => 0..3u32, 1 => 1..Psn::MASK + 1].boxed()
    } else {
        (1..Psn::MASK + 1).boxed()
    };
    let fields = (
        (
            0..2usize,
            prop::bool::weighted(0.8),
            prop::bool::weighted(0.2),
            any::<usize>(),
        ),
        (psn_off, 0..2100usize, any::<bool>(), any::<u64>()),
        (
            any::<u32>(),
            any::<u8>(),
            (any::<u32>(), any::<u64>(), any::<u64>()),
        ),
        (
            (any::<bool>(), any::<bool>()),
            prop::option::weighted(0.2, (any::<usize>(), 1..=255u8)),
        ),
    )
        .prop_map(
            |(
                (to, real_dest, stranger, op),
                (psn_off, len, real_key, va_off),
                (dma_len, syndrome, words),
                (flags, flip),
            )| {
                Junk::Packet(Fields {
                    to,
                    real_dest,
                    stranger,
                    op,
                    psn_off,
                    len,
                    real_key,
                    va_off,
                    dma_len,
                    syndrome,
                    words,
                    flags,
                    flip,
                })
            },
        );
    prop_oneof![
        1 => (0..2usize, prop::collection::vec(any::<u8>(), 0..80))
            .prop_map(|(to, data)| Junk::Bytes { to, data }),
        6 => fields,
    ]
}

/// The bytes of `j` as sent to `sides[to]`, and where from.
fn build(p: &Pair, sides: &[Side; 2], j: &Junk) -> (usize, IpAddr, Vec<u8>) {
    let f = match j {
        Junk::Bytes { to, data } => return (*to, p.addrs[1 - to], data.clone()),
        Junk::Packet(f) => f,
    };
    // Three times in four an RC opcode, which reaches the RC engine.
    let rc = f.op % 4 != 0;
    let ops: Vec<Opcode> = Opcode::all()
        .filter(|o| !rc || o.info().is_some_and(|i| i.transport == Transport::Rc))
        .collect();
    let op = ops[f.op / 4 % ops.len()];
    let target = &sides[f.to];
    let epsn = p.eps[f.to].qps[&target.qpn].resp.epsn;
    let dest = if f.real_dest {
        target.qpn
    } else {
        f.words.0 & Psn::MASK
    };
    let len = if op.info().is_some_and(|i| i.payload) {
        f.len
    } else {
        0
    };
    let mut t = craft(op, epsn + f.psn_off, dest, len);
    let (mr, w) = (&target.mr, f.words);
    let key = if f.real_key { mr.rkey } else { w.0 };
    let va = if f.real_key {
        mr.addr + f.va_off % mr.len as u64
    } else {
        f.va_off
    };
    if let Some(r) = &mut t.reth {
        *r = RethRepr {
            va,
            rkey: key,
            dma_len: f.dma_len % (2 * mr.len as u32),
        };
    }
    if let Some(x) = &mut t.atomic_eth {
        (x.va, x.rkey, x.swap_add, x.compare) = (va & !7, key, w.1, w.2);
    }
    if let Some(x) = &mut t.aeth {
        x.syndrome = Syndrome::from_byte(f.syndrome);
        x.msn = w.0 & 0xff_ffff;
    }
    if let Some(x) = &mut t.deth {
        x.qkey = if f.flags.0 { 0x1111_1111 } else { w.0 };
    }
    t.ieth = t.ieth.map(|_| key);
    t.imm = t.imm.map(|_| w.0);
    t.atomic_ack = t.atomic_ack.map(|_| w.1);
    (t.bth.ack_req, t.bth.solicited) = f.flags;
    let mut data = emit(&t, &pattern(len, w.0 as u8));
    if let Some((at, x)) = f.flip {
        let at = at % data.len();
        if !(9..12).contains(&at) {
            data[at] ^= x;
        }
    }
    let from = if f.stranger {
        STRANGER
    } else {
        p.addrs[1 - f.to]
    };
    (f.to, from, data)
}

/// A clean exchange in both directions: WRITE, SEND, READ, FETCH_ADD from 0
/// to 1 and a SEND from 1 to 0; checks every byte. `round` keeps the data
/// of each call distinct.
fn clean_exchange(p: &mut Pair, [a, b]: [Side; 2], round: u8) {
    const N: usize = 3000;
    let src = pattern(N, round);
    write_mr(p, 0, a.mr.lkey, 0, &src);
    write_mr(p, 1, b.mr.lkey, 0, &pattern(N, round ^ 0x80));
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 8192, 4096)))
        .unwrap();
    p.eps[0]
        .post_recv(a.qpn, recv_wr(2, &sge(&a, 8192, 4096)))
        .unwrap();
    let (addr, rkey) = (b.mr.addr, b.mr.rkey);
    let ops = [
        (
            SendOp::Write {
                remote: rmem(addr + 4096, rkey),
            },
            sge(&a, 0, N as u32),
        ),
        (SendOp::Send, sge(&a, 0, N as u32)),
        (
            SendOp::Read {
                remote: rmem(addr, rkey),
            },
            sge(&a, 4096, N as u32),
        ),
        (
            SendOp::FetchAdd {
                remote: rmem(addr + 16376, rkey),
                add: 1,
            },
            sge(&a, 16376, 8),
        ),
    ];
    for (i, (op, sg)) in ops.into_iter().enumerate() {
        p.eps[0]
            .post_send(a.qpn, send_wr(i as u64, op, &sg))
            .unwrap();
    }
    p.eps[1]
        .post_send(b.qpn, send_wr(9, SendOp::Send, &sge(&b, 0, 100)))
        .unwrap();
    let ok = |w: &crate::verbs::WorkCompletion| w.status == WcStatus::Success;
    let wa = p.wait_cqes(0, a.cq, 5);
    let wb = p.wait_cqes(1, b.cq, 2);
    assert!(wa.iter().chain(&wb).all(ok), "{wa:?} {wb:?}");
    assert!(read_mr(p, 1, b.mr.lkey, 4096, N) == src, "WRITE");
    assert!(read_mr(p, 1, b.mr.lkey, 8192, N) == src, "SEND");
    assert!(
        read_mr(p, 0, a.mr.lkey, 4096, N) == pattern(N, round ^ 0x80),
        "READ"
    );
    assert_eq!(
        read_mr(p, 0, a.mr.lkey, 8192, 100),
        pattern(N, round ^ 0x80)[..100]
    );
    let counter = u64::from_ne_bytes(read_mr(p, 1, b.mr.lkey, 16376, 8).try_into().unwrap());
    assert_eq!(
        counter,
        u64::from(round) + 1,
        "FETCH_ADD ran once per round"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("FERROCE_SOAK_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn random_packets_never_panic_nor_spoil_a_clean_transfer(
        seed in any::<u64>(),
        junk in prop::collection::vec(junk(false), 1..64),
    ) {
        let mut p = Pair::new(seed);
        let sides = connect(&mut p, QpType::Rc, 1 << 14, Mtu::Mtu1024);
        // Traffic first: the responder has a READ and an atomic to replay.
        clean_exchange(&mut p, sides, 0);
        let snapshot = |p: &Pair| {
            [0, 1].map(|i| p.eps[i].mr_bytes(sides[i].mr.lkey).unwrap().to_vec())
        };
        let memory = snapshot(&p);
        for j in &junk {
            let (to, from, data) = build(&p, &sides, j);
            p.eps[to].handle_datagram(p.now, from, &data);
        }
        // Whatever the junk made the endpoints send flows, and settles.
        p.settle(1_000_000);
        for (i, side) in sides.iter().enumerate() {
            prop_assert_eq!(p.eps[i].qp_state(side.qpn).unwrap(), QpState::Rts);
            let wcs = p.completions(i, side.cq);
            prop_assert!(wcs.is_empty(), "stray completions {:?}", wcs);
        }
        prop_assert!(snapshot(&p) == memory, "junk changed registered memory");
        clean_exchange(&mut p, sides, 1);
    }

    /// At the expected PSN junk may be executed and may fail its QP, but it
    /// never panics, and the endpoints serve new QPs as before.
    #[test]
    fn random_packets_at_any_psn_never_panic_nor_harm_other_qps(
        seed in any::<u64>(),
        junk in prop::collection::vec(junk(true), 1..64),
    ) {
        let mut p = Pair::new(seed);
        let sides = connect(&mut p, QpType::Rc, 1 << 14, Mtu::Mtu1024);
        clean_exchange(&mut p, sides, 0);
        for j in &junk {
            let (to, from, data) = build(&p, &sides, j);
            p.eps[to].handle_datagram(p.now, from, &data);
        }
        p.settle(1_000_000);
        for (i, side) in sides.iter().enumerate() {
            let state = p.eps[i].qp_state(side.qpn).unwrap();
            prop_assert!(matches!(state, QpState::Rts | QpState::Err), "{:?}", state);
        }
        let fresh = connect(&mut p, QpType::Rc, 1 << 14, Mtu::Mtu1024);
        clean_exchange(&mut p, fresh, 0);
    }
}
