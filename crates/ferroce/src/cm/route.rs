//! Address and route resolution for rdma_cm IDs, from the host's routing
//! table (`ferroce_io::route`): which local address (and so which device)
//! reaches a destination, and the path MTU and hop limit from there.

use std::net::{IpAddr, SocketAddr};

use ferroce_io::route::{self, Route as HostRoute};

use super::CmIdError;
use super::id::Route;
use crate::Mtu;

/// The route to `dst`, from `src` if given (it must be an address of this
/// host); the kernel picks the source otherwise.
pub(crate) fn resolve(dst: SocketAddr, src: Option<SocketAddr>) -> Result<HostRoute, CmIdError> {
    let canon = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    route::resolve_scoped(canon(dst), src.map(canon)).map_err(CmIdError::Route)
}

/// The path a connection over `route` takes: rdma_cm's IB MTU for the
/// path (interface MTU less the RoCE headers), and the route's hop limit.
pub(crate) fn path_of(route: &HostRoute) -> Route {
    let mtu = [
        Mtu::Mtu256,
        Mtu::Mtu512,
        Mtu::Mtu1024,
        Mtu::Mtu2048,
        Mtu::Mtu4096,
    ]
    .into_iter()
    .rev()
    .find(|m| m.bytes() as u32 <= route.ib_mtu)
    .unwrap_or(Mtu::Mtu256);
    Route {
        mtu,
        hop_limit: route.hop_limit,
    }
}

/// The local address of `route`, as a device is opened on it.
pub(crate) fn local_of(route: &HostRoute) -> IpAddr {
    route.source.to_canonical()
}
