//! Extended CQs: `ibv_create_cq_ex` (the `verbs_context` op the header's
//! inline wrapper calls) and the `ibv_cq_ex` polling interface:
//! `ibv_start_poll` takes the oldest completion (ENOENT if none),
//! `ibv_next_poll` the next, `ibv_end_poll` ends the pass, and the
//! `ibv_wc_read_*` callbacks read fields of the completion taken last.
//!
//! Every CQ of this library carries these callbacks (an `ibv_cq` is the
//! prefix of an `ibv_cq_ex`), so a CQ from either call works with
//! `ibv_poll_cq`, completion channels and `ibv_cq_ex_to_cq`. Each poll
//! takes one completion from the CQ's ring, as `ibv_poll_cq` does
//! (without the engine's lock); the fields are those
//! `ibv_poll_cq` fills (`IBV_WC_STANDARD_FLAGS`). Completion timestamps,
//! CVLAN, flow tags and tag matching are not there: asking for them at
//! create fails with EOPNOTSUPP, as with rxe.

use std::ffi::{c_int, c_void};
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ferroce::WorkCompletion;

use super::{ctx, guard, guard_ptr, obj};
use crate::abi::*;
use crate::convert::wc;
use crate::objects::{Cq, Pd};

/// The `ibv_cq_ex` of a new CQ: its `ibv_cq` fields and the callbacks.
pub(super) fn cq_ex(
    context: *mut ibv_context,
    channel: *mut ibv_comp_channel,
    cq_context: *mut c_void,
    handle: u32,
    depth: u32,
) -> ibv_cq_ex {
    ibv_cq_ex {
        context,
        channel,
        cq_context,
        handle,
        cqe: c_int::try_from(depth).unwrap_or(c_int::MAX),
        mutex: [0; 5],
        cond: [0; 6],
        comp_events_completed: 0,
        async_events_completed: 0,
        comp_mask: 0,
        status: AtomicU32::new(0),
        wr_id: AtomicU64::new(0),
        start_poll: Some(start_poll),
        next_poll: Some(next_poll),
        end_poll: Some(end_poll),
        read_opcode: Some(read_opcode),
        read_vendor_err: Some(read_vendor_err),
        read_byte_len: Some(read_byte_len),
        read_imm_data: Some(read_imm_data),
        read_qp_num: Some(read_qp_num),
        read_src_qp: Some(read_src_qp),
        read_wc_flags: Some(read_wc_flags),
        read_slid: Some(read_slid),
        read_sl: Some(read_sl),
        read_dlid_path_bits: Some(read_dlid_path_bits),
        read_completion_ts: None,
        read_cvlan: None,
        read_flow_tag: None,
        read_tm_info: None,
        read_completion_wallclock_ns: None,
    }
}

/// `verbs_context::create_cq_ex`: the attributes checked as rxe's
/// provider checks them (wc_flags beyond the standard ones, or create flags
/// other than SINGLE_THREADED: EOPNOTSUPP; unknown `comp_mask` bits or a
/// NULL `parent_domain` under `IBV_CQ_INIT_ATTR_MASK_PD`: EINVAL), then the
/// CQ `ibv_create_cq` would make.
pub(super) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    guard_ptr(|| {
        // SAFETY: module contract.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        if a.comp_mask & !(CQ_INIT_ATTR_MASK_FLAGS | CQ_INIT_ATTR_MASK_PD) != 0 {
            return Err(libc::EINVAL);
        }
        if a.wc_flags & !WC_STANDARD_FLAGS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        if a.comp_mask & CQ_INIT_ATTR_MASK_PD != 0 {
            // Only a hint for a provider's allocators: there are no parent
            // domains here, so it is one of our PDs, and changes nothing.
            // SAFETY: module contract.
            let _: &Pd = unsafe { obj(a.parent_domain) }?;
        }
        if a.comp_mask & CQ_INIT_ATTR_MASK_FLAGS != 0
            && a.flags & !CREATE_CQ_ATTR_SINGLE_THREADED != 0
        {
            return Err(libc::EOPNOTSUPP);
        }
        // SAFETY: module contract.
        unsafe { super::cq::new_cq(context, a.cqe, a.cq_context, a.channel) }.map(|q| q.cast())
    })
}

/// The CQ behind an `ibv_cq_ex` pointer.
///
/// # Safety
/// Module contract.
unsafe fn cq<'a>(p: *mut ibv_cq_ex) -> Result<&'a Cq, c_int> {
    // SAFETY: module contract.
    unsafe { obj(p) }
}

/// Takes one completion into `q.current` and the public `status`/`wr_id`;
/// ENOENT when the CQ is empty.
fn take_one(q: &Cq) -> c_int {
    // SAFETY: module contract (the CQ's context outlives it).
    let Ok(c) = (unsafe { ctx(q.cq.context) }) else {
        return libc::EINVAL;
    };
    let mut one = [WorkCompletion::default()];
    match q.inner.poll_into(&mut one) {
        Ok(1) => {}
        Ok(_) => return libc::ENOENT,
        Err(e) => return crate::convert::errno(&e),
    }
    let ud = c.ud_qps.read().unwrap_or_else(|p| p.into_inner());
    let w = wc(&one[0], ud.contains(&one[0].qpn));
    drop(ud);
    q.cq.wr_id.store(w.wr_id, Ordering::Relaxed);
    q.cq.status.store(w.status, Ordering::Relaxed);
    *current(q) = w;
    0
}

fn current(q: &Cq) -> MutexGuard<'_, ibv_wc> {
    q.current.lock().unwrap_or_else(|p| p.into_inner())
}

unsafe extern "C" fn start_poll(cq_ex: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Ok(q) = (unsafe { cq(cq_ex) }) else {
            return libc::EINVAL;
        };
        // SAFETY: module contract.
        match unsafe { attr.as_ref() } {
            Some(a) if a.comp_mask == 0 => take_one(q),
            _ => libc::EINVAL,
        }
    })
}

unsafe extern "C" fn next_poll(cq_ex: *mut ibv_cq_ex) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        match unsafe { cq(cq_ex) } {
            Ok(q) => take_one(q),
            Err(e) => e,
        }
    })
}

/// Nothing to release: each poll took its completion whole.
unsafe extern "C" fn end_poll(_cq_ex: *mut ibv_cq_ex) {}

/// Reads one field of the current completion (0 for a bad pointer).
fn read<T: Default>(cq_ex: *mut ibv_cq_ex, f: impl FnOnce(&ibv_wc) -> T) -> T {
    guard(T::default(), || {
        // SAFETY: module contract.
        match unsafe { cq(cq_ex) } {
            Ok(q) => f(&current(q)),
            Err(_) => T::default(),
        }
    })
}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.opcode)
}

unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.vendor_err)
}

unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.byte_len)
}

/// Big-endian, as `ibv_wc::imm_data` (or the invalidated rkey).
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.imm_data)
}

unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.qp_num)
}

unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.src_qp)
}

unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.wc_flags)
}

unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| u32::from(w.slid))
}

unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    read(cq, |w| w.sl)
}

unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    read(cq, |w| w.dlid_path_bits)
}
