//! Tests of the device, port and GID attributes: against the rig's
//! `ibv_devinfo`, rxe's rules and the engine's limits, and on this host.

use super::*;
use crate::{Mtu, QpType, VerbsError};
use ferroce_core::{Endpoint, EndpointConfig, QpInit};

const RIG_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x52, 0x00, 0x0a];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn iface(name: &str, mac: Option<[u8; 6]>, mtu: u32, addrs: &[&str]) -> Interface {
    Interface {
        name: name.into(),
        mac,
        mtu,
        addrs: addrs.iter().map(|a| ip(a)).collect(),
        up: true,
        running: true,
        loopback: mac.is_none(),
        speed_mbps: None,
    }
}

fn texts(table: &[Gid]) -> Vec<String> {
    table.iter().map(ToString::to_string).collect()
}

#[test]
fn eui64_of_the_rig_mac() {
    // shared/rig/README.md §3: node_guid 5054:00ff:fe52:000a.
    assert_eq!(Guid::from_mac(RIG_MAC).to_string(), "5054:00ff:fe52:000a");
    assert_eq!(
        Guid::from_mac(RIG_MAC).to_be_bytes(),
        [0x50, 0x54, 0x00, 0xff, 0xfe, 0x52, 0x00, 0x0a]
    );
    // The U/L bit flips both ways.
    let local_mac = [0x02, 0xfc, 0, 0, 0, 1];
    assert_eq!(Guid::from_mac(local_mac).to_string(), "00fc:00ff:fe00:0001");
    let eth0 = iface("eth0", Some(RIG_MAC), 1500, &["198.18.0.11"]);
    let attr = device_attr_for(&eth0, ip("198.18.0.11"));
    assert_eq!(attr.node_guid, Guid::from_mac(RIG_MAC));
    assert_eq!(attr.sys_image_guid, attr.node_guid);
}

#[test]
fn guid_without_a_mac_is_stable_and_local() {
    let lo = iface("lo", None, 65536, &["127.0.0.1", "::1"]);
    let g = node_guid_for(&lo, ip("127.0.0.1"));
    assert_eq!(g.to_string(), "0000:7fff:fe00:0001");
    assert_eq!(g, node_guid_for(&lo, ip("::ffff:127.0.0.1")));
    assert_eq!(node_guid_for(&lo, ip("::1")), node_guid_for(&lo, ip("::1")));
    assert_ne!(node_guid_for(&lo, ip("::1")), g);
    // Modified EUI-64 "u" bit clear: not a universal (IEEE) identifier.
    assert_eq!(node_guid_for(&lo, ip("::1")).to_be_bytes()[0] & 0x02, 0);
}

#[test]
fn mtu_mapping() {
    let cases = [
        (1500, Mtu::Mtu1024), // rxe: 1024 (3), rig README §3
        (9000, Mtu::Mtu4096), // rxe: 4096 (5) with RIG_MTU=9000
        (1400, Mtu::Mtu1024),
        (65536, Mtu::Mtu4096), // lo
        (4096 + 84, Mtu::Mtu4096),
        (4096 + 83, Mtu::Mtu2048),
        (2048 + 84, Mtu::Mtu2048),
        (1024 + 84, Mtu::Mtu1024),
        // rxe says 1024 here (1104 - 80); a 1024-byte WRITE_ONLY_WITH_IMM
        // over IPv6 would be 1108 bytes.
        (1104, Mtu::Mtu512),
        (576, Mtu::Mtu256),
        (68, Mtu::Mtu256), // rxe's floor
        (0, Mtu::Mtu256),
    ];
    for (netdev, want) in cases {
        assert_eq!(active_mtu(netdev), want, "netdev MTU {netdev}");
    }
    // The budget covers the largest headers on a full-MTU packet.
    let ipv6_udp = 40 + 8;
    let bth_reth_immdt = 12 + 16 + 4;
    let icrc = 4;
    assert_eq!(MTU_HEADER_BUDGET, ipv6_udp + bth_reth_immdt + icrc);
}

#[test]
fn gid_order_as_on_the_rig() {
    // getifaddrs lists IPv4 first, then IPv6 with wider scope first.
    let eth0 = iface(
        "eth0",
        Some(RIG_MAC),
        1500,
        &["198.18.0.11", "fd52:6f43:4500::11", "fe80::5054:ff:fe52:a"],
    );
    let table = gid_table_for(&eth0);
    assert_eq!(
        texts(&table),
        [
            "fe80::5054:ff:fe52:a",
            "::ffff:198.18.0.11",
            "fd52:6f43:4500::11"
        ]
    );
    // sysfs spells the IPv4 one 0000:...:ffff:c612:000b.
    assert_eq!(
        table[1].long_form(),
        "0000:0000:0000:0000:0000:ffff:c612:000b"
    );
    assert!(table.iter().all(|g| g.kind == GidType::RoceV2));
    assert!(table.iter().all(|g| g.netdev == "eth0"));
    assert_eq!(gid_index(&table, ip("198.18.0.11")), Some(1));
    assert_eq!(gid_index(&table, ip("::ffff:198.18.0.11")), Some(1));
    assert_eq!(gid_index(&table, ip("fd52:6f43:4500::11")), Some(2));
    assert_eq!(gid_index(&table, ip("198.18.0.12")), None);
}

/// The raw backend's table: each entry as RoCE v1 then RoCE v2, at 2i and
/// 2i + 1, as a ConnectX port lists them (the default fe80:: GID too).
#[test]
fn raw_backend_table_has_both_types_per_address() {
    let eth0 = iface(
        "eth0",
        Some(RIG_MAC),
        1500,
        &["198.18.0.11", "fd52:6f43:4500::11"],
    );
    let table = with_both_types(gid_table_for(&eth0));
    let kinds: Vec<GidType> = table.iter().map(|g| g.kind).collect();
    assert_eq!(kinds, [GidType::RoceV1, GidType::RoceV2].repeat(3));
    assert_eq!(
        texts(&table),
        [
            "fe80::5054:ff:fe52:a",
            "fe80::5054:ff:fe52:a",
            "::ffff:198.18.0.11",
            "::ffff:198.18.0.11",
            "fd52:6f43:4500::11",
            "fd52:6f43:4500::11"
        ]
    );
    // The first entry of an address is its v1 one.
    assert_eq!(gid_index(&table, ip("198.18.0.11")), Some(2));
    // Never more than the table holds.
    let many: Vec<String> = (0..600)
        .map(|i| format!("10.0.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let big = with_both_types(gid_table_for(&iface("eth1", Some(RIG_MAC), 1500, &many)));
    assert_eq!(big.len(), GID_TABLE_LEN as usize);
}

#[test]
fn gid_order_other_shapes() {
    // Stable-privacy link-local: the default GID stays at 0 and the
    // real link-local comes with the other IPv6 addresses.
    let eth0 = iface(
        "eth0",
        Some(RIG_MAC),
        1500,
        &[
            "2001:db8::5",
            "fe80::1234:5678:9abc:def0",
            "10.0.0.1",
            "10.0.0.2",
        ],
    );
    assert_eq!(
        texts(&gid_table_for(&eth0)),
        [
            "fe80::5054:ff:fe52:a",
            "::ffff:10.0.0.1",
            "::ffff:10.0.0.2",
            "2001:db8::5",
            "fe80::1234:5678:9abc:def0"
        ]
    );
    // IPv6 disabled: the default GID is there all the same, as on rxe.
    let v4only = iface("eth1", Some(RIG_MAC), 1500, &["10.0.0.1"]);
    assert_eq!(
        texts(&gid_table_for(&v4only)),
        ["fe80::5054:ff:fe52:a", "::ffff:10.0.0.1"]
    );
    // No MAC: link-local first, then IPv4, then the rest.
    let tun = iface("tun0", None, 1500, &["10.8.0.1", "2001:db8::1", "fe80::1"]);
    assert_eq!(
        texts(&gid_table_for(&tun)),
        ["fe80::1", "::ffff:10.8.0.1", "2001:db8::1"]
    );
    let lo = iface("lo", None, 65536, &["127.0.0.1", "::1"]);
    assert_eq!(texts(&gid_table_for(&lo)), ["::ffff:127.0.0.1", "::1"]);
    // The table stops at GID_TABLE_LEN.
    let many: Vec<String> = (0..1100).map(|i| format!("2001:db8::{i:x}")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let big = iface("eth2", Some(RIG_MAC), 1500, &refs);
    assert_eq!(gid_table_for(&big).len(), GID_TABLE_LEN as usize);
}

#[test]
fn gid_text_as_inet_ntop() {
    let show = |s: &str| Gid::from_ip(ip(s), "x").to_string();
    assert_eq!(show("198.18.0.11"), "::ffff:198.18.0.11");
    assert_eq!(show("::1"), "::1");
    assert_eq!(show("::"), "::");
    // glibc prints the deprecated IPv4-compatible form dotted...
    assert_eq!(show("::c612:b"), "::198.18.0.11");
    // ...but not when the 16 bits before the last are zero.
    assert_eq!(show("::2"), "::2");
    assert_eq!(show("fe80::5054:ff:fe52:a"), "fe80::5054:ff:fe52:a");
    assert_eq!(show("fd52:6f43:4500::11"), "fd52:6f43:4500::11");
    assert_eq!(show("2001:db8:0:1:0:0:0:1"), "2001:db8:0:1::1");
    assert_eq!(show("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
    assert_eq!(
        Gid::from_ip(ip("::ffff:198.18.0.11"), "x").ip(),
        ip("198.18.0.11")
    );
}

#[test]
fn port_state_speed_and_limits() {
    let mut eth0 = iface("eth0", Some(RIG_MAC), 1500, &["198.18.0.11"]);
    let p = port_attr_for(&eth0);
    assert_eq!(p.state, PortState::Active);
    assert_eq!(p.phys_state, PhysState::LinkUp);
    assert_eq!((p.max_mtu, p.active_mtu), (Mtu::Mtu4096, Mtu::Mtu1024));
    assert_eq!(p.link_layer, LinkLayer::Ethernet);
    assert_eq!((p.gid_tbl_len, p.pkey_tbl_len), (1024, 1));
    assert_eq!(p.max_msg_sz, 0x80_0000);
    // Unknown link speed: 1X SDR, as rxe on virtio-net.
    assert_eq!((p.active_speed, p.active_width), (speed::SDR, width::X1));
    eth0.running = false;
    let p = port_attr_for(&eth0);
    assert_eq!(
        (p.state, p.phys_state),
        (PortState::Down, PhysState::Polling)
    );
    eth0.up = false;
    assert_eq!(port_attr_for(&eth0).phys_state, PhysState::Disabled);

    for (mbps, want) in [
        (100, (speed::SDR, width::X1)),
        (10_000, (speed::FDR10, width::X1)),
        (25_000, (speed::EDR, width::X1)),
        (40_000, (speed::FDR10, width::X4)),
        (100_000, (speed::EDR, width::X4)),
        (400_000, (speed::NDR, width::X4)),
    ] {
        assert_eq!(eth_speed_to_ib(Some(mbps)), want, "{mbps} Mbit/s");
    }
}

#[test]
fn cap_flags() {
    let rxe: Vec<_> = DeviceCapFlags::RXE.names().collect();
    assert_eq!(
        rxe,
        [
            "BAD_PKEY_CNTR",
            "BAD_QKEY_CNTR",
            "AUTO_PATH_MIG",
            "CHANGE_PHY_PORT",
            "UD_AV_PORT_ENFORCE",
            "PORT_ACTIVE_EVENT",
            "SYS_IMAGE_GUID",
            "RC_RNR_NAK_GEN",
            "SRQ_RESIZE",
            "MEM_WINDOW",
            "MEM_MGT_EXTENSIONS",
            "MEM_WINDOW_TYPE_2B"
        ]
    );
    assert_eq!(DeviceCapFlags::RXE.unknown_bits(), 0);
    assert_eq!(DeviceCapFlags::FERROCE.bits(), 0x0112_3804);
    assert!(DeviceCapFlags::FERROCE.contains(DeviceCapFlags::SRQ_RESIZE));
    assert_eq!(DeviceCapFlags::from_bits(1 << 31).unknown_bits(), 1 << 31);
}

/// The limits reported are the ones the engine enforces.
#[test]
fn limits_match_the_engine() {
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let pd = ep.alloc_pd();
    assert!(ep.create_cq(MAX_CQE).is_ok());
    assert!(matches!(
        ep.create_cq(MAX_CQE + 1),
        Err(VerbsError::BadValue { .. })
    ));
    let cq = ep.create_cq(16).unwrap();
    let init = |wr| QpInit {
        pd,
        qp_type: QpType::Rc,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: wr,
        max_recv_wr: wr,
        sq_sig_all: false,
        srq: None,
    };
    assert!(ep.create_qp(init(MAX_QP_WR)).is_ok());
    assert!(matches!(
        ep.create_qp(init(MAX_QP_WR + 1)),
        Err(VerbsError::BadValue { .. })
    ));
    let srq = ep.create_srq(pd, MAX_SRQ_WR, 0).unwrap();
    assert!(matches!(
        ep.create_srq(pd, MAX_SRQ_WR + 1, 0),
        Err(VerbsError::BadValue { .. })
    ));
    // SRQ_RESIZE: a new max_wr is taken, within the same limit.
    let resize = |max_wr| ferroce_core::verbs::SrqAttr {
        max_wr: Some(max_wr),
        srq_limit: None,
    };
    assert!(ep.modify_srq(srq, &resize(16)).is_ok());
    assert_eq!(ep.query_srq(srq).unwrap().max_wr, 16);
    assert!(matches!(
        ep.modify_srq(srq, &resize(MAX_SRQ_WR + 1)),
        Err(VerbsError::BadValue { .. })
    ));
    let lo = iface("lo", None, 65536, &["127.0.0.1"]);
    let port = port_attr_for(&lo);
    assert_eq!(u64::from(port.max_msg_sz), ferroce_core::MAX_MSG_SIZE);
    let dev = device_attr_for(&lo, ip("127.0.0.1"));
    assert_eq!(dev.vendor_id, 0xffffff);
    assert_eq!(dev.max_qp_rd_atom, 16);
    assert_eq!(dev.max_srq_wr, MAX_SRQ_WR);
    assert!(dev.max_srq > 0);
    assert_eq!(dev.atomic_cap, AtomicCap::Hca);
    assert_eq!(dev.phys_port_cnt, 1);
}

#[test]
fn queries_on_this_host() {
    let local = ip("127.0.0.1");
    let table = gid_table(local).unwrap();
    assert_eq!(
        gid_index(&table, local),
        table.iter().position(|g| g.ip() == local)
    );
    assert!(gid_index(&table, local).is_some());
    // Another loopback address: not listed by lo, added at the end.
    let other = ip("127.0.0.33");
    let t2 = gid_table(other).unwrap();
    assert_eq!(gid_index(&t2, other), Some(t2.len() - 1));
    assert_eq!(query_port(local).unwrap().link_layer, LinkLayer::Ethernet);
    assert_eq!(query_device(local).unwrap().phys_port_cnt, 1);
    let err = query_device(ip("0.0.0.0")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
}

#[test]
fn context_queries_its_own_address() {
    // An address and port no other test binds.
    let local = ip("127.0.0.41");
    let ctx = Context::open_with(crate::DeviceConfig {
        port: 47_941,
        seed: Some(1),
        ..crate::DeviceConfig::new(local)
    })
    .unwrap();
    let table = ctx.gid_table().unwrap();
    assert_eq!(table[ctx.gid_index().unwrap()].ip(), local);
    assert_eq!(ctx.query_port().unwrap().qkey_viol_cntr, 0);
    assert_eq!(
        ctx.query_device().unwrap().node_guid.to_string(),
        "0000:7fff:fe00:0029"
    );
}
