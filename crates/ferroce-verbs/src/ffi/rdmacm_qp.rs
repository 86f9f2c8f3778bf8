//! rdma_cm's entry points: the QP of an ID (`rdma_create_qp`,
//! `rdma_create_qp_ex`, `rdma_destroy_qp`) and endpoints
//! (`rdma_create_ep`, `rdma_destroy_ep`).
//!
//! The QP is made by this library's `ibv_create_qp` (so it is an
//! `ibv_qp` like any other, for `ibv_post_send` and `ibv_query_qp`) and
//! handed to the ID's CM ([`ferroce::cm::CmId::attach_qp`]), which moves
//! it to INIT now and to RTR and RTS when rdma_cm does. Without CQs in
//! the attributes, CQs with completion channels are made as librdmacm
//! makes them (`id->send_cq`, `id->recv_cq` and their channels), which
//! the `rdma_verbs.h` helpers (`rdma_get_recv_comp`, ...) use.

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use super::rdmacm::{
    default_pd, ferroce_rdma_create_id, ferroce_rdma_destroy_id, guard_cm, id_obj,
};
use super::rdmacm_conn::{
    ferroce_rdma_bind_addr, ferroce_rdma_resolve_addr, ferroce_rdma_resolve_route,
};
use super::{cq, obj, put, qp};
use crate::abi::{
    QP_CREATE_BLOCK_SELF_MCAST_LB, QP_INIT_ATTR_CREATE_FLAGS, QPS_INIT, QPS_RTS, QPT_UD,
    ibv_comp_channel, ibv_cq, ibv_pd, ibv_qp_init_attr,
};
use crate::objects::Qp;
use crate::rdmacm::abi::{
    IBV_QP_INIT_ATTR_PD, RAI_PASSIVE, RDMA_PS_TCP, RDMA_PS_UDP, RDMA_UDP_QKEY, ibv_qp_init_attr_ex,
    rdma_addrinfo, rdma_cm_id,
};
use crate::rdmacm::convert::{cm_errno, qp_type_of};
use crate::rdmacm::objects::{EpQp, IdObj};

/// The calling thread's `errno` (after a call of ours that set it).
fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A completion channel and a CQ of `cqe` entries on it, as librdmacm
/// makes them for an ID whose QP attributes name no CQ.
///
/// # Safety
/// `id` is live and has a device.
unsafe fn make_cq(
    id: *mut rdma_cm_id,
    cqe: u32,
) -> Result<(*mut ibv_comp_channel, *mut ibv_cq), c_int> {
    // SAFETY: module contract.
    let verbs = unsafe { (*id).verbs };
    // SAFETY: `verbs` is a context of ours.
    let ch = unsafe { cq::ibv_create_comp_channel(verbs) };
    if ch.is_null() {
        return Err(last_errno());
    }
    let n = c_int::try_from(cqe.max(1)).unwrap_or(c_int::MAX);
    // SAFETY: as above; the CQ's context is the ID, as librdmacm's.
    let c = unsafe { cq::ibv_create_cq(verbs, n, id.cast(), ch, 0) };
    if c.is_null() {
        let e = last_errno();
        // SAFETY: the channel just made, unused.
        unsafe { cq::ibv_destroy_comp_channel(ch) };
        return Err(e);
    }
    Ok((ch, c))
}

/// Destroys the CQs and channels `rdma_create_qp` made for the ID.
///
/// # Safety
/// `id` is live and its QP (if any) no longer uses them.
unsafe fn drop_own_cqs(id: *mut rdma_cm_id, o: &IdObj) {
    if !o.own_cqs.swap(false, Ordering::AcqRel) {
        return;
    }
    // SAFETY: module contract: these are the ones made by `make_cq`.
    unsafe {
        for (cq_field, ch_field) in [
            (&raw mut (*id).send_cq, &raw mut (*id).send_cq_channel),
            (&raw mut (*id).recv_cq, &raw mut (*id).recv_cq_channel),
        ] {
            let c = cq_field.replace(std::ptr::null_mut());
            if !c.is_null() {
                cq::ibv_destroy_cq(c);
            }
            let ch = ch_field.replace(std::ptr::null_mut());
            if !ch.is_null() {
                cq::ibv_destroy_comp_channel(ch);
            }
        }
    }
}

/// `rdma_create_qp`'s work: PD (the ID's, or the device's own when NULL)
/// on the ID's device, CQs made if none named, the QP created and handed
/// to the CM, which moves it to INIT (UD: RTS).
///
/// # Safety
/// `id` is live; `pd` is NULL or a PD of ours; `attr` is the caller's.
unsafe fn create_qp_on(
    id: *mut rdma_cm_id,
    o: &IdObj,
    pd: *mut ibv_pd,
    attr: &mut ibv_qp_init_attr,
) -> Result<(), c_int> {
    // SAFETY: module contract.
    let (verbs, id_pd, has_qp) = unsafe { ((*id).verbs, (*id).pd, !(*id).qp.is_null()) };
    if verbs.is_null() || has_qp {
        return Err(libc::EINVAL);
    }
    let pd = match (pd.is_null(), id_pd.is_null()) {
        (false, _) => pd,
        (true, false) => id_pd,
        (true, true) => default_pd(verbs)?,
    };
    // SAFETY: module contract.
    if unsafe { (*pd).context } != verbs {
        return Err(libc::EINVAL);
    }
    if attr.send_cq.is_null() || attr.recv_cq.is_null() {
        o.own_cqs.store(true, Ordering::Release);
        // SAFETY: `id` has a device.
        unsafe {
            if attr.recv_cq.is_null() {
                let (ch, c) = make_cq(id, attr.cap.max_recv_wr)?;
                (&raw mut (*id).recv_cq_channel).write(ch);
                (&raw mut (*id).recv_cq).write(c);
                attr.recv_cq = c;
            }
            if attr.send_cq.is_null() {
                let (ch, c) = make_cq(id, attr.cap.max_send_wr)?;
                (&raw mut (*id).send_cq_channel).write(ch);
                (&raw mut (*id).send_cq).write(c);
                attr.send_cq = c;
            }
        }
    }
    // SAFETY: `pd` is ours, `attr` valid.
    let q = unsafe { qp::ibv_create_qp(pd, attr) };
    if q.is_null() {
        let e = last_errno();
        // SAFETY: no QP uses them.
        unsafe { drop_own_cqs(id, o) };
        return Err(e);
    }
    // SAFETY: the QP just made.
    let qobj: &Qp = unsafe { obj(q) }?;
    if let Err(e) = o.inner.attach_qp(&qobj.inner) {
        // SAFETY: the QP just made, the CQs no longer used after it.
        unsafe {
            qp::ibv_destroy_qp(q);
            drop_own_cqs(id, o);
        }
        return Err(cm_errno(&e));
    }
    let state = if attr.qp_type == QPT_UD {
        QPS_RTS
    } else {
        QPS_INIT
    };
    qobj.qp.qp_base.state.store(state, Ordering::Release);
    {
        // What the CM set, for `ibv_query_qp` (udaddy reads the Q_Key).
        let mut saved = qobj.attr.lock().unwrap_or_else(|p| p.into_inner());
        saved.qp_state = state;
        saved.port_num = 1;
        saved.pkey_index = 0;
        if attr.qp_type == QPT_UD {
            saved.qkey = RDMA_UDP_QKEY;
        }
    }
    // SAFETY: module contract.
    unsafe {
        (&raw mut (*id).qp).write(q);
        (&raw mut (*id).pd).write(pd);
        (&raw mut (*id).srq).write(attr.srq);
    }
    Ok(())
}

pub(super) unsafe extern "C" fn ferroce_rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: module contract.
        unsafe { create_qp_on(id, o, pd, a) }
    })
}

/// `rdma_create_qp_ex`: as `rdma_create_qp` with the PD in the attributes,
/// and of the create flags `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB` on a UD QP
/// (mckey's `-l`); other extended attributes (send ops for `ibv_wr_*`,
/// other flags) are not in ferroce's library: EOPNOTSUPP.
pub(super) unsafe extern "C" fn ferroce_rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let ex = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        if ex.comp_mask & !(IBV_QP_INIT_ATTR_PD | QP_INIT_ATTR_CREATE_FLAGS) != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let flags = if ex.comp_mask & QP_INIT_ATTR_CREATE_FLAGS != 0 {
            ex.create_flags
        } else {
            0
        };
        let block_self = flags == QP_CREATE_BLOCK_SELF_MCAST_LB && ex.qp_type == QPT_UD;
        if flags != 0 && !block_self {
            return Err(libc::EOPNOTSUPP);
        }
        let pd = if ex.comp_mask & IBV_QP_INIT_ATTR_PD != 0 {
            ex.pd
        } else {
            std::ptr::null_mut()
        };
        let mut a = ibv_qp_init_attr {
            qp_context: ex.qp_context,
            send_cq: ex.send_cq,
            recv_cq: ex.recv_cq,
            srq: ex.srq,
            cap: ex.cap,
            qp_type: ex.qp_type,
            sq_sig_all: ex.sq_sig_all,
        };
        // SAFETY: module contract.
        unsafe { create_qp_on(id, o, pd, &mut a) }?;
        if block_self {
            // SAFETY: the QP `create_qp_on` just put on the ID.
            let q: &Qp = unsafe { super::obj((*id).qp) }?;
            q.inner
                .block_self_mcast_loopback(true)
                .map_err(|e| crate::convert::errno(&e))?;
        }
        ex.send_cq = a.send_cq;
        ex.recv_cq = a.recv_cq;
        ex.cap = a.cap;
        Ok(())
    })
}

/// `rdma_destroy_qp`: destroys the ID's QP (and the CQs it made for it).
pub(super) unsafe extern "C" fn ferroce_rdma_destroy_qp(id: *mut rdma_cm_id) {
    guard_cm(|| {
        // SAFETY: module contract.
        let o = unsafe { id_obj(id) }?;
        // SAFETY: module contract.
        let q = unsafe { (&raw mut (*id).qp).replace(std::ptr::null_mut()) };
        if !q.is_null() {
            o.inner.detach_qp();
            // SAFETY: the ID's QP, ours.
            unsafe { qp::ibv_destroy_qp(q) };
        }
        // SAFETY: the QP is gone.
        unsafe { drop_own_cqs(id, o) };
        Ok(())
    });
}

/// For `rdma_get_request` on a passive endpoint: the request's ID gets
/// the QP the endpoint was made with.
///
/// # Safety
/// `new` is a live ID of ours.
pub(super) unsafe fn create_ep_qp(listen: &IdObj, new: *mut rdma_cm_id) -> Result<(), c_int> {
    let ep = *listen.ep_qp.lock().unwrap_or_else(|p| p.into_inner());
    let Some(EpQp { pd, mut attr }) = ep else {
        return Ok(());
    };
    // SAFETY: module contract.
    let o = unsafe { id_obj(new) }?;
    // SAFETY: module contract.
    unsafe { create_qp_on(new, o, pd, &mut attr) }
}

/// `rdma_create_ep`: a synchronous ID for `res`, bound (passive, its QP
/// made for each request) or resolved with its QP made (active).
pub(super) unsafe extern "C" fn ferroce_rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let r = unsafe { res.as_ref() }.ok_or(libc::EINVAL)?;
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let ps = match r.ai_port_space as u32 {
            0 if r.ai_qp_type as u32 == QPT_UD => RDMA_PS_UDP,
            0 => RDMA_PS_TCP,
            ps => ps,
        };
        let mut new = std::ptr::null_mut();
        // SAFETY: our own entry point.
        if unsafe {
            ferroce_rdma_create_id(std::ptr::null_mut(), &mut new, std::ptr::null_mut(), ps)
        } != 0
        {
            return Err(last_errno());
        }
        // SAFETY: `new` is live; on failure destroyed, never handed out.
        match unsafe { set_up_ep(new, r, pd, attr) } {
            Ok(()) => {
                // SAFETY: module contract.
                unsafe { put(id, new) }
            }
            Err(e) => {
                // SAFETY: as above.
                unsafe { ferroce_rdma_destroy_id(new) };
                Err(e)
            }
        }
    })
}

/// # Safety
/// `id` is live; `pd`, `attr` and `r` follow the module contract.
unsafe fn set_up_ep(
    id: *mut rdma_cm_id,
    r: &rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> Result<(), c_int> {
    let ok = |rc: c_int| if rc == 0 { Ok(()) } else { Err(last_errno()) };
    // SAFETY: module contract.
    let o = unsafe { id_obj(id) }?;
    // SAFETY: module contract.
    let mut a = unsafe { attr.as_ref() }.copied();
    if let Some(a) = a.as_mut() {
        a.qp_type = if r.ai_qp_type != 0 {
            r.ai_qp_type as u32
        } else {
            // SAFETY: as above.
            unsafe { qp_type_of((*id).ps) }
        };
    }
    if r.ai_flags & RAI_PASSIVE != 0 {
        // SAFETY: our own entry point.
        ok(unsafe { ferroce_rdma_bind_addr(id, r.ai_src_addr) })?;
        if let Some(attr) = a {
            *o.ep_qp.lock().unwrap_or_else(|p| p.into_inner()) = Some(EpQp { pd, attr });
        }
        return Ok(());
    }
    // SAFETY: our own entry points.
    unsafe {
        ok(ferroce_rdma_resolve_addr(
            id,
            r.ai_src_addr,
            r.ai_dst_addr,
            2000,
        ))?;
        ok(ferroce_rdma_resolve_route(id, 2000))?;
    }
    if let Some(mut a) = a {
        // SAFETY: module contract.
        unsafe { create_qp_on(id, o, pd, &mut a) }?;
        // SAFETY: the caller's struct gets the caps and CQs, as librdmacm's.
        unsafe { attr.write(a) };
    }
    Ok(())
}

/// `rdma_destroy_ep`: the QP (and CQs made for it), then the ID.
pub(super) unsafe extern "C" fn ferroce_rdma_destroy_ep(id: *mut rdma_cm_id) {
    if id.is_null() {
        return;
    }
    // SAFETY: module contract.
    unsafe {
        ferroce_rdma_destroy_qp(id);
        ferroce_rdma_destroy_id(id);
    }
}
