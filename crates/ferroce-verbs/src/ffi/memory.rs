//! Protection domains and memory regions. `ibv_reg_mr` registers the
//! application's own buffer in place (`Backing::from_raw`): the engine
//! sends from it and peers' WRITEs and READ responses land in it, with no
//! copy through memory of ferroce's. Its I/O virtual address (what peers
//! put in RETHs, and what `ibv_sge` addresses are relative to) is the
//! buffer's address, or the `iova` of `ibv_reg_mr_iova2`.

use std::ffi::{c_int, c_uint, c_void};

use ferroce::Backing;

use super::{ctx, guard_errno, guard_ptr, obj, take};
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
