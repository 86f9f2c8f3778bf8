//! rdma_cm's entry points: binding, resolving, connecting,
//! listening, accepting, rejecting, disconnecting, options. Each maps to
//! the `ferroce::cm::CmId` call of the same name; a synchronous ID (no
//! channel) then waits for the call's outcome, as librdmacm's.

use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::put;
use super::rdmacm::{
    channel_arc, guard_cm, id_obj, is_device, new_channel, read_sockaddr, refresh, sole_device_of,
};
use super::rdmacm_event::{ack_held, complete, deliver};
use super::rdmacm_qp::create_ep_qp;
use crate::abi::ibv_qp_attr;
use crate::convert::qp_state;
use crate::rdmacm::abi::*;
use crate::rdmacm::convert::{cm_errno, conn_param, init_qp_attr};
use crate::rdmacm::objects::ChannelObj;

/// `rdma_bind_addr`. An address that is not one of the process's devices
/// (`FERROCE_DEVICES`) is refused with ENODEV, as the kernel refuses an
/// address with no RDMA device; the wildcard binds every device. A
/// loopback address that is no device's binds as the wildcard, as the
/// kernel's rdma_cm takes a loopback address for "any" (no device
/// attached, `verbs` NULL): libfabric's verbs provider probes with
/// `localhost` and lists no `verbs;ofi_rxm` endpoint if that fails.
pub(super) unsafe extern "C" fn ferroce_rdma_bind_addr(
    id: *mut rdma_cm_id,
    addr: *mut c_void,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let mut a = unsafe { read_sockaddr(addr) }?.ok_or(libc::EINVAL)?;
        if !is_device(a.ip()) && a.ip().to_canonical().is_loopback() {
            a.set_ip(unspecified_like(a.ip()));
        }
        if !is_device(a.ip()) {
            return Err(libc::ENODEV);
        }
        o.inner.bind_addr(a).map_err(|e| cm_errno(&e))?;
        // SAFETY: module contract.
        unsafe { refresh(id, o) };
        Ok(())
    })
}

/// The wildcard address of `ip`'s family.
fn unspecified_like(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

/// `rdma_resolve_addr`. With no source address (and none bound), a
/// process with one device of the destination's family sends from it.
pub(super) unsafe extern "C" fn ferroce_rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut c_void,
    dst: *mut c_void,
    timeout_ms: c_int,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let d = unsafe { read_sockaddr(dst) }?.ok_or(libc::EINVAL)?;
        // SAFETY: module contract.
        let mut s = unsafe { read_sockaddr(src) }?;
        if s.is_none() && o.inner.local_addr().is_none_or(|l| l.ip().is_unspecified()) {
            s = sole_device_of(d.ip()).map(|ip| std::net::SocketAddr::new(ip, 0));
        }
        if let Some(s) = s
            && !is_device(s.ip())
        {
            return Err(libc::ENODEV);
        }
        let t = Duration::from_millis(timeout_ms.max(0) as u64);
        o.inner.resolve_addr(s, d, t).map_err(|e| cm_errno(&e))?;
        if o.inner.verbs().is_some_and(|c| !is_device(c.local())) {
            return Err(libc::ENODEV);
        }
        // SAFETY: module contract.
        unsafe {
            refresh(id, o);
            complete(id, o)
        }
    })
}

pub(super) unsafe extern "C" fn ferroce_rdma_resolve_route(
    id: *mut rdma_cm_id,
    timeout_ms: c_int,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        let t = Duration::from_millis(timeout_ms.max(0) as u64);
        o.inner.resolve_route(t).map_err(|e| cm_errno(&e))?;
        // SAFETY: module contract.
        unsafe {
            refresh(id, o);
            complete(id, o)
        }
    })
}

/// The parameters of `rdma_connect`/`rdma_accept` (librdmacm's defaults
/// for NULL), with their private data copied.
///
/// # Safety
/// `p` is NULL or a valid `rdma_conn_param` whose private data holds
/// `private_data_len` bytes.
unsafe fn read_param(p: *const rdma_conn_param) -> ferroce::cm::ConnParam {
    // SAFETY: module contract.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return ferroce::cm::ConnParam::default();
    };
    let data = if p.private_data.is_null() || p.private_data_len == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's bytes, `private_data_len` long.
        unsafe {
            std::slice::from_raw_parts(p.private_data.cast::<u8>(), p.private_data_len.into())
        }
        .to_vec()
    };
    conn_param(p, data)
}

pub(super) unsafe extern "C" fn ferroce_rdma_connect(
    id: *mut rdma_cm_id,
    param: *mut rdma_conn_param,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let p = unsafe { read_param(param) };
        o.inner.connect(&p).map_err(|e| cm_errno(&e))?;
        // SAFETY: module contract.
        unsafe { complete(id, o) }
    })
}

pub(super) unsafe extern "C" fn ferroce_rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        o.inner
            .listen(backlog.max(0) as u32)
            .map_err(|e| cm_errno(&e))
    })
}

/// `rdma_get_request`: for a synchronous listener, the next request's ID
/// (itself synchronous), with the QP a passive endpoint asked for.
pub(super) unsafe extern "C" fn ferroce_rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    guard_cm(|| {
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let new = loop {
            // SAFETY: module contract.
            if let Some(new) = unsafe { get_request_within(listen, Duration::from_secs(3600)) }? {
                break new;
            }
        };
        // SAFETY: module contract.
        unsafe { put(id, new) }
    })
}

/// The next request of a synchronous listener, waiting at most `wait`
/// (None: none came): its new ID holds the request event.
///
/// # Safety
/// `listen` is NULL or a live ID of this library.
pub(super) unsafe fn get_request_within(
    listen: *mut rdma_cm_id,
    wait: Duration,
) -> Result<Option<*mut rdma_cm_id>, c_int> {
    // SAFETY: module contract.
    let l = unsafe { id_obj(listen) }?;
    if !l.is_sync() {
        return Err(libc::EINVAL);
    }
    let ev = match l.inner.get_request(wait) {
        Ok(ev) => ev,
        Err(ferroce::Error::Cm(ferroce::cm::CmIdError::TimedOut(_))) => return Ok(None),
        Err(e) => return Err(cm_errno(&e)),
    };
    let ev = deliver(ev).ok_or(libc::EINVAL)?;
    // SAFETY: `ev` is the event just made, on the new ID.
    let new = unsafe { (*ev).id };
    // SAFETY: as above.
    unsafe { (&raw mut (*new).event).write(ev) };
    // SAFETY: `new` is live.
    if let Err(e) = unsafe { create_ep_qp(l, new) } {
        // SAFETY: `new` is live and no one else has it yet.
        unsafe { super::rdmacm::ferroce_rdma_destroy_id(new) };
        return Err(e);
    }
    Ok(Some(new))
}

pub(super) unsafe extern "C" fn ferroce_rdma_accept(
    id: *mut rdma_cm_id,
    param: *mut rdma_conn_param,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let p = unsafe { read_param(param) };
        o.inner.accept(&p).map_err(|e| cm_errno(&e))?;
        // SAFETY: module contract.
        unsafe { complete(id, o) }
    })
}

pub(super) unsafe extern "C" fn ferroce_rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    len: u8,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        let data = if private_data.is_null() || len == 0 {
            &[][..]
        } else {
            // SAFETY: the caller's `len` bytes.
            unsafe { std::slice::from_raw_parts(private_data.cast::<u8>(), len.into()) }
        };
        o.inner.reject(data).map_err(|e| cm_errno(&e))
    })
}

pub(super) unsafe extern "C" fn ferroce_rdma_establish(id: *mut rdma_cm_id) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        o.inner.establish().map_err(|e| cm_errno(&e))
    })
}

/// `rdma_disconnect`: the QP to the error state and the DREQ (or DREP); a
/// synchronous ID waits for its DISCONNECTED.
pub(super) unsafe extern "C" fn ferroce_rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        o.inner.disconnect().map_err(|e| cm_errno(&e))?;
        // SAFETY: module contract.
        unsafe { complete(id, o) }
    })
}

/// `rdma_notify`: the kernel uses it to start a connection on the first
/// receive before the RTU; ferroce's CM needs no hint. Returns 0.
pub(super) unsafe extern "C" fn ferroce_rdma_notify(id: *mut rdma_cm_id, _event: c_int) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        unsafe { id_obj(id) }.map(|_| ())
    })
}

/// `rdma_set_option`: the ID's ToS and ACK timeout (`uint8_t`, as the
/// kernel takes them); REUSEADDR and AFONLY are accepted and change
/// nothing (ferroce's ports are the process's own; a wildcard IPv6 ID
/// listens on IPv6 devices only, which is AFONLY); IB paths are not
/// RoCE's (EINVAL); other names ENOSYS, as the kernel answers.
pub(super) unsafe extern "C" fn ferroce_rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: usize,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        if val.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `val` holds `len` bytes, at least one (checked per name).
        let byte = || unsafe { val.cast::<u8>().read() };
        match (level, name) {
            (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) if len == 1 => o.inner.set_tos(byte()),
            (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) if len == 1 => {
                o.inner.set_ack_timeout(byte())
            }
            (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR | RDMA_OPTION_ID_AFONLY)
                if len == size_of::<c_int>() => {}
            (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS | RDMA_OPTION_ID_ACK_TIMEOUT)
            | (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR | RDMA_OPTION_ID_AFONLY)
            | (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => return Err(libc::EINVAL),
            _ => return Err(libc::ENOSYS),
        }
        Ok(())
    })
}

/// `rdma_migrate_id`: the ID's events are delivered by `channel` from
/// now (those not yet read included), and the ID is asynchronous; a NULL
/// channel makes it synchronous, on a private channel of its own. Its
/// events still arrive on the ferroce channel it was made on, which
/// `channel` reads from then too. As librdmacm: a synchronous ID's held
/// event (`id->event`) is acknowledged first, the call waits until the
/// ID's events are acknowledged, and migrating a synchronous ID to NULL
/// is EINVAL.
pub(super) unsafe extern "C" fn ferroce_rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        let was_sync = o.is_sync();
        let to = if channel.is_null() {
            if was_sync {
                return Err(libc::EINVAL);
            }
            Arc::new(new_channel()?)
        } else {
            // SAFETY: module contract.
            let to = unsafe { channel_arc(channel) }?;
            if !Arc::ptr_eq(&o.chan, &to) {
                watch_home(&to, &o.chan)?;
            }
            to
        };
        if was_sync {
            // SAFETY: module contract.
            unsafe { ack_held(id) };
        }
        let c_channel = Arc::as_ptr(&to).cast_mut().cast::<rdma_event_channel>();
        *o.owner.lock().unwrap_or_else(|p| p.into_inner()) = to;
        o.sync.store(channel.is_null(), Ordering::Release);
        // SAFETY: module contract; C reads `channel` from now.
        unsafe { (&raw mut (*id).channel).write(c_channel) };
        o.unacked.wait_zero();
        Ok(())
    })
}

/// Makes `to` read `home` too: a source, and its eventfd in `to`'s epoll.
fn watch_home(to: &ChannelObj, home: &Arc<ChannelObj>) -> Result<(), c_int> {
    let mut sources = to.sources.lock().unwrap_or_else(|p| p.into_inner());
    if sources
        .iter()
        .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(home)))
    {
        return Ok(());
    }
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: both descriptors are live; `ev` is a valid epoll_event.
    let rc = unsafe {
        libc::epoll_ctl(
            to.watch.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            home.inner.as_raw_fd(),
            &mut ev,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    sources.push(Arc::downgrade(home));
    Ok(())
}

/// `rdma_init_qp_attr`: the attributes (and mask) that move the ID's QP
/// to the state asked for in `attr->qp_state`, for a program that moves
/// its own QP (`rping -q`): INIT once the ID has a device, RTR and RTS
/// once the exchange is known (CONNECT_REQUEST on the passive side,
/// CONNECT_RESPONSE on the active side); before that, or for another
/// state, EINVAL, as the kernel answers.
pub(super) unsafe extern "C" fn ferroce_rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_attr,
    mask: *mut c_int,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        if mask.is_null() {
            return Err(libc::EINVAL);
        }
        let state = qp_state(a.qp_state).ok_or(libc::EINVAL)?;
        let wanted = o.inner.qp_attr(state).map_err(|e| cm_errno(&e))?;
        let (filled, m) = init_qp_attr(&wanted, o.inner.flow_label().unwrap_or(0));
        *a = filled;
        // SAFETY: module contract.
        unsafe { put(mask, m as c_int) }
    })
}

/// `rdma_get_src_port` / `rdma_get_dst_port`: the port in network order
/// (0 for an ID without the address).
pub(super) unsafe extern "C" fn ferroce_rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: module contract.
    port_of(
        unsafe { id_obj(id) }
            .ok()
            .and_then(|o| o.inner.local_addr()),
    )
}

pub(super) unsafe extern "C" fn ferroce_rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: module contract.
    port_of(unsafe { id_obj(id) }.ok().and_then(|o| o.inner.peer_addr()))
}

fn port_of(a: Option<std::net::SocketAddr>) -> u16 {
    a.map_or(0, |a| a.port().to_be())
}
