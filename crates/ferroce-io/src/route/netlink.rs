//! A small rtnetlink client: the two questions route resolution asks the
//! kernel, `RTM_GETROUTE` (what `ip route get` asks: which route, interface,
//! gateway and metrics a destination takes) and `RTM_GETLINK` (an
//! interface's name, index and MTU, by index or by name).
//!
//! Requests are built and answers parsed from plain byte slices (no
//! `unsafe`; the socket is socket2's). The answers come from the kernel of
//! this network namespace, but are parsed as carefully as network input:
//! every length is checked, unknown attributes are skipped, and anything
//! malformed is an `InvalidData` error, never a panic. A kernel refusal
//! (`NLMSG_ERROR`) becomes the `io::Error` of its errno.
//!
//! Message layouts are those of `linux/netlink.h`, `linux/rtnetlink.h` and
//! `linux/if_link.h`; integers are in host byte order, addresses in network
//! order.

use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// `struct nlmsghdr`: length, type, flags, sequence, port id.
const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;

/// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope,
/// type (one byte each), flags (u32).
const RTMSG_LEN: usize = 12;
/// `struct ifinfomsg`: family, pad, type (u16), index (i32), flags (u32),
/// change (u32).
const IFINFOMSG_LEN: usize = 16;

const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_METRICS: u16 = 8;
/// A gateway of the other family (`struct rtvia`: u16 family, address).
const RTA_VIA: u16 = 18;
const RTA_IP_PROTO: u16 = 27;
const RTA_DPORT: u16 = 29;

/// Metrics inside `RTA_METRICS`. `RTAX_LOCK` is a bit mask, bit N for
/// metric N.
const RTAX_LOCK: u16 = 1;
const RTAX_MTU: u16 = 2;
const RTAX_HOPLIMIT: u16 = 10;

const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_EXT_MASK: u16 = 29;
/// `RTEXT_FILTER_SKIP_STATS`: leave the counters out of a link answer.
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

/// The flag bits of an attribute type that are not part of the type.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// `rtm_type` of a route to an address of this host.
pub(super) const RTN_LOCAL: u8 = 2;

/// The RoCE v2 UDP port, for policy rules that match on it.
const ROCE_V2_PORT: u16 = 4791;

/// How long to wait for the kernel's answer (it answers at once; this only
/// bounds a kernel that would not).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// What the kernel answers to `RTM_GETROUTE` for one destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RouteAnswer {
    /// `rtm_type`: `RTN_UNICAST` (1), [`RTN_LOCAL`], ...
    pub(super) kind: u8,
    /// The output interface's index.
    pub(super) oif: Option<u32>,
    pub(super) gateway: Option<IpAddr>,
    /// The route's `mtu` metric, or a path MTU learned from ICMP.
    pub(super) mtu: Option<u32>,
    /// The `mtu` metric is locked (`mtu lock N`): path MTU discovery may
    /// not change it.
    pub(super) mtu_locked: bool,
    /// The route's `hoplimit` metric.
    pub(super) hop_limit: Option<u8>,
}

/// What the kernel answers to `RTM_GETLINK` for one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LinkAnswer {
    pub(super) index: u32,
    pub(super) name: String,
    pub(super) mtu: u32,
}

/// Which interface to ask about.
#[derive(Debug, Clone, Copy)]
pub(super) enum Link<'a> {
    Index(u32),
    Name(&'a str),
}

/// An rtnetlink socket: one question at a time, answers matched by
/// sequence number.
pub(super) struct Netlink {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    pub(super) fn open() -> io::Result<Self> {
        let socket = Socket::new(
            Domain::from(libc::AF_NETLINK),
            Type::RAW,
            Some(Protocol::from(libc::NETLINK_ROUTE)),
        )?;
        socket.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        Ok(Self {
            socket,
            seq: 0,
            // Answers to a single route or link fit in a page or two; an
            // answer that fills this is treated as truncated.
            buf: vec![0; 64 * 1024],
        })
    }

    /// `ip route get dst [from src] [oif N] ipproto udp dport 4791`.
    pub(super) fn route(
        &mut self,
        dst: IpAddr,
        src: Option<IpAddr>,
        oif: u32,
    ) -> io::Result<RouteAnswer> {
        self.seq = self.seq.wrapping_add(1);
        let req = route_request(self.seq, dst, src, oif);
        let body = self.ask(&req, RTM_NEWROUTE)?;
        parse_route(body)
    }

    /// The next request's sequence number (answers are matched by it).
    pub(super) fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Sends `req` and expects no answer (a request without NLM_F_ACK;
    /// a refusal would come back with its sequence number, which later
    /// questions skip).
    pub(super) fn tell(&mut self, req: &[u8]) -> io::Result<()> {
        self.socket.send(req).map(|_| ())
    }

    pub(super) fn link(&mut self, which: Link<'_>) -> io::Result<LinkAnswer> {
        self.seq = self.seq.wrapping_add(1);
        let req = link_request(self.seq, which);
        let body = self.ask(&req, RTM_NEWLINK)?;
        parse_link(body)
    }

    /// Sends `req` to the kernel and returns the body of the answer of
    /// type `want` that carries `req`'s sequence number (messages with
    /// another sequence number, left from an earlier question, are skipped).
    pub(super) fn ask(&mut self, req: &[u8], want: u16) -> io::Result<&[u8]> {
        // An unconnected netlink socket sends to the kernel (port id 0).
        self.socket.send(req)?;
        for _ in 0..16 {
            let n = (&self.socket).read(&mut self.buf)?;
            if n == self.buf.len() {
                return Err(malformed("answer larger than 64 KiB (truncated)"));
            }
            if let Some(body) = find_answer(&self.buf[..n], self.seq, want)? {
                return Ok(&self.buf[body]);
            }
        }
        Err(malformed("no answer to our request"))
    }
}

/// Where in `datagram` the body of the message of type `want` and sequence
/// `seq` is; the kernel's refusal of that request as its errno.
fn find_answer(datagram: &[u8], seq: u32, want: u16) -> io::Result<Option<Range<usize>>> {
    for msg in Messages::new(datagram) {
        let (ty, s, body) = msg?;
        if s != seq {
            continue;
        }
        match ty {
            NLMSG_ERROR => return Err(kernel_error(&datagram[body])),
            NLMSG_DONE => return Err(malformed("empty answer")),
            t if t == want => return Ok(Some(body)),
            _ => {}
        }
    }
    Ok(None)
}

pub(super) fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed rtnetlink answer: {what}"),
    )
}

/// The errno of an `NLMSG_ERROR` body (`struct nlmsgerr`: a negative errno,
/// then the request's header).
fn kernel_error(body: &[u8]) -> io::Error {
    match body.get(..4) {
        Some(b) => {
            let code = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            if code == 0 {
                // An ACK, which we never ask for.
                malformed("an acknowledgement instead of an answer")
            } else {
                io::Error::from_raw_os_error(code.saturating_neg())
            }
        }
        None => malformed("short error message"),
    }
}

/// The netlink messages of one datagram: (type, sequence, where the body
/// is in the datagram).
struct Messages<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Messages<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }
}

impl Iterator for Messages<'_> {
    type Item = io::Result<(u16, u32, Range<usize>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.get(self.at..).filter(|r| !r.is_empty())?;
        let Some(h) = rest.get(..NLMSG_HDRLEN) else {
            self.at = self.buf.len();
            return Some(Err(malformed("short message header")));
        };
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let ty = u16::from_ne_bytes([h[4], h[5]]);
        let seq = u32::from_ne_bytes([h[8], h[9], h[10], h[11]]);
        if len < NLMSG_HDRLEN || len > rest.len() {
            self.at = self.buf.len();
            return Some(Err(malformed("message length out of bounds")));
        }
        let body = self.at + NLMSG_HDRLEN..self.at + len;
        self.at += align4(len);
        Some(Ok((ty, seq, body)))
    }
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The attributes (`struct rtattr` / `nlattr`: u16 length, u16 type, then
/// the payload, padded to 4) of a message's tail: (type, payload).
pub(super) fn attrs(mut buf: &[u8]) -> impl Iterator<Item = io::Result<(u16, &[u8])>> {
    std::iter::from_fn(move || {
        if buf.is_empty() {
            return None;
        }
        let Some(h) = buf.get(..4) else {
            buf = &[];
            return Some(Err(malformed("short attribute header")));
        };
        let len = u16::from_ne_bytes([h[0], h[1]]) as usize;
        let ty = u16::from_ne_bytes([h[2], h[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            buf = &[];
            return Some(Err(malformed("attribute length out of bounds")));
        }
        let payload = &buf[4..len];
        buf = buf.get(align4(len)..).unwrap_or(&[]);
        Some(Ok((ty, payload)))
    })
}

pub(super) fn put_attr(out: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(align4(out.len()), 0);
}

/// A request: header (its length filled in at the end), then `fixed`
/// (the family header) and the attributes `attrs` writes.
pub(super) fn request(
    ty: u16,
    seq: u32,
    fixed: &[u8],
    attrs: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(fixed);
    attrs(&mut out);
    let len = (out.len() as u32).to_ne_bytes();
    out[..4].copy_from_slice(&len);
    out
}

pub(super) fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

pub(super) fn family(a: IpAddr) -> u8 {
    match a {
        IpAddr::V4(_) => libc::AF_INET as u8,
        IpAddr::V6(_) => libc::AF_INET6 as u8,
    }
}

/// The `RTM_GETROUTE` request for a UDP flow to port 4791 (so that policy
/// rules on the protocol or port apply as they will to the traffic).
fn route_request(seq: u32, dst: IpAddr, src: Option<IpAddr>, oif: u32) -> Vec<u8> {
    let bits = |a: IpAddr| if a.is_ipv4() { 32 } else { 128 };
    let rtmsg = [
        family(dst),
        bits(dst),
        src.map_or(0, bits),
        0, // tos
        0, // table
        0, // protocol
        0, // scope
        0, // type
        0,
        0,
        0,
        0, // flags: the route the traffic takes, not the table entry
    ];
    request(RTM_GETROUTE, seq, &rtmsg, |out| {
        put_attr(out, RTA_DST, &addr_bytes(dst));
        if let Some(src) = src {
            put_attr(out, RTA_SRC, &addr_bytes(src));
        }
        if oif != 0 {
            put_attr(out, RTA_OIF, &oif.to_ne_bytes());
        }
        put_attr(out, RTA_IP_PROTO, &[libc::IPPROTO_UDP as u8]);
        put_attr(out, RTA_DPORT, &ROCE_V2_PORT.to_be_bytes());
    })
}

fn link_request(seq: u32, which: Link<'_>) -> Vec<u8> {
    let index = match which {
        Link::Index(i) => i,
        Link::Name(_) => 0,
    };
    let mut ifinfo = [0u8; IFINFOMSG_LEN];
    ifinfo[4..8].copy_from_slice(&index.to_ne_bytes());
    request(RTM_GETLINK, seq, &ifinfo, |out| {
        if let Link::Name(name) = which {
            let mut z = name.as_bytes().to_vec();
            z.push(0);
            put_attr(out, IFLA_IFNAME, &z);
        }
        put_attr(out, IFLA_EXT_MASK, &RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    })
}

fn u32_of(p: &[u8]) -> io::Result<u32> {
    match p {
        [a, b, c, d] => Ok(u32::from_ne_bytes([*a, *b, *c, *d])),
        _ => Err(malformed("a 32-bit attribute of another size")),
    }
}

fn ip_of(p: &[u8]) -> io::Result<IpAddr> {
    if let Ok(a) = <[u8; 4]>::try_from(p) {
        Ok(IpAddr::V4(Ipv4Addr::from(a)))
    } else if let Ok(a) = <[u8; 16]>::try_from(p) {
        Ok(IpAddr::V6(Ipv6Addr::from(a)))
    } else {
        Err(malformed("an address of neither 4 nor 16 bytes"))
    }
}

/// The body of an `RTM_NEWROUTE` answer.
fn parse_route(body: &[u8]) -> io::Result<RouteAnswer> {
    let Some(rtmsg) = body.get(..RTMSG_LEN) else {
        return Err(malformed("short route message"));
    };
    let mut out = RouteAnswer {
        kind: rtmsg[7],
        ..RouteAnswer::default()
    };
    let mut locks = 0u32;
    for a in attrs(&body[RTMSG_LEN..]) {
        let (ty, p) = a?;
        match ty {
            RTA_OIF => out.oif = Some(u32_of(p)?),
            RTA_GATEWAY => out.gateway = Some(ip_of(p)?),
            RTA_VIA => out.gateway = Some(ip_of(p.get(2..).unwrap_or_default())?),
            RTA_METRICS => {
                for m in attrs(p) {
                    let (mty, mp) = m?;
                    match mty {
                        RTAX_LOCK => locks = u32_of(mp)?,
                        RTAX_MTU => out.mtu = Some(u32_of(mp)?),
                        RTAX_HOPLIMIT => {
                            out.hop_limit = u8::try_from(u32_of(mp)?).ok().filter(|&h| h > 0)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out.mtu_locked = locks & (1 << RTAX_MTU) != 0;
    Ok(out)
}

/// The body of an `RTM_NEWLINK` answer.
fn parse_link(body: &[u8]) -> io::Result<LinkAnswer> {
    let Some(ifinfo) = body.get(..IFINFOMSG_LEN) else {
        return Err(malformed("short link message"));
    };
    let index = u32::from_ne_bytes([ifinfo[4], ifinfo[5], ifinfo[6], ifinfo[7]]);
    let (mut name, mut mtu) = (None, None);
    for a in attrs(&body[IFINFOMSG_LEN..]) {
        let (ty, p) = a?;
        match ty {
            IFLA_IFNAME => {
                let s = p.split(|&b| b == 0).next().unwrap_or_default();
                name = Some(String::from_utf8_lossy(s).into_owned());
            }
            IFLA_MTU => mtu = Some(u32_of(p)?),
            _ => {}
        }
    }
    Ok(LinkAnswer {
        index,
        name: name.ok_or_else(|| malformed("link without a name"))?,
        mtu: mtu.ok_or_else(|| malformed("link without an MTU"))?,
    })
}

#[cfg(test)]
mod tests;
