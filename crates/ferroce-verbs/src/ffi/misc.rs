//! The rest of what programs call: the `*_str` helpers, fork support,
//! `ibv_read_sysfs_file`, multicast attach and detach, and the verbs
//! ferroce does not have (memory windows, CQ resizing), which return
//! EOPNOTSUPP as rdma-core does for a provider without them.

use super::{guard, guard_errno, obj, set_errno};
use crate::abi::*;
use crate::objects::Qp;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io::Read;

/// Strings indexed by enum value, "unknown" past the end or for a gap.
fn pick(table: &[&'static CStr], i: c_int) -> *const c_char {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .filter(|s| !s.is_empty())
        .map_or(c"unknown".as_ptr(), |s| s.as_ptr())
}

pub(super) unsafe extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    pick(
        &[
            c"success",
            c"local length error",
            c"local QP operation error",
            c"local EE context operation error",
            c"local protection error",
            c"Work Request Flushed Error",
            c"memory management operation error",
            c"bad response error",
            c"local access error",
            c"remote invalid request error",
            c"remote access error",
            c"remote operation error",
            c"transport retry counter exceeded",
            c"RNR retry counter exceeded",
            c"local RDD violation error",
            c"remote invalid RD request",
            c"aborted error",
            c"invalid EE context number",
            c"invalid EE context state",
            c"fatal error",
            c"response timeout error",
            c"general error",
            c"TM error",
            c"TM software rendezvous",
        ],
        status,
    )
}

pub(super) unsafe extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    pick(
        &[
            c"CQ error",
            c"local work queue catastrophic error",
            c"invalid request local work queue error",
            c"local access violation work queue error",
            c"communication established",
            c"send queue drained",
            c"path migrated",
            c"path migration request error",
            c"local catastrophic error",
            c"port active",
            c"port error",
            c"LID change",
            c"P_Key change",
            c"SM change",
            c"SRQ catastrophic error",
            c"SRQ limit reached",
            c"last WQE reached",
            c"client reregistration",
            c"GID table change",
            c"WQ fatal",
        ],
        event,
    )
}

pub(super) unsafe extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    pick(
        &[
            c"",
            c"InfiniBand channel adapter",
            c"InfiniBand switch",
            c"InfiniBand router",
            c"iWARP NIC",
            c"usNIC",
            c"usNIC UDP",
            c"unspecified",
        ],
        node_type,
    )
}

pub(super) unsafe extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    pick(
        &[
            c"no state change (NOP)",
            c"down",
            c"init",
            c"armed",
            c"active",
            c"active defer",
        ],
        state,
    )
}

/// `ibv_fork_init`: ferroce does not pin registered memory in the kernel,
/// so a child after fork() cannot corrupt it: nothing to set up.
pub(super) unsafe extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED` (2), see `ibv_fork_init`.
pub(super) unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

pub(super) unsafe extern "C" fn ibv_dontfork_range(_base: *mut c_void, _len: usize) -> c_int {
    0
}

pub(super) unsafe extern "C" fn ibv_dofork_range(_base: *mut c_void, _len: usize) -> c_int {
    0
}

/// `ibv_read_sysfs_file`: reads `dir/file` into `buf` (NUL-terminated,
/// the trailing newline dropped) and returns its length, or -1. A ferroce
/// device has no sysfs directory, so for its paths this finds nothing.
pub(super) unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard(-1, || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return -1;
        }
        // SAFETY: NUL-terminated strings (module contract).
        let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let path = format!("{}/{}", d.to_string_lossy(), f.to_string_lossy());
        let mut bytes = Vec::new();
        if std::fs::File::open(path)
            .and_then(|mut h| h.read_to_end(&mut bytes))
            .is_err()
        {
            return -1;
        }
        let n = bytes.len().min(size - 1);
        let mut text = &bytes[..n];
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        // SAFETY: `buf` holds `size` bytes (module contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast(), text.len());
            buf.add(text.len()).write(0);
        }
        text.len() as c_int
    })
}

/// `ibv_attach_mcast`: the UD QP receives what is sent to multicast
/// `gid` (the LID is ignored: RoCE has none). EINVAL for a QP that is not
/// UD, a GID that is not multicast, a QP attached already (rxe returns 0
/// there; ferroce follows IBA and says so); ENOMEM past the device's
/// multicast limits; a group the device cannot join, the socket's errno.
pub(super) unsafe extern "C" fn ibv_attach_mcast(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    _lid: u16,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        // SAFETY: the caller's GID, read once.
        let g = unsafe { gid.as_ref() }.ok_or(libc::EINVAL)?;
        q.inner.attach_mcast(gid_ip(g)).map_err(|e| mcast_errno(&e))
    })
}

/// `ibv_detach_mcast`: EINVAL for a QP not attached to `gid`.
pub(super) unsafe extern "C" fn ibv_detach_mcast(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    _lid: u16,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        // SAFETY: the caller's GID, read once.
        let g = unsafe { gid.as_ref() }.ok_or(libc::EINVAL)?;
        q.inner.detach_mcast(gid_ip(g)).map_err(|e| mcast_errno(&e))
    })
}

/// A GID as the address it holds (IPv4-mapped ones as IPv4).
fn gid_ip(g: &ibv_gid) -> std::net::IpAddr {
    std::net::IpAddr::V6(std::net::Ipv6Addr::from(g.raw)).to_canonical()
}

/// The errno of a refused attach or detach (rxe's: ENOMEM past its limits).
fn mcast_errno(e: &ferroce::Error) -> c_int {
    match e {
        ferroce::Error::Verbs(ferroce::VerbsError::Mcast {
            why: ferroce::McastRefusal::Full,
            ..
        }) => libc::ENOMEM,
        other => crate::convert::errno(other),
    }
}

/// `ibv_get_sysfs_path@IBVERBS_1.0`.
pub(super) unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// The `ibv_copy_{qp,ah}_attr_from_kern` helpers translate the kernel's uverbs
/// structs for librdmacm, which needs them only with the kernel's
/// rdma_cm device: with ferroce there is no kernel struct to translate,
/// and librdmacm, finding no such device, never calls them. They exist
/// because librdmacm.so.1 (linked into perftest) binds every symbol at
/// load time. They leave `dst` untouched.
pub(super) unsafe extern "C" fn ibv_copy_qp_attr_from_kern(_dst: *mut c_void, _src: *const c_void) {
}

pub(super) unsafe extern "C" fn ibv_copy_ah_attr_from_kern(_dst: *mut c_void, _src: *const c_void) {
}

/// `ibv_query_ece` / `ibv_set_ece` (enhanced connection establishment):
/// not in ferroce.
pub(super) unsafe extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

pub(super) unsafe extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_get_pkey_index@IBVERBS_1.5`: the one P_Key (0xFFFF) is at index 0.
pub(super) unsafe extern "C" fn ibv_get_pkey_index(
    _context: *mut ibv_context,
    port: u8,
    pkey_be: u16,
) -> c_int {
    if port == 1 && u16::from_be(pkey_be) == 0xffff {
        0
    } else {
        set_errno(libc::EINVAL);
        -1
    }
}
