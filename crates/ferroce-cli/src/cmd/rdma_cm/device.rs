//! Opening the devices of the rdma_cm tools. rdma_cm binds an ID to the
//! device the process has on its address, so a tool opens its device
//! first: on its local address ([`open_on`], the UDP or the raw backend),
//! on the address the routing table uses towards the server
//! ([`source_towards`]), or, for a wildcard listen, on every address of the
//! host ([`open_wildcard`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use clap::Args;
use ferroce::{BackendKind, Context, DeviceConfig};

use crate::cmd::qos::QosArgs;
use crate::error::{Error, open_device};

/// A device on `local`: on the raw-Ethernet backend with `raw`'s VLAN,
/// priorities and PFC if given, else on UDP; with `ports` (this device's
/// RoCE port, the peer's) instead of 4791 and 4791.
pub(crate) fn open_on(
    local: IpAddr,
    raw: Option<&QosArgs>,
    ports: Option<(u16, u16)>,
) -> Result<Context, Error> {
    let mut config = DeviceConfig::new(local);
    if let Some((port, peer_port)) = ports {
        (config.port, config.peer_port) = (port, peer_port);
    }
    if let Some(qos) = raw {
        config.backend = BackendKind::Raw;
        config.raw = qos.options();
    }
    open_device(config)
}

/// What a wildcard listen opened: the devices, and the addresses skipped
/// (another process holds them) with the reason.
pub(crate) struct Wildcard {
    pub(crate) opened: Vec<(IpAddr, Context)>,
    pub(crate) skipped: Vec<(IpAddr, Error)>,
}

/// A device (by `open`) on every address [`wildcard_addresses`] gives.
pub(crate) fn open_wildcard(
    v6: bool,
    loopback: bool,
    mut open: impl FnMut(IpAddr) -> Result<Context, Error>,
) -> std::io::Result<Wildcard> {
    let mut all = Wildcard {
        opened: Vec::new(),
        skipped: Vec::new(),
    };
    for addr in wildcard_addresses(v6, loopback)? {
        match open(addr) {
            Ok(ctx) => all.opened.push((addr, ctx)),
            Err(e) => all.skipped.push((addr, e)),
        }
    }
    Ok(all)
}

/// The addresses a wildcard server opens devices on: those of the family
/// (`v6`) of every interface that is up; with `loopback` false, not those of
/// loopback interfaces nor IPv6 link-local ones (which need a scope) or ::1.
/// What `cmatose`, `udaddy`, `rdma-server` and `rping` share.
pub(crate) fn wildcard_addresses(v6: bool, loopback: bool) -> std::io::Result<Vec<IpAddr>> {
    let local_only = |a: &IpAddr| matches!(a, IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80 || a.is_loopback());
    Ok(ferroce::netif::interfaces()?
        .iter()
        .filter(|i| i.up && (loopback || !i.loopback))
        .flat_map(|i| i.addrs.iter().copied())
        .filter(|a| a.is_ipv6() == v6 && (loopback || !local_only(a)))
        .collect())
}

/// `--raw` of the rdma_cm tools, with the raw backend's QoS flags.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct RawArgs {
    /// Open the device on the raw-Ethernet backend (needs CAP_NET_RAW):
    /// frames built by ferroce, RoCE v2 or, with the port's
    /// default_roce_mode set to `IB/RoCE v1` (`ferroce config`), RoCE v1
    /// (ferroce's, not the C tool's). The device is on the local address,
    /// or on a client's route to its server.
    #[arg(long)]
    pub(crate) raw: bool,
    /// VLAN, priorities and PFC (with --raw).
    #[command(flatten)]
    pub(crate) qos: QosArgs,
}

impl RawArgs {
    /// With `--raw`, the raw device the run holds: on `local` (the tool's
    /// `local_flag`), or for a client without one on the address the
    /// routing table uses towards `server`. rdma_cm binds its IDs to the
    /// device the process has on an address, and opens a UDP-backend one
    /// only where it has none, so this must come before the first ID
    /// resolves or binds. A server needs its address: the raw backend
    /// opens one interface, not every one.
    pub(crate) fn open(
        &self,
        local: Option<IpAddr>,
        local_flag: &str,
        server: Option<IpAddr>,
    ) -> Result<Option<Context>, Error> {
        if !self.raw {
            return Ok(None);
        }
        let at = match (local, server) {
            (Some(ip), _) if !ip.is_unspecified() => ip,
            (_, Some(dst)) => source_towards(dst, local_flag)?,
            _ => {
                return Err(Error::Usage(format!(
                    "--raw as a server needs the address to serve on (the raw backend opens \
                     the one interface that holds it): add {local_flag} ADDRESS"
                )));
            }
        };
        open_on(at, Some(&self.qos), None).map(Some)
    }
}

/// The local address the routing table uses towards `dst` (a connected
/// UDP socket; nothing is sent). `flag` is the tool's option that gives
/// the source address instead.
pub(crate) fn source_towards(dst: IpAddr, flag: &str) -> Result<IpAddr, Error> {
    let any: IpAddr = if dst.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let no_route = |e: std::io::Error| {
        Error::Run(format!(
            "no route to {dst} ({e}): add a route, or give the source address with {flag}"
        ))
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(no_route)?;
    socket
        .connect(SocketAddr::new(dst, 4791))
        .map_err(no_route)?;
    Ok(socket.local_addr().map_err(no_route)?.ip().to_canonical())
}
