//! FLUSH (IBA 1.5, opcode 0x1C) on the simulated network: FETH and RETH,
//! no payload, answered with an empty READ RESPONSE once every earlier
//! WRITE is in the peer's memory; the access checks for each placement
//! type, range and whole-region selectivity; refusals at post and at
//! registration; a duplicate answered, not executed again.

use super::read_mr;
use super::util::{Opts, Pair, connect_with, craft, emit, rmem, send_wr};
use crate::verbs::{
    Access, FlushLevel, FlushType, Mtu, QpType, RemoteSlice, SendOp, VerbsError, WcOpcode, WcStatus,
};
use ferroce_wire::aeth::{NakCode, Syndrome};
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, TransportPacket};

fn flush(addr: u64, rkey: u32, len: u64, to: FlushType, level: FlushLevel) -> SendOp {
    SendOp::Flush {
        remote: RemoteSlice::new(addr, rkey, len),
        to,
        level,
    }
}

/// A pair whose QPs and regions allow FLUSH_GLOBAL (the tests' default).
fn flush_pair(seed: u64) -> (Pair, [super::util::Side; 2]) {
    let mut p = Pair::new(seed);
    let sides = connect_with(
        &mut p,
        Opts {
            qp_access: super::util::all_access(),
            sq_sig_all: true,
            ..Opts::new(QpType::Rc, 8192, Mtu::Mtu1024)
        },
    );
    (p, sides)
}

#[test]
fn a_flush_after_writes_completes_with_them_in_place() {
    let (mut p, [a, b]) = flush_pair(91);
    for (i, level) in [FlushLevel::Range, FlushLevel::Region]
        .into_iter()
        .enumerate()
    {
        let data = [i as u8 + 1; 3000];
        let mut wr = send_wr(
            10 * i as u64,
            SendOp::Write {
                remote: rmem(b.mr.addr, b.mr.rkey),
            },
            &[],
        );
        wr.inline = None;
        let sg = super::util::sge(&a, 0, 3000);
        super::write_mr(&mut p, 0, a.mr.lkey, 0, &data);
        wr.sg = &sg;
        p.eps[0].post_send(a.qpn, wr).unwrap();
        let op = flush(b.mr.addr, b.mr.rkey, 3000, FlushType::Global, level);
        p.eps[0]
            .post_send(a.qpn, send_wr(10 * i as u64 + 1, op, &[]))
            .unwrap();
        let c = p.wait_cqes(0, a.cq, 2);
        assert_eq!(
            (c[1].status, c[1].opcode, c[1].byte_len),
            (WcStatus::Success, WcOpcode::Flush, 3000),
            "{level:?}"
        );
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 3000), data);
    }
}

#[test]
fn flush_is_checked_at_post_and_at_registration() {
    let (mut p, [a, b]) = flush_pair(92);
    let op = flush(
        b.mr.addr,
        b.mr.rkey,
        8,
        FlushType::Global,
        FlushLevel::Range,
    );
    let sg = super::util::sge(&a, 0, 8);
    assert!(matches!(
        p.eps[0].post_send(a.qpn, send_wr(1, op, &sg)),
        Err(VerbsError::BadValue { .. })
    ));
    let big = flush(
        b.mr.addr,
        b.mr.rkey,
        1 << 32,
        FlushType::Global,
        FlushLevel::Range,
    );
    assert!(matches!(
        p.eps[0].post_send(a.qpn, send_wr(1, big, &[])),
        Err(VerbsError::TooLong { .. })
    ));
    let err = p.eps[1]
        .reg_mr(b.pd, 64, Access::LOCAL_WRITE | Access::FLUSH_PERSISTENT)
        .unwrap_err();
    assert!(err.to_string().contains("persistent memory"), "{err}");
    assert!(p.eps[1].reg_mr(b.pd, 64, Access::FLUSH_GLOBAL).is_ok());
}

/// A FLUSH the peer may not serve: to persistence (no region has it), or
/// from a QP without FLUSH_GLOBAL, or past the region's end: REMOTE
/// ACCESS ERROR, and the QP in error as for any such NAK.
#[test]
fn a_flush_the_peer_refuses_fails_with_remote_access_error() {
    let cases: [(&str, bool, FlushType, u64); 3] = [
        ("persistent", true, FlushType::Persistent, 8),
        ("QP without FLUSH_GLOBAL", false, FlushType::Global, 8),
        ("past the region", true, FlushType::Global, 8193),
    ];
    for (name, qp_flush, to, len) in cases {
        let mut p = Pair::new(93);
        let without = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let access = if qp_flush {
            super::util::all_access()
        } else {
            without
        };
        let [a, b] = connect_with(
            &mut p,
            Opts {
                qp_access: access,
                sq_sig_all: true,
                ..Opts::new(QpType::Rc, 8192, Mtu::Mtu1024)
            },
        );
        let op = flush(b.mr.addr, b.mr.rkey, len, to, FlushLevel::Range);
        p.eps[0].post_send(a.qpn, send_wr(1, op, &[])).unwrap();
        let c = p.wait_cqes(0, a.cq, 1)[0];
        assert_eq!(
            (c.status, c.opcode),
            (WcStatus::RemAccessErr, WcOpcode::Flush),
            "{name}"
        );
    }
}

/// A FLUSH of an unknown placement type: INVALID REQUEST (one with a
/// payload is malformed: the parser drops it). A duplicate FLUSH: answered
/// again.
#[test]
fn malformed_flushes_are_nakked_and_duplicates_answered() {
    for (name, feth, payload) in [("placement 0", 0u32, 0usize), ("selectivity 2", 0x21, 0)] {
        let (mut p, [_a, b]) = flush_pair(94);
        let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
        let mut t = craft(Opcode::RC_FLUSH, epsn, b.qpn, payload);
        t.bth.ack_req = true;
        t.feth = Some(feth);
        t.reth = Some(RethRepr {
            va: b.mr.addr,
            rkey: b.mr.rkey,
            dma_len: 8,
        });
        p.deliver(1, &emit(&t, &vec![1; payload]));
        let nak = p
            .take_transmits(1)
            .iter()
            .filter_map(|o| {
                let r = TransportPacket::new_checked(&o[..]).ok()?;
                r.aeth().map(|x| x.syndrome())
            })
            .next();
        assert_eq!(nak, Some(Syndrome::Nak(NakCode::InvalidRequest)), "{name}");
    }
    let (mut p, [a, b]) = flush_pair(95);
    let op = flush(
        b.mr.addr,
        b.mr.rkey,
        64,
        FlushType::Global,
        FlushLevel::Range,
    );
    p.eps[0].post_send(a.qpn, send_wr(1, op, &[])).unwrap();
    let request = p.take_transmits(0);
    let r = TransportPacket::new_checked(&request[0][..]).unwrap();
    assert_eq!(
        (r.bth().opcode(), r.feth(), r.payload().len()),
        (Opcode::RC_FLUSH, Some(1), 0)
    );
    p.deliver(1, &request[0]);
    assert_eq!(p.take_transmits(1).len(), 1, "answered");
    p.deliver(1, &request[0]);
    let again = p.take_transmits(1);
    let d = TransportPacket::new_checked(&again[0][..]).unwrap();
    assert_eq!(
        (d.bth().opcode(), d.payload().len()),
        (Opcode::RC_RDMA_READ_RESPONSE_ONLY, 0),
        "the duplicate answered again"
    );
}
