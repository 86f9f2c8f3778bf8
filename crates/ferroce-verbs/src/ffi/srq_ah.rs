//! Shared receive queues and address handles (UD destinations).

use std::ffi::{c_int, c_void};

use ferroce::SrqAttr;

use super::{ctx, guard_errno, guard_ptr, obj, put, take};
use crate::abi::*;
use crate::convert::{errno, gid_ip, ip_gid};
use crate::objects::{Ah, Pd, Srq};

pub(super) unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    init: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    guard_ptr(|| {
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(pd) }?;
        // SAFETY: module contract.
        let a = unsafe { init.as_ref() }.ok_or(libc::EINVAL)?;
        let inner = p
            .inner
            .create_srq(a.attr.max_wr.max(1))
            .map_err(|e| errno(&e))?;
        // As QPs (see `qp::new_qp`): a bad lkey fails in a completion.
        inner
            .set_local_errors(ferroce::LocalErrors::Completion)
            .map_err(|e| errno(&e))?;
        if a.attr.srq_limit > 0 {
            inner.arm_limit(a.attr.srq_limit).map_err(|e| errno(&e))?;
        }
        let srq = Srq::new(p.pd.context, pd, a.srq_context, inner, a.attr, None);
        p.users.add();
        // SAFETY: module contract.
        let c = unsafe { ctx(p.pd.context) }?;
        let handle = srq.srq.handle;
        let raw = Box::into_raw(srq);
        c.srqs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, raw as usize);
        Ok(raw.cast())
    })
}

pub(super) unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let s: &Srq = unsafe { obj(srq) }?;
        // SAFETY: module contract.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        let mask = mask as u32;
        let change = SrqAttr {
            max_wr: (mask & SRQ_MAX_WR != 0).then_some(a.max_wr),
            srq_limit: (mask & SRQ_LIMIT != 0).then_some(a.srq_limit),
        };
        s.inner.modify(&change).map_err(|e| errno(&e))
    })
}

pub(super) unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let s: &Srq = unsafe { obj(srq) }?;
        let info = s.inner.query().map_err(|e| errno(&e))?;
        let max_sge = s.attr.lock().unwrap_or_else(|p| p.into_inner()).max_sge;
        let out = ibv_srq_attr {
            max_wr: info.max_wr,
            max_sge,
            srq_limit: info.srq_limit,
        };
        // SAFETY: module contract.
        unsafe { put(attr, out) }
    })
}

pub(super) unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let s: &Srq = unsafe { obj(srq) }?;
        if s.users.any() {
            return Err(libc::EBUSY);
        }
        // SAFETY: module contract.
        unsafe { obj::<Pd, _>(s.srq.pd) }?.users.remove();
        if let Some((xrcd, cq)) = s.xrc {
            // SAFETY: module contract: an XRC SRQ's domain and CQ outlive it.
            unsafe {
                obj::<crate::objects::Xrcd, _>(xrcd as *mut ibv_xrcd)?
                    .users
                    .remove();
                obj::<crate::objects::Cq, _>(cq as *mut ibv_cq)?
                    .users
                    .remove();
            }
        }
        // SAFETY: module contract.
        let c = unsafe { ctx(s.srq.context) }?;
        c.srqs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&s.srq.handle);
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Srq, _>(srq) });
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ibv_create_ah(
    pd: *mut ibv_pd,
    attr: *mut ibv_ah_attr,
) -> *mut ibv_ah {
    guard_ptr(|| {
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(pd) }?;
        // SAFETY: module contract.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        if a.is_global == 0 {
            // RoCE has no LIDs: the GRH's GID is the destination.
            return Err(libc::EINVAL);
        }
        let ah = Box::new(Ah {
            ah: ibv_ah {
                context: p.pd.context,
                pd,
                handle: 0,
            },
            remote: gid_ip(&a.grh.dgid),
            grh: a.grh,
        });
        p.users.add();
        Ok(Box::into_raw(ah).cast())
    })
}

pub(super) unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let a: &Ah = unsafe { obj(ah) }?;
        // SAFETY: module contract.
        unsafe { obj::<Pd, _>(a.ah.pd) }?.users.remove();
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Ah, _>(ah) });
        Ok(())
    })
}

/// `ibv_init_ah_from_wc`: the address vector back to the sender of a UD
/// receive, from the GRH in front of its data.
pub(super) unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    attr: *mut ibv_ah_attr,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        unsafe { ctx(context) }?;
        // SAFETY: module contract.
        let w = unsafe { wc.as_ref() }.ok_or(libc::EINVAL)?;
        if w.wc_flags & WC_GRH == 0 || grh.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the receive buffer's first 40 bytes (module contract);
        // not necessarily aligned.
        let g = unsafe { grh.read_unaligned() };
        let flow = u32::from_be(g.version_tclass_flow);
        // RoCE v2 over IPv4: the GRH's last 20 bytes are the IPv4 header
        // (as rxe writes it); the sender is its source address.
        // SAFETY: the same 40 bytes, as bytes.
        let bytes = unsafe { grh.cast::<[u8; 40]>().read_unaligned() };
        let (dgid, flow_label, traffic_class) = if bytes[20] >> 4 == 4 {
            let src = [bytes[32], bytes[33], bytes[34], bytes[35]];
            (ip_gid(std::net::Ipv4Addr::from(src).into()), 0, bytes[21])
        } else {
            (g.sgid, flow & 0xf_ffff, (flow >> 20) as u8)
        };
        let out = ibv_ah_attr {
            grh: ibv_global_route {
                dgid,
                flow_label,
                sgid_index: 0,
                hop_limit: 0xff,
                traffic_class,
            },
            is_global: 1,
            port_num: port,
            ..ibv_ah_attr::default()
        };
        // SAFETY: module contract.
        unsafe { put(attr, out) }
    })
}

pub(super) unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port: u8,
) -> *mut ibv_ah {
    let mut attr = ibv_ah_attr::default();
    // SAFETY: module contract.
    let r = unsafe {
        match obj::<Pd, _>(pd) {
            Ok(p) => ibv_init_ah_from_wc(p.pd.context, port, wc, grh, &mut attr),
            Err(e) => e,
        }
    };
    if r != 0 {
        super::set_errno(r);
        return std::ptr::null_mut::<c_void>().cast();
    }
    // SAFETY: module contract.
    unsafe { ibv_create_ah(pd, &mut attr) }
}
