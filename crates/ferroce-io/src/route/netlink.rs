//! A small rtnetlink client: the questions route resolution and the
//! neighbour lookup ask the kernel, `RTM_GETROUTE` (what `ip route get`
//! asks: which route, interface, gateway and metrics a destination takes),
//! `RTM_GETLINK` (an interface's name, index and MTU, by index or by name)
//! and, for [`super::neigh`], any request and its one answer.
//!
//! Messages are encoded and decoded by `netlink-packet-route` over
//! `netlink-packet-core`, on a blocking `netlink-sys` socket; this module
//! only picks the fields asked and read. The answers come from the kernel
//! of this network namespace, but are treated as carefully as network
//! input: a datagram is walked message by message with every length
//! checked, anything the decoder refuses is an `InvalidData` error, never a
//! panic. A kernel refusal (`NLMSG_ERROR`) becomes the `io::Error` of its
//! errno.
//!
//! The decoder reads every attribute of an answer, which costs a few
//! microseconds per question (most of it a link's); these questions are
//! asked per resolution and per neighbour refresh in the raw backend's
//! cache thread, never per packet.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use netlink_packet_core::{
    DecodeError, NLM_F_REQUEST, NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteMetric, RouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

/// The RoCE v2 UDP port, for policy rules that match on it.
const ROCE_V2_PORT: u16 = 4791;

/// How long to wait for the kernel's answer (it answers at once; this only
/// bounds a kernel that would not).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// The receive buffer: answers to a single route, link or neighbour fit in
/// a page or two; a larger one is reported as truncated.
const ANSWER_BUF: usize = 64 * 1024;

/// How many datagrams to read for one answer before giving up (left-over
/// answers to earlier requests come first).
const MAX_DATAGRAMS: usize = 16;

/// What the kernel answers to `RTM_GETROUTE` for one destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct RouteAnswer {
    /// `rtm_type`: unicast, local (an address of this host), ...
    pub(super) kind: RouteType,
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
        let socket = Socket::new(NETLINK_ROUTE)?;
        // Port id 0 is the kernel: the socket sends to it and hears only it.
        socket.connect(&SocketAddr::new(0, 0))?;
        socket2::SockRef::from(&socket).set_read_timeout(Some(ANSWER_TIMEOUT))?;
        Ok(Self {
            socket,
            seq: 0,
            buf: Vec::with_capacity(ANSWER_BUF),
        })
    }

    /// `ip route get dst [from src] [oif N] ipproto udp dport 4791`.
    pub(super) fn route(
        &mut self,
        dst: IpAddr,
        src: Option<IpAddr>,
        oif: u32,
    ) -> io::Result<RouteAnswer> {
        let req = RouteNetlinkMessage::GetRoute(route_request(dst, src, oif));
        let answer = self.ask(req, NLM_F_REQUEST, |m| match m {
            RouteNetlinkMessage::NewRoute(r) => Some(r),
            _ => None,
        })?;
        parse_route(&answer)
    }

    pub(super) fn link(&mut self, which: Link<'_>) -> io::Result<LinkAnswer> {
        let req = RouteNetlinkMessage::GetLink(link_request(which));
        let answer = self.ask(req, NLM_F_REQUEST, |m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(l),
            _ => None,
        })?;
        parse_link(&answer)
    }

    /// Sends `req` and expects no answer (a request without NLM_F_ACK;
    /// a refusal would come back with its sequence number, which later
    /// questions skip).
    pub(super) fn tell(&mut self, req: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        let bytes = self.encode(req, flags);
        self.socket.send(&bytes, 0).map(|_| ())
    }

    /// Sends `req` to the kernel and returns the first message with its
    /// sequence number that `pick` takes (messages with another sequence
    /// number, left from an earlier question, are skipped).
    pub(super) fn ask<T>(
        &mut self,
        req: RouteNetlinkMessage,
        flags: u16,
        pick: impl Fn(RouteNetlinkMessage) -> Option<T>,
    ) -> io::Result<T> {
        let bytes = self.encode(req, flags);
        self.socket.send(&bytes, 0)?;
        for _ in 0..MAX_DATAGRAMS {
            self.buf.clear();
            // MSG_TRUNC: the datagram's real length, to see a truncation.
            let n = self.socket.recv(&mut self.buf, libc::MSG_TRUNC)?;
            if n > self.buf.len() {
                return Err(malformed("answer larger than 64 KiB (truncated)"));
            }
            if let Some(answer) = find_answer(&self.buf, self.seq, &pick)? {
                return Ok(answer);
            }
        }
        Err(malformed("no answer to our request"))
    }

    /// `req` as a datagram under the next sequence number.
    fn encode(&mut self, req: RouteNetlinkMessage, flags: u16) -> Vec<u8> {
        self.seq = self.seq.wrapping_add(1);
        encode(req, self.seq, flags)
    }
}

/// `req` as a datagram with sequence number `seq` and header `flags`.
pub(super) fn encode(req: RouteNetlinkMessage, seq: u32, flags: u16) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(req));
    msg.finalize();
    let mut out = vec![0; msg.buffer_len()];
    msg.serialize(&mut out);
    out
}

/// The first message of `datagram` with sequence number `seq` that `pick`
/// takes; the kernel's refusal of that request as its errno. Only those
/// messages are decoded, but every message's length is checked.
pub(super) fn find_answer<T>(
    datagram: &[u8],
    seq: u32,
    pick: &impl Fn(RouteNetlinkMessage) -> Option<T>,
) -> io::Result<Option<T>> {
    let mut at = 0;
    while at < datagram.len() {
        let rest = &datagram[at..];
        let header = NetlinkBuffer::new_checked(rest).map_err(undecodable)?;
        let len = header.length() as usize;
        // An aligned length may run past the last message: it ends the walk.
        at = at.saturating_add(align4(len));
        if header.sequence_number() != seq {
            continue;
        }
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rest[..len]);
        match msg.map_err(undecodable)?.payload {
            NetlinkPayload::Error(e) => return Err(kernel_error(e.code.map(|c| c.get()))),
            NetlinkPayload::Done(_) => return Err(malformed("empty answer")),
            NetlinkPayload::InnerMessage(m) => {
                if let Some(answer) = pick(m) {
                    return Ok(Some(answer));
                }
            }
            _ => {}
        }
    }
    Ok(None)
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

pub(super) fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed rtnetlink answer: {what}"),
    )
}

fn undecodable(e: DecodeError) -> io::Error {
    malformed(&e.to_string())
}

/// The error of an `NLMSG_ERROR`'s code (a negative errno; 0 is an ACK).
fn kernel_error(code: Option<i32>) -> io::Error {
    match code {
        // An ACK, which we never ask for.
        None => malformed("an acknowledgement instead of an answer"),
        Some(code) => io::Error::from_raw_os_error(code.saturating_neg()),
    }
}

pub(super) fn family(a: IpAddr) -> AddressFamily {
    match a {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

/// The `RTM_GETROUTE` request for a UDP flow to port 4791 (so that policy
/// rules on the protocol or port apply as they will to the traffic). No
/// flags: the route the traffic takes, not the table entry.
fn route_request(dst: IpAddr, src: Option<IpAddr>, oif: u32) -> RouteMessage {
    let bits = |a: IpAddr| if a.is_ipv4() { 32 } else { 128 };
    let mut m = RouteMessage::default();
    m.header.address_family = family(dst);
    m.header.destination_prefix_length = bits(dst);
    m.header.source_prefix_length = src.map_or(0, bits);
    m.attributes.push(RouteAttribute::Destination(dst.into()));
    if let Some(src) = src {
        m.attributes.push(RouteAttribute::Source(src.into()));
    }
    if oif != 0 {
        m.attributes.push(RouteAttribute::Oif(oif));
    }
    m.attributes
        .push(RouteAttribute::IpProto(libc::IPPROTO_UDP as u8));
    m.attributes.push(RouteAttribute::Dport(ROCE_V2_PORT));
    m
}

/// The `RTM_GETLINK` request for one interface, without its counters.
fn link_request(which: Link<'_>) -> LinkMessage {
    let mut m = LinkMessage::default();
    match which {
        Link::Index(i) => m.header.index = i,
        Link::Name(name) => m.attributes.push(LinkAttribute::IfName(name.into())),
    }
    m.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    m
}

fn ip_of_route(a: &RouteAddress) -> io::Result<IpAddr> {
    match a {
        RouteAddress::Inet(a) => Ok((*a).into()),
        RouteAddress::Inet6(a) => Ok((*a).into()),
        _ => Err(malformed("a gateway that is not an IP address")),
    }
}

/// The fields of an `RTM_NEWROUTE` answer.
fn parse_route(msg: &RouteMessage) -> io::Result<RouteAnswer> {
    let mut out = RouteAnswer {
        kind: msg.header.kind,
        ..RouteAnswer::default()
    };
    let mut locks = 0u32;
    for a in &msg.attributes {
        match a {
            RouteAttribute::Oif(i) => out.oif = Some(*i),
            RouteAttribute::Gateway(g) => out.gateway = Some(ip_of_route(g)?),
            RouteAttribute::Via(RouteVia::Inet(g)) => out.gateway = Some((*g).into()),
            RouteAttribute::Via(RouteVia::Inet6(g)) => out.gateway = Some((*g).into()),
            RouteAttribute::Via(_) => return Err(malformed("a gateway that is not an IP address")),
            RouteAttribute::Metrics(metrics) => {
                for m in metrics {
                    match m {
                        RouteMetric::Lock(l) => locks = *l,
                        RouteMetric::Mtu(mtu) => out.mtu = Some(*mtu),
                        RouteMetric::Hoplimit(h) => {
                            out.hop_limit = u8::try_from(*h).ok().filter(|&h| h > 0)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    // RTAX_LOCK is a bit mask, bit N for metric N (RTAX_MTU is 2).
    const RTAX_MTU: u32 = 2;
    out.mtu_locked = locks & (1 << RTAX_MTU) != 0;
    Ok(out)
}

/// The fields of an `RTM_NEWLINK` answer.
fn parse_link(msg: &LinkMessage) -> io::Result<LinkAnswer> {
    let (mut name, mut mtu) = (None, None);
    for a in &msg.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::Mtu(m) => mtu = Some(*m),
            _ => {}
        }
    }
    Ok(LinkAnswer {
        index: msg.header.index,
        name: name.ok_or_else(|| malformed("link without a name"))?,
        mtu: mtu.ok_or_else(|| malformed("link without an MTU"))?,
    })
}

#[cfg(test)]
mod tests;
