//! The device's held packets and pacing: order per priority, other
//! priorities flowing past a pause, back-pressure when full, the driver's
//! wake-up. Pauses at 1 Mbit/s (65535 quanta: 33 s) so that no pause or
//! refill runs out while a test runs.

use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::verbs::{Path, RoceMode};
use ferroce_core::{Ecn, PacketKind};

use super::*;
use crate::config_raw::PfcConfig;

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

fn qos(pfc: bool) -> Qos {
    let opts = RawOptions {
        pcp: PcpMap::precedence(),
        pfc: pfc.then_some(PfcConfig {
            link_mbps: Some(1),
            ..PfcConfig::default()
        }),
        ..RawOptions::default()
    };
    Qos::new(&opts, "no-such-interface", 6)
}

/// A 1000-byte packet of traffic class `tos`, marked `n` in its data.
fn packet(tos: u8, n: u8) -> Transmit {
    Transmit {
        path: Path {
            remote: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            udp_src_port: 0xc000,
            traffic_class: tos,
            hop_limit: 64,
            roce: RoceMode::V2,
        },
        kind: PacketKind::Request,
        ecn: Ecn::NotEct,
        data: std::iter::once(Opcode::RC_SEND_ONLY.0)
            .chain(std::iter::repeat_n(n, 999))
            .collect(),
    }
}

fn pause(p: usize, quanta: u16) -> MacControlRepr {
    let mut q = [0; PRIORITIES];
    q[p] = quanta;
    MacControlRepr::Pfc {
        enabled: 1 << p,
        quanta: q,
    }
}

const PRIO3: u8 = 3 << 5;
const PRIO5: u8 = 5 << 5;

#[test]
fn a_paused_priority_holds_in_order_and_others_flow() {
    let mut q = qos(true);
    q.on_mac_control(&pause(3, u16::MAX));
    assert!(q.must_hold(&packet(PRIO3, 0)));
    assert!(
        !q.must_hold(&packet(PRIO5, 0)),
        "priority 5 stopped by a pause of 3"
    );
    for n in 0..3 {
        assert!(q.hold(MAC, &packet(PRIO3, n)));
    }
    assert!(q.take_ready().is_empty(), "released while paused");
    assert!(q.wake_in().is_some_and(|d| d > Duration::from_secs(30)));
    q.on_mac_control(&pause(3, 0));
    // Still held before it: a new packet queues behind them.
    assert!(q.must_hold(&packet(PRIO3, 0)));
    let ready = q.take_ready();
    let order: Vec<u8> = ready.iter().map(|(_, t)| t.data[1]).collect();
    assert_eq!(order, [0, 1, 2]);
    // The ring took one: the others go back first, in order.
    q.put_back(ready.into_iter().skip(1).collect());
    let again: Vec<u8> = q.take_ready().iter().map(|(_, t)| t.data[1]).collect();
    assert_eq!(again, [1, 2]);
    assert_eq!(q.tx_held, 3);
    let s = q.stats();
    assert_eq!((s.rx_pause[3], s.rx_resume[3]), (1, 1));
}

/// A CNP: opcode 0x81 first, traffic class `tos`.
fn cnp(tos: u8) -> Transmit {
    let mut t = packet(tos, 0);
    t.data[0] = Opcode::CNP.0;
    t
}

#[test]
fn cnps_take_their_own_priority_past_a_paused_roce_priority() {
    let mut q = qos(true);
    assert_eq!(q.priority(&packet(PRIO3, 0)), 3);
    assert_eq!(q.priority(&cnp(PRIO3)), 6, "cnp_802p_prio, not the class's");
    assert_eq!(q.tag(&cnp(PRIO3)).map(|t| t.pcp), Some(6));
    q.on_mac_control(&pause(3, u16::MAX));
    assert!(q.must_hold(&packet(PRIO3, 0)));
    assert!(
        !q.must_hold(&cnp(PRIO3)),
        "a CNP waited behind RoCE's pause"
    );
    // Held on its own priority when that one is paused.
    q.on_mac_control(&pause(6, u16::MAX));
    assert!(q.must_hold(&cnp(PRIO3)));
    assert!(q.hold(MAC, &cnp(PRIO3)));
    q.on_mac_control(&pause(6, 0));
    assert_eq!(q.take_ready().len(), 1);
}

#[test]
fn a_full_priority_refuses_instead_of_dropping() {
    let mut q = qos(true);
    q.on_mac_control(&pause(5, u16::MAX));
    for n in 0..MAX_HELD {
        assert!(q.hold(MAC, &packet(PRIO5, n as u8)));
    }
    assert!(!q.hold(MAC, &packet(PRIO5, 0)), "taken past MAX_HELD");
    assert!(
        q.hold(MAC, &packet(PRIO3, 0)),
        "priority 3 has its own room"
    );
}

#[test]
fn sends_are_paced_at_the_link_speed() {
    let mut q = qos(true);
    q.refill();
    let mut sent = 0;
    while !q.must_hold(&packet(PRIO3, 0)) {
        q.sent(1000);
        sent += 1;
        assert!(sent < 1000, "never paced");
    }
    // A 64 KiB bucket of 1066-byte frames.
    assert_eq!(sent, 62);
    assert!(q.hold(MAC, &packet(PRIO3, 0)));
    assert!(q.take_ready().is_empty(), "released with an empty bucket");
    // At 1 Mbit/s the next frame's bytes take about 8 ms to come.
    let wait = q.wake_in().unwrap();
    assert!(
        wait > Duration::from_millis(1) && wait < Duration::from_millis(20),
        "{wait:?}"
    );
}

#[test]
fn without_pfc_nothing_is_held_or_tagged() {
    let mut q = qos(false);
    q.on_mac_control(&pause(3, u16::MAX));
    assert!(!q.must_hold(&packet(PRIO3, 0)));
    assert_eq!(q.tag(&packet(PRIO3, 0)), None);
    assert_eq!(q.wake_in(), None);
    assert_eq!(q.stats(), PfcStats::default());
    // With PFC on and no VLAN, the priority tag (VID 0).
    let tag = qos(true).tag(&packet(PRIO5, 0)).unwrap();
    assert_eq!((tag.vid, tag.pcp), (0, 5));
}
