//! A region the application holds: the engine sets that QP's packets aside
//! (in order, bounded) and goes on with everything else.

use std::sync::Arc;
use std::time::Duration;

use super::util::{Pair, Side, connect, pattern, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::MAX_DEFERRED;
use crate::mr::Region;
use crate::verbs::{Mtu, QpType, SendOp, WcOpcode, WcStatus};

fn write_to(side: &Side, offset: u64) -> SendOp {
    SendOp::Write {
        remote: rmem(side.mr.addr + offset, side.mr.rkey),
    }
}

/// Steps the simulation for `d` of its time.
fn run_for(p: &mut Pair, d: Duration) {
    let until = p.now.after(d);
    while p.now < until && p.step() {}
}

fn region(p: &Pair, i: usize, side: &Side) -> Arc<Region> {
    p.eps[i].region(side.mr.lkey).unwrap()
}

#[test]
fn write_into_a_held_region_waits_for_its_release() {
    let mut p = Pair::new(70);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(5000, 1);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let held = region(&p, 1, &b);
    held.with_range(0, 8192, |bytes| {
        let sg = sge(&a, 0, 5000);
        let wr = send_wr(1, write_to(&b, 0), &sg);
        p.eps[0].post_send(a.qpn, wr).unwrap();
        // Less than the requester's retransmit timeout.
        run_for(&mut p, Duration::from_micros(500));
        assert!(bytes.iter().all(|&x| x == 0), "written while held");
        assert!(p.completions(0, a.cq).is_empty(), "acknowledged while held");
        assert!(p.eps[1].stats().rx_deferred > 0);
    })
    .unwrap();
    let wc = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 5000), data);
    assert_eq!(p.eps[1].stats().rx_deferred_dropped, 0);
}

#[test]
fn other_qps_go_on_while_one_region_is_held() {
    let mut p = Pair::new(71);
    let [a1, b1] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let [a2, b2] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(3000, 2);
    write_mr(&mut p, 0, a1.mr.lkey, 0, &data);
    write_mr(&mut p, 0, a2.mr.lkey, 0, &data);
    let held = region(&p, 1, &b1);
    held.with_range_mut(0, 8192, |_| {
        let sg = sge(&a1, 0, 3000);
        let wr = send_wr(1, write_to(&b1, 0), &sg);
        p.eps[0].post_send(a1.qpn, wr).unwrap();
        let sg = sge(&a2, 0, 3000);
        let wr = send_wr(2, write_to(&b2, 0), &sg);
        p.eps[0].post_send(a2.qpn, wr).unwrap();
        let wc = p.wait_cqes(0, a2.cq, 1)[0];
        assert_eq!((wc.wr_id, wc.status), (2, WcStatus::Success));
        assert!(p.completions(0, a1.cq).is_empty());
    })
    .unwrap();
    assert_eq!(read_mr(&p, 1, b2.mr.lkey, 0, 3000), data);
    let wc = p.wait_cqes(0, a1.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 1, b1.mr.lkey, 0, 3000), data);
}

/// A SEND into a free region, posted after a WRITE into a held one on the
/// same QP, waits behind it: the QP still takes its packets in order.
#[test]
fn a_qps_later_packets_queue_behind_the_deferred_one() {
    let mut p = Pair::new(72);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let free = p.eps[1]
        .reg_mr(b.pd, 4096, crate::verbs::Access::LOCAL_WRITE)
        .unwrap();
    let data = pattern(2000, 3);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(
            b.qpn,
            recv_wr(
                9,
                &[crate::verbs::Sge {
                    lkey: free.lkey,
                    offset: 0,
                    len: 4096,
                }],
            ),
        )
        .unwrap();
    let held = region(&p, 1, &b);
    held.with_range(0, 8192, |_| {
        let sg = sge(&a, 0, 2000);
        let wr = send_wr(1, write_to(&b, 100), &sg);
        p.eps[0].post_send(a.qpn, wr).unwrap();
        let sg = sge(&a, 0, 64);
        let wr = send_wr(2, SendOp::Send, &sg);
        p.eps[0].post_send(a.qpn, wr).unwrap();
        run_for(&mut p, Duration::from_micros(500));
        assert!(p.completions(1, b.cq).is_empty(), "SEND passed the WRITE");
    })
    .unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!(
        (r.wr_id, r.status, r.opcode),
        (9, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 100, 2000), data);
    let s = p.wait_cqes(0, a.cq, 2);
    let ids: Vec<_> = s.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(ids, [(1, WcStatus::Success), (2, WcStatus::Success)]);
    // Taken in order, not refused as out of sequence and sent again.
    assert_eq!(p.eps[1].stats().rx_out_of_sequence, 0);
    assert_eq!(p.eps[0].stats().retransmits, 0);
}

/// Past the bound a packet is dropped unexecuted; RC sends it again and the
/// transfer still completes whole.
#[test]
fn past_the_bound_packets_are_dropped_and_sent_again() {
    let mut p = Pair::new(73);
    let len = (MAX_DEFERRED + 20) * 1024;
    let [a, b] = connect(&mut p, QpType::Rc, len, Mtu::Mtu1024);
    let data = pattern(len, 4);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let held = region(&p, 1, &b);
    held.with_range(0, 1, |_| {
        let sg = sge(&a, 0, len as u32);
        let wr = send_wr(1, write_to(&b, 0), &sg);
        p.eps[0].post_send(a.qpn, wr).unwrap();
        run_for(&mut p, Duration::from_micros(500));
    })
    .unwrap();
    assert!(p.eps[1].stats().rx_deferred_dropped > 0);
    let wc = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, len), data);
}

/// READ responses and atomic results land in local memory: a held local
/// region defers them the same way.
#[test]
fn read_responses_wait_for_a_held_local_region() {
    let mut p = Pair::new(74);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(3000, 5);
    write_mr(&mut p, 1, b.mr.lkey, 0, &data);
    let held = region(&p, 0, &a);
    held.with_range(0, 8192, |bytes| {
        let op = SendOp::Read {
            remote: rmem(b.mr.addr, b.mr.rkey),
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(1, op, &sge(&a, 0, 3000)))
            .unwrap();
        run_for(&mut p, Duration::from_micros(500));
        assert!(bytes[..3000].iter().all(|&x| x == 0));
        assert!(p.completions(0, a.cq).is_empty());
    })
    .unwrap();
    let wc = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, 3000), data);
}

/// A source region the application is writing: the packet is not sent
/// (counted), and RC sends it again once the region is free.
#[test]
fn sending_from_a_region_being_written_is_recovered() {
    let mut p = Pair::new(75);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let held = region(&p, 0, &a);
    held.with_range_mut(0, 8192, |bytes| {
        bytes[..4000].copy_from_slice(&pattern(4000, 6));
        let sg = sge(&a, 0, 4000);
        let wr = send_wr(1, write_to(&b, 0), &sg);
        p.eps[0].post_send(a.qpn, wr).unwrap();
        run_for(&mut p, Duration::from_micros(200));
        assert!(p.eps[0].stats().tx_region_busy > 0);
    })
    .unwrap();
    let wc = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 4000), pattern(4000, 6));
}

#[test]
fn ud_receive_into_a_held_region_is_delivered_after() {
    let mut p = Pair::new(76);
    let [a, b] = connect(&mut p, QpType::Ud, 8192, Mtu::Mtu1024);
    let data = pattern(500, 7);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(3, &sge(&b, 0, 4096)))
        .unwrap();
    let held = region(&p, 1, &b);
    held.with_range(0, 8192, |_| {
        let sg = sge(&a, 0, 500);
        let mut wr = send_wr(4, SendOp::Send, &sg);
        wr.ud = Some(super::ops::ud_dest(&p, b.qpn));
        p.eps[0].post_send(a.qpn, wr).unwrap();
        run_for(&mut p, Duration::from_micros(200));
        assert!(p.completions(1, b.cq).is_empty());
    })
    .unwrap();
    let r = p.wait_cqes(1, b.cq, 1)[0];
    assert_eq!((r.wr_id, r.status, r.byte_len), (3, WcStatus::Success, 540));
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 500), data);
}

/// UC has no retransmission: a multi-packet WRITE set aside whole still
/// lands whole, and the QP takes the next message in sequence.
#[test]
fn uc_write_into_a_held_region_lands_after_release() {
    let mut p = Pair::new(77);
    let [a, b] = connect(&mut p, QpType::Uc, 8192, Mtu::Mtu1024);
    let data = pattern(3000, 8);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let held = region(&p, 1, &b);
    held.with_range(0, 8192, |bytes| {
        let sg = sge(&a, 0, 3000);
        let wr = send_wr(1, write_to(&b, 0), &sg);
        p.eps[0].post_send(a.qpn, wr).unwrap();
        run_for(&mut p, Duration::from_micros(200));
        assert!(bytes.iter().all(|&x| x == 0));
    })
    .unwrap();
    p.settle(100_000);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 3000), data);
    let sg = sge(&a, 0, 100);
    let wr = send_wr(2, write_to(&b, 4000), &sg);
    p.eps[0].post_send(a.qpn, wr).unwrap();
    p.settle(100_000);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 4000, 100), data[..100]);
    assert_eq!(p.eps[1].stats().rx_out_of_sequence, 0);
}

/// An atomic on a held region is executed once, after the release.
#[test]
fn atomic_on_a_held_region_runs_once_after_release() {
    let mut p = Pair::new(78);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    write_mr(&mut p, 1, b.mr.lkey, 64, &40u64.to_ne_bytes());
    let held = region(&p, 1, &b);
    held.with_range(64, 8, |_| {
        let op = SendOp::FetchAdd {
            remote: rmem(b.mr.addr + 64, b.mr.rkey),
            add: 2,
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(1, op, &sge(&a, 0, 8)))
            .unwrap();
        run_for(&mut p, Duration::from_micros(300));
        assert!(p.completions(0, a.cq).is_empty());
    })
    .unwrap();
    let wc = p.wait_cqes(0, a.cq, 1)[0];
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, 8), 40u64.to_ne_bytes());
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 64, 8), 42u64.to_ne_bytes());
}

/// Many QPs on held regions: all queues together keep at most
/// MAX_DEFERRED_TOTAL packets, the rest are dropped and counted.
#[test]
fn all_queues_together_are_bounded() {
    const QPS: usize = 20;
    const EACH: usize = 60; // under the per-QP bound
    const { assert!(QPS * EACH > crate::MAX_DEFERRED_TOTAL && EACH <= MAX_DEFERRED) };
    let mut p = Pair::new(79);
    let sides: Vec<[Side; 2]> = (0..QPS)
        .map(|_| connect(&mut p, QpType::Ud, 16384, Mtu::Mtu1024))
        .collect();
    for [a, b] in &sides {
        write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(100, 1));
        for k in 0..EACH {
            let sg = sge(b, (k * 256) as u64, 256);
            p.eps[1].post_recv(b.qpn, recv_wr(k as u64, &sg)).unwrap();
        }
    }
    let held: Vec<_> = sides.iter().map(|[_, b]| region(&p, 1, b)).collect();
    let guards: Vec<_> = held.iter().map(|r| r.try_read().unwrap()).collect();
    for [a, b] in &sides {
        for k in 0..EACH {
            let sg = sge(a, 0, 100);
            let mut wr = send_wr(k as u64, SendOp::Send, &sg);
            wr.ud = Some(super::ops::ud_dest(&p, b.qpn));
            p.eps[0].post_send(a.qpn, wr).unwrap();
        }
    }
    run_for(&mut p, Duration::from_micros(500));
    let s = p.eps[1].stats();
    let dropped = (QPS * EACH - crate::MAX_DEFERRED_TOTAL) as u64;
    assert_eq!(s.rx_deferred_dropped, dropped);
    drop(guards);
    p.settle(1_000_000);
    let delivered: usize = sides
        .iter()
        .map(|[_, b]| p.completions(1, b.cq).len())
        .sum();
    assert_eq!(delivered, crate::MAX_DEFERRED_TOTAL);
}
