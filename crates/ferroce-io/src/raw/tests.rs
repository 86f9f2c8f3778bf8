//! The raw backend between two network namespaces joined by a veth pair
//! (root only; skipped with a message otherwise).

mod backlog;
mod capture;
mod gso;
mod mcast;
mod netns;
#[path = "../../../ferroce-verbs/tests/shared/skip.rs"]
mod skip;

use std::time::{Duration, Instant};

use ferroce_wire::ethernet::VlanTag;
use ferroce_wire::{Opcode, RoceVersion, samples};

use super::frame::{FrameBuilder, FrameSpec, L3, RxPacket};
use super::*;
use netns::{A4, A6, B4, B6, IFACE, Pair};

/// What a receiver got: (version, PCP, ECN, transport bytes).
#[derive(Default)]
struct Collect(Vec<(RoceVersion, Option<u8>, u8, Vec<u8>)>);

impl RawReceiver for Collect {
    fn deliver(&mut self, p: &RxPacket<'_>) {
        self.0.push((
            p.version(),
            p.vlan.map(|t| t.pcp),
            p.ecn(),
            p.transport.to_vec(),
        ));
    }
}

/// Counts what it receives.
struct Count(usize);

impl RawReceiver for Count {
    fn deliver(&mut self, _: &RxPacket<'_>) {
        self.0 += 1;
    }
}

fn open_in(ns: &str, hold: Vec<IpAddr>) -> RawBackend {
    let mut cfg = RawConfig::new(IFACE);
    cfg.hold_port = hold;
    Pair::run_in(ns, || RawBackend::open(&cfg).expect("open the raw backend"))
}

/// A SEND_ONLY transport of `len` payload bytes, PSN `psn`.
fn transport(psn: u32, len: usize) -> Vec<u8> {
    let t = samples::transport(Opcode::RC_SEND_ONLY, psn, len);
    let mut buf = vec![0; t.buffer_len()];
    let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ psn) as u8).collect();
    let n = t.emit(&mut buf, &payload).unwrap();
    buf.truncate(n);
    buf
}

/// Receives on `rx` until `want` packets or 5 s.
fn receive(rx: &mut RawBackend, want: usize) -> Collect {
    let mut got = Collect::default();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.0.len() < want && Instant::now() < deadline {
        if rx.recv(&mut got) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    got
}

fn l3s() -> [L3; 3] {
    [
        L3::V2Ipv4 {
            src: A4,
            dst: B4,
            tos: (26 << 2) | 1,
            ttl: 64,
            src_port: 0xc001,
        },
        L3::V2Ipv6 {
            src: A6,
            dst: B6,
            traffic_class: 2,
            flow_label: 0x54321,
            hop_limit: 64,
            src_port: 0xc002,
        },
        L3::V1 {
            sgid: crate::route::neigh::link_local_from_mac([2, 0, 0, 0, 0, 0xa]),
            dgid: crate::route::neigh::link_local_from_mac([2, 0, 0, 0, 0, 0xb]),
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 1,
        },
    ]
}

#[test]
fn v1_and_v2_frames_cross_the_veth_with_and_without_a_tag() {
    kinds_cross("kinds", false);
}

#[test]
fn the_frame_by_frame_receive_ring_takes_the_same_frames() {
    kinds_cross("frames", true);
}

/// Every kind of frame, tagged and not, into a receiver with a block ring
/// or (`frame_by_frame`) a frame ring.
fn kinds_cross(tag: &str, frame_by_frame: bool) {
    let Some(pair) = Pair::new(tag) else {
        return;
    };
    let mut a = open_in(&pair.a, vec![]);
    // B's link-local address is the EUI-64 one the kernel derived from its
    // MAC, as `link_local_from_mac` derives it; its port is held too.
    let mac = open_in(&pair.b, vec![]).mac();
    let ll = crate::route::neigh::link_local_from_mac(mac);
    let shown = Pair::exec(
        &pair.b,
        &["ip", "-6", "addr", "show", "dev", IFACE, "scope", "link"],
    );
    assert!(shown.contains(&format!("{ll}/64")), "{ll} not in {shown}");
    let mut cfg = RawConfig::new(IFACE);
    cfg.hold_port = vec![B4.into(), B6.into(), ll.into()];
    cfg.rx_frame_by_frame = frame_by_frame;
    let mut b = Pair::run_in(&pair.b, || RawBackend::open(&cfg).unwrap());
    assert_eq!(b.held_ports(), 3);
    let mut builder = FrameBuilder::new(1);
    let mut sent = Vec::new();
    for (i, l3) in l3s().into_iter().enumerate() {
        for vlan in [
            None,
            Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 0,
            }),
        ] {
            let spec = FrameSpec {
                dst_mac: b.mac(),
                src_mac: a.mac(),
                vlan,
                l3,
            };
            let t = transport(sent.len() as u32, 200 + i);
            assert!(a.queue(|slot| builder.build(&spec, &t, slot).unwrap()));
            sent.push((l3, vlan.map(|v| v.pcp), t));
        }
    }
    a.flush().unwrap();
    let got = receive(&mut b, sent.len());
    assert_eq!(got.0.len(), sent.len(), "received {:?}", b.stats());
    for ((l3, pcp, t), (version, got_pcp, ecn, bytes)) in sent.iter().zip(&got.0) {
        let want = match l3 {
            L3::V2Ipv4 { .. } => RoceVersion::V2Ipv4,
            L3::V2Ipv6 { .. } => RoceVersion::V2Ipv6,
            L3::V1 { .. } => RoceVersion::V1,
        };
        assert_eq!((*version, *got_pcp), (want, *pcp));
        let want_ecn = match l3 {
            L3::V2Ipv4 { tos, .. } => tos & 3,
            L3::V2Ipv6 { traffic_class, .. } => traffic_class & 3,
            L3::V1 { .. } => 0,
        };
        assert_eq!(*ecn, want_ecn);
        // Same transport, the ICRC now filled in (and checked on receive).
        assert_eq!(bytes[..bytes.len() - 4], t[..t.len() - 4]);
    }
    let s = b.stats();
    assert_eq!(
        (s.rx_roce, s.rx_bad_icrc, s.rx_malformed, s.rx_ring_drops),
        (6, 0, 0, 0)
    );
    assert_eq!(a.stats().tx_frames, 6);
}

#[test]
fn a_corrupted_icrc_is_counted_and_dropped() {
    let Some(pair) = Pair::new("icrc") else {
        return;
    };
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![B4.into()]);
    let spec = FrameSpec {
        dst_mac: b.mac(),
        src_mac: a.mac(),
        vlan: None,
        l3: l3s()[0],
    };
    let mut builder = FrameBuilder::default();
    let t = transport(5, 64);
    assert!(a.queue(|slot| {
        let n = builder.build(&spec, &t, slot).unwrap();
        slot[n - 1] ^= 0xff; // the ICRC's last byte
        n
    }));
    assert!(a.queue(|slot| builder.build(&spec, &t, slot).unwrap()));
    a.flush().unwrap();
    let got = receive(&mut b, 1);
    std::thread::sleep(Duration::from_millis(20));
    let mut more = Collect::default();
    b.recv(&mut more);
    assert_eq!(
        got.0.len() + more.0.len(),
        1,
        "only the good frame is delivered"
    );
    let s = b.stats();
    assert_eq!((s.rx_frames, s.rx_roce, s.rx_bad_icrc), (2, 1, 1));
}

#[test]
fn other_traffic_is_filtered_in_the_kernel() {
    let Some(pair) = Pair::new("filter") else {
        return;
    };
    let mut b = open_in(&pair.b, vec![]);
    // ARP and neighbour discovery, a TCP connection attempt (SYN, then
    // the RST back), UDP to other ports over IPv4 and IPv6: none of it
    // RoCE. (No ping: the test machine may not have one.)
    Pair::run_in(&pair.a, || {
        let refused = std::net::TcpStream::connect_timeout(
            &SocketAddr::new(B4.into(), 9),
            Duration::from_secs(2),
        );
        assert!(refused.is_err(), "nothing listens on TCP 9");
        for (from, to) in [(IpAddr::from(A4), IpAddr::from(B4)), (A6.into(), B6.into())] {
            let s = std::net::UdpSocket::bind((from, 0)).unwrap();
            s.send_to(b"not roce", (to, 9999)).unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut got = Collect::default();
    b.recv(&mut got);
    let s = b.stats();
    assert_eq!((s.rx_frames, s.rx_not_roce), (0, 0), "{s:?}");
    // The same traffic reached the interface: its counter moved.
    let rx_packets = Pair::exec(
        &pair.b,
        &["cat", "/sys/class/net/eth0/statistics/rx_packets"],
    );
    assert!(
        rx_packets.trim().parse::<u64>().unwrap() >= 4,
        "{rx_packets}"
    );
}

/// `Udp: ... NoPorts ...` of `/proc/net/snmp` in namespace `ns`.
fn udp_no_ports(ns: &str) -> u64 {
    let snmp = Pair::exec(ns, &["cat", "/proc/net/snmp"]);
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let i = names
        .split_whitespace()
        .position(|w| w == "NoPorts")
        .unwrap();
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

#[test]
fn ten_thousand_frames_arrive_and_port_4791_is_held() {
    const FRAMES: usize = 10_000;
    /// Frames sent before waiting for the receiver: below the veth's
    /// backlog (net.core.netdev_max_backlog, 1000 by default).
    const BURST: usize = 256;
    let Some(pair) = Pair::new("batch") else {
        return;
    };
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![B4.into()]);
    let no_ports = udp_no_ports(&pair.b);
    let spec = FrameSpec {
        dst_mac: b.mac(),
        src_mac: a.mac(),
        vlan: None,
        l3: l3s()[0],
    };
    let mut builder = FrameBuilder::default();
    let t = transport(1, 1024);
    let mut got = Count(0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    while sent < FRAMES && Instant::now() < deadline {
        let burst = BURST.min(FRAMES - sent);
        for _ in 0..burst {
            while !a.queue(|slot| builder.build(&spec, &t, slot).unwrap()) {
                a.flush().unwrap();
                std::thread::yield_now();
            }
        }
        a.flush().unwrap();
        sent += burst;
        while got.0 < sent && Instant::now() < deadline {
            if b.recv(&mut got) == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    let s = b.stats();
    assert_eq!(
        (s.rx_roce, s.rx_ring_drops, s.rx_bad_icrc),
        (FRAMES as u64, 0, 0),
        "{s:?}"
    );
    // The kernel delivered them to the held port's socket, not to ICMP.
    assert_eq!(udp_no_ports(&pair.b), no_ports);
}

#[test]
fn the_peer_resolves_and_a_missing_one_is_named() {
    let Some(pair) = Pair::new("neigh") else {
        return;
    };
    let b = open_in(&pair.b, vec![]);
    let (mac4, mac6, missing) = Pair::run_in(&pair.a, || {
        let wait = Duration::from_secs(3);
        (
            crate::route::neigh::resolve(B4.into(), IFACE, wait),
            crate::route::neigh::resolve(B6.into(), IFACE, wait),
            crate::route::neigh::resolve("10.19.0.99".parse().unwrap(), IFACE, wait),
        )
    });
    assert_eq!(mac4.unwrap(), b.mac());
    assert_eq!(mac6.unwrap(), b.mac());
    let e = missing.unwrap_err().to_string();
    assert!(e.contains("10.19.0.99") && e.contains(IFACE), "{e}");
    // A stale entry answers at once, and the kernel is asked to re-confirm
    // it: STALE becomes DELAY (then PROBE) as for the kernel's own traffic.
    let mac = b.mac().map(|o| format!("{o:02x}")).join(":");
    netns::ip(&[
        "-n",
        &pair.a,
        "neigh",
        "change",
        &B4.to_string(),
        "dev",
        IFACE,
        "lladdr",
        &mac,
        "nud",
        "stale",
    ]);
    let again = Pair::run_in(&pair.a, || {
        crate::route::neigh::resolve(B4.into(), IFACE, Duration::from_secs(3))
    });
    assert_eq!(again.unwrap(), b.mac());
    let state = Pair::exec(
        &pair.a,
        &["ip", "neigh", "get", &B4.to_string(), "dev", IFACE],
    );
    assert!(
        state.contains("DELAY") || state.contains("PROBE") || state.contains("REACHABLE"),
        "{state}"
    );
}

#[test]
fn a_missing_interface_is_named() {
    let e = RawBackend::open(&RawConfig::new("nosuch0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nosuch0"), "{e}");
}

#[test]
fn pfc_frames_are_received_and_reported() {
    use ferroce_wire::pfc::{self, MacControlRepr};
    struct Mac(Vec<([u8; 6], MacControlRepr)>);
    impl RawReceiver for Mac {
        fn deliver(&mut self, _: &RxPacket<'_>) {}
        fn mac_control(&mut self, src: [u8; 6], repr: MacControlRepr) {
            self.0.push((src, repr));
        }
    }
    let Some(pair) = Pair::new("pfc") else { return };
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![]);
    let repr = MacControlRepr::Pfc {
        enabled: 1 << 3,
        quanta: [0, 0, 0, 0xffff, 0, 0, 0, 0],
    };
    assert!(a.queue_frame(&pfc::frame(a.mac(), &repr)));
    a.flush().unwrap();
    let mut got = Mac(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.0.is_empty() && Instant::now() < deadline {
        b.recv(&mut got);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(got.0, [(a.mac(), repr)]);
    assert_eq!(b.stats().rx_mac_control, 1);
}

#[test]
fn the_receive_descriptor_wakes_a_sleeper() {
    let Some(pair) = Pair::new("wake") else {
        return;
    };
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![B4.into()]);
    let spec = FrameSpec {
        dst_mac: b.mac(),
        src_mac: a.mac(),
        vlan: None,
        l3: l3s()[0],
    };
    let sleeper = crate::Sleeper::new().unwrap();
    let t = transport(9, 16);
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let mut builder = FrameBuilder::default();
            assert!(a.queue(|slot| builder.build(&spec, &t, slot).unwrap()));
            a.flush().unwrap();
        });
        // Readable once the kernel hands the block over (the frame, then
        // the block timeout): long before the 5 s limit.
        sleeper
            .sleep_on(b.wait_fd(), Duration::from_secs(5))
            .unwrap();
    });
    let waited = start.elapsed();
    let mut got = Count(0);
    b.recv(&mut got);
    assert_eq!(got.0, 1, "woke after {waited:?} with nothing to read");
    assert!(
        waited < Duration::from_secs(2),
        "woke only after {waited:?}"
    );
}

#[test]
fn a_bad_ring_size_names_the_setting() {
    let Some(pair) = Pair::new("config") else {
        return;
    };
    let mut cfg = RawConfig::new(IFACE);
    cfg.rx_block_size = 1000;
    let e = Pair::run_in(&pair.a, || RawBackend::open(&cfg).unwrap_err().to_string());
    assert!(
        e.contains("receive ring") && e.contains("rx_block_size"),
        "{e}"
    );
    // The frame-by-frame ring's size is named too.
    let mut cfg = RawConfig::new(IFACE);
    (cfg.rx_frame_by_frame, cfg.rx_frame_size) = (true, 1000);
    let e = Pair::run_in(&pair.a, || RawBackend::open(&cfg).unwrap_err().to_string());
    assert!(
        e.contains("receive ring") && e.contains("rx_frame_size"),
        "{e}"
    );
}

#[test]
fn a_full_receive_ring_counts_the_kernels_drops() {
    const SENT: u64 = 200;
    let Some(pair) = Pair::new("ringfull") else {
        return;
    };
    // The sender through the qdisc layer this time.
    let mut cfg = RawConfig::new(IFACE);
    cfg.qdisc_bypass = false;
    let mut a = Pair::run_in(&pair.a, || RawBackend::open(&cfg).unwrap());
    // Two 4 KiB blocks: three 1 KiB frames each.
    let mut cfg = RawConfig::new(IFACE);
    (cfg.rx_block_size, cfg.rx_blocks) = (4096, 2);
    let mut b = Pair::run_in(&pair.b, || RawBackend::open(&cfg).unwrap());
    let spec = FrameSpec {
        dst_mac: b.mac(),
        src_mac: a.mac(),
        vlan: None,
        l3: l3s()[0],
    };
    let mut builder = FrameBuilder::default();
    let t = transport(3, 1000);
    for _ in 0..SENT {
        assert!(a.queue(|slot| builder.build(&spec, &t, slot).unwrap()));
        if a.stats().tx_frames.is_multiple_of(64) {
            a.flush().unwrap();
        }
    }
    a.flush().unwrap();
    // Nothing is read until everything has arrived (or been dropped).
    std::thread::sleep(Duration::from_millis(300));
    let mut got = Count(0);
    b.recv(&mut got);
    let s = b.stats();
    assert!(s.rx_ring_drops > 0 && got.0 <= 6, "{s:?}");
    assert_eq!(got.0 as u64 + s.rx_ring_drops, SENT, "{s:?}");
}
