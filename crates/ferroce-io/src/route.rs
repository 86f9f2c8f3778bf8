//! Address and route resolution from the host's routing table, as rdma_cm's
//! `rdma_resolve_addr` and `rdma_resolve_route` do for RoCE (the kernel's
//! `drivers/infiniband/core/addr.c` and `cma.c`): which local address (the
//! GID a ferroce device binds), interface, path MTU, IB MTU and hop limit
//! reach a destination, and whether the destination is this host.
//!
//! Contract: [`resolve`] and [`resolve_scoped`] ask the kernel of the
//! calling thread's network namespace and send nothing on any network. They
//! open a UDP socket and connect it (which only looks the route up and
//! picks a source address), and ask rtnetlink the route (`ip route get`)
//! and the interface; nothing is cached, so each call sees the table as it
//! is. The answer is a snapshot: routes and addresses may change after.
//!
//! What comes from where:
//! * the source address: the kernel's choice for the connected socket
//!   (`getsockname`), as `ip_route_output`/`ip6_route_output` choose it for
//!   rdma_cm; a given source must be an address of this host (rdma_cm's
//!   `rdma_bind_addr`, EADDRNOTAVAIL otherwise);
//! * the interface: the route's output interface, except for a local
//!   destination, whose route goes through `lo`: there it is the interface
//!   that has the destination address (lo for 127.0.0.0/8 and ::1; for a
//!   link-local one, the interface its scope id names), as addr.c
//!   translates a loopback route to the device on that address;
//! * the path MTU: the connected socket's `IP_MTU`/`IPV6_MTU`, which is the
//!   route's `mtu` metric (locked or not) or an MTU learned from ICMP, else
//!   the interface MTU. For a local destination it is the interface MTU
//!   (the interface that has the address, not lo's 65536), as cma.c uses
//!   the device's netdev MTU;
//! * the IB MTU: [`ib_mtu_for`] of the smaller of the path and interface
//!   MTUs. cma.c uses the interface MTU alone (`iboe_get_mtu(ndev->mtu)`),
//!   so under a route `mtu` smaller than the interface's, rxe's rdma_cm
//!   would pick packets the route cannot carry (read in cma.c, not run);
//!   ferroce follows the route;
//! * the hop limit: the route's `hoplimit` metric, else the socket's default
//!   (`net.ipv4.ip_default_ttl`; for IPv6 the kernel's per-route and
//!   per-interface answer, `IPV6_UNICAST_HOPS` on the connected socket), as
//!   addr.c takes `ip4_dst_hoplimit`/`ip6_dst_hoplimit`.
//!
//! An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, the form of an IPv4 GID)
//! is resolved as the IPv4 address.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::os::fd::AsRawFd;

use netlink_packet_route::route::RouteType;
use socket2::{Domain, Protocol, Socket, Type};

use crate::{netif, sys};

mod error;
pub mod neigh;
mod netlink;

pub use error::RouteError;

use netlink::{Link, Netlink};

/// The RoCE headers rdma_cm takes off the interface MTU before choosing an
/// IB MTU (`iboe_get_mtu` in `include/rdma/ib_addr.h`): GRH 40 (the IPv6
/// header's size; IPv4's 20 counts as 40 too) + UDP 8 + BTH 12 + XRCETH 4 +
/// AtomicETH 28 + ICRC 4 = 96 bytes. The device's own active MTU follows
/// rxe's `rxe_set_mtu` instead (80 bytes there, 84 in ferroce); this
/// budget is larger, so the IB MTU of a path never exceeds the active MTU
/// of a port on the same interface.
pub const ROCE_HEADER_BUDGET: u32 = 96;

/// The IB MTUs, largest first.
const IB_MTUS: [u32; 5] = [4096, 2048, 1024, 512, 256];

/// The RoCE v2 UDP port, the destination the socket is connected to (so a
/// policy rule on the port applies as it will to the traffic).
const ROCE_V2_PORT: u16 = 4791;

/// The IB MTU in bytes for an IP MTU: the largest of 256..=4096 that fits
/// `ip_mtu` less [`ROCE_HEADER_BUDGET`], as rdma_cm's `iboe_get_mtu` (1500
/// gives 1024, 9000 gives 4096, 1280 gives 1024); `None` below 352 bytes,
/// where rdma_cm fails the route with EINVAL.
pub fn ib_mtu_for(ip_mtu: u32) -> Option<u32> {
    let room = ip_mtu.checked_sub(ROCE_HEADER_BUDGET)?;
    IB_MTUS.into_iter().find(|&m| m <= room)
}

/// How a destination is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The destination as resolved (IPv4-mapped addresses as IPv4).
    pub destination: IpAddr,
    /// The local address: the given source, or the kernel's choice. A
    /// ferroce device on this address reaches the destination; it is the
    /// source GID ([`Route::source_gid`]).
    pub source: IpAddr,
    /// The interface's name (for a local destination, the one that has
    /// the destination address).
    pub interface: String,
    /// The interface's index (the scope id of its link-local addresses).
    pub ifindex: u32,
    /// The interface's MTU (the netdev MTU).
    pub interface_mtu: u32,
    /// The path MTU: the route's (see the module docs); the interface MTU
    /// for a local destination.
    pub path_mtu: u32,
    /// The route's `mtu` is locked (`mtu lock N`).
    pub path_mtu_locked: bool,
    /// The IB MTU in bytes (256..=4096): [`ib_mtu_for`] of the smaller of
    /// `path_mtu` and `interface_mtu`.
    pub ib_mtu: u32,
    /// The IP TTL / hop limit for the GRH.
    pub hop_limit: u8,
    /// The next hop, when the route goes through a gateway.
    pub gateway: Option<IpAddr>,
    /// The destination is an address of this host (its route is local).
    pub local: bool,
}

impl Route {
    /// The source address as a GID: IPv4 as `::ffff:a.b.c.d`, as rdma_cm's
    /// `rdma_ip2gid`.
    pub fn source_gid(&self) -> [u8; 16] {
        gid_of(self.source)
    }

    /// The destination address as a GID.
    pub fn destination_gid(&self) -> [u8; 16] {
        gid_of(self.destination)
    }

    /// The IB MTU as the verbs code (`IBV_MTU_256` = 1 .. `IBV_MTU_4096` = 5).
    pub fn ib_mtu_code(&self) -> u8 {
        (self.ib_mtu.max(256) / 128).ilog2() as u8
    }
}

fn gid_of(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Resolves `dst`, from `src` if given (rdma_cm's `rdma_resolve_addr` and
/// `rdma_resolve_route`). An IPv6 link-local address needs a scope id:
/// use [`resolve_scoped`] for those.
pub fn resolve(dst: IpAddr, src: Option<IpAddr>) -> Result<Route, RouteError> {
    resolve_scoped(SocketAddr::new(dst, 0), src.map(|s| SocketAddr::new(s, 0)))
}

/// Resolves `dst` as [`resolve`], with the scope ids (interface indexes)
/// of IPv6 link-local addresses, which need one (on either address; other
/// addresses' scope ids and all ports are ignored). An unspecified source
/// (0.0.0.0, ::) is the same as none.
pub fn resolve_scoped(dst: SocketAddr, src: Option<SocketAddr>) -> Result<Route, RouteError> {
    let (dst, scope) = canonical(dst);
    let src = src.map(canonical);
    check_addresses(dst, scope, src)?;
    // An unspecified source (0.0.0.0, ::) asks for the kernel's choice.
    let src = src.filter(|(a, _)| !a.is_unspecified());
    let src_ip = src.map(|(a, _)| a);
    let oif = if scope != 0 {
        scope
    } else {
        src.map_or(0, |(_, s)| s)
    };
    let system = |what| system(dst, what);

    let socket = connect(dst, oif, src)?;
    let source = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.ip())
        .ok_or_else(|| system("getsockname")(io::Error::other("no address")))?;
    let ipv6 = dst.is_ipv6();
    let socket_mtu = sys::path_mtu(socket.as_raw_fd(), ipv6).map_err(system("IP_MTU"))?;

    let mut nl = Netlink::open().map_err(system("opening an rtnetlink socket"))?;
    let answer = nl
        .route(dst, Some(source), oif)
        .map_err(|cause| no_route_or(dst, src_ip, cause, "RTM_GETROUTE"))?;
    let local = answer.kind == RouteType::Local;
    let link = if local {
        local_owner(&mut nl, dst, oif, answer.oif)
    } else {
        let oif = answer
            .oif
            .ok_or_else(|| system("RTM_GETROUTE")(io::Error::other("route without interface")))?;
        nl.link(Link::Index(oif))
    }
    .map_err(system("RTM_GETLINK"))?;

    let path_mtu = if local { link.mtu } else { socket_mtu };
    let ib_mtu = ib_mtu_for(path_mtu.min(link.mtu)).ok_or_else(|| RouteError::MtuTooSmall {
        dst,
        interface: link.name.clone(),
        mtu: path_mtu.min(link.mtu),
    })?;
    let hop_limit = match answer.hop_limit {
        Some(h) => h,
        None => default_hop_limit(&socket, ipv6).map_err(system("reading the hop limit"))?,
    };
    Ok(Route {
        destination: dst,
        source,
        interface: link.name,
        ifindex: link.index,
        interface_mtu: link.mtu,
        path_mtu,
        path_mtu_locked: answer.mtu_locked,
        ib_mtu,
        hop_limit,
        gateway: answer.gateway,
        local,
    })
}

/// The error for an unexpected failure of `what`.
fn system(dst: IpAddr, what: &'static str) -> impl FnOnce(io::Error) -> RouteError {
    move |cause| RouteError::System { dst, what, cause }
}

/// The address (IPv4-mapped as IPv4) and, for a link-local one, its scope
/// id. Other addresses' scope ids are ignored, as `connect(2)` and rdma_cm
/// ignore them.
fn canonical(a: SocketAddr) -> (IpAddr, u32) {
    let ip = a.ip().to_canonical();
    match a {
        SocketAddr::V6(v6) if needs_scope(ip).is_some() => (ip, v6.scope_id()),
        _ => (ip, 0),
    }
}

fn needs_scope(a: IpAddr) -> Option<Ipv6Addr> {
    match a {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(v6),
        _ => None,
    }
}

/// What rdma_cm refuses before it looks a route up.
fn check_addresses(dst: IpAddr, scope: u32, src: Option<(IpAddr, u32)>) -> Result<(), RouteError> {
    if dst.is_unspecified() {
        return Err(RouteError::Unspecified { dst });
    }
    // A link-local address takes its interface from its own scope id or
    // the other address's, as a socket bound to a scoped source connects.
    let any_scope = scope != 0 || src.is_some_and(|(_, s)| s != 0);
    if let Some(addr) = needs_scope(dst).filter(|_| !any_scope) {
        return Err(RouteError::NeedsScope { addr });
    }
    let Some((src, _)) = src else {
        return Ok(());
    };
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(RouteError::FamilyMismatch { dst, src });
    }
    if let Some(addr) = needs_scope(src).filter(|_| !any_scope) {
        return Err(RouteError::NeedsScope { addr });
    }
    let owner = netif::interface_of(src).map_err(|cause| RouteError::System {
        dst,
        what: "listing the interface addresses",
        cause,
    })?;
    if owner.is_none() && !src.is_unspecified() {
        return Err(RouteError::SourceNotLocal { dst, src });
    }
    Ok(())
}

/// A UDP socket connected to `dst` (bound to `src` first if given): the
/// kernel looks the route up and picks the source address; nothing is
/// sent.
fn connect(dst: IpAddr, oif: u32, src: Option<(IpAddr, u32)>) -> Result<Socket, RouteError> {
    let sockaddr = |ip: IpAddr, port: u16, scope: u32| match ip {
        IpAddr::V4(_) => SocketAddr::new(ip, port),
        IpAddr::V6(v6) => SocketAddr::V6(SocketAddrV6::new(v6, port, 0, scope)),
    };
    let domain = if dst.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .map_err(system(dst, "opening a UDP socket"))?;
    let src_ip = src.map(|(a, _)| a);
    if let Some((ip, scope)) = src {
        let scope = if scope != 0 { scope } else { oif };
        socket
            .bind(&sockaddr(ip, 0, scope).into())
            .map_err(|cause| match cause.raw_os_error() {
                Some(libc::EADDRNOTAVAIL) => RouteError::SourceNotLocal { dst, src: ip },
                _ => RouteError::System {
                    dst,
                    what: "binding the source address",
                    cause,
                },
            })?;
    }
    socket
        .connect(&sockaddr(dst, ROCE_V2_PORT, oif).into())
        .map_err(|cause| no_route_or(dst, src_ip, cause, "connecting a UDP socket"))?;
    Ok(socket)
}

/// A route lookup's failure: no route for the errnos a lookup gives when
/// the table has none (or an unreachable, prohibit or blackhole route).
fn no_route_or(
    dst: IpAddr,
    src: Option<IpAddr>,
    cause: io::Error,
    what: &'static str,
) -> RouteError {
    match cause.raw_os_error() {
        Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::EACCES | libc::EINVAL) => {
            RouteError::NoRoute { dst, src, cause }
        }
        _ => RouteError::System { dst, what, cause },
    }
}

/// The interface of a local destination: for a link-local address, the
/// one its scope names (the same address may be on several); else the one
/// that has the address, or (an address local through a `local` route
/// only) the route's, which is lo.
fn local_owner(
    nl: &mut Netlink,
    dst: IpAddr,
    scope: u32,
    route_oif: Option<u32>,
) -> io::Result<netlink::LinkAnswer> {
    if needs_scope(dst).is_some() && scope != 0 {
        return nl.link(Link::Index(scope));
    }
    if let Some(owner) = netif::interface_of(dst)? {
        return nl.link(Link::Name(&owner.name));
    }
    match route_oif {
        Some(i) => nl.link(Link::Index(i)),
        None => Err(io::Error::other("local route without interface")),
    }
}

/// The hop limit a socket sends with when the route sets none.
fn default_hop_limit(socket: &Socket, ipv6: bool) -> io::Result<u8> {
    let h = if ipv6 {
        socket.unicast_hops_v6()?
    } else {
        socket.ttl_v4()?
    };
    u8::try_from(h).map_err(|_| io::Error::other(format!("hop limit {h} out of range")))
}

#[cfg(test)]
mod tests;
