//! Memory windows: the context ops `ibv_alloc_mw`, `ibv_bind_mw` and
//! `ibv_dealloc_mw` call (the header's inline verbs), and the BIND_MW part
//! of a send request. `ibv_bind_mw` takes the next key byte of the R_Key
//! the application's `ibv_mw` holds and writes the new R_Key there once
//! the request is posted, as rdma-core's providers do; the bind itself
//! happens when the QP reaches it, and its completion says whether it did.

use std::ffi::c_int;

use ferroce::{MwBind, MwType, SendOp, SendWr, inc_rkey};

use super::{guard_errno, guard_ptr, obj, take};
use crate::abi::*;
use crate::convert::{access, errno};
use crate::objects::{Mr, Mw, Pd, Qp};

pub(super) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, kind: u32) -> *mut ibv_mw {
    guard_ptr(|| {
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(pd) }?;
        let kind = match kind {
            MW_TYPE_1 => MwType::One,
            MW_TYPE_2 => MwType::Two,
            _ => return Err(libc::EINVAL),
        };
        let inner = p.inner.alloc_mw(kind).map_err(|e| errno(&e))?;
        let rkey = inner.rkey().map_err(|e| errno(&e))?;
        p.users.add();
        let mw = Box::new(Mw {
            mw: ibv_mw {
                context: p.pd.context,
                pd,
                rkey,
                handle: rkey >> 8,
                type_: kind.code(),
            },
            inner,
        });
        Ok(Box::into_raw(mw).cast())
    })
}

pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let w: &Mw = unsafe { obj(mw) }?;
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(w.mw.pd) }?;
        p.users.remove();
        // SAFETY: module contract; not used again. Dropping deallocates.
        drop(unsafe { take::<Mw, _>(mw) });
        Ok(())
    })
}

/// `ibv_bind_mw` (type 1 windows: the header refuses others before it
/// calls here).
pub(super) unsafe extern "C" fn bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *mut ibv_mw_bind,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        // SAFETY: module contract.
        let b = unsafe { bind.as_ref() }.ok_or(libc::EINVAL)?;
        // SAFETY: module contract.
        let rkey = inc_rkey(unsafe { mw.as_ref() }.ok_or(libc::EINVAL)?.rkey);
        // SAFETY: module contract.
        let op = unsafe { bind_op(mw, rkey, &b.bind_info) }?;
        let wr = SendWr {
            signaled: b.send_flags & SEND_SIGNALED != 0,
            fence: b.send_flags & SEND_FENCE != 0,
            ..SendWr::new(b.wr_id, op, &[])
        };
        q.inner.post_send(wr).map_err(|e| errno(&e))?;
        // SAFETY: module contract: the application's window, written as
        // rdma-core's providers write it.
        unsafe { (*mw).rkey = rkey };
        Ok(())
    })
}

/// The BIND_MW operation of window `mw` with `rkey`'s key byte.
///
/// # Safety
/// `mw` is a window of this library, `info.mr` NULL (an unbind) or a
/// region of this library (module contract).
pub(super) unsafe fn bind_op(
    mw: *mut ibv_mw,
    rkey: u32,
    info: &ibv_mw_bind_info,
) -> Result<SendOp, c_int> {
    // SAFETY: module contract.
    let w: &Mw = unsafe { obj(mw) }?;
    let lkey = if info.mr.is_null() {
        0 // a type 1 unbind (length 0) names no region
    } else {
        // SAFETY: module contract.
        let m: &Mr = unsafe { obj(info.mr) }?;
        m.mr.lkey
    };
    let bind = MwBind {
        lkey,
        addr: info.addr,
        len: info.length,
        access: access(info.mw_access_flags)?,
    };
    Ok(SendOp::BindMw {
        // Any R_Key the window has had names it.
        mw: w.inner.rkey().map_err(|e| errno(&e))?,
        rkey,
        bind,
    })
}
