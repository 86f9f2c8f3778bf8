//! Random RD packets into connected EE contexts: requests of every RD
//! opcode (RESYNC included) to B's EEC, naming its RD QP or another number,
//! with the right Q_Key or another, at PSNs other than the expected one,
//! RDETHs naming the EEC or anything else, and stray responses to A's EEC.
//! They never panic the engine, complete nothing, change no registered
//! memory, and leave the EECs and QPs able to carry a clean exchange.

use ferroce_wire::aeth::{AethRepr, Syndrome};
use ferroce_wire::deth::DethRepr;
use ferroce_wire::{Opcode, Psn, Transport};
use proptest::prelude::*;

use super::rd::{Host, PSN, QKEY, dest, post_recv, setup, sge_of};
use super::util::{Pair, craft, emit, pattern};
use super::write_mr;
use crate::verbs::{Mtu, QpState, SendWr, WcStatus};

/// One random packet.
#[derive(Debug, Clone)]
struct Junk {
    /// To B's EEC (a request) or to A's (a response).
    to_b: bool,
    /// The low five bits of the opcode (0x00..=0x15 is RD's range).
    op: u8,
    /// RDETH: 0 the receiving EEC, else this number.
    eec: u32,
    /// BTH destination: 0 the RD QP, else this number.
    qpn: u32,
    /// DETH Q_Key: the right one, or this.
    qkey: Option<u32>,
    /// Added to the expected PSN: 0 (executed) only with `any_psn`.
    psn_off: u32,
    len: usize,
    syndrome: u8,
}

fn junk(any_psn: bool) -> impl Strategy<Value = Junk> {
    let psn_off = if any_psn {
        prop_oneof![1 => 0..3u32, 1 => 1..Psn::MASK + 1].boxed()
    } else {
        (1..Psn::MASK + 1).boxed()
    };
    (
        any::<bool>(),
        0..0x16u8,
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![3 => Just(None), 1 => any::<u32>().prop_map(Some)],
        psn_off,
        0..2100usize,
        any::<u8>(),
    )
        .prop_map(|(to_b, op, eec, qpn, qkey, psn_off, len, syndrome)| Junk {
            to_b,
            op,
            eec,
            qpn,
            qkey,
            psn_off,
            len,
            syndrome,
        })
}

/// The bytes of `j`, or `None` for an opcode RD leaves reserved.
fn build(a: &Host, b: &Host, j: &Junk) -> Option<Vec<u8>> {
    let op = Opcode(j.op).in_transport(Transport::Rd);
    let info = op.info()?;
    let (eec, qp) = if j.to_b {
        (b.eecs[0], b.qps[0])
    } else {
        (a.eecs[0], a.qps[0])
    };
    let len = if info.payload { j.len } else { 0 };
    let qpn = if j.qpn == 0 { qp } else { j.qpn & 0xff_ffff };
    let mut t = craft(op, Psn::new(PSN) + j.psn_off, qpn, len);
    t.rdeth = t
        .rdeth
        .map(|_| if j.eec == 0 { eec } else { j.eec & 0xff_ffff });
    if t.deth.is_some() {
        t.deth = Some(DethRepr {
            qkey: j.qkey.unwrap_or(QKEY),
            src_qp: a.qps[0],
        });
    }
    if t.aeth.is_some() {
        t.aeth = Some(AethRepr {
            syndrome: Syndrome::from_byte(j.syndrome),
            msn: 0,
        });
    }
    Some(emit(&t, &pattern(len, j.op)))
}

/// A SEND from A's QP to B's, completed at both ends with the bytes.
fn clean_exchange(p: &mut Pair, a: &Host, b: &Host, round: u64) {
    write_mr(p, 0, a.mr.lkey, 0, &pattern(3000, round as u8));
    post_recv(p, b, b.qps[0], 10 + round, 4096);
    let sg = sge_of(a, 0, 3000);
    let wr = SendWr::send(round, &sg).via(dest(a.eecs[0], b.qps[0]));
    p.eps[0].post_send(a.qps[0], wr).unwrap();
    let sent = p.wait_cqes(0, a.cq, 1);
    assert_eq!(sent[0].status, WcStatus::Success, "{sent:?}");
    let got = p.wait_cqes(1, b.cq, 1);
    assert_eq!((got[0].status, got[0].byte_len), (WcStatus::Success, 3000));
}

fn feed(p: &mut Pair, a: &Host, b: &Host, junk: &[Junk]) {
    for j in junk {
        let Some(data) = build(a, b, j) else { continue };
        let (to, from) = if j.to_b {
            (1, p.addrs[0])
        } else {
            (0, p.addrs[1])
        };
        p.eps[to].handle_datagram(p.now, from, &data);
    }
    p.settle(1_000_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("FERROCE_SOAK_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn random_rd_packets_never_panic_nor_spoil_a_clean_exchange(
        seed in any::<u64>(),
        junk in prop::collection::vec(junk(false), 1..64),
    ) {
        let mut p = Pair::new(seed);
        let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
        clean_exchange(&mut p, &a, &b, 0);
        let memory = p.eps[1].mr_bytes(b.mr.lkey).unwrap();
        feed(&mut p, &a, &b, &junk);
        for (i, h) in [(0, &a), (1, &b)] {
            prop_assert_eq!(p.eps[i].qp_state(h.qps[0]).unwrap(), QpState::Rts);
            prop_assert_eq!(p.eps[i].eec_state(h.eecs[0]).unwrap(), QpState::Rts);
            let wcs = p.completions(i, h.cq);
            prop_assert!(wcs.is_empty(), "stray completions {:?}", wcs);
        }
        prop_assert!(p.eps[1].mr_bytes(b.mr.lkey).unwrap() == memory, "junk changed memory");
        clean_exchange(&mut p, &a, &b, 1);
    }

    /// At the expected PSN junk may be executed and may fail an EEC, but it
    /// never panics, and new EECs and QPs work.
    #[test]
    fn random_rd_packets_at_any_psn_never_panic_nor_harm_new_ones(
        seed in any::<u64>(),
        junk in prop::collection::vec(junk(true), 1..64),
    ) {
        let mut p = Pair::new(seed);
        let [a, b] = setup(&mut p, 1, 1, Mtu::Mtu1024);
        clean_exchange(&mut p, &a, &b, 0);
        feed(&mut p, &a, &b, &junk);
        let [a2, b2] = setup(&mut p, 1, 1, Mtu::Mtu1024);
        clean_exchange(&mut p, &a2, &b2, 0);
    }
}
