//! Congestion control end to end on the simulated network: a link that
//! marks CE makes the receiver send CNPs (rate-limited), the sender's
//! DCQCN cuts its rate and its pacer holds it there, and once marking
//! stops the rate climbs back to the line rate; nothing is lost.

use std::time::Duration;

use super::util::{Pair, Side, connect, pattern, rmem, send_wr, sge};
use crate::cc::CongestionConfig;
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};
use crate::{Ecn, Instant};

/// 10 Gb/s: cuts bind quickly, and recovery takes tens of milliseconds.
const LINE_MBPS: u64 = 10_000;
const MSG: usize = 256 << 10;
const MSGS: usize = 24;

fn setup() -> (Pair, [Side; 2]) {
    let mut p = Pair::new(15);
    let cfg = CongestionConfig {
        line_rate_mbps: LINE_MBPS,
        ..CongestionConfig::default()
    };
    for e in &mut p.eps {
        e.set_congestion_control(cfg);
    }
    let sides = connect(&mut p, QpType::Rc, MSG * MSGS, Mtu::Mtu1024);
    (p, sides)
}

#[test]
fn ce_marks_cut_the_rate_and_it_recovers_when_they_stop() {
    let (mut p, [a, b]) = setup();
    let data = pattern(MSG * MSGS, 3);
    p.eps[0].write_mr(a.mr.lkey, |m| m.copy_from_slice(&data));
    for i in 0..MSGS {
        let write = SendOp::Write {
            remote: rmem(b.mr.addr + (i * MSG) as u64, b.mr.rkey),
        };
        let list = sge(&a, (i * MSG) as u64, MSG as u32);
        p.eps[0]
            .post_send(a.qpn, send_wr(i as u64, write, &list))
            .unwrap();
    }
    // Phase 1: every ECN-capable packet is marked for 1 ms.
    p.faults.ce_mark = 1.0;
    let marking = Instant::from_nanos(1_000_000);
    p.drive_until(1_000_000, |p| p.now >= marking);
    let np = p.eps[1].stats();
    let cut = p.eps[0].qp_congestion(a.qpn, p.now).unwrap();
    let interval = CongestionConfig::default().np.min_time_between_cnps;
    let most = (marking.as_nanos() / interval.as_nanos() as u64) + 1;
    assert!(np.rx_ce > np.cnps_sent, "every mark answered: {np:?}");
    assert!(
        (2..=most).contains(&np.cnps_sent),
        "{} CNPs in 1 ms",
        np.cnps_sent
    );
    assert_eq!(p.eps[0].stats().cnps_received, np.cnps_sent);
    assert!(cut.limited && cut.rate_cuts >= 2, "{cut:?}");
    assert!(cut.rate_mbps < LINE_MBPS as f64 / 4.0, "{cut:?}");
    // The pacer held the sender: far less than a line-rate millisecond left.
    let sent = p.request_bytes[0];
    let line_ms = LINE_MBPS * 1000 / 8;
    assert!(sent < line_ms / 2, "{sent} bytes in the marked millisecond");

    // Phase 2: no more marks. Some time later, still sending, the rate
    // has grown; by the end it is back at the line rate.
    p.faults.ce_mark = 0.0;
    let later = p.now.after(Duration::from_millis(5));
    p.drive_until(1_000_000, |p| p.now >= later);
    let mid = p.eps[0].qp_congestion(a.qpn, p.now).unwrap();
    assert!(mid.rate_mbps > cut.rate_mbps, "{cut:?} then {mid:?}");
    assert_eq!(mid.cnps_received, cut.cnps_received, "CNPs after the marks");
    let wcs = p.wait_cqes(0, a.cq, MSGS);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(p.eps[1].mr_bytes(b.mr.lkey).unwrap(), &data[..]);
    assert_eq!(p.eps[0].stats().retransmits, 0);
    let idle = p.now.after(Duration::from_secs(1));
    let end = p.eps[0].qp_congestion(a.qpn, idle).unwrap();
    assert!(!end.limited, "{end:?}");
    assert_eq!(end.rate_mbps, LINE_MBPS as f64);
}

#[test]
fn cnps_leave_with_their_own_dscp_and_the_fields_the_annex_gives() {
    let (mut p, [a, b]) = setup();
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 4096)))
        .unwrap();
    let out: Vec<_> = std::iter::from_fn(|| p.eps[0].poll_transmit(p.now)).collect();
    assert!(out.iter().all(|t| t.ecn == Ecn::Ect0), "ECN on by default");
    for t in &out {
        p.eps[1].handle_datagram_ecn(p.now, p.addrs[0], Ecn::Ce, &t.data);
    }
    let replies: Vec<_> = std::iter::from_fn(|| p.eps[1].poll_transmit(p.now)).collect();
    let cnps: Vec<_> = replies
        .iter()
        .filter(|t| t.data[0] == ferroce_wire::Opcode::CNP.0)
        .collect();
    // Four marked packets at one instant: one CNP.
    assert_eq!((out.len(), cnps.len()), (4, 1));
    let cnp = cnps[0];
    assert_eq!(cnp.tos() >> 2, crate::cc::CNP_DSCP);
    assert_eq!(cnp.ecn, Ecn::Ect0);
    let pkt = ferroce_wire::TransportPacket::new_checked(&cnp.data[..]).unwrap();
    let bth = pkt.bth();
    assert_eq!(bth.dest_qp(), a.qpn);
    assert_eq!(
        (bth.becn(), bth.fecn(), bth.psn().value()),
        (true, false, 0)
    );
    assert_eq!(bth.pkey(), 0xffff);
    assert_eq!(pkt.cnp_reserved(), Some(&[0u8; 16][..]));
    assert_eq!(cnp.data.len(), 12 + 16 + 4);
    // The sender takes it: one CNP, one cut, its rate halved.
    p.eps[0].handle_datagram(p.now, p.addrs[1], &cnp.data);
    let cc = p.eps[0].qp_congestion(a.qpn, p.now).unwrap();
    assert_eq!((cc.cnps_received, cc.rate_cuts), (1, 1));
    let half = LINE_MBPS as f64 * (1.0 - 1023.0 / 2048.0);
    assert!((cc.rate_mbps - half).abs() < 1e-6, "{cc:?}");
}

#[test]
fn with_congestion_control_off_nothing_is_marked_or_answered() {
    let (mut p, [a, b]) = setup();
    for e in &mut p.eps {
        e.set_congestion_control(CongestionConfig::OFF);
    }
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 4096)))
        .unwrap();
    let out: Vec<_> = std::iter::from_fn(|| p.eps[0].poll_transmit(p.now)).collect();
    assert!(out.iter().all(|t| t.ecn == Ecn::NotEct));
    for t in &out {
        p.eps[1].handle_datagram_ecn(p.now, p.addrs[0], Ecn::Ce, &t.data);
    }
    let s = p.eps[1].stats();
    assert_eq!((s.rx_ce, s.cnps_sent), (4, 0));
}

#[test]
fn poll_timeout_reports_the_pacers_next_release() {
    let (mut p, [a, b]) = setup();
    // One CNP: the sender is paced at half the line rate.
    let mut cnp = ferroce_wire::samples::transport(ferroce_wire::Opcode::CNP, 0, 0);
    cnp.bth.dest_qp = a.qpn;
    let mut bytes = vec![0; cnp.buffer_len()];
    cnp.emit(&mut bytes, &[]).unwrap();
    p.eps[0].handle_datagram(p.now, p.addrs[1], &bytes);
    let rate = p.eps[0].qp_congestion(a.qpn, p.now).unwrap().rate_mbps;
    assert!(rate < LINE_MBPS as f64 * 0.51, "{rate}");
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    let list = sge(&a, 0, 1 << 20);
    p.eps[0].post_send(a.qpn, send_wr(1, write, &list)).unwrap();
    // The burst allowance goes at once, then nothing until the release.
    let burst: Vec<_> = std::iter::from_fn(|| p.eps[0].poll_transmit(p.now)).collect();
    let sent: usize = burst.iter().map(|t| t.data.len()).sum();
    assert!(
        (64 << 10..(64 << 10) + 2100).contains(&sent),
        "{sent} bytes"
    );
    // The bucket is just below empty: the next release comes within one
    // packet's time (1040 bytes at 5 Gb/s: 1.66 µs), lets one packet go,
    // and the one after comes a packet's time later.
    let one = 1040.0 * 8.0 * 1000.0 / rate;
    let release = p.eps[0].poll_timeout().unwrap();
    assert!(release > p.now && (release.as_nanos() as f64) <= one + 1.0);
    p.eps[0].handle_timeout(release);
    let next: Vec<_> = std::iter::from_fn(|| p.eps[0].poll_transmit(release)).collect();
    assert_eq!(next.len(), 1, "one packet per release");
    let again = p.eps[0].poll_timeout().unwrap();
    let gap = (again.as_nanos() - release.as_nanos()) as f64;
    // At the rate of now: the bytes sent moved DCQCN's byte counter, and
    // its fast recovery raised the rate since the cut.
    let rate = p.eps[0].qp_congestion(a.qpn, release).unwrap().rate_mbps;
    let one = 1040.0 * 8.0 * 1000.0 / rate;
    assert!((gap - one).abs() < 2.0, "{gap} ns, one packet {one} ns");
}
