//! Protection domains and memory regions. `ibv_reg_mr` registers the
//! application's own buffer in place (`Backing::from_raw`): the engine
//! sends from it and peers' WRITEs and READ responses land in it, with no
//! copy through memory of ferroce's and no lock: through the same volatile
//! copies and atomics as every region (ferroce-mem). Its I/O virtual address (what peers
//! put in RETHs, and what `ibv_sge` addresses are relative to) is the
//! buffer's address, or the `iova` of `ibv_reg_mr_iova2`.

use std::ffi::{c_int, c_uint, c_void};

use ferroce::Backing;

use super::{ctx, guard, guard_errno, guard_ptr, obj, take};
use crate::abi::*;
use crate::convert::{access, errno};
use crate::objects::{Mr, Pd, Span};

pub(super) unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    guard_ptr(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let inner = c.inner.alloc_pd();
        c.users.add();
        let pd = Box::new(Pd {
            pd: ibv_pd { context, handle: 0 },
            inner,
            users: Default::default(),
        });
        Ok(Box::into_raw(pd).cast())
    })
}

pub(super) unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(pd) }?;
        if p.users.any() {
            return Err(libc::EBUSY);
        }
        // SAFETY: module contract.
        unsafe { ctx(p.pd.context) }?.users.remove();
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Pd, _>(pd) });
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access_flags: c_int,
) -> *mut ibv_mr {
    // SAFETY: the caller's contract is ibv_reg_mr's.
    unsafe { reg(pd, addr, length, addr as u64, access_flags as c_uint) }
}

/// `ibv_reg_mr_iova2@IBVERBS_1.8` (what the header's `ibv_reg_mr` calls
/// with optional access flags): peers and local scatter lists name the
/// region's first byte by `iova`.
pub(super) unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access_flags: c_uint,
) -> *mut ibv_mr {
    // SAFETY: as ibv_reg_mr.
    unsafe { reg(pd, addr, length, iova, access_flags) }
}

/// `ibv_reg_mr_iova@IBVERBS_1.7`.
pub(super) unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access_flags: c_int,
) -> *mut ibv_mr {
    // SAFETY: as ibv_reg_mr.
    unsafe { reg(pd, addr, length, iova, access_flags as c_uint) }
}

/// # Safety
/// `addr..addr + length` is the caller's memory under ibv_reg_mr's rules
/// (the module contract).
unsafe fn reg(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    flags: c_uint,
) -> *mut ibv_mr {
    guard_ptr(|| {
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(pd) }?;
        // SAFETY: module contract.
        let c = unsafe { ctx(p.pd.context) }?;
        let access = access(flags)?;
        // SAFETY: ibv_reg_mr's contract is from_raw's (module contract).
        let backing = unsafe { Backing::from_raw(addr.cast(), length) }.ok_or(libc::EINVAL)?;
        let inner = p
            .inner
            .reg_mr_with_iova(backing, access, iova)
            .map_err(|e| errno(&e))?;
        let (lkey, rkey) = (inner.lkey(), inner.rkey());
        let span = Span { base: iova };
        c.spans
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(lkey, span);
        p.users.add();
        let mr = Box::new(Mr {
            mr: ibv_mr {
                context: p.pd.context,
                pd,
                addr,
                length,
                handle: lkey,
                lkey,
                rkey,
            },
            inner,
        });
        Ok(Box::into_raw(mr).cast())
    })
}

pub(super) unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let m: &Mr = unsafe { obj(mr) }?;
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(m.mr.pd) }?;
        // SAFETY: module contract.
        let c = unsafe { ctx(m.mr.context) }?;
        if m.inner.windows_bound() > 0 {
            // Not while windows are bound to it (rxe refuses it too, with
            // EINVAL): the engine would go on reaching the memory.
            return Err(libc::EBUSY);
        }
        c.spans
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&m.mr.lkey);
        p.users.remove();
        // SAFETY: module contract; dropping deregisters, and the engine no
        // longer touches the memory once the drop returns.
        drop(unsafe { take::<Mr, _>(mr) });
        Ok(())
    })
}

/// `ibv_rereg_mr`'s flags and results (`enum ibv_rereg_mr_flags`,
/// `enum ibv_rereg_mr_err_code`).
const REREG_CHANGE_TRANSLATION: c_int = 1;
const REREG_CHANGE_PD: c_int = 1 << 1;
const REREG_CHANGE_ACCESS: c_int = 1 << 2;
const REREG_ERR_INPUT: c_int = -1;
const REREG_ERR_CMD: c_int = -4;

/// `ibv_rereg_mr@IBVERBS_1.1`: a new PD and/or new access flags for a
/// region, its keys and memory kept. A new translation (address, length)
/// is `IBV_REREG_MR_ERR_CMD` with `EOPNOTSUPP`, as rxe answers it; bad
/// flags or a NULL PD are `IBV_REREG_MR_ERR_INPUT` (`EINVAL`); what the
/// region refuses (windows bound: `EBUSY`) is `IBV_REREG_MR_ERR_CMD`.
pub(super) unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    _addr: *mut c_void,
    _length: usize,
    access_flags: c_int,
) -> c_int {
    let known = REREG_CHANGE_TRANSLATION | REREG_CHANGE_PD | REREG_CHANGE_ACCESS;
    let r = guard(Err((REREG_ERR_CMD, libc::EIO)), || {
        let input = |e| (REREG_ERR_INPUT, e);
        if flags == 0 || flags & !known != 0 {
            return Err(input(libc::EINVAL));
        }
        if flags & REREG_CHANGE_TRANSLATION != 0 {
            return Err((REREG_ERR_CMD, libc::EOPNOTSUPP));
        }
        // SAFETY: module contract.
        let m: &Mr = unsafe { obj(mr) }.map_err(input)?;
        let new_pd: Option<&Pd> = if flags & REREG_CHANGE_PD != 0 {
            // SAFETY: module contract.
            Some(unsafe { obj(pd) }.map_err(input)?)
        } else {
            None
        };
        let new_access = if flags & REREG_CHANGE_ACCESS != 0 {
            Some(access(access_flags as c_uint).map_err(input)?)
        } else {
            None
        };
        if new_pd.is_some_and(|p| p.pd.context != m.mr.context) {
            return Err(input(libc::EINVAL));
        }
        m.inner
            .rereg(new_pd.map(|p| &p.inner), new_access)
            .map_err(|e| (REREG_ERR_CMD, errno(&e)))?;
        if let Some(p) = new_pd {
            // SAFETY: module contract: the old PD is a PD of this library.
            unsafe { obj::<Pd, _>(m.mr.pd) }
                .map_err(input)?
                .users
                .remove();
            p.users.add();
        }
        Ok(())
    });
    match r {
        Ok(()) => {
            if flags & REREG_CHANGE_PD != 0 {
                // SAFETY: module contract; no reference to the region is
                // held now.
                unsafe { (*mr).pd = pd };
            }
            0
        }
        Err((code, e)) => {
            super::set_errno(e);
            code
        }
    }
}
