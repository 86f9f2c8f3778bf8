//! Devices and contexts: the device list, `ibv_open_device` /
//! `ibv_close_device`, and the queries (device, port, GID, P_Key).
//!
//! A ferroce device is one address, so its GID table holds that address
//! (as a RoCE v2 GID) at index 0 and nothing else: the other entries of
//! the interface's table (which `ferroce devinfo` lists, in rxe's order)
//! are addresses the device does not send from.

use std::ffi::{c_char, c_int, c_uint};
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use ferroce::{Context, DeviceConfig};

use super::{
    ctx, free_null_terminated, guard, guard_errno, guard_ptr, null_terminated, put, set_errno, take,
};
use crate::abi::*;
use crate::config::devices;
use crate::convert::{be64, device_attr, errno, ip_gid, port_attr};
use crate::objects::{Ctx, Device, new_verbs_context};

/// The device `p` points to, if it is one of ours.
fn device(p: *mut ibv_device) -> Result<&'static Device, c_int> {
    devices()
        .iter()
        .copied()
        .find(|d| std::ptr::eq(&d.dev, p))
        .ok_or(libc::EINVAL)
}

pub(super) unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    guard_ptr(|| {
        let list = devices()
            .iter()
            .map(|d| (&raw const d.dev).cast_mut())
            .collect();
        // SAFETY: `num` is NULL or an `int *` by the contract.
        Ok(unsafe { null_terminated(list, num) })
    })
}

pub(super) unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: `list` is NULL or an array from ibv_get_device_list.
    guard((), || unsafe { free_null_terminated(list) });
}

pub(super) unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    guard(std::ptr::null(), || match device(dev) {
        Ok(d) => d.dev.name.as_ptr(),
        Err(e) => {
            set_errno(e);
            std::ptr::null()
        }
    })
}

/// `ibv_get_device_index@IBVERBS_1.9`: the device's place in the list.
pub(super) unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    guard(-1, || {
        devices()
            .iter()
            .position(|d| std::ptr::eq(&d.dev, dev))
            .map_or(-1, |i| i as c_int)
    })
}

pub(super) unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    guard(0, || {
        device(dev)
            .ok()
            .and_then(|d| ferroce::query_device(d.addr).ok())
            .map_or(0, |a| be64(a.node_guid.0))
    })
}

pub(super) unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    guard_ptr(|| {
        let d = device(dev)?;
        let inner = open_shared(d)?;
        let (async_fd, inbox) = match super::events::async_fd(&inner) {
            Ok(made) => made,
            Err(e) => {
                close_shared(&d.open);
                return Err(e);
            }
        };
        let fd = async_fd.as_raw_fd();
        let mut vctx = new_verbs_context(
            dev,
            super::context_ops(),
            query_port_ex,
            query_device_ex,
            fd,
        );
        vctx.create_cq_ex = Some(super::cq_ex::create_cq_ex);
        vctx.create_qp_ex = Some(super::qp_ex::create_qp_ex);
        vctx.open_xrcd = Some(super::xrc::open_xrcd);
        vctx.close_xrcd = Some(super::xrc::close_xrcd);
        vctx.create_srq_ex = Some(super::xrc::create_srq_ex);
        vctx.get_srq_num = Some(super::xrc::get_srq_num);
        let boxed = Box::new(Ctx {
            vctx,
            device: d,
            inner,
            spans: Default::default(),
            cqs: Default::default(),
            qps: Default::default(),
            srqs: Default::default(),
            users: Default::default(),
            ud_qps: Default::default(),
            async_fd,
            inbox,
        });
        let raw = Box::into_raw(boxed);
        // Its share of the device's asynchronous events (`ffi::events`).
        lock_open(&d.open).contexts.push(raw as usize);
        // SAFETY: `raw` is the live Box just made.
        Ok(unsafe { &raw mut (*raw).vctx.context })
    })
}

/// The device's ferroce context: opened by its first user, shared after.
fn open_shared(d: &Device) -> Result<Context, c_int> {
    let mut open = lock_open(&d.open);
    let ctx = match &open.ctx {
        Some(c) => c.clone(),
        None => {
            // The backend FERROCE_BACKEND names (UDP by default). A bad
            // value is said on stderr, as libibverbs warns of a driver it
            // cannot load: EINVAL alone would not name the variable.
            let backend = ferroce::BackendKind::from_env().map_err(|e| {
                eprintln!("libibverbs (ferroce): {e}");
                libc::EINVAL
            })?;
            let cfg = DeviceConfig {
                backend,
                ..DeviceConfig::new(d.addr)
            };
            let c = Context::open_with(cfg).map_err(|e| errno(&e))?;
            open.ctx = Some(c.clone());
            c
        }
    };
    open.users += 1;
    Ok(ctx)
}

/// The device's open state, locked (a panic elsewhere leaves it usable).
pub(super) fn lock_open(
    open: &Mutex<crate::objects::OpenDevice>,
) -> std::sync::MutexGuard<'_, crate::objects::OpenDevice> {
    open.lock().unwrap_or_else(|p| p.into_inner())
}

fn close_shared(open: &Mutex<crate::objects::OpenDevice>) {
    let mut open = lock_open(open);
    open.users = open.users.saturating_sub(1);
    if open.users == 0 {
        // The last context: the driver thread stops once the objects
        // still holding the device (if any) are gone too.
        open.ctx = None;
    }
}

pub(super) unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let device = c.device;
        let addr = std::ptr::from_ref(c) as usize;
        lock_open(&device.open).contexts.retain(|&a| a != addr);
        if c.users.any() {
            // Objects left alive (perftest leaves some, and rdma-core closes
            // anyway) point at the context: its memory is kept so that they
            // stay usable until destroyed; the device's share is released.
            close_shared(&device.open);
            return Ok(());
        }
        let off = std::mem::offset_of!(verbs_context, context);
        // SAFETY: the context's Box starts `off` bytes before it.
        drop(unsafe { take::<Ctx, u8>(context.cast::<u8>().sub(off)) });
        close_shared(&device.open);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let a = c.inner.query_device().map_err(|e| errno(&e))?;
        // SAFETY: module contract.
        unsafe { put(attr, device_attr(&a)) }
    })
}

/// `verbs_context::query_device_ex`, what the header's inline
/// `ibv_query_device_ex` calls: the whole `attr_size` bytes zeroed, then
/// the attributes and `device_cap_flags_ex` (what ferroce has).
unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    _input: *const std::ffi::c_void,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let a = c.inner.query_device().map_err(|e| errno(&e))?;
        if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
            return Err(libc::EINVAL);
        }
        let ex = ibv_device_attr_ex {
            orig_attr: device_attr(&a),
            comp_mask: 0,
            odp_caps: Default::default(),
            completion_timestamp_mask: 0,
            hca_core_clock: 0,
            device_cap_flags_ex: a.device_cap_flags_ex,
        };
        let n = attr_size.min(size_of::<ibv_device_attr_ex>());
        // SAFETY: `attr` holds `attr_size` bytes (the caller's struct).
        unsafe {
            std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            std::ptr::copy_nonoverlapping((&raw const ex).cast::<u8>(), attr.cast(), n);
        }
        Ok(())
    })
}

fn query_port(c: &Ctx, port: u8) -> Result<ibv_port_attr, c_int> {
    if port != 1 {
        return Err(libc::EINVAL);
    }
    c.inner
        .query_port()
        .map(|p| port_attr(&p))
        .map_err(|e| errno(&e))
}

/// `ibv_query_port@IBVERBS_1.1`, which binaries built before the extended
/// ABI call (its `_compat_ibv_port_attr` has the same size).
pub(super) unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let p = query_port(c, port)?;
        // SAFETY: module contract.
        unsafe { put(attr, p) }
    })
}

/// `verbs_context::query_port`, what the header's inline `ibv_query_port`
/// calls: fills at most `len` bytes (an older header's shorter struct).
unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let p = query_port(c, port)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        let n = len.min(size_of::<ibv_port_attr>());
        // SAFETY: `attr` holds `len` bytes (the caller's struct size).
        unsafe { std::ptr::copy_nonoverlapping((&raw const p).cast::<u8>(), attr.cast(), n) };
        Ok(())
    })
}

/// The device's GID at `index`: its address at 0, an empty slot (None)
/// elsewhere in the table, an error past its end.
fn gid_at(c: &Ctx, port: u32, index: u32) -> Result<Option<ibv_gid>, c_int> {
    if port != 1 || index >= ferroce::GID_TABLE_LEN {
        return Err(libc::EINVAL);
    }
    Ok((index == 0).then(|| ip_gid(c.inner.local())))
}

pub(super) unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    let r = guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let index = u32::try_from(index).map_err(|_| libc::EINVAL)?;
        let g = gid_at(c, port.into(), index)?.unwrap_or_default();
        // SAFETY: module contract.
        unsafe { put(gid, g) }
    });
    minus_one(r)
}

/// rdma-core's older queries return -1 with `errno` set.
fn minus_one(r: c_int) -> c_int {
    if r == 0 {
        0
    } else {
        set_errno(r);
        -1
    }
}

/// `ibv_query_gid_type@IBVERBS_PRIVATE_34` (ibv_devinfo's GID type column).
pub(super) unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port: u8,
    index: c_uint,
    kind: *mut u32,
) -> c_int {
    let r = guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        gid_at(c, port.into(), index)?.ok_or(libc::ENODATA)?;
        // SAFETY: module contract.
        unsafe { put(kind, GID_TYPE_SYSFS_ROCE_V2) }
    });
    minus_one(r)
}

/// `_ibv_query_gid_ex@IBVERBS_1.11` (what `ibv_query_gid_ex` calls).
pub(super) unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        if flags != 0 || entry.is_null() {
            return Err(libc::EINVAL);
        }
        let gid = gid_at(c, port, index)?.ok_or(libc::ENODATA)?;
        let e = ibv_gid_entry {
            gid,
            gid_index: index,
            port_num: port,
            gid_type: GID_TYPE_ROCE_V2,
            ndev_ifindex: 0,
        };
        let n = entry_size.min(size_of::<ibv_gid_entry>());
        // SAFETY: `entry` holds `entry_size` bytes.
        unsafe { std::ptr::copy_nonoverlapping((&raw const e).cast::<u8>(), entry.cast(), n) };
        Ok(())
    })
}

/// `_ibv_query_gid_table@IBVERBS_1.11` (what `ibv_query_gid_table` calls):
/// the table's non-empty entries, here the one at index 0; their number,
/// or a negative errno (EINVAL: flags, no room, an entry size too small).
pub(super) unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    let r = guard(Err(libc::EIO), || {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        if flags != 0 || entries.is_null() || entry_size < size_of::<ibv_gid_entry>() {
            return Err(libc::EINVAL);
        }
        let gid = gid_at(c, 1, 0)?.ok_or(libc::ENODATA)?;
        if max_entries < 1 {
            return Err(libc::EINVAL);
        }
        let e = ibv_gid_entry {
            gid,
            gid_index: 0,
            port_num: 1,
            gid_type: GID_TYPE_ROCE_V2,
            ndev_ifindex: 0,
        };
        // SAFETY: `entries` holds `max_entries` entries of `entry_size`
        // bytes (module contract), the first of them written here.
        unsafe { entries.write_unaligned(e) };
        Ok(1)
    });
    r.unwrap_or_else(|e| -(e as isize))
}

/// One P_Key, the default partition's, at index 0 (as rxe).
pub(super) unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    let r = guard_errno(|| {
        // SAFETY: module contract.
        unsafe { ctx(context) }?;
        if port != 1 || index != 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: module contract.
        unsafe { put(pkey, 0xffff_u16.to_be()) }
    });
    minus_one(r)
}
