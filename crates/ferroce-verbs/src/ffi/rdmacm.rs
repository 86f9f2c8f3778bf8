//! rdma_cm's entry points, part one: the devices rdma_cm uses, event
//! channels and IDs (events are in `rdmacm_event.rs`, addresses in
//! `rdmacm_addr.rs`, connections in `rdmacm_conn.rs`, QPs and endpoints in
//! `rdmacm_qp.rs`).
//! Exported from this library under private names (`export.rs`) that
//! `librdmacm.so.1` (crate `ferroce-rdmacm`) forwards to. Same contract as
//! the rest of this module; rdma_cm pointers are ones this library
//! returned: `rdma_event_channel *` from [`ferroce_rdma_create_event_channel`]
//! (an `Arc<ChannelObj>`), `rdma_cm_id *` the first field of a live Box'd
//! [`IdObj`], `rdma_cm_event *` of a Box'd `EventObj` not yet acked.
//!
//! librdmacm's conventions: 0, or -1 with `errno` set.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use ferroce::Context;
use ferroce::cm::{CmId, EventChannel};

use super::rdmacm_event::ack_held;
use super::{free_null_terminated, guard, guard_ptr, null_terminated, obj, put, set_errno, take};
use crate::abi::{ibv_context, ibv_pd};
use crate::config::devices;
use crate::convert::ip_gid;
use crate::rdmacm::abi::*;
use crate::rdmacm::convert::*;
use crate::rdmacm::objects::{ChannelObj, IdObj, Unacked, ids};

/// librdmacm's error convention around `f`: 0, or -1 with `errno`.
pub(super) fn guard_cm(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    match guard(Err(libc::EIO), f) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// A device as rdma_cm uses it: its `ibv_context` (from this library's
/// `ibv_open_device`) and the PD `rdma_create_qp` uses when given none.
struct CmDevice {
    addr: IpAddr,
    verbs: usize,
    pd: Mutex<usize>,
}

/// Every configured device (`FERROCE_DEVICES`), opened at the first
/// rdma_cm call as librdmacm opens every device at its start: so that
/// `ferroce::cm` finds the process's devices already open (one engine per
/// address), and `id->verbs` is a context of this library.
fn cm_devices() -> &'static [CmDevice] {
    CM_DEVICES.get_or_init(|| {
        OPENED_BY.store(std::process::id(), std::sync::atomic::Ordering::Release);
        devices()
            .iter()
            .filter_map(|d| {
                let dev = (&raw const d.dev).cast_mut();
                // SAFETY: `dev` is one of this library's devices.
                let verbs = unsafe { super::device::ibv_open_device(dev) };
                (!verbs.is_null()).then(|| CmDevice {
                    addr: d.addr,
                    verbs: verbs as usize,
                    pd: Mutex::new(0),
                })
            })
            .collect()
    })
}

static CM_DEVICES: OnceLock<Vec<CmDevice>> = OnceLock::new();

/// The process that opened rdma_cm's devices: a child it forks inherits
/// the IDs' memory but not their driver threads, and its exit must not
/// end its parent's connections (the kernel's rdma_cm descriptor, shared
/// with the parent, stays open then too).
static OPENED_BY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Whether this process is the one that opened rdma_cm's devices (not a
/// child forked from it).
pub(super) fn opened_here() -> bool {
    OPENED_BY.load(std::sync::atomic::Ordering::Acquire) == std::process::id()
}

/// The devices rdma_cm has opened, if it has (none before its first call):
/// their ferroce contexts.
pub(super) fn opened_devices() -> Vec<Context> {
    CM_DEVICES.get().map_or_else(Vec::new, |list| {
        list.iter()
            .filter_map(|d| {
                // SAFETY: rdma_cm's own contexts, never closed.
                unsafe { super::ctx(d.verbs as *mut ibv_context) }
                    .ok()
                    .map(|c| c.inner.clone())
            })
            .collect()
    })
}

/// Whether `ip` is one of the process's devices (or the wildcard).
pub(super) fn is_device(ip: IpAddr) -> bool {
    ip.is_unspecified() || cm_devices().iter().any(|d| d.addr == ip.to_canonical())
}

/// The process's only device of `ip`'s family, if it has exactly one: the
/// source address of a connection that names none (the routing table
/// would pick the loopback destination itself on `lo`).
pub(super) fn sole_device_of(ip: IpAddr) -> Option<IpAddr> {
    let mut same = cm_devices()
        .iter()
        .filter(|d| d.addr.is_ipv6() == ip.to_canonical().is_ipv6());
    match (same.next(), same.next()) {
        (Some(d), None) => Some(d.addr),
        _ => None,
    }
}

/// The `ibv_context` of a ferroce device, if it is one of ours.
fn verbs_of(ctx: &Context) -> Option<&'static CmDevice> {
    cm_devices().iter().find(|d| d.addr == ctx.local())
}

/// The device's PD for `rdma_create_qp` without one (allocated once).
pub(super) fn default_pd(verbs: *mut ibv_context) -> Result<*mut ibv_pd, c_int> {
    let d = cm_devices()
        .iter()
        .find(|d| d.verbs == verbs as usize)
        .ok_or(libc::EINVAL)?;
    let mut pd = d.pd.lock().unwrap_or_else(|p| p.into_inner());
    if *pd == 0 {
        // SAFETY: `verbs` is a context of this library.
        let p = unsafe { super::memory::ibv_alloc_pd(verbs) };
        if p.is_null() {
            return Err(libc::ENOMEM);
        }
        *pd = p as usize;
    }
    Ok(*pd as *mut ibv_pd)
}

/// The address a C `struct sockaddr *` holds; NULL or `AF_UNSPEC` is none.
///
/// # Safety
/// `p` is NULL or points to a `sockaddr` of the size its family has.
pub(super) unsafe fn read_sockaddr(p: *const c_void) -> Result<Option<SocketAddr>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: every sockaddr starts with its 2-byte family.
    let family = unsafe { p.cast::<u16>().read_unaligned() };
    if family == libc::AF_UNSPEC as u16 {
        return Ok(None);
    }
    let len = family_len(family).ok_or(libc::EAFNOSUPPORT)?;
    // SAFETY: a sockaddr of this family has `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    from_sockaddr(bytes).map(Some).ok_or(libc::EAFNOSUPPORT)
}

/// The [`IdObj`] of a C ID.
///
/// # Safety
/// Module contract.
pub(super) unsafe fn id_obj<'a>(p: *mut rdma_cm_id) -> Result<&'a IdObj, c_int> {
    // SAFETY: the ID is the first field of a live IdObj.
    unsafe { obj(p) }
}

/// Writes what the ID now knows into the C struct: its addresses and
/// GIDs, its device (`verbs`, `port_num`, and the device's PD in `pd`)
/// and, once routed, its path.
///
/// # Safety
/// `p` is a live ID of this library.
pub(super) unsafe fn refresh(p: *mut rdma_cm_id, o: &IdObj) {
    let local = o.inner.local_addr();
    let peer = o.inner.peer_addr();
    let verbs = o.inner.verbs().as_ref().and_then(verbs_of);
    // SAFETY: `p` is live; C reads these fields, Rust holds no reference
    // to them.
    unsafe {
        let route = &raw mut (*p).route;
        if let Some(l) = local {
            (&raw mut (*route).addr.src_storage).write(to_storage(l));
            (&raw mut (*route).addr.ibaddr.sgid).write(ip_gid(l.ip()));
        }
        if let Some(r) = peer {
            (&raw mut (*route).addr.dst_storage).write(to_storage(r));
            (&raw mut (*route).addr.ibaddr.dgid).write(ip_gid(r.ip()));
        }
        (&raw mut (*route).addr.ibaddr.pkey).write(0xffff_u16.to_be());
        if let Some(d) = verbs {
            let ctx = d.verbs as *mut ibv_context;
            // librdmacm's `ucma_get_device`: an ID with a device has that
            // device's PD in `id->pd` (UCX makes its QPs on it); a PD the
            // application gave (`rdma_create_ep`) stays while the device
            // does.
            let moved = (&raw const (*p).verbs).read() != ctx;
            if (moved || (&raw const (*p).pd).read().is_null())
                && let Ok(pd) = default_pd(ctx)
            {
                (&raw mut (*p).pd).write(pd);
            }
            (&raw mut (*p).verbs).write(ctx);
            (&raw mut (*p).port_num).write(1);
        }
        if let (Some(l), Some(r), true) = (local, peer, verbs.is_some()) {
            let path = o.path.get();
            path.write(ibv_sa_path_rec {
                dgid: ip_gid(r.ip()),
                sgid: ip_gid(l.ip()),
                reversible: 1,
                numb_path: 1,
                pkey: 0xffff_u16.to_be(),
                ..Default::default()
            });
            (&raw mut (*route).path_rec).write(path);
            (&raw mut (*route).num_paths).write(1);
        }
    }
}

/// A channel: the ferroce one, and an epoll descriptor watching its
/// eventfd for the application (see [`ChannelObj`]).
pub(super) fn new_channel() -> Result<ChannelObj, c_int> {
    let inner = EventChannel::new().map_err(|e| cm_errno(&e))?;
    // SAFETY: plain syscalls; the descriptor is owned at once.
    let watch = unsafe {
        let fd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        if fd < 0 {
            return Err(last_errno());
        }
        OwnedFd::from_raw_fd(fd)
    };
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: both descriptors are live; `ev` is a valid epoll_event.
    let rc = unsafe {
        libc::epoll_ctl(
            watch.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            inner.as_raw_fd(),
            &mut ev,
        )
    };
    if rc != 0 {
        return Err(last_errno());
    }
    Ok(ChannelObj {
        ch: rdma_event_channel {
            fd: watch.as_raw_fd(),
        },
        inner,
        watch,
        sources: Mutex::new(Vec::new()),
    })
}

/// The calling thread's `errno`.
fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The shared channel behind a C channel pointer (another reference).
///
/// # Safety
/// `p` is NULL or a channel of this library not yet destroyed.
pub(super) unsafe fn channel_arc(p: *mut rdma_event_channel) -> Result<Arc<ChannelObj>, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    let p = p.cast::<ChannelObj>().cast_const();
    // SAFETY: `p` came from Arc::into_raw and is still counted.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
    }
}

pub(super) unsafe extern "C" fn ferroce_rdma_create_event_channel() -> *mut rdma_event_channel {
    guard_ptr(|| {
        cm_devices();
        Ok(Arc::into_raw(Arc::new(new_channel()?)).cast_mut().cast())
    })
}

/// Drops the application's reference; IDs still on the channel keep it
/// (librdmacm frees it at once and leaves them dangling).
pub(super) unsafe extern "C" fn ferroce_rdma_destroy_event_channel(ch: *mut rdma_event_channel) {
    guard((), || {
        if !ch.is_null() {
            // SAFETY: the application's reference, given back.
            drop(unsafe { Arc::from_raw(ch.cast::<ChannelObj>().cast_const()) });
        }
    });
}

/// A new C ID over `inner`, whose events arrive on `chan` and are
/// delivered by `owner` (`sync`: created without a channel).
pub(super) fn new_id(
    inner: CmId,
    (chan, owner): (Arc<ChannelObj>, Arc<ChannelObj>),
    sync: bool,
    context: *mut c_void,
    ps: u32,
) -> *mut rdma_cm_id {
    let channel = Arc::as_ptr(&owner).cast_mut().cast::<rdma_event_channel>();
    let raw = Box::into_raw(Box::new(IdObj {
        id: UnsafeCell::new(rdma_cm_id {
            verbs: std::ptr::null_mut(),
            channel,
            context,
            qp: std::ptr::null_mut(),
            route: rdma_route {
                addr: rdma_addr::default(),
                path_rec: std::ptr::null_mut(),
                num_paths: 0,
            },
            ps,
            port_num: 0,
            event: std::ptr::null_mut(),
            send_cq_channel: std::ptr::null_mut(),
            send_cq: std::ptr::null_mut(),
            recv_cq_channel: std::ptr::null_mut(),
            recv_cq: std::ptr::null_mut(),
            srq: std::ptr::null_mut(),
            pd: std::ptr::null_mut(),
            qp_type: qp_type_of(ps),
        }),
        inner: inner.clone(),
        chan,
        owner: Mutex::new(owner),
        sync: AtomicBool::new(sync),
        path: UnsafeCell::new(ibv_sa_path_rec::default()),
        unacked: Unacked::default(),
        ep_qp: Mutex::new(None),
        own_cqs: AtomicBool::new(false),
        mc_contexts: Mutex::new(Vec::new()),
    }));
    ids().push((inner, raw as usize));
    raw.cast()
}

/// `rdma_create_id`; a NULL channel makes a synchronous ID (its calls
/// wait for their outcome), as librdmacm's.
pub(super) unsafe extern "C" fn ferroce_rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    guard_cm(|| {
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let space = port_space(ps)?;
        cm_devices();
        let (chan, sync) = if channel.is_null() {
            (Arc::new(new_channel()?), true)
        } else {
            // SAFETY: module contract.
            (unsafe { channel_arc(channel) }?, false)
        };
        let inner = chan.inner.create_id(space).map_err(|e| cm_errno(&e))?;
        let raw = new_id(inner, (chan.clone(), chan), sync, context, ps);
        // SAFETY: module contract.
        unsafe { put(id, raw) }
    })
}

/// `rdma_destroy_id`: waits until the ID's events are acknowledged, as
/// librdmacm's, then lets the ID go (the CM sends what it owes the peer).
pub(super) unsafe extern "C" fn ferroce_rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        unsafe { ack_held(id) };
        o.unacked.wait_zero();
        ids().retain(|&(_, p)| p != id as usize);
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<IdObj, _>(id) });
        Ok(())
    })
}

/// `rdma_get_devices`: the `ibv_context` of every configured device
/// (rdma_cm's own, opened once), NULL-terminated.
pub(super) unsafe extern "C" fn ferroce_rdma_get_devices(num: *mut c_int) -> *mut *mut ibv_context {
    guard_ptr(|| {
        let list = cm_devices()
            .iter()
            .map(|d| d.verbs as *mut ibv_context)
            .collect();
        // SAFETY: `num` is NULL or an `int *` by the contract.
        Ok(unsafe { null_terminated(list, num) })
    })
}

pub(super) unsafe extern "C" fn ferroce_rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: `list` is NULL or an array from ferroce_rdma_get_devices.
    guard((), || unsafe { free_null_terminated(list) });
}
