//! Address and route resolution for rdma_cm IDs, from the host's routing
//! table (`ferroce_io::route`): which local address (and so which device)
//! reaches a destination, and the path MTU and hop limit from there.
//!
//! A resolution asks the kernel over rtnetlink (tens of µs; a local
//! destination over 100 µs), more than the rest of a connection setup, so
//! its answer serves the same (destination, source) for [`FRESH`]: a
//! change of routes or MTUs reaches new connections within that time.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferroce_io::route::{self, Route as HostRoute};

use super::CmIdError;
use super::id::Route;
use crate::Mtu;

/// How long one resolution serves the next for the same addresses.
const FRESH: Duration = Duration::from_secs(1);
/// At most this many answers are kept (the table is emptied when full).
const MAX_CACHED: usize = 1024;

type Key = (SocketAddr, Option<SocketAddr>);
static CACHE: Mutex<Option<HashMap<Key, (Instant, HostRoute)>>> = Mutex::new(None);

/// The route to `dst`, from `src` if given (it must be an address of this
/// host); the kernel picks the source otherwise. Ports do not matter.
pub(crate) fn resolve(dst: SocketAddr, src: Option<SocketAddr>) -> Result<HostRoute, CmIdError> {
    let canon = |a: SocketAddr| {
        let mut a = with_scope(a);
        a.set_port(0);
        a
    };
    let key = (canon(dst), src.map(canon));
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let table = cache.get_or_insert_with(HashMap::new);
    if let Some((at, route)) = table.get(&key)
        && at.elapsed() < FRESH
    {
        return Ok(route.clone());
    }
    drop(cache);
    let route =
        route::resolve_scoped(with_scope(dst), src.map(with_scope)).map_err(CmIdError::Route)?;
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let table = cache.get_or_insert_with(HashMap::new);
    if table.len() >= MAX_CACHED {
        table.clear();
    }
    table.insert(key, (Instant::now(), route.clone()));
    Ok(route)
}

fn scope_of(a: SocketAddr) -> Option<u32> {
    match a {
        SocketAddr::V6(v6) if v6.scope_id() != 0 => Some(v6.scope_id()),
        _ => None,
    }
}

fn with_scope(a: SocketAddr) -> SocketAddr {
    let mut out = SocketAddr::new(a.ip().to_canonical(), a.port());
    if let (SocketAddr::V6(o), Some(scope)) = (&mut out, scope_of(a)) {
        o.set_scope_id(scope);
    }
    out
}

/// The path a connection over `route` takes: rdma_cm's IB MTU for the
/// path (interface MTU less the RoCE headers), and the route's hop limit.
pub(crate) fn path_of(route: &HostRoute) -> Route {
    let mtu = Mtu::ALL
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
