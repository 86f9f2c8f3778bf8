//! Neighbours: a peer's MAC address on an interface, from the kernel's
//! neighbour table (ARP for IPv4, neighbour discovery for IPv6) over
//! rtnetlink, as the raw backend needs it to address frames; and the
//! link-local GID of a MAC (its EUI-64), as NICs derive RoCE v1 GIDs.
//!
//! Contract: [`resolve`] asks the kernel of the calling thread's network
//! namespace (`RTM_GETNEIGH`, as `ip neigh get`). An entry that is valid
//! (reachable, stale, delay, probe, permanent or noarp) answers at once; for
//! a stale one the kernel is also asked to re-confirm it (`NTF_USE`), since
//! frames sent through a packet socket never pass the kernel's neighbour
//! code that would do so for its own traffic. Otherwise it asks
//! the kernel to resolve the peer (`RTM_NEWNEIGH` with `NTF_USE`, as `ip
//! neigh replace ADDR dev DEV use`: the kernel sends its ARP request or
//! neighbour solicitation, nothing else is sent) and polls the entry every
//! 10 ms until it is valid, it fails (the kernel's retries ran out: about
//! 3 s by default), or `wait` passes. Nothing is cached here.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE, NLM_F_REQUEST};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::neighbour::{
    NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};

use super::netlink::{self, Link, Netlink};

/// Neighbour states (`NUD_*` of linux/neighbour.h), one bit each.
const NUD_INCOMPLETE: u16 = 0x01;
const NUD_STALE: u16 = 0x04;
const NUD_FAILED: u16 = 0x20;
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

/// How often [`resolve`] looks at the entry while the kernel resolves it.
const POLL: Duration = Duration::from_millis(10);

/// Why a peer's MAC address could not be found.
#[derive(Debug)]
pub enum NeighError {
    /// The interface does not exist in this network namespace.
    NoInterface { interface: String, cause: io::Error },
    /// The kernel tried and nobody answered (entry FAILED), or `wait`
    /// passed first.
    Unresolved {
        peer: IpAddr,
        interface: String,
        waited: Duration,
        failed: bool,
    },
    /// rtnetlink failed in an unexpected way.
    System {
        peer: IpAddr,
        what: &'static str,
        cause: io::Error,
    },
}

impl fmt::Display for NeighError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoInterface { interface, cause } => write!(
                f,
                "no interface {interface} in this network namespace ({cause}); \
                 `ip link` lists the interfaces"
            ),
            Self::Unresolved {
                peer,
                interface,
                waited,
                failed,
            } => {
                let how = if *failed {
                    "the kernel's ARP/neighbour solicitation got no answer"
                } else {
                    "no answer yet"
                };
                write!(
                    f,
                    "cannot resolve {peer} on {interface}: {how} after {} ms; \
                     check that the peer is up and on that link (`ip neigh show dev {interface}`)",
                    waited.as_millis()
                )
            }
            Self::System { peer, what, cause } => {
                write!(f, "resolving {peer}: {what} failed: {cause}")
            }
        }
    }
}

impl std::error::Error for NeighError {}

/// A neighbour table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    state: u16,
    mac: Option<[u8; 6]>,
}

/// The MAC address of `peer` on `interface`, resolving it if the kernel
/// does not know it yet (see the module docs); waits at most `wait`.
pub fn resolve(peer: IpAddr, interface: &str, wait: Duration) -> Result<[u8; 6], NeighError> {
    let peer = peer.to_canonical();
    let sys = |what| move |cause| NeighError::System { peer, what, cause };
    let mut nl = Netlink::open().map_err(sys("open an rtnetlink socket"))?;
    let ifindex = nl
        .link(Link::Name(interface))
        .map_err(|cause| NeighError::NoInterface {
            interface: interface.into(),
            cause,
        })?
        .index;
    let start = Instant::now();
    let mut asked = false;
    loop {
        let entry = get(&mut nl, peer, ifindex).map_err(sys("RTM_GETNEIGH"))?;
        match entry {
            Some(Entry {
                state,
                mac: Some(mac),
            }) if state & NUD_VALID != 0 => {
                if state & NUD_STALE != 0 {
                    tell_use(&mut nl, peer, ifindex).map_err(sys("RTM_NEWNEIGH (use)"))?;
                }
                return Ok(mac);
            }
            Some(Entry { state, .. }) if asked && state & NUD_FAILED != 0 => {
                return Err(NeighError::Unresolved {
                    peer,
                    interface: interface.into(),
                    waited: start.elapsed(),
                    failed: true,
                });
            }
            Some(Entry { state, .. }) if state & NUD_INCOMPLETE != 0 => {}
            _ if !asked => {
                tell_use(&mut nl, peer, ifindex).map_err(sys("RTM_NEWNEIGH (use)"))?;
                asked = true;
            }
            _ => {}
        }
        if start.elapsed() >= wait {
            return Err(NeighError::Unresolved {
                peer,
                interface: interface.into(),
                waited: start.elapsed(),
                failed: false,
            });
        }
        std::thread::sleep(POLL);
    }
}

/// A neighbour message for `peer` on `ifindex` (state NONE: for a
/// request to create an entry, the kernel's own, not a permanent one).
fn neighbour(peer: IpAddr, ifindex: u32, flags: NeighbourFlags) -> NeighbourMessage {
    let mut m = NeighbourMessage::default();
    m.header.family = netlink::family(peer);
    m.header.ifindex = ifindex;
    m.header.state = NeighbourState::None;
    m.header.flags = flags;
    m.attributes
        .push(NeighbourAttribute::Destination(peer.into()));
    m
}

/// The entry for `peer` on `ifindex`; `None` when there is none.
fn get(nl: &mut Netlink, peer: IpAddr, ifindex: u32) -> io::Result<Option<Entry>> {
    let req = RouteNetlinkMessage::GetNeighbour(neighbour(peer, ifindex, NeighbourFlags::empty()));
    match nl.ask(req, NLM_F_REQUEST, new_neighbour) {
        Ok(n) => Ok(Some(entry_of(&n))),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `ip neigh replace PEER dev IF use`: create the entry if need be and
/// make the kernel resolve it.
fn use_request(peer: IpAddr, ifindex: u32) -> (RouteNetlinkMessage, u16) {
    let m = neighbour(peer, ifindex, NeighbourFlags::Use);
    (
        RouteNetlinkMessage::NewNeighbour(m),
        NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE,
    )
}

fn tell_use(nl: &mut Netlink, peer: IpAddr, ifindex: u32) -> io::Result<()> {
    let (req, flags) = use_request(peer, ifindex);
    nl.tell(req, flags)
}

/// The `RTM_NEWNEIGH` that answers `RTM_GETNEIGH`.
fn new_neighbour(m: RouteNetlinkMessage) -> Option<NeighbourMessage> {
    match m {
        RouteNetlinkMessage::NewNeighbour(n) => Some(n),
        _ => None,
    }
}

fn entry_of(n: &NeighbourMessage) -> Entry {
    let mac = n.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLayerAddress(l) => <[u8; 6]>::try_from(l.as_slice()).ok(),
        _ => None,
    });
    Entry {
        state: u16::from(n.header.state),
        mac,
    }
}

/// The modified EUI-64 interface identifier of a MAC (RFC 4291 appendix
/// A): the universal/local bit flipped, FF FE in the middle. RoCE NICs and
/// rxe derive the node GUID and the default link-local GID from it.
pub const fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The IPv6 link-local address fe80::/64 + EUI-64 of `mac`: the GID at
/// index 0 of a RoCE port (the RoCE v1 GID of an interface without IPv6).
pub fn link_local_from_mac(mac: [u8; 6]) -> Ipv6Addr {
    let mut b = [0u8; 16];
    b[..2].copy_from_slice(&[0xfe, 0x80]);
    b[8..].copy_from_slice(&eui64(mac));
    Ipv6Addr::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_gid_of_a_mac() {
        // QEMU's default MAC, and the address Linux gives it.
        let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        assert_eq!(
            link_local_from_mac(mac),
            "fe80::5054:ff:fe12:3456".parse::<Ipv6Addr>().unwrap()
        );
        // A locally administered MAC loses its U/L bit.
        assert_eq!(
            eui64([0x02, 0, 0, 0, 0, 0x0a]),
            [0, 0, 0, 0xff, 0xfe, 0, 0, 0x0a]
        );
    }

    /// A datagram of one message, written independently of the encoder.
    fn datagram(ty: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut out = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(&0u16.to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn requests_and_answers() {
        const RTM_NEWNEIGH: u16 = 28;
        const NDA_LLADDR: u16 = 2;
        let (req, flags) = use_request("10.0.0.2".parse().unwrap(), 3);
        let req = netlink::encode(req, 7, flags);
        // Header (16), ndmsg (12), NDA_DST (4 + 4).
        assert_eq!(req.len(), 36);
        assert_eq!(u16::from_ne_bytes([req[4], req[5]]), RTM_NEWNEIGH);
        // NLM_F_REQUEST | NLM_F_REPLACE | NLM_F_CREATE.
        assert_eq!(u16::from_ne_bytes([req[6], req[7]]), 0x501);
        assert_eq!(u32::from_ne_bytes([req[8], req[9], req[10], req[11]]), 7);
        assert_eq!(req[16], libc::AF_INET as u8);
        assert_eq!(&req[20..24], &3u32.to_ne_bytes());
        assert_eq!(&req[24..26], &[0, 0], "state NONE");
        assert_eq!(req[16 + 10], 0x01, "NTF_USE");
        assert_eq!(&req[28..36], &[8, 0, 1, 0, 10, 0, 0, 2][..]);

        // ndmsg: AF_INET, ifindex 3, NUD_REACHABLE; NDA_LLADDR.
        let mut body = vec![libc::AF_INET as u8, 0, 0, 0];
        body.extend_from_slice(&3u32.to_ne_bytes());
        body.extend_from_slice(&0x02u16.to_ne_bytes());
        body.extend_from_slice(&[0, 1]);
        body.extend_from_slice(&10u16.to_ne_bytes());
        body.extend_from_slice(&NDA_LLADDR.to_ne_bytes());
        body.extend_from_slice(&[1, 2, 3, 4, 5, 6, 0, 0]);
        let d = datagram(RTM_NEWNEIGH, 4, &body);
        let n = netlink::find_answer(&d, 4, &new_neighbour)
            .unwrap()
            .unwrap();
        assert_eq!(
            entry_of(&n),
            Entry {
                state: 0x02,
                mac: Some([1, 2, 3, 4, 5, 6])
            }
        );
        // A short ndmsg, a truncated attribute: errors, not panics.
        let short = datagram(RTM_NEWNEIGH, 4, &body[..5]);
        assert!(netlink::find_answer(&short, 4, &new_neighbour).is_err());
        let mut cut = datagram(RTM_NEWNEIGH, 4, &body[..body.len() - 3]);
        assert!(netlink::find_answer(&cut, 4, &new_neighbour).is_err());
        cut[0] = 0xff;
        assert!(netlink::find_answer(&cut, 4, &new_neighbour).is_err());
    }
}
