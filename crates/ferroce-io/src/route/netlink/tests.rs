use super::*;

/// Builds a datagram of one message: header, fixed part, then attributes,
/// written independently of the request encoder.
fn message(ty: u16, seq: u32, fixed: &[u8], attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = fixed.to_vec();
    for (t, p) in attrs {
        body.extend_from_slice(&((4 + p.len()) as u16).to_ne_bytes());
        body.extend_from_slice(&t.to_ne_bytes());
        body.extend_from_slice(p);
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
    }
    let mut out = Vec::new();
    out.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&0u16.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&body);
    out
}

fn u32a(ty: u16, v: u32) -> (u16, Vec<u8>) {
    (ty, v.to_ne_bytes().to_vec())
}

/// The answer `ip route get 198.18.77.9` gives for a route `via
/// 198.18.5.2 dev va mtu lock 1400 hoplimit 17` (type unicast).
fn gateway_answer(seq: u32) -> Vec<u8> {
    let rtmsg = [2, 32, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0];
    let mut metrics = Vec::new();
    for (t, v) in [
        (RTAX_LOCK, 1u32 << RTAX_MTU),
        (RTAX_MTU, 1400),
        (RTAX_HOPLIMIT, 17),
    ] {
        metrics.extend_from_slice(&8u16.to_ne_bytes());
        metrics.extend_from_slice(&t.to_ne_bytes());
        metrics.extend_from_slice(&v.to_ne_bytes());
    }
    message(
        RTM_NEWROUTE,
        seq,
        &rtmsg,
        &[
            u32a(15, 254), // RTA_TABLE
            (RTA_DST, vec![198, 18, 77, 9]),
            u32a(RTA_OIF, 3),
            (7, vec![198, 18, 5, 1]), // RTA_PREFSRC
            (RTA_GATEWAY, vec![198, 18, 5, 2]),
            (RTA_METRICS, metrics),
            u32a(25, 0), // RTA_UID
        ],
    )
}

#[test]
fn route_answer_fields() {
    let d = gateway_answer(7);
    let body = find_answer(&d, 7, RTM_NEWROUTE).unwrap().unwrap();
    let a = parse_route(&d[body]).unwrap();
    assert_eq!(
        a,
        RouteAnswer {
            kind: 1,
            oif: Some(3),
            gateway: Some("198.18.5.2".parse().unwrap()),
            mtu: Some(1400),
            mtu_locked: true,
            hop_limit: Some(17),
        }
    );
}

#[test]
fn ipv4_route_through_an_ipv6_gateway() {
    let mut via = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
    via.extend_from_slice(&"fe80::2".parse::<Ipv6Addr>().unwrap().octets());
    let d = message(
        RTM_NEWROUTE,
        1,
        &[2, 32, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0],
        &[u32a(RTA_OIF, 4), (RTA_VIA, via)],
    );
    let body = find_answer(&d, 1, RTM_NEWROUTE).unwrap().unwrap();
    let a = parse_route(&d[body]).unwrap();
    assert_eq!(a.gateway, Some("fe80::2".parse().unwrap()));
    assert!(!a.mtu_locked && a.mtu.is_none() && a.hop_limit.is_none());
}

#[test]
fn other_sequence_numbers_are_skipped_and_errors_are_errnos() {
    let mut d = gateway_answer(3);
    let mut err = (-libc::ENETUNREACH).to_ne_bytes().to_vec();
    err.extend_from_slice(&[0; 16]); // the request's header
    d.extend(message(NLMSG_ERROR, 4, &err, &[]));
    let e = find_answer(&d, 4, RTM_NEWROUTE).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH));
    assert!(find_answer(&d, 5, RTM_NEWROUTE).unwrap().is_none());
    // An ACK (error 0) is not an answer.
    let ack = message(NLMSG_ERROR, 9, &0i32.to_ne_bytes(), &[]);
    let e = find_answer(&ack, 9, RTM_NEWROUTE).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
}

#[test]
fn link_answer_fields() {
    let mut ifinfo = [0u8; IFINFOMSG_LEN];
    ifinfo[4..8].copy_from_slice(&3u32.to_ne_bytes());
    let d = message(
        RTM_NEWLINK,
        2,
        &ifinfo,
        &[(IFLA_IFNAME, b"va\0".to_vec()), u32a(IFLA_MTU, 9000)],
    );
    let body = find_answer(&d, 2, RTM_NEWLINK).unwrap().unwrap();
    assert_eq!(
        parse_link(&d[body]).unwrap(),
        LinkAnswer {
            index: 3,
            name: "va".into(),
            mtu: 9000,
        }
    );
    let no_mtu = message(RTM_NEWLINK, 2, &ifinfo, &[(IFLA_IFNAME, b"va\0".to_vec())]);
    let body = find_answer(&no_mtu, 2, RTM_NEWLINK).unwrap().unwrap();
    assert!(parse_link(&no_mtu[body]).is_err());
}

#[test]
fn requests_are_well_formed() {
    let dst: IpAddr = "fd00:5::9".parse().unwrap();
    let src: IpAddr = "fd00:5::1".parse().unwrap();
    let req = route_request(11, dst, Some(src), 3);
    let mut msgs = Messages::new(&req);
    let (ty, seq, body) = msgs.next().unwrap().unwrap();
    assert!(msgs.next().is_none());
    assert_eq!((ty, seq, body.end), (RTM_GETROUTE, 11, req.len()));
    let body = &req[body];
    assert_eq!(&body[..3], &[libc::AF_INET6 as u8, 128, 128]);
    let got: Vec<(u16, Vec<u8>)> = attrs(&body[RTMSG_LEN..])
        .map(|a| a.map(|(t, p)| (t, p.to_vec())))
        .collect::<io::Result<_>>()
        .unwrap();
    let octets = |a: IpAddr| match a {
        IpAddr::V6(a) => a.octets().to_vec(),
        IpAddr::V4(a) => a.octets().to_vec(),
    };
    assert_eq!(
        got,
        [
            (RTA_DST, octets(dst)),
            (RTA_SRC, octets(src)),
            (RTA_OIF, 3u32.to_ne_bytes().to_vec()),
            (RTA_IP_PROTO, vec![17]),
            (RTA_DPORT, vec![0x12, 0xb7]),
        ]
    );

    let req = link_request(12, Link::Name("veth0"));
    let (_, _, body) = Messages::new(&req).next().unwrap().unwrap();
    let body = &req[body];
    assert_eq!(&body[4..8], &0u32.to_ne_bytes());
    let (t, p) = attrs(&body[IFINFOMSG_LEN..]).next().unwrap().unwrap();
    assert_eq!((t, p), (IFLA_IFNAME, &b"veth0\0"[..]));
}

#[test]
fn malformed_answers_are_errors_not_panics() {
    let good = gateway_answer(1);
    // Every truncation, and every single-byte corruption of the length
    // fields, gives an answer or an error, never a panic.
    for cut in 0..good.len() {
        let d = &good[..cut];
        if let Ok(Some(body)) = find_answer(d, 1, RTM_NEWROUTE) {
            let _ = parse_route(&d[body]);
        }
    }
    for i in 0..good.len() {
        for v in [0u8, 1, 3, 4, 0x7f, 0xff] {
            let mut d = good.clone();
            d[i] = v;
            if let Ok(Some(body)) = find_answer(&d, 1, RTM_NEWROUTE) {
                let _ = parse_route(&d[body]);
            }
        }
    }
    // A message length past the datagram, an attribute length past the
    // message.
    let mut d = good.clone();
    d[..4].copy_from_slice(&((good.len() + 4) as u32).to_ne_bytes());
    assert!(find_answer(&d, 1, RTM_NEWROUTE).is_err());
    let mut d = good.clone();
    let first_attr = NLMSG_HDRLEN + RTMSG_LEN;
    d[first_attr..first_attr + 2].copy_from_slice(&0xfff0u16.to_ne_bytes());
    let body = find_answer(&d, 1, RTM_NEWROUTE).unwrap().unwrap();
    assert!(parse_route(&d[body]).is_err());
    // A short route message, an address of the wrong size.
    assert!(parse_route(&[2, 32]).is_err());
    let bad = message(
        RTM_NEWROUTE,
        1,
        &[2, 32, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0],
        &[(RTA_GATEWAY, vec![1, 2, 3])],
    );
    let body = find_answer(&bad, 1, RTM_NEWROUTE).unwrap().unwrap();
    assert!(parse_route(&bad[body]).is_err());
}

#[test]
fn the_kernel_answers_for_loopback() {
    let mut nl = Netlink::open().unwrap();
    let a = nl.route("127.0.0.1".parse().unwrap(), None, 0).unwrap();
    assert_eq!(a.kind, RTN_LOCAL, "{a:?}");
    let lo = nl.link(Link::Index(a.oif.unwrap())).unwrap();
    let by_name = nl.link(Link::Name(&lo.name)).unwrap();
    assert_eq!(lo, by_name);
    assert!(lo.mtu > 0);
    let e = nl.link(Link::Name("no-such-if-x")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
}
