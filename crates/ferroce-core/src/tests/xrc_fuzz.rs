//! Random XRC packets into a connected initiator and target: requests of
//! every XRC opcode naming a real SRQ, a missing one or a basic SRQ, at
//! PSNs other than the expected one, and stray responses to the
//! initiator. They never panic the engine, complete nothing, change no
//! registered memory, and leave both QPs able to carry a clean exchange.

use ferroce_wire::aeth::{AethRepr, Syndrome};
use ferroce_wire::{Opcode, Psn, Transport};
use proptest::prelude::*;

use super::util::{Pair, craft, emit, pattern, sge};
use super::write_mr;
use super::xrc::{Initiator, PSN, Target, ini_side, post_srq, setup};
use crate::verbs::{Mtu, QpState, SendWr, WcStatus};

/// One random packet.
#[derive(Debug, Clone)]
struct Junk {
    /// To the target (a request) or to the initiator (a response).
    to_target: bool,
    /// The low five bits of the opcode (0x00..=0x17 is XRC's range).
    op: u8,
    /// Which SRQ its XRCETH names: 0 and 1 real, 2 a basic SRQ, else this.
    srq: u32,
    /// Added to the expected PSN: 0 (executed) only with `any_psn`.
    psn_off: u32,
    len: usize,
    syndrome: u8,
}

/// Random packets; `any_psn` lets them hit the expected PSN (and so be
/// executed), else they never do.
fn junk(any_psn: bool) -> impl Strategy<Value = Junk> {
    let psn_off = if any_psn {
        prop_oneof![1 => 0..3u32, 1 => 1..Psn::MASK + 1].boxed()
    } else {
        (1..Psn::MASK + 1).boxed()
    };
    (
        any::<bool>(),
        0..0x18u8,
        prop_oneof![0..3u32, any::<u32>()],
        psn_off,
        0..2100usize,
        any::<u8>(),
    )
        .prop_map(|(to_target, op, srq, psn_off, len, syndrome)| Junk {
            to_target,
            op,
            srq,
            psn_off,
            len,
            syndrome,
        })
}

/// The bytes of `j`, or `None` for an opcode XRC leaves reserved.
fn build(ini: &Initiator, tgt: &Target, basic: u32, j: &Junk) -> Option<Vec<u8>> {
    let op = Opcode(j.op).in_transport(Transport::Xrc);
    let info = op.info()?;
    let dest = if j.to_target {
        tgt.tgts[0]
    } else {
        ini.inis[0]
    };
    let len = if info.payload { j.len } else { 0 };
    let mut t = craft(op, Psn::new(PSN) + j.psn_off, dest, len);
    if t.xrceth.is_some() {
        t.xrceth = Some(match j.srq {
            0 | 1 => tgt.srqs[j.srq as usize],
            2 => basic,
            n => n & 0xff_ffff,
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

/// A SEND to each SRQ, completed at both ends with the bytes in place.
fn clean_exchange(p: &mut Pair, ini: &Initiator, tgt: &Target, round: u64) {
    let data = pattern(3000, round as u8);
    write_mr(p, 0, ini.mr.lkey, 0, &data);
    let side = ini_side(ini);
    for k in 0..2 {
        post_srq(p, tgt, k, 4 * round + k as u64, 1, 3000);
        let sg = sge(&side, 0, 3000);
        let wr = SendWr::send(k as u64, &sg).to_srq(tgt.srqs[k]);
        p.eps[0].post_send(ini.inis[0], wr).unwrap();
    }
    let sent = p.wait_cqes(0, ini.cq, 2);
    assert!(
        sent.iter().all(|c| c.status == WcStatus::Success),
        "{sent:?}"
    );
    for k in 0..2 {
        let got = p.wait_cqes(1, tgt.cqs[k], 1);
        assert_eq!(got[0].status, WcStatus::Success);
        assert_eq!(got[0].byte_len, 3000);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("FERROCE_SOAK_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn random_xrc_packets_never_panic_nor_spoil_a_clean_exchange(
        seed in any::<u64>(),
        junk in prop::collection::vec(junk(false), 1..64),
    ) {
        let mut p = Pair::new(seed);
        let (ini, tgt) = setup(&mut p, 2, 1, Mtu::Mtu1024);
        let basic = p.eps[1].create_srq(tgt.pd, 4, 0).unwrap();
        clean_exchange(&mut p, &ini, &tgt, 0);
        let memory = p.eps[1].mr_bytes(tgt.mr.lkey).unwrap();
        for j in &junk {
            let Some(data) = build(&ini, &tgt, basic, j) else { continue };
            let (to, from) = if j.to_target { (1, p.addrs[0]) } else { (0, p.addrs[1]) };
            p.eps[to].handle_datagram(p.now, from, &data);
        }
        p.settle(1_000_000);
        prop_assert_eq!(p.eps[0].qp_state(ini.inis[0]).unwrap(), QpState::Rts);
        prop_assert_eq!(p.eps[1].qp_state(tgt.tgts[0]).unwrap(), QpState::Rts);
        for (i, cq) in [(0, ini.cq), (1, tgt.cqs[0]), (1, tgt.cqs[1])] {
            let wcs = p.completions(i, cq);
            prop_assert!(wcs.is_empty(), "stray completions {:?}", wcs);
        }
        prop_assert!(p.eps[1].mr_bytes(tgt.mr.lkey).unwrap() == memory, "junk changed memory");
        prop_assert_eq!(p.eps[1].query_srq(basic).unwrap().wqes, 0);
        clean_exchange(&mut p, &ini, &tgt, 1);
    }

    /// At the expected PSN junk may be executed and may fail the target,
    /// but it never panics, and a new initiator and target pair works.
    #[test]
    fn random_xrc_packets_at_any_psn_never_panic_nor_harm_a_new_pair(
        seed in any::<u64>(),
        junk in prop::collection::vec(junk(true), 1..64),
    ) {
        let mut p = Pair::new(seed);
        let (ini, tgt) = setup(&mut p, 2, 1, Mtu::Mtu1024);
        let basic = p.eps[1].create_srq(tgt.pd, 4, 0).unwrap();
        clean_exchange(&mut p, &ini, &tgt, 0);
        for j in &junk {
            let Some(data) = build(&ini, &tgt, basic, j) else { continue };
            let (to, from) = if j.to_target { (1, p.addrs[0]) } else { (0, p.addrs[1]) };
            p.eps[to].handle_datagram(p.now, from, &data);
        }
        p.settle(1_000_000);
        for state in [p.eps[0].qp_state(ini.inis[0]), p.eps[1].qp_state(tgt.tgts[0])] {
            prop_assert!(matches!(state, Ok(QpState::Rts | QpState::Err)), "{:?}", state);
        }
        let (ini2, tgt2) = setup(&mut p, 2, 1, Mtu::Mtu1024);
        clean_exchange(&mut p, &ini2, &tgt2, 0);
    }
}
