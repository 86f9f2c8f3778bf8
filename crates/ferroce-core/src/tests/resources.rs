//! The responder resources (`qp::resources`): duplicates of READs and
//! atomics are answered from the record of what was served and nothing
//! else, and the responses a QP owes stay bounded while a forger floods it
//! with duplicate READs (a responder that served 128 KiB forged READs again
//! each would starve a legitimate transfer to RETRY_EXC_ERR).

use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, Psn};

use super::util::{Pair, Side, connect, craft, emit, parse, pattern, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::qp::Response;
use crate::qp::resources::ServedKind;
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

/// The size of each forged READ.
const FORGED_LEN: u32 = 128 << 10;
/// Steps of the simulation between two forged requests.
const FORGE_EVERY: u32 = 8;

/// A READ request to `b`'s QP at `psn` for `len` bytes at `off` in its
/// region, with the right R_Key: what a forger who learnt the key sends.
fn read_request(b: &Side, psn: Psn, off: u64, len: u32) -> Vec<u8> {
    let mut t = craft(Opcode::RC_RDMA_READ_REQUEST, psn, b.qpn, 0);
    t.reth = Some(RethRepr {
        va: b.mr.addr + off,
        rkey: b.mr.rkey,
        dma_len: len,
    });
    emit(&t, &[])
}

/// A PSN behind `b`'s expected one, anywhere in the last 5,000.
fn behind(p: &Pair, b: &Side, n: u32) -> Psn {
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    epsn - (1 + n.wrapping_mul(7919) % 5000)
}

/// READ and atomic responses `b` owes, and responses in all.
fn owed(p: &Pair, b: &Side) -> (usize, usize) {
    let out = &p.eps[1].qps[&b.qpn].resp.out;
    let jobs = out
        .iter()
        .filter(|r| !matches!(r, Response::Ack { .. }))
        .count();
    (jobs, out.len())
}

#[test]
fn forged_duplicate_reads_are_dropped_while_a_write_stream_completes() {
    const WRITES: usize = 16;
    const LEN: u32 = 64 << 10;
    let mut p = Pair::new(920);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 20, Mtu::Mtu1024);
    let data = pattern(WRITES * LEN as usize, 9);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    for i in 0..WRITES {
        let off = (i * LEN as usize) as u64;
        let write = SendOp::Write {
            remote: rmem(b.mr.addr + off, b.mr.rkey),
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(i as u64, write, &sge(&a, off, LEN)))
            .unwrap();
    }
    let (mut step, mut forged, mut wcs) = (0, 0, Vec::new());
    p.drive_until(1_000_000, |p| {
        step += 1;
        if step % FORGE_EVERY == 0 {
            let psn = behind(p, &b, step);
            p.deliver(1, &read_request(&b, psn, 0, FORGED_LEN));
            forged += 1;
        }
        assert_eq!(owed(p, &b).0, 0, "a forged READ is being served");
        wcs.extend(p.completions(0, a.cq));
        wcs.len() == WRITES
    });
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, data.len()), data);
    assert!(forged > 100, "only {forged} forged");
    assert_eq!(p.eps[1].stats().rx_duplicate_unserved, forged);
}

#[test]
fn forged_duplicate_reads_inside_a_read_stream_stay_bounded() {
    const READS: usize = 32;
    const LEN: u32 = 16 << 10;
    let mut p = Pair::new(921);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 20, Mtu::Mtu1024);
    let data = pattern(READS * LEN as usize, 4);
    write_mr(&mut p, 1, b.mr.lkey, 0, &data);
    for i in 0..READS {
        let off = (i * LEN as usize) as u64;
        let read = SendOp::Read {
            remote: rmem(b.mr.addr + off, b.mr.rkey),
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(i as u64, read, &sge(&a, off, LEN)))
            .unwrap();
    }
    let depth = usize::from(p.eps[1].qps[&b.qpn].cfg.max_dest_rd_atomic);
    let (mut step, mut wcs, mut most, mut forged_n) = (0u32, Vec::new(), (0, 0), 0);
    p.drive_until(1_000_000, |p| {
        step += 1;
        if step % FORGE_EVERY == 0 {
            // PSNs just behind the expected one fall inside recorded READs;
            // the forger asks for the whole READ from its first byte, or for
            // what belongs at that PSN (the only request served again).
            let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
            let psn = epsn - (1 + step % 40);
            let served = p.eps[1].qps[&b.qpn].resp.resources.read_at(psn);
            let forged = match served.map(|s| (s.psn, s.kind)) {
                Some((first, ServedKind::Read { va, len, .. })) if step % 3 != 0 => {
                    let skipped = psn.distance(first) as u32 * 1024;
                    let off = va - b.mr.addr + u64::from(skipped);
                    read_request(&b, psn, off, len - skipped)
                }
                _ => read_request(&b, psn, 0, FORGED_LEN),
            };
            p.deliver(1, &forged);
            forged_n += 1;
        }
        let (jobs, all) = owed(p, &b);
        most = (most.0.max(jobs), most.1.max(all));
        wcs.extend(p.completions(0, a.cq));
        wcs.len() == READS
    });
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, data.len()), data);
    assert!(most.0 <= depth, "{} READ responses owed at once", most.0);
    assert!(most.1 <= 2 * depth + 2, "{} responses owed at once", most.1);
    // Some were served again (the ones asking for what belongs at their
    // PSN), the rest dropped.
    let unserved = p.eps[1].stats().rx_duplicate_unserved;
    assert!(
        unserved > 0 && unserved < forged_n,
        "{unserved} of {forged_n}"
    );
}

#[test]
fn a_duplicate_read_is_served_only_from_its_record() {
    let mut p = Pair::new(922);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    let data = pattern(4096, 2);
    write_mr(&mut p, 1, b.mr.lkey, 0, &data);
    let read = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, read, &sge(&a, 0, 4096)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    let first = p.eps[1].qps[&b.qpn].resp.epsn - 4;
    let cases: [(&str, Psn, u64, u32, usize); 7] = [
        ("the whole READ again", first, 0, 4096, 4),
        ("the rest from its third packet", first + 2, 2048, 2048, 2),
        ("its last packet", first + 3, 3072, 1024, 1),
        (
            "the third packet's PSN, bytes from the start",
            first + 2,
            0,
            2048,
            0,
        ),
        ("past its end", first + 2, 2048, 4096, 0),
        ("more packets than it had", first + 3, 3072, 2048, 0),
        ("a PSN no READ had", first - 1, 0, 1024, 0),
    ];
    for (what, psn, off, len, packets) in cases {
        let before = p.eps[1].stats().rx_duplicate_unserved;
        p.deliver(1, &read_request(&b, psn, off, len));
        let out = p.take_transmits(1);
        assert_eq!(out.len(), packets, "{what}");
        for (k, pkt) in out.iter().enumerate() {
            let t = parse(pkt);
            assert_eq!(t.bth.psn, psn + k as u32, "{what}");
            let at = off as usize + k * 1024;
            assert_eq!(
                pkt[pkt.len() - 4 - 1024..pkt.len() - 4],
                data[at..at + 1024],
                "{what}"
            );
        }
        let unserved = p.eps[1].stats().rx_duplicate_unserved - before;
        assert_eq!(unserved, u64::from(packets == 0), "{what}");
    }
    // Another R_Key (a region of the same QP's protection domain would do
    // as well as this one for the check): not served.
    let mut t = craft(Opcode::RC_RDMA_READ_REQUEST, first, b.qpn, 0);
    t.reth = Some(RethRepr {
        va: b.mr.addr,
        rkey: b.mr.rkey ^ 1,
        dma_len: 1024,
    });
    p.deliver(1, &emit(&t, &[]));
    assert!(p.take_transmits(1).is_empty());
}

#[test]
fn reads_beyond_the_responder_resources_wait_their_turn() {
    let mut p = Pair::new(923);
    let [_a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    let depth = u32::from(p.eps[1].qps[&b.qpn].cfg.max_dest_rd_atomic);
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    // `depth` READs of one packet each, owed at once; the next waits.
    for k in 0..=depth {
        p.deliver(1, &read_request(&b, epsn + k, 0, 8));
    }
    let s = p.eps[1].stats();
    assert_eq!(s.rx_over_depth, 1);
    assert_eq!(p.eps[1].qps[&b.qpn].resp.epsn, epsn + depth);
    assert_eq!(p.take_transmits(1).len(), depth as usize);
    // Once answered, the same request is served.
    p.deliver(1, &read_request(&b, epsn + depth, 0, 8));
    assert_eq!(p.take_transmits(1).len(), 1);
    assert_eq!(p.eps[1].qps[&b.qpn].resp.epsn, epsn + depth + 1);
    // Only the last `depth` are recorded: the first READ is forgotten.
    assert_eq!(p.eps[1].qps[&b.qpn].resp.resources.len(), depth as usize);
    p.deliver(1, &read_request(&b, epsn, 0, 8));
    assert!(p.take_transmits(1).is_empty());
    p.deliver(1, &read_request(&b, epsn + 1, 0, 8));
    assert_eq!(p.take_transmits(1).len(), 1);
}

#[test]
fn a_duplicate_atomic_never_served_is_dropped() {
    let mut p = Pair::new(924);
    let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let psn = p.eps[1].qps[&b.qpn].resp.epsn - 5;
    for op in [Opcode::RC_FETCH_ADD, Opcode::RC_COMPARE_SWAP] {
        p.deliver(1, &emit(&craft(op, psn, b.qpn, 0), &[]));
        assert!(p.take_transmits(1).is_empty(), "{op}");
    }
    assert_eq!(p.eps[1].stats().rx_duplicate_unserved, 2);
}
