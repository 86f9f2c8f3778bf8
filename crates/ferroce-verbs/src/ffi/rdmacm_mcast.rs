//! rdma_cm's entry points: multicast (`rdma_join_multicast`,
//! `rdma_join_multicast_ex`, `rdma_leave_multicast`), over
//! [`ferroce::cm::CmId::join_multicast`]. Same contract as `rdmacm.rs`.
//!
//! As librdmacm: the join's `context` comes back in the MULTICAST_JOIN
//! event's `param.ud.private_data` (with length 0), the ID's QP is
//! attached to the group (librdmacm attaches it when it reads the event;
//! here the join attaches it), and a synchronous ID's join waits for its
//! event. Errors: EINVAL for an address that is not a group (or an ID
//! that is not bound or resolved), 524 (the kernel's ENOTSUPP) for an
//! IPv6 group on RoCE v2, EADDRINUSE for a group the ID joined already,
//! EADDRNOTAVAIL for leaving one it did not join (librdmacm's).

use std::ffi::{c_int, c_void};
use std::net::IpAddr;

use ferroce::cm::{CmIdError, McJoinError};

use super::rdmacm::{guard_cm, id_obj, read_sockaddr};
use super::rdmacm_event::complete;
use crate::rdmacm::abi::*;
use crate::rdmacm::convert::cm_errno;

/// The kernel's ENOTSUPP, which reaches librdmacm's callers as is.
const KERNEL_ENOTSUPP: c_int = 524;

/// `struct rdma_cm_join_mc_attr_ex`.
#[repr(C)]
pub(crate) struct rdma_cm_join_mc_attr_ex {
    pub(crate) comp_mask: u32,
    pub(crate) join_flags: u32,
    pub(crate) addr: *const c_void,
}

/// `comp_mask` bits: the address and the join flags are set.
const JOIN_MC_ATTR_ADDRESS: u32 = 1;
const JOIN_MC_ATTR_JOIN_FLAGS: u32 = 2;
/// `join_flags`: a full member, or a send-only full member.
const MC_JOIN_FLAG_FULLMEMBER: u32 = 0;
const MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u32 = 1;

fn mc_errno(e: &ferroce::Error) -> c_int {
    match e {
        ferroce::Error::Cm(CmIdError::Multicast(McJoinError::Ipv6OnRoceV2(_))) => KERNEL_ENOTSUPP,
        ferroce::Error::Cm(CmIdError::AlreadyJoined(_)) => libc::EADDRINUSE,
        ferroce::Error::Cm(CmIdError::NotJoined(_)) => libc::EADDRNOTAVAIL,
        other => cm_errno(other),
    }
}

/// Joins `addr` on `id` with `context` for its event.
///
/// # Safety
/// Module contract; `addr` is a `sockaddr` of its family's size.
unsafe fn join(
    id: *mut rdma_cm_id,
    addr: *const c_void,
    send_only: bool,
    context: *mut c_void,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let group: IpAddr = unsafe { read_sockaddr(addr) }?.ok_or(libc::EINVAL)?.ip();
        o.mc_contexts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((group.to_canonical(), context as usize));
        let joined = if send_only {
            o.inner.join_multicast_send_only(group)
        } else {
            o.inner.join_multicast(group)
        };
        if let Err(e) = joined {
            forget(o, group);
            return Err(mc_errno(&e));
        }
        // SAFETY: module contract.
        unsafe { complete(id, o) }
    })
}

/// Forgets the context of `group`'s join.
fn forget(o: &crate::rdmacm::objects::IdObj, group: IpAddr) {
    let mut c = o.mc_contexts.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = c.iter().position(|(g, _)| *g == group.to_canonical()) {
        c.remove(i);
    }
}

pub(super) unsafe extern "C" fn ferroce_rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *const c_void,
    context: *mut c_void,
) -> c_int {
    // SAFETY: the caller's arguments, as rdma_join_multicast takes them.
    unsafe { join(id, addr, false, context) }
}

pub(super) unsafe extern "C" fn ferroce_rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    attr: *const rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    // SAFETY: the caller's attributes, read once.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return guard_cm(|| Err(libc::EINVAL));
    };
    let both = JOIN_MC_ATTR_ADDRESS | JOIN_MC_ATTR_JOIN_FLAGS;
    let send_only = match a.join_flags {
        MC_JOIN_FLAG_FULLMEMBER => false,
        MC_JOIN_FLAG_SENDONLY_FULLMEMBER => true,
        _ => return guard_cm(|| Err(libc::EINVAL)),
    };
    if a.comp_mask & both != both || a.addr.is_null() {
        return guard_cm(|| Err(libc::EINVAL));
    }
    // SAFETY: as rdma_join_multicast's.
    unsafe { join(id, a.addr, send_only, context) }
}

pub(super) unsafe extern "C" fn ferroce_rdma_leave_multicast(
    id: *mut rdma_cm_id,
    addr: *const c_void,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let group: IpAddr = unsafe { read_sockaddr(addr) }?.ok_or(libc::EINVAL)?.ip();
        o.inner.leave_multicast(group).map_err(|e| mc_errno(&e))?;
        forget(o, group);
        Ok(())
    })
}

/// The context given to the join of `group` on the ID of `o`.
pub(super) fn context_of(o: &crate::rdmacm::objects::IdObj, group: IpAddr) -> *mut c_void {
    let c = o.mc_contexts.lock().unwrap_or_else(|p| p.into_inner());
    c.iter()
        .find(|(g, _)| *g == group.to_canonical())
        .map_or(std::ptr::null_mut(), |(_, ctx)| *ctx as *mut c_void)
}
