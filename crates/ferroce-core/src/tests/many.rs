//! Many QPs at once: requests wait while the endpoint has MAX_IN_FLIGHT
//! packets in flight, the count stays exact through loss and
//! retransmission, the timer heap always names the earliest deadline,
//! every QP gets its turn, and everything completes with
//! the data intact.

use super::util::{Faults, Pair, Side, connect, pattern, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::endpoint::MAX_IN_FLIGHT;
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

const QPS: usize = 24;
const MSGS: u64 = 6;
const LEN: usize = 64 << 10;

/// The endpoint's books agree with its QPs: the count of packets in
/// flight is their sum, and the next timer (from the heap) is the earliest
/// of their deadlines.
fn check_books(p: &mut Pair) {
    for e in &mut p.eps {
        let sum: u64 = e.qps.values().map(|q| u64::from(q.in_flight())).sum();
        assert_eq!(e.packets_in_flight(), sum);
        let earliest = e.qps.values().filter_map(|q| q.next_deadline()).min();
        assert_eq!(e.poll_timeout(), earliest);
    }
}

fn run(seed: u64, faults: Faults) {
    let mut p = Pair::new(seed);
    let sides: Vec<[Side; 2]> = (0..QPS)
        .map(|_| connect(&mut p, QpType::Rc, MSGS as usize * LEN, Mtu::Mtu1024))
        .collect();
    p.faults = faults;
    for (k, [a, b]) in sides.iter().enumerate() {
        write_mr(
            &mut p,
            0,
            a.mr.lkey,
            0,
            &pattern(MSGS as usize * LEN, k as u8),
        );
        for m in 0..MSGS {
            let op = SendOp::Write {
                remote: rmem(b.mr.addr + m * LEN as u64, b.mr.rkey),
            };
            let sg = sge(a, m * LEN as u64, LEN as u32);
            let wr = send_wr(m, op, &sg);
            p.eps[0].post_send(a.qpn, wr).unwrap();
        }
    }
    // 24 QPs x 128-PSN windows would put 3072 packets in flight.
    let mut peak = 0;
    let mut done = [0u64; QPS];
    p.drive_until(5_000_000, |p| {
        check_books(p);
        peak = peak.max(p.eps[0].packets_in_flight());
        for (k, [a, _]) in sides.iter().enumerate() {
            for wc in p.completions(0, a.cq) {
                assert_eq!(wc.status, WcStatus::Success, "QP {k}: {wc:?}");
                assert_eq!(wc.wr_id, done[k], "QP {k} completed out of order");
                done[k] += 1;
            }
        }
        done.iter().all(|&d| d == MSGS)
    });
    // Over the cap by at most one packet per QP (each asks for an ACK).
    assert!(peak <= MAX_IN_FLIGHT + QPS as u64, "peak {peak}");
    assert!(
        peak > MAX_IN_FLIGHT / 2,
        "peak {peak}: the cap was never near"
    );
    if faults.loss == 0.0 {
        // Capped QPs asked for ACKs: no timeout was needed.
        assert_eq!(p.eps[0].stats().retransmits, 0);
    }
    p.settle(1_000_000);
    check_books(&mut p);
    assert_eq!(p.eps[0].packets_in_flight(), 0);
    for (k, [_, b]) in sides.iter().enumerate() {
        let got = read_mr(&p, 1, b.mr.lkey, 0, MSGS as usize * LEN);
        assert!(got == pattern(MSGS as usize * LEN, k as u8), "QP {k} data");
    }
}

#[test]
fn many_qps_stay_under_the_cap() {
    run(71, Faults::default());
}

#[test]
fn many_qps_under_loss_and_reordering() {
    run(
        72,
        Faults {
            loss: 0.02,
            duplicate: 0.01,
            reorder: 0.05,
            ..Faults::default()
        },
    );
}
