//! The process's open devices, bound ports and wildcard listeners: how an
//! rdma_cm ID finds the device for an address (librdmacm binds an ID to the
//! device whose GID is the address; a ferroce device has its address as
//! its GID), and how ports stay unique per port space.
//!
//! Lock order: these tables are never held while a device's CM lock is
//! taken, and no `Arc` of an ID is dropped while one is held (an ID's drop
//! comes back here).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ferroce_cm::rdma_cm::{PortSpace, RdmaService};

use super::CmIdError;
use super::id::IdInner;
use crate::context::DeviceHandle;
use crate::{Context, DeviceConfig};

static DEVICES: Mutex<Vec<Weak<DeviceHandle>>> = Mutex::new(Vec::new());
static PORTS: Mutex<Option<HashSet<(PortSpace, IpAddr, u16)>>> = Mutex::new(None);
type Listeners = HashMap<(PortSpace, u16, bool), Weak<IdInner>>;
static WILDCARD: Mutex<Option<Listeners>> = Mutex::new(None);

/// The kernel's default `ip_local_port_range`, where rdma_cm picks a port
/// for an ID that connects without binding one.
const EPHEMERAL: std::ops::RangeInclusive<u16> = 32768..=60999;

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records a newly opened device, and makes its CM listen for the
/// services wildcard listeners already wait on.
pub(crate) fn register(ctx: &Context) {
    {
        let mut devices = lock(&DEVICES);
        devices.retain(|d| d.strong_count() > 0);
        devices.push(Arc::downgrade(&ctx.device));
    }
    let services: Vec<u64> = lock(&WILDCARD)
        .as_ref()
        .map(|l| {
            l.keys()
                .filter(|(_, _, v6)| *v6 == ctx.local().is_ipv6())
                .map(|&(ps, port, _)| RdmaService::new(ps, port).service_id())
                .collect()
        })
        .unwrap_or_default();
    for service in services {
        ctx.shared.cm_listen(service);
    }
}

/// Every open device.
pub(crate) fn devices() -> Vec<Context> {
    let handles: Vec<Arc<DeviceHandle>> = lock(&DEVICES).iter().filter_map(Weak::upgrade).collect();
    handles.into_iter().map(Context::from_handle).collect()
}

/// The open device on `addr`, or a new one (RoCE port 4791 both ways) on
/// the backend `FERROCE_BACKEND` names ([`crate::BACKEND_ENV`]).
pub(crate) fn device_for(addr: IpAddr) -> Result<Context, CmIdError> {
    let addr = addr.to_canonical();
    if let Some(ctx) = devices().into_iter().find(|c| c.local() == addr) {
        return Ok(ctx);
    }
    let no_device = |cause: String| CmIdError::NoDevice { addr, cause };
    let backend = crate::BackendKind::from_env().map_err(|e| no_device(e.to_string()))?;
    let cfg = DeviceConfig {
        backend,
        ..DeviceConfig::new(addr)
    };
    Context::open_with(cfg).map_err(|e| no_device(e.to_string()))
}

fn clashes(
    taken: &HashSet<(PortSpace, IpAddr, u16)>,
    ps: PortSpace,
    ip: IpAddr,
    port: u16,
) -> bool {
    taken.iter().any(|&(p, i, n)| {
        p == ps && n == port && (i == ip || i.is_unspecified() || ip.is_unspecified())
    })
}

/// Binds `addr` in `ps`; port 0 picks a free ephemeral one. Returns the
/// address bound.
pub(crate) fn bind_port(ps: PortSpace, addr: SocketAddr) -> Result<SocketAddr, CmIdError> {
    let ip = addr.ip().to_canonical();
    let mut guard = lock(&PORTS);
    let taken = guard.get_or_insert_with(HashSet::new);
    let port = if addr.port() != 0 {
        if clashes(taken, ps, ip, addr.port()) {
            return Err(CmIdError::AddrInUse(addr));
        }
        addr.port()
    } else {
        let span = u32::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        let start = (RandomState::new().hash_one(ip) % u64::from(span)) as u32;
        (0..span)
            .map(|i| EPHEMERAL.start() + ((start + i) % span) as u16)
            .find(|&p| !clashes(taken, ps, ip, p))
            .ok_or(CmIdError::NoFreePort)?
    };
    taken.insert((ps, ip, port));
    Ok(SocketAddr::new(ip, port))
}

/// Frees what [`bind_port`] bound.
pub(crate) fn release_port(ps: PortSpace, addr: SocketAddr) {
    if let Some(taken) = lock(&PORTS).as_mut() {
        taken.remove(&(ps, addr.ip(), addr.port()));
    }
}

/// Makes `id` the listener for `port` of `ps` on every device of the
/// family, open now or later.
pub(crate) fn listen_wildcard(ps: PortSpace, port: u16, v6: bool, id: &Arc<IdInner>) {
    lock(&WILDCARD)
        .get_or_insert_with(HashMap::new)
        .insert((ps, port, v6), Arc::downgrade(id));
    let service = RdmaService::new(ps, port).service_id();
    for ctx in devices() {
        if ctx.local().is_ipv6() == v6 {
            ctx.shared.cm_listen(service);
        }
    }
}

/// Ends a wildcard listen (the devices' CMs stop listening when they next
/// find no listener for a REQ), called as the listener is dropped: only
/// if the entry is still that listener's (its `Weak` is dead), not a newer
/// listener's on the same port (perftest -R listens twice on one port).
pub(crate) fn unlisten_wildcard(ps: PortSpace, port: u16, v6: bool) {
    if let Some(l) = lock(&WILDCARD).as_mut()
        && l.get(&(ps, port, v6))
            .is_some_and(|w| w.strong_count() == 0)
    {
        l.remove(&(ps, port, v6));
    }
}

/// The wildcard listener for `port` of `ps` in the family of `v6`.
pub(crate) fn wildcard_listener(ps: PortSpace, port: u16, v6: bool) -> Option<Arc<IdInner>> {
    let weak = lock(&WILDCARD).as_ref()?.get(&(ps, port, v6))?.clone();
    weak.upgrade()
}
