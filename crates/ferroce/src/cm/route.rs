//! Address and route resolution for rdma_cm IDs: which local address
//! reaches a destination (the kernel's choice, from its routing table) and
//! the path a connection takes from there.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use super::CmIdError;
use super::id::Route;
use crate::Context;

/// The hop limit rdma_cm puts in a RoCE path (the kernel's default TTL).
const HOP_LIMIT: u8 = 64;

/// The local address that reaches `dst`: `src` if given (it must be of the
/// same family), else the source address the kernel's routing table picks
/// (a connected UDP socket: nothing is sent).
pub(crate) fn source_for(dst: IpAddr, src: Option<IpAddr>) -> Result<IpAddr, CmIdError> {
    let dst = dst.to_canonical();
    if let Some(src) = src {
        let src = src.to_canonical();
        if src.is_ipv6() != dst.is_ipv6() {
            return Err(CmIdError::MixedFamilies { src, dst });
        }
        return Ok(src);
    }
    let any: IpAddr = if dst.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let no_route = |e: std::io::Error| CmIdError::NoRoute {
        dst,
        cause: e.to_string(),
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(no_route)?;
    socket
        .connect(SocketAddr::new(dst, ferroce_wire::udp::ROCE_V2_PORT))
        .map_err(no_route)?;
    Ok(socket.local_addr().map_err(no_route)?.ip().to_canonical())
}

/// The path from `ctx`'s device to `dst`: its port's active MTU (derived
/// from the interface MTU as rxe derives it) and the default hop limit.
/// The MTU read for one route serves those resolved within
/// [`MTU_FRESH`](super::hub::MTU_FRESH) (reading it costs system calls
/// that were a tenth of a connection setup's time).
pub(crate) fn route_for(ctx: &Context, _dst: IpAddr) -> Result<Route, CmIdError> {
    let mut cached = ctx.shared.cm.mtu.lock().unwrap_or_else(|p| p.into_inner());
    let mtu = match *cached {
        Some((at, mtu)) if at.elapsed() < super::hub::MTU_FRESH => mtu,
        _ => {
            let port = ctx.query_port().map_err(|e| CmIdError::NoDevice {
                addr: ctx.local(),
                cause: e.to_string(),
            })?;
            *cached = Some((std::time::Instant::now(), port.active_mtu));
            port.active_mtu
        }
    };
    Ok(Route {
        mtu,
        hop_limit: HOP_LIMIT,
    })
}
