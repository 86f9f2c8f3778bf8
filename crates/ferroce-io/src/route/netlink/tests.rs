use super::*;
use std::net::Ipv6Addr;

// Numbers of linux/netlink.h, linux/rtnetlink.h and linux/if_link.h, for
// datagrams written independently of the crates' encoder and decoder.
const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTMSG_LEN: usize = 12;
const IFINFOMSG_LEN: usize = 16;
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_METRICS: u16 = 8;
const RTA_VIA: u16 = 18;
const RTA_IP_PROTO: u16 = 27;
const RTA_DPORT: u16 = 29;
const RTAX_LOCK: u16 = 1;
const RTAX_MTU: u16 = 2;
const RTAX_HOPLIMIT: u16 = 10;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_EXT_MASK: u16 = 29;

fn new_route(m: RouteNetlinkMessage) -> Option<RouteMessage> {
    match m {
        RouteNetlinkMessage::NewRoute(r) => Some(r),
        _ => None,
    }
}

fn new_link(m: RouteNetlinkMessage) -> Option<LinkMessage> {
    match m {
        RouteNetlinkMessage::NewLink(l) => Some(l),
        _ => None,
    }
}

/// The route answer of `seq` in `d`, decoded and read.
fn route_of(d: &[u8], seq: u32) -> io::Result<Option<RouteAnswer>> {
    find_answer(d, seq, &new_route)?
        .map(|r| parse_route(&r))
        .transpose()
}

/// The attributes of a message tail, walked independently of the decoder.
fn attrs_of(mut buf: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let ty = u16::from_ne_bytes([buf[2], buf[3]]);
        out.push((ty, buf[4..len].to_vec()));
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

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
    let a = route_of(&d, 7).unwrap().unwrap();
    assert_eq!(
        a,
        RouteAnswer {
            kind: RouteType::Unicast,
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
    let a = route_of(&d, 1).unwrap().unwrap();
    assert_eq!(a.gateway, Some("fe80::2".parse().unwrap()));
    assert!(!a.mtu_locked && a.mtu.is_none() && a.hop_limit.is_none());
}

#[test]
fn other_sequence_numbers_are_skipped_and_errors_are_errnos() {
    let mut d = gateway_answer(3);
    let mut err = (-libc::ENETUNREACH).to_ne_bytes().to_vec();
    err.extend_from_slice(&[0; 16]); // the request's header
    d.extend(message(NLMSG_ERROR, 4, &err, &[]));
    let e = route_of(&d, 4).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH));
    assert!(route_of(&d, 5).unwrap().is_none());
    // A message of our sequence number that is not the answer is skipped.
    let mut ifinfo = [0u8; IFINFOMSG_LEN];
    ifinfo[4..8].copy_from_slice(&3u32.to_ne_bytes());
    let mut d = message(RTM_NEWLINK, 6, &ifinfo, &[]);
    d.extend(gateway_answer(6));
    assert_eq!(route_of(&d, 6).unwrap().unwrap().oif, Some(3));
    // An ACK (error 0) is not an answer.
    let ack = message(NLMSG_ERROR, 9, &0i32.to_ne_bytes(), &[]);
    let e = route_of(&ack, 9).unwrap_err();
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
    let l = find_answer(&d, 2, &new_link).unwrap().unwrap();
    assert_eq!(
        parse_link(&l).unwrap(),
        LinkAnswer {
            index: 3,
            name: "va".into(),
            mtu: 9000,
        }
    );
    let no_mtu = message(RTM_NEWLINK, 2, &ifinfo, &[(IFLA_IFNAME, b"va\0".to_vec())]);
    let l = find_answer(&no_mtu, 2, &new_link).unwrap().unwrap();
    assert!(parse_link(&l).is_err());
}

#[test]
fn requests_are_well_formed() {
    let dst: IpAddr = "fd00:5::9".parse().unwrap();
    let src: IpAddr = "fd00:5::1".parse().unwrap();
    let req = encode(
        RouteNetlinkMessage::GetRoute(route_request(dst, Some(src), 3)),
        11,
        NLM_F_REQUEST,
    );
    let len = u32::from_ne_bytes([req[0], req[1], req[2], req[3]]) as usize;
    assert_eq!(len, req.len());
    assert_eq!(u16::from_ne_bytes([req[4], req[5]]), RTM_GETROUTE);
    assert_eq!(u16::from_ne_bytes([req[6], req[7]]), 1, "NLM_F_REQUEST");
    assert_eq!(u32::from_ne_bytes([req[8], req[9], req[10], req[11]]), 11);
    let body = &req[NLMSG_HDRLEN..];
    assert_eq!(&body[..3], &[libc::AF_INET6 as u8, 128, 128]);
    assert_eq!(&body[3..RTMSG_LEN], &[0; 9], "no table, type or flags");
    let octets = |a: IpAddr| match a {
        IpAddr::V6(a) => a.octets().to_vec(),
        IpAddr::V4(a) => a.octets().to_vec(),
    };
    assert_eq!(
        attrs_of(&body[RTMSG_LEN..]),
        [
            (RTA_DST, octets(dst)),
            (RTA_SRC, octets(src)),
            (RTA_OIF, 3u32.to_ne_bytes().to_vec()),
            (RTA_IP_PROTO, vec![17]),
            (RTA_DPORT, vec![0x12, 0xb7]),
        ]
    );

    let req = encode(
        RouteNetlinkMessage::GetLink(link_request(Link::Name("veth0"))),
        12,
        NLM_F_REQUEST,
    );
    assert_eq!(u16::from_ne_bytes([req[4], req[5]]), RTM_GETLINK);
    let body = &req[NLMSG_HDRLEN..];
    assert_eq!(&body[4..8], &0u32.to_ne_bytes());
    // RTEXT_FILTER_SKIP_STATS: the answer leaves the counters out.
    assert_eq!(
        attrs_of(&body[IFINFOMSG_LEN..]),
        [
            (IFLA_IFNAME, b"veth0\0".to_vec()),
            (IFLA_EXT_MASK, (1u32 << 3).to_ne_bytes().to_vec()),
        ]
    );
    let req = encode(
        RouteNetlinkMessage::GetLink(link_request(Link::Index(7))),
        13,
        NLM_F_REQUEST,
    );
    assert_eq!(
        &req[NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8],
        &7u32.to_ne_bytes()
    );
}

#[test]
fn malformed_answers_are_errors_not_panics() {
    let good = gateway_answer(1);
    // Every truncation, and every single-byte corruption of the length
    // fields, gives an answer or an error, never a panic.
    for cut in 0..good.len() {
        let _ = route_of(&good[..cut], 1);
    }
    for i in 0..good.len() {
        for v in [0u8, 1, 3, 4, 0x7f, 0xff] {
            let mut d = good.clone();
            d[i] = v;
            let _ = route_of(&d, 1);
        }
    }
    // A message length past the datagram, an attribute length past the
    // message.
    let mut d = good.clone();
    d[..4].copy_from_slice(&((good.len() + 4) as u32).to_ne_bytes());
    assert!(route_of(&d, 1).is_err());
    let mut d = good.clone();
    let first_attr = NLMSG_HDRLEN + RTMSG_LEN;
    d[first_attr..first_attr + 2].copy_from_slice(&0xfff0u16.to_ne_bytes());
    assert!(route_of(&d, 1).is_err());
    // A short route message, an address of the wrong size.
    assert!(route_of(&message(RTM_NEWROUTE, 1, &[2, 32], &[]), 1).is_err());
    let bad = message(
        RTM_NEWROUTE,
        1,
        &[2, 32, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0],
        &[(RTA_GATEWAY, vec![1, 2, 3])],
    );
    assert!(route_of(&bad, 1).is_err());
}

#[test]
fn the_kernel_answers_for_loopback() {
    let mut nl = Netlink::open().unwrap();
    let a = nl.route("127.0.0.1".parse().unwrap(), None, 0).unwrap();
    assert_eq!(a.kind, RouteType::Local, "{a:?}");
    let lo = nl.link(Link::Index(a.oif.unwrap())).unwrap();
    let by_name = nl.link(Link::Name(&lo.name)).unwrap();
    assert_eq!(lo, by_name);
    assert!(lo.mtu > 0);
    let e = nl.link(Link::Name("no-such-if-x")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
}

#[test]
fn real_answers_cut_or_corrupted_are_errors_not_panics() {
    // The kernel's own answers for lo carry every attribute it sends
    // (the link's AF_SPEC, queues, qdisc, ...), not only the ones read.
    let mut nl = Netlink::open().unwrap();
    let a = nl.route("127.0.0.1".parse().unwrap(), None, 0).unwrap();
    let route = (nl.buf.clone(), nl.seq);
    nl.link(Link::Index(a.oif.unwrap())).unwrap();
    let link = (nl.buf.clone(), nl.seq);
    let link_of = |d: &[u8], seq| -> io::Result<Option<LinkAnswer>> {
        find_answer(d, seq, &new_link)?
            .map(|l| parse_link(&l))
            .transpose()
    };
    assert!(route_of(&route.0, route.1).unwrap().is_some());
    assert!(link_of(&link.0, link.1).unwrap().is_some());
    for (good, seq) in [&route, &link] {
        let decode = |d: &[u8]| {
            let _ = route_of(d, *seq);
            let _ = link_of(d, *seq);
        };
        for cut in 0..good.len() {
            decode(&good[..cut]);
        }
        for i in 0..good.len() {
            for v in [0u8, 1, 3, 0x7f, 0xff] {
                let mut d = good.clone();
                d[i] = v;
                decode(&d);
            }
        }
    }
}
