//! XRC: `ibv_open_xrcd`, `ibv_close_xrcd`, `ibv_create_srq_ex` with
//! `IBV_SRQT_XRC`, `ibv_get_srq_num` (the `verbs_context` ops the header's
//! inline wrappers call) and the target QPs of `ibv_create_qp_ex` with
//! `IBV_QPT_XRC_RECV`. Initiator QPs (`IBV_QPT_XRC_SEND`) are made by
//! `ibv_create_qp` (`qp.rs`); their requests name the target's SRQ in
//! `wr.qp_type.xrc.remote_srqn` (`post.rs`).
//!
//! A domain's file descriptor (`IBV_XRCD_INIT_ATTR_FD`), with which the
//! kernel shares one domain between processes, is taken and not used: each
//! process has its own engine, so each `ibv_open_xrcd` opens a domain of
//! its own. `ibv_open_qp` (a target QP of another process) is not offered.

use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::AtomicU32;

use ferroce::QpType;

use super::{ctx, guard_errno, guard_ptr, obj, put, take};
use crate::abi::*;
use crate::convert::errno;
use crate::objects::{Cq, Pd, Qp, Srq, Xrcd};

/// `verbs_context::open_xrcd`.
pub(super) unsafe extern "C" fn open_xrcd(
    context: *mut ibv_context,
    attr: *mut ibv_xrcd_init_attr,
) -> *mut ibv_xrcd {
    guard_ptr(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        // SAFETY: module contract.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        if a.comp_mask & !(XRCD_INIT_ATTR_FD | XRCD_INIT_ATTR_OFLAGS) != 0 {
            return Err(libc::EINVAL);
        }
        let x = Box::new(Xrcd {
            xrcd: ibv_xrcd { context },
            inner: c.inner.open_xrcd(),
            users: Default::default(),
        });
        c.users.add();
        Ok(Box::into_raw(x).cast())
    })
}

/// `verbs_context::close_xrcd`: EBUSY while SRQs or target QPs are in it.
pub(super) unsafe extern "C" fn close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let x: &Xrcd = unsafe { obj(xrcd) }?;
        if x.users.any() {
            return Err(libc::EBUSY);
        }
        // SAFETY: module contract.
        unsafe { ctx(x.xrcd.context) }?.users.remove();
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Xrcd, _>(xrcd) });
        Ok(())
    })
}

/// `verbs_context::create_srq_ex`: an XRC SRQ (type, PD, XRCD and CQ all
/// given), or a basic one as `ibv_create_srq` makes it.
pub(super) unsafe extern "C" fn create_srq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_srq_init_attr_ex,
) -> *mut ibv_srq {
    guard_ptr(|| {
        // SAFETY: module contract.
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        let known = SRQ_INIT_ATTR_TYPE | SRQ_INIT_ATTR_PD | SRQ_INIT_ATTR_XRCD | SRQ_INIT_ATTR_CQ;
        if a.comp_mask & !known != 0 || a.comp_mask & SRQ_INIT_ATTR_PD == 0 {
            // Tag matching is not here; every SRQ needs a PD.
            return Err(libc::EOPNOTSUPP);
        }
        let srq_type = if a.comp_mask & SRQ_INIT_ATTR_TYPE != 0 {
            a.srq_type
        } else {
            SRQT_BASIC
        };
        match srq_type {
            SRQT_XRC => {}
            SRQT_BASIC => {
                let mut basic = ibv_srq_init_attr {
                    srq_context: a.srq_context,
                    attr: a.attr,
                };
                // SAFETY: module contract.
                let srq = unsafe { super::srq_ah::ibv_create_srq(a.pd, &mut basic) };
                return if srq.is_null() {
                    Err(errno_now())
                } else {
                    Ok(srq)
                };
            }
            _ => return Err(libc::EOPNOTSUPP),
        }
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(a.pd) }?;
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let need = SRQ_INIT_ATTR_XRCD | SRQ_INIT_ATTR_CQ;
        if a.comp_mask & need != need || p.pd.context != context {
            return Err(libc::EINVAL);
        }
        // SAFETY: module contract.
        let x: &Xrcd = unsafe { obj(a.xrcd) }?;
        // SAFETY: module contract.
        let cq: &Cq = unsafe { obj(a.cq) }?;
        let inner = p
            .inner
            .create_xrc_srq(&x.inner, &cq.inner, a.attr.max_wr.max(1))
            .map_err(|e| errno(&e))?;
        inner
            .set_local_errors(ferroce::LocalErrors::Completion)
            .map_err(|e| errno(&e))?;
        if a.attr.srq_limit > 0 {
            inner.arm_limit(a.attr.srq_limit).map_err(|e| errno(&e))?;
        }
        let xrc = Some((a.xrcd as usize, a.cq as usize));
        let s = Srq::new(context, a.pd, a.srq_context, inner, a.attr, xrc);
        p.users.add();
        x.users.add();
        cq.users.add();
        let handle = s.srq.handle;
        let raw = Box::into_raw(s);
        c.srqs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, raw as usize);
        Ok(raw.cast())
    })
}

/// The errno a call that returned NULL left.
fn errno_now() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// `verbs_context::get_srq_num`: EINVAL for a basic SRQ.
pub(super) unsafe extern "C" fn get_srq_num(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let s: &Srq = unsafe { obj(srq) }?;
        let n = s.inner.srq_num().map_err(|e| errno(&e))?;
        // SAFETY: module contract.
        unsafe { put(srq_num, n) }
    })
}

/// `ibv_create_qp_ex` with `IBV_QPT_XRC_RECV`: a target QP in `a.xrcd`,
/// with no PD, CQ or queue.
///
/// # Safety
/// Module contract: `a.xrcd` is this library's.
pub(super) unsafe fn new_tgt_qp(
    context: *mut ibv_context,
    a: &mut ibv_qp_init_attr_ex,
) -> Result<*mut Qp, c_int> {
    // SAFETY: module contract.
    let c = unsafe { ctx(context) }?;
    // SAFETY: module contract.
    let x: &Xrcd = unsafe { obj(a.xrcd.cast::<ibv_xrcd>()) }?;
    if x.xrcd.context != context {
        return Err(libc::EINVAL);
    }
    let inner = x.inner.create_tgt_qp(None).map_err(|e| errno(&e))?;
    let qpn = inner.qpn();
    a.cap = ibv_qp_cap::default();
    let init = ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: std::ptr::null_mut(),
        recv_cq: std::ptr::null_mut(),
        srq: std::ptr::null_mut(),
        cap: a.cap,
        qp_type: QPT_XRC_RECV,
        sq_sig_all: 0,
    };
    let qp = Box::into_raw(Box::new(Qp {
        qp: super::qp_ex::qp_ex(ibv_qp {
            context,
            qp_context: a.qp_context,
            pd: std::ptr::null_mut(),
            send_cq: std::ptr::null_mut(),
            recv_cq: std::ptr::null_mut(),
            srq: std::ptr::null_mut(),
            handle: qpn,
            qp_num: qpn,
            state: AtomicU32::new(QPS_RESET),
            qp_type: QPT_XRC_RECV,
            mutex: [0; 5],
            cond: [0; 6],
            events_completed: 0,
        }),
        inner,
        qp_type: QpType::XrcTgt,
        init,
        attr: Mutex::new(ibv_qp_attr::default()),
        send_ops: None,
        batch: Default::default(),
        xrcd: a.xrcd as usize,
    }));
    x.users.add();
    c.qps
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(qpn, qp as usize);
    Ok(qp)
}
