//! ATOMIC WRITE (IBA 1.5, opcode 0x1D) on the simulated network: 8 bytes
//! placed whole and answered with an empty READ RESPONSE; the checks at
//! post and at the responder; a duplicate answered, never placed twice;
//! and a mix with WRITEs under loss, duplication and reordering.

use super::read_mr;
use super::util::{Faults, Opts, Pair, connect, connect_with, rmem, send_wr, sge};
use crate::verbs::{Access, Mtu, QpType, SendOp, VerbsError, WcOpcode, WcStatus};
use ferroce_wire::{Opcode, TransportPacket};

fn atomic_write(addr: u64, rkey: u32) -> SendOp {
    SendOp::AtomicWrite {
        remote: rmem(addr, rkey),
    }
}

#[test]
fn eight_bytes_are_placed_and_complete_as_atomic_write() {
    let mut p = Pair::new(81);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let value = 0x1122_3344_5566_7788u64.to_ne_bytes();
    let mut wr = send_wr(7, atomic_write(b.mr.addr + 64, b.mr.rkey), &[]);
    wr.inline = Some(&value);
    wr.signaled = true;
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let c = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!(
        (c.wr_id, c.status, c.opcode, c.byte_len),
        (7, WcStatus::Success, WcOpcode::AtomicWrite, 8)
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 64, 8), value);
    // From a region as well as inline; nothing around the 8 bytes moves.
    super::write_mr(&mut p, 0, a.mr.lkey, 0, &[0xab; 8]);
    let sg = sge(&a, 0, 8);
    let mut wr = send_wr(8, atomic_write(b.mr.addr + 72, b.mr.rkey), &sg);
    wr.signaled = true;
    p.eps[0].post_send(a.qpn, wr).unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(
        read_mr(&p, 1, b.mr.lkey, 64, 16),
        [value, [0xab; 8]].concat()
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 80, 8), [0; 8]);
}

#[test]
fn a_bad_atomic_write_is_refused_at_post_or_by_the_responder() {
    let mut p = Pair::new(82);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mut wr = send_wr(1, atomic_write(b.mr.addr + 4, b.mr.rkey), &[]);
    wr.inline = Some(&[1; 8]);
    assert!(matches!(
        p.eps[0].post_send(a.qpn, wr),
        Err(VerbsError::Unaligned(_))
    ));
    let mut wr = send_wr(1, atomic_write(b.mr.addr, b.mr.rkey), &[]);
    wr.inline = Some(&[1; 4]);
    assert!(matches!(
        p.eps[0].post_send(a.qpn, wr),
        Err(VerbsError::BadValue { .. })
    ));
    // UC has no ATOMIC WRITE.
    let mut u = Pair::new(83);
    let [ua, ub] = connect(&mut u, QpType::Uc, 4096, Mtu::Mtu1024);
    let mut wr = send_wr(1, atomic_write(ub.mr.addr, ub.mr.rkey), &[]);
    wr.inline = Some(&[1; 8]);
    assert!(matches!(
        u.eps[0].post_send(ua.qpn, wr),
        Err(VerbsError::BadOpForQpType { .. })
    ));
    // A responder QP without remote write access: REMOTE_ACCESS NAK.
    let mut q = Pair::new(84);
    let [qa, qb] = connect_with(
        &mut q,
        Opts {
            qp_access: Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    let mut wr = send_wr(2, atomic_write(qb.mr.addr, qb.mr.rkey), &[]);
    wr.inline = Some(&[1; 8]);
    wr.signaled = true;
    q.eps[0].post_send(qa.qpn, wr).unwrap();
    let c = q.wait_cqes(0, qa.cq, 1)[0];
    assert_eq!(
        (c.status, c.opcode),
        (WcStatus::RemAccessErr, WcOpcode::AtomicWrite)
    );
    assert_eq!(read_mr(&q, 1, qb.mr.lkey, 0, 8), [0; 8]);
}

/// A duplicate ATOMIC WRITE (its answer lost, or the request duplicated
/// on the wire) after a later WRITE to the same bytes: answered again,
/// never placed again, so the WRITE's bytes stay.
#[test]
fn a_duplicate_is_answered_and_never_placed_twice() {
    let mut p = Pair::new(85);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let mut wr = send_wr(1, atomic_write(b.mr.addr, b.mr.rkey), &[]);
    wr.inline = Some(&[0x11; 8]);
    p.eps[0].post_send(a.qpn, wr).unwrap();
    let request = p.take_transmits(0);
    assert_eq!(request.len(), 1);
    p.deliver(1, &request[0]);
    let answer = p.take_transmits(1); // lost
    assert_eq!(answer.len(), 1);
    let r = TransportPacket::new_checked(&answer[0][..]).unwrap();
    assert_eq!(r.bth().opcode(), Opcode::RC_RDMA_READ_RESPONSE_ONLY);
    assert!(r.payload().is_empty());
    let mut wr = send_wr(
        2,
        SendOp::Write {
            remote: rmem(b.mr.addr, b.mr.rkey),
        },
        &[],
    );
    wr.inline = Some(&[0x22; 8]);
    p.eps[0].post_send(a.qpn, wr).unwrap();
    for t in p.take_transmits(0) {
        p.deliver(1, &t);
    }
    let _ = p.take_transmits(1); // the WRITE's ACK, lost too
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8), [0x22; 8]);
    p.deliver(1, &request[0]);
    let again = p.take_transmits(1);
    assert_eq!(again.len(), 1, "the duplicate is answered");
    let d = TransportPacket::new_checked(&again[0][..]).unwrap();
    assert_eq!(
        (d.bth().opcode(), d.bth().psn(), d.payload().len()),
        (Opcode::RC_RDMA_READ_RESPONSE_ONLY, r.bth().psn(), 0),
        "with an empty READ RESPONSE at its PSN (the MSN is the current one)"
    );
    assert_eq!(
        read_mr(&p, 1, b.mr.lkey, 0, 8),
        [0x22; 8],
        "and not placed again"
    );
    // The requester, on its timer, resends and completes both.
    let c = p.wait_cqes(0, a.cq, 0);
    assert!(c.is_empty());
    p.settle(10_000);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8), [0x22; 8]);
}

/// ATOMIC WRITEs and WRITEs to their own slots, many in flight, through
/// loss, duplication and reordering: all complete, each slot holds its
/// last value, and the initiator depth bounds the ATOMIC WRITEs in flight.
#[test]
fn a_mix_under_faults_completes_with_every_value_in_place() {
    let mut p = Pair::new(86);
    p.faults = Faults {
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.1,
        ..Faults::default()
    };
    let [a, b] = connect_with(
        &mut p,
        Opts {
            max_rd_atomic: 2,
            sq_sig_all: true,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    let n = 64u64;
    for i in 0..n {
        let value = (i * 0x0101_0101).to_ne_bytes();
        let slot = b.mr.addr + (i % 16) * 8;
        let op = if i % 3 == 0 {
            SendOp::Write {
                remote: rmem(slot, b.mr.rkey),
            }
        } else {
            atomic_write(slot, b.mr.rkey)
        };
        let mut wr = send_wr(i, op, &[]);
        wr.inline = Some(&value);
        p.eps[0].post_send(a.qpn, wr).unwrap();
    }
    let done = p.wait_cqes(0, a.cq, n as usize);
    assert!(
        done.iter().all(|c| c.status == WcStatus::Success),
        "{done:?}"
    );
    let ids: Vec<u64> = done.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "completions in order");
    for slot in 0..16u64 {
        let last = (0..n).filter(|i| i % 16 == slot).max().unwrap();
        assert_eq!(
            read_mr(&p, 1, b.mr.lkey, (slot * 8) as usize, 8),
            (last * 0x0101_0101).to_ne_bytes(),
            "slot {slot}"
        );
    }
}

/// ATOMIC WRITE packets the requester never sends, from the peer: 4 bytes,
/// an unaligned address, a RETH that names 16 bytes. Each is NAKed
/// INVALID REQUEST (the QP then in error, as for any class C error) and
/// places nothing.
#[test]
fn malformed_atomic_writes_are_nakked_and_place_nothing() {
    use super::util::{craft, emit};
    use ferroce_wire::aeth::{NakCode, Syndrome};
    use ferroce_wire::reth::RethRepr;
    for (name, va_off, dma_len, payload) in [
        ("4 bytes", 0u64, 4u32, 4usize),
        ("unaligned", 4, 8, 8),
        ("RETH of 16", 0, 16, 8),
    ] {
        let mut p = Pair::new(87);
        let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
        let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
        let mut t = craft(Opcode::RC_ATOMIC_WRITE, epsn, b.qpn, payload);
        t.bth.ack_req = true;
        t.reth = Some(RethRepr {
            va: b.mr.addr + va_off,
            rkey: b.mr.rkey,
            dma_len,
        });
        p.deliver(1, &emit(&t, &vec![0x5a; payload]));
        let out = p.take_transmits(1);
        let nak = out
            .iter()
            .filter_map(|o| TransportPacket::new_checked(&o[..]).ok())
            .find_map(|r| r.aeth().map(|x| x.syndrome()));
        assert_eq!(nak, Some(Syndrome::Nak(NakCode::InvalidRequest)), "{name}");
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 16), [0; 16], "{name}");
        let _ = a;
    }
}
