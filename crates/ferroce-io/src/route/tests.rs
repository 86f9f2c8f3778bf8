use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn ib_mtu_rule_is_rdma_cms() {
    // iboe_get_mtu: the largest IB MTU <= IP MTU - 96.
    let cases = [
        (9000, Some(4096)),
        (65536, Some(4096)),
        (4096 + 96, Some(4096)),
        (4096 + 95, Some(2048)),
        (2048 + 96, Some(2048)),
        (2048 + 95, Some(1024)),
        (1500, Some(1024)),
        (1280, Some(1024)), // IPv6's minimum MTU
        (1024 + 96, Some(1024)),
        (1024 + 95, Some(512)),
        (576, Some(256)),
        (256 + 96, Some(256)),
        (256 + 95, None),
        (68, None),
        (0, None),
    ];
    for (mtu, want) in cases {
        assert_eq!(ib_mtu_for(mtu), want, "IP MTU {mtu}");
    }
}

#[test]
fn ib_mtu_codes_are_the_verbs_enum() {
    let mut r = Route {
        destination: ip("198.18.0.12"),
        source: ip("198.18.0.11"),
        interface: "eth0".into(),
        ifindex: 2,
        interface_mtu: 1500,
        path_mtu: 1500,
        path_mtu_locked: false,
        ib_mtu: 256,
        hop_limit: 64,
        gateway: None,
        local: false,
    };
    for (bytes, code) in [(256, 1), (512, 2), (1024, 3), (2048, 4), (4096, 5)] {
        r.ib_mtu = bytes;
        assert_eq!(r.ib_mtu_code(), code, "{bytes}");
    }
    let mut gid = [0u8; 16];
    gid[10..12].copy_from_slice(&[0xff, 0xff]);
    gid[12..].copy_from_slice(&[198, 18, 0, 11]);
    assert_eq!(r.source_gid(), gid);
    r.destination = ip("fd52:6f43:4500::12");
    let v6: Ipv6Addr = "fd52:6f43:4500::12".parse().unwrap();
    assert_eq!(r.destination_gid(), v6.octets());
}

#[test]
fn refusals_before_any_lookup() {
    let e = resolve(ip("0.0.0.0"), None).unwrap_err();
    assert!(matches!(e, RouteError::Unspecified { .. }), "{e:?}");
    assert_eq!(e.errno(), libc::EINVAL);

    let e = resolve(ip("127.0.0.1"), Some(ip("::1"))).unwrap_err();
    assert!(matches!(e, RouteError::FamilyMismatch { .. }), "{e:?}");
    assert_eq!(e.errno(), libc::EINVAL);
    let msg = e.to_string();
    assert!(msg.contains("127.0.0.1") && msg.contains("::1"), "{msg}");

    let e = resolve(ip("127.0.0.1"), Some(ip("::"))).unwrap_err();
    assert!(matches!(e, RouteError::FamilyMismatch { .. }), "{e:?}");

    // An IPv4-mapped source is IPv4: not a mismatch.
    assert!(!matches!(
        resolve(ip("127.0.0.1"), Some(ip("::ffff:127.0.0.1"))),
        Err(RouteError::FamilyMismatch { .. })
    ));

    let e = resolve(ip("fe80::1"), None).unwrap_err();
    assert!(matches!(e, RouteError::NeedsScope { .. }), "{e:?}");
    assert!(e.to_string().contains("fe80::1%eth0"), "{e}");
    assert_eq!(e.errno(), libc::EINVAL);

    // 192.0.2.0/24 is TEST-NET-1: never an address of a host.
    let e = resolve(ip("127.0.0.1"), Some(ip("192.0.2.77"))).unwrap_err();
    assert!(matches!(e, RouteError::SourceNotLocal { .. }), "{e:?}");
    assert_eq!(e.errno(), libc::EADDRNOTAVAIL);
    let msg = e.to_string();
    assert!(
        msg.contains("192.0.2.77") && msg.contains("not an address of this host"),
        "{msg}"
    );
}

#[test]
fn messages_name_the_destination_and_the_fix() {
    let e = RouteError::NoRoute {
        dst: ip("198.18.0.99"),
        src: None,
        cause: io::Error::from_raw_os_error(libc::ENETUNREACH),
    };
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "no route to 198.18.0.99: add a route or pass a source address on the right interface"
        ),
        "{msg}"
    );
    assert!(msg.contains("unreachable"), "{msg}");
    assert_eq!(e.errno(), libc::ENETUNREACH);

    let e = RouteError::MtuTooSmall {
        dst: ip("198.18.0.99"),
        interface: "veth0".into(),
        mtu: 300,
    };
    let msg = e.to_string();
    assert!(
        msg.contains("MTU 300") && msg.contains("352") && msg.contains("veth0"),
        "{msg}"
    );
}

#[test]
fn loopback_resolves_to_a_local_route() {
    // Every Linux network namespace has 127.0.0.1 on lo once lo is up.
    let r = resolve(ip("127.0.0.1"), None).unwrap();
    assert!(r.local, "{r:?}");
    assert_eq!(r.source, ip("127.0.0.1"));
    assert_eq!(r.gateway, None);
    assert!(
        r.interface_mtu > 0 && r.path_mtu == r.interface_mtu,
        "{r:?}"
    );
    assert_eq!(Some(r.ib_mtu), ib_mtu_for(r.interface_mtu));
    assert!(r.hop_limit > 0);
}

#[test]
fn an_unspecified_source_is_the_kernels_choice() {
    let r = resolve(ip("127.0.0.1"), Some(ip("0.0.0.0"))).unwrap();
    assert_eq!(r.source, ip("127.0.0.1"));
    assert!(r.local);
}

#[test]
fn scope_ids_count_only_for_link_local_addresses() {
    let scoped =
        |a: &str, scope| SocketAddr::V6(SocketAddrV6::new(a.parse().unwrap(), 0, 0, scope));
    assert_eq!(canonical(scoped("fe80::1", 7)), (ip("fe80::1"), 7));
    assert_eq!(canonical(scoped("fd00::1", 7)), (ip("fd00::1"), 0));
    assert_eq!(canonical(scoped("::ffff:10.0.0.1", 7)), (ip("10.0.0.1"), 0));
}
