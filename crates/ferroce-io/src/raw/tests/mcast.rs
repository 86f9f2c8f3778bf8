//! Multicast groups across the veth, both backends: a UDP backend in b
//! joins an IPv4 and an IPv6 group (the kernel lists the memberships on
//! b's eth0), a UDP backend in a sends UD packets to them from its own
//! interface, and b hands them on as multicast with their ICRC checked
//! for the group; after `leave` nothing more arrives and the membership
//! is gone. The raw backend's join shows in the kernel's list too.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::netns::{A4, A6, B4, B6, IFACE, Pair};
use super::open_in;
use crate::udp::{OutDatagram, Receiver, UdpBackend, UdpConfig};
use ferroce_wire::{Opcode, samples};

/// What arrived as multicast: (from, group, transport).
#[derive(Default)]
struct Groups(Vec<(IpAddr, IpAddr, Vec<u8>)>);

impl Receiver for Groups {
    fn accepts(&mut self, _: IpAddr, _: u32) -> bool {
        false
    }
    fn deliver(&mut self, _: IpAddr, _: u16, _: &[u8]) {}
    fn accepts_group(&mut self, _: IpAddr, _: IpAddr) -> bool {
        true
    }
    fn deliver_multicast(&mut self, from: IpAddr, group: IpAddr, _: u16, _: u8, data: &[u8]) {
        self.0.push((from, group, data.to_vec()));
    }
}

/// A UD SEND_ONLY to the multicast QPN (its ICRC is the backend's to fill).
fn ud_to_group(psn: u32) -> Vec<u8> {
    let mut t = samples::transport(Opcode::UD_SEND_ONLY, psn, 32);
    t.bth.dest_qp = 0xff_ffff;
    let mut buf = vec![0; t.buffer_len()];
    let n = t.emit(&mut buf, &[psn as u8; 32]).unwrap();
    buf.truncate(n);
    buf
}

fn udp_in(ns: &str, local: IpAddr) -> UdpBackend {
    Pair::run_in(ns, || {
        UdpBackend::bind(UdpConfig::new(local)).expect("bind")
    })
}

fn send(tx: &mut UdpBackend, group: IpAddr, psn: u32) {
    let mut data = ud_to_group(psn);
    let mut batch = [OutDatagram {
        remote: group,
        remote_port: 4791,
        src_port: 0xc000,
        tos: 0,
        transport: &mut data,
    }];
    assert_eq!(tx.send(&mut batch).expect("send"), 1);
}

fn receive(rx: &mut UdpBackend, want: usize, wait: Duration) -> Groups {
    let mut got = Groups::default();
    let deadline = Instant::now() + wait;
    while got.0.len() < want && Instant::now() < deadline {
        if rx.recv_into(&mut got).expect("receive") == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    got
}

/// The groups the kernel lists on b's eth0 (`ip maddr`).
fn memberships(ns: &str) -> String {
    Pair::exec(ns, &["ip", "maddr", "show", "dev", IFACE])
}

#[test]
fn udp_backends_join_send_to_and_leave_ipv4_and_ipv6_groups() {
    let Some(pair) = Pair::new("mc") else { return };
    for (a, b, group) in [
        (IpAddr::V4(A4), IpAddr::V4(B4), "239.255.19.1"),
        (IpAddr::V6(A6), IpAddr::V6(B6), "ff0e::19:1"),
    ] {
        let group: IpAddr = group.parse().unwrap();
        let mut tx = udp_in(&pair.a, a);
        let mut rx = udp_in(&pair.b, b);
        // Sockets are made in the calling thread's namespace: the
        // backend's own, in a process that lives in one.
        Pair::run_in(&pair.b, || rx.join(group)).expect("join");
        assert!(memberships(&pair.b).contains(&group.to_string()), "{group}");
        // A fresh veth may drop the first IPv6 packets while its address
        // configuration settles: probe until one arrives.
        let ready = (0..50).any(|_| {
            Pair::run_in(&pair.a, || send(&mut tx, group, 100));
            !receive(&mut rx, 1, Duration::from_millis(100)).0.is_empty()
        });
        assert!(ready, "{group}: no probe arrived in 5 s");
        Pair::run_in(&pair.a, || (0..5).for_each(|psn| send(&mut tx, group, psn)));
        let got = receive(&mut rx, 5, Duration::from_secs(5));
        assert_eq!(got.0.len(), 5, "{group}: {:?} {:?}", rx.stats(), tx.stats());
        for (from, to, data) in &got.0 {
            assert_eq!((*from, *to), (a, group));
            assert_eq!(data[5..8], [0xff; 3], "the multicast QPN");
        }
        assert_eq!(rx.stats().rx_bad_icrc, 0);
        rx.leave(group);
        assert!(
            !memberships(&pair.b).contains(&group.to_string()),
            "{group} left"
        );
        Pair::run_in(&pair.a, || send(&mut tx, group, 9));
        assert!(receive(&mut rx, 1, Duration::from_millis(200)).0.is_empty());
    }
}

#[test]
fn the_raw_backend_joins_the_group_on_its_interface() {
    let Some(pair) = Pair::new("mcraw") else {
        return;
    };
    let mut raw = open_in(&pair.b, vec![]);
    for group in ["239.255.19.2", "ff0e::19:2"] {
        let group: IpAddr = group.parse().unwrap();
        Pair::run_in(&pair.b, || raw.join(group)).expect("join");
        assert!(memberships(&pair.b).contains(&group.to_string()), "{group}");
        raw.leave(group);
        assert!(
            !memberships(&pair.b).contains(&group.to_string()),
            "{group} left"
        );
    }
}
