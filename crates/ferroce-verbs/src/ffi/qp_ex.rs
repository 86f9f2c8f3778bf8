//! Extended QPs: `ibv_create_qp_ex` (the `verbs_context` op the header's
//! inline wrapper calls when `comp_mask` asks for more than a PD),
//! `ibv_qp_to_qp_ex`, and the `ibv_wr_*` send interface.
//!
//! Between `ibv_wr_start` and `ibv_wr_complete` each operation builder
//! (`ibv_wr_send`, `ibv_wr_rdma_write`, ...) starts a request with the
//! `wr_id` and `wr_flags` the application set in the `ibv_qp_ex`, and the
//! setters (`ibv_wr_set_sge`, `ibv_wr_set_inline_data`,
//! `ibv_wr_set_ud_addr`, ...) complete the last one started; inline data is
//! copied when its setter is called. `ibv_wr_complete` posts the batch in
//! order, as `ibv_post_send` would. If a builder met an error it posts
//! nothing and returns that errno, as rxe's provider does: an operation
//! ferroce lacks (EOPNOTSUPP), inline data past the QP's `max_inline_data`
//! (ENOSPC, rxe's), a setter with no request started (EINVAL), a batch
//! longer than the send queue (ENOMEM). Unlike rxe, which reserves each
//! request's queue slot in its builder, requests still queued from before
//! show only when posting: those before the one refused are posted, and
//! `ibv_wr_complete` returns ENOMEM. `ibv_wr_abort` drops the batch.
//!
//! Operations ferroce has: SEND (+imm, +invalidate), RDMA WRITE (+imm),
//! RDMA READ, CMP_SWAP, FETCH_ADD, ATOMIC WRITE, BIND_MW and LOCAL_INV, and
//! on an XRC initiator `ibv_wr_set_xrc_srqn` names the target SRQ. Their
//! `send_ops_flags` bits are accepted; any other (TSO, FLUSH) fails the
//! create with EOPNOTSUPP, and its builder, if called anyway, fails the
//! batch.

use std::ffi::{c_int, c_void};
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{ctx, guard, guard_ptr, obj};
use crate::abi::*;
use crate::objects::{BuiltWr, Pd, Qp, WrBatch};

/// The `ibv_qp_ex` of a new QP around its `ibv_qp`.
pub(super) fn qp_ex(base: ibv_qp) -> ibv_qp_ex {
    ibv_qp_ex {
        qp_base: base,
        comp_mask: 0,
        wr_id: AtomicU64::new(0),
        wr_flags: AtomicU32::new(0),
        wr_atomic_cmp_swp: Some(atomic_cmp_swp),
        wr_atomic_fetch_add: Some(atomic_fetch_add),
        wr_bind_mw: Some(bind_mw),
        wr_local_inv: Some(local_inv),
        wr_rdma_read: Some(rdma_read),
        wr_rdma_write: Some(rdma_write),
        wr_rdma_write_imm: Some(rdma_write_imm),
        wr_send: Some(send),
        wr_send_imm: Some(send_imm),
        wr_send_inv: Some(send_inv),
        wr_send_tso: Some(lacking_tso),
        wr_set_ud_addr: Some(set_ud_addr),
        wr_set_xrc_srqn: Some(set_xrc_srqn),
        wr_set_inline_data: Some(set_inline_data),
        wr_set_inline_data_list: Some(set_inline_data_list),
        wr_set_sge: Some(set_sge),
        wr_set_sge_list: Some(set_sge_list),
        wr_start: Some(wr_start),
        wr_complete: Some(wr_complete),
        wr_abort: Some(wr_abort),
        wr_atomic_write: Some(atomic_write),
    }
}

/// `verbs_context::create_qp_ex`.
pub(super) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    guard_ptr(|| {
        // SAFETY: module contract.
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        if a.qp_type == QPT_XRC_RECV {
            if a.comp_mask & QP_INIT_ATTR_XRCD == 0 || a.xrcd.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: module contract.
            return unsafe { super::xrc::new_tgt_qp(context, a) }.map(|q| q.cast());
        }
        let known = QP_INIT_ATTR_PD | QP_INIT_ATTR_CREATE_FLAGS | QP_INIT_ATTR_SEND_OPS_FLAGS;
        if a.comp_mask & QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
            return Err(libc::EINVAL);
        }
        if a.comp_mask & !known != 0 {
            // TSO, RSS indirection and hashing: not here (an XRCD only
            // for an XRC target).
            return Err(libc::EOPNOTSUPP);
        }
        let flags = if a.comp_mask & QP_INIT_ATTR_CREATE_FLAGS != 0 {
            a.create_flags
        } else {
            0
        };
        // rxe refuses every create flag; ferroce takes mlx5's multicast
        // loopback block (on UD QPs, the only ones that join groups).
        let block_self = flags == QP_CREATE_BLOCK_SELF_MCAST_LB && a.qp_type == QPT_UD;
        if flags != 0 && !block_self {
            return Err(libc::EOPNOTSUPP);
        }
        let send_ops = (a.comp_mask & QP_INIT_ATTR_SEND_OPS_FLAGS != 0).then_some(a.send_ops_flags);
        if send_ops.is_some_and(|f| f & !ops_for(a.qp_type) != 0) {
            return Err(libc::EOPNOTSUPP);
        }
        // SAFETY: module contract.
        let p: &Pd = unsafe { obj(a.pd) }?;
        if p.pd.context != context {
            return Err(libc::EINVAL);
        }
        let mut init = ibv_qp_init_attr {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        // SAFETY: module contract.
        let qp = unsafe { super::qp::new_qp(a.pd, &mut init, send_ops) }?;
        a.cap = init.cap;
        if block_self {
            // SAFETY: the QP just made.
            let q: &Qp = unsafe { obj(qp) }?;
            q.inner
                .block_self_mcast_loopback(true)
                .map_err(|e| crate::convert::errno(&e))?;
        }
        Ok(qp.cast())
    })
}

/// The `send_ops_flags` a QP type may ask for, as rxe's provider allows
/// them less what ferroce lacks: RC all (ATOMIC WRITE too), UC no READ,
/// atomics or SEND with invalidate, UD SENDs only.
fn ops_for(qp_type: u32) -> u64 {
    let sends = QP_EX_WITH_SEND | QP_EX_WITH_SEND_WITH_IMM;
    match qp_type {
        QPT_RC => QP_EX_SUPPORTED,
        // XRC has no ATOMIC WRITE opcode.
        QPT_XRC_SEND => QP_EX_SUPPORTED & !QP_EX_WITH_ATOMIC_WRITE,
        QPT_UC => {
            sends
                | QP_EX_WITH_RDMA_WRITE
                | QP_EX_WITH_RDMA_WRITE_WITH_IMM
                | QP_EX_WITH_BIND_MW
                | QP_EX_WITH_LOCAL_INV
        }
        QPT_UD => sends,
        _ => 0,
    }
}

/// `ibv_qp_to_qp_ex@IBVERBS_1.6`: the `ibv_qp_ex` of a QP created with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`; NULL (errno EOPNOTSUPP) for others,
/// as rdma-core.
pub(super) unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    guard_ptr(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        match q.send_ops {
            Some(_) => Ok(qp.cast()),
            None => Err(libc::EOPNOTSUPP),
        }
    })
}

/// Runs `f` on the QP's batch; nothing for a bad pointer (the builders
/// return nothing: a bad QP pointer is the application's bug).
fn with_batch(qx: *mut ibv_qp_ex, f: impl FnOnce(&Qp, &mut WrBatch)) {
    guard((), || {
        // SAFETY: module contract.
        if let Ok(q) = unsafe { obj::<Qp, _>(qx) } {
            f(q, &mut batch(q));
        }
    });
}

fn batch(q: &Qp) -> MutexGuard<'_, WrBatch> {
    q.batch.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the request `wr` with the QP's current `wr_id` and `wr_flags`.
/// A batch longer than the send queue fails whole with ENOMEM, as rxe's
/// builders fail when the queue is full.
fn start(qx: *mut ibv_qp_ex, wr: BuiltWr) {
    with_batch(qx, |q, b| {
        if b.wrs.len() >= q.init.cap.max_send_wr as usize {
            b.error.get_or_insert(libc::ENOMEM);
            return;
        }
        b.wrs.push(BuiltWr {
            wr_id: q.qp.wr_id.load(Ordering::Relaxed),
            flags: q.qp.wr_flags.load(Ordering::Relaxed),
            ..wr
        });
    });
}

/// Completes the last request started; an error if there is none.
fn set_last(qx: *mut ibv_qp_ex, f: impl FnOnce(&Qp, &mut BuiltWr) -> Result<(), c_int>) {
    with_batch(qx, |q, b| {
        let r = match b.wrs.last_mut() {
            Some(w) => f(q, w),
            None => Err(libc::EINVAL),
        };
        if let Err(e) = r {
            b.error.get_or_insert(e);
        }
    });
}

/// Marks the batch failed with EOPNOTSUPP (an operation ferroce lacks).
fn lacking(qx: *mut ibv_qp_ex) {
    with_batch(qx, |_, b| {
        b.error.get_or_insert(libc::EOPNOTSUPP);
    });
}

unsafe extern "C" fn wr_start(qx: *mut ibv_qp_ex) {
    with_batch(qx, |_, b| *b = WrBatch::default());
}

unsafe extern "C" fn wr_abort(qx: *mut ibv_qp_ex) {
    with_batch(qx, |_, b| *b = WrBatch::default());
}

unsafe extern "C" fn wr_complete(qx: *mut ibv_qp_ex) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Ok(q) = (unsafe { obj::<Qp, _>(qx) }) else {
            return libc::EINVAL;
        };
        // SAFETY: module contract.
        let Ok(c) = (unsafe { ctx(q.qp.qp_base.context) }) else {
            return libc::EINVAL;
        };
        let WrBatch { wrs, error } = std::mem::take(&mut *batch(q));
        if let Some(e) = error {
            return e;
        }
        for w in &wrs {
            // Inline data goes as one element pointing at its copy.
            let inline = w.inline.as_ref().map(|data| ibv_sge {
                addr: data.as_ptr() as u64,
                length: data.len() as u32,
                lkey: 0,
            });
            let sges = inline.as_slice();
            let wr = send_wr(w, if w.inline.is_some() { sges } else { &w.sges });
            // SAFETY: `wr` and the buffers it points at live until the
            // call returns (the engine copies inline data at post).
            if let Err(e) = unsafe { super::post::post_one_send(c, q, &wr) } {
                return e;
            }
        }
        0
    })
}

/// The `ibv_send_wr` that `ibv_post_send` would take for `w`, its scatter
/// list `sges` (which the post only reads).
fn send_wr(w: &BuiltWr, sges: &[ibv_sge]) -> ibv_send_wr {
    let wr = match (w.ud, w.opcode) {
        (Some((ah, remote_qpn, remote_qkey)), _) => ibv_send_wr_wr {
            ud: wr_ud {
                ah: ah as *mut ibv_ah,
                remote_qpn,
                remote_qkey,
            },
        },
        (None, WR_ATOMIC_CMP_AND_SWP | WR_ATOMIC_FETCH_AND_ADD) => ibv_send_wr_wr {
            atomic: wr_atomic {
                remote_addr: w.remote_addr,
                compare_add: w.compare_add,
                swap: w.swap,
                rkey: w.rkey,
            },
        },
        (None, _) => ibv_send_wr_wr {
            rdma: wr_rdma {
                remote_addr: w.remote_addr,
                rkey: w.rkey,
            },
        },
    };
    let inline = if w.inline.is_some() { SEND_INLINE } else { 0 };
    ibv_send_wr {
        wr_id: w.wr_id,
        next: std::ptr::null_mut(),
        sg_list: sges.as_ptr().cast_mut(),
        num_sge: sges.len() as c_int,
        opcode: w.opcode,
        send_flags: (w.flags & !SEND_INLINE) | inline,
        imm_data: w.imm,
        wr,
        qp_type: w.xrc_srqn,
        bind_mw: w.bind.unwrap_or(wr_bind_mw::NONE),
    }
}

fn op(opcode: u32) -> BuiltWr {
    BuiltWr {
        opcode,
        ..BuiltWr::default()
    }
}

fn remote(opcode: u32, rkey: u32, remote_addr: u64) -> BuiltWr {
    BuiltWr {
        rkey,
        remote_addr,
        ..op(opcode)
    }
}

unsafe extern "C" fn send(qx: *mut ibv_qp_ex) {
    start(qx, op(WR_SEND));
}

unsafe extern "C" fn send_imm(qx: *mut ibv_qp_ex, imm: u32) {
    start(
        qx,
        BuiltWr {
            imm,
            ..op(WR_SEND_WITH_IMM)
        },
    );
}

unsafe extern "C" fn rdma_write(qx: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    start(qx, remote(WR_RDMA_WRITE, rkey, addr));
}

unsafe extern "C" fn rdma_write_imm(qx: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    start(
        qx,
        BuiltWr {
            imm,
            ..remote(WR_RDMA_WRITE_WITH_IMM, rkey, addr)
        },
    );
}

unsafe extern "C" fn rdma_read(qx: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    start(qx, remote(WR_RDMA_READ, rkey, addr));
}

unsafe extern "C" fn atomic_cmp_swp(qx: *mut ibv_qp_ex, rkey: u32, addr: u64, cmp: u64, swap: u64) {
    let wr = BuiltWr {
        compare_add: cmp,
        swap,
        ..remote(WR_ATOMIC_CMP_AND_SWP, rkey, addr)
    };
    start(qx, wr);
}

unsafe extern "C" fn atomic_fetch_add(qx: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    let wr = BuiltWr {
        compare_add: add,
        ..remote(WR_ATOMIC_FETCH_AND_ADD, rkey, addr)
    };
    start(qx, wr);
}

unsafe extern "C" fn set_ud_addr(qx: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    set_last(qx, |_, w| {
        if ah.is_null() {
            return Err(libc::EINVAL);
        }
        w.ud = Some((ah as usize, qpn, qkey));
        Ok(())
    });
}

unsafe extern "C" fn set_xrc_srqn(qx: *mut ibv_qp_ex, srqn: u32) {
    set_last(qx, |_, w| {
        w.xrc_srqn = srqn;
        Ok(())
    });
}

unsafe extern "C" fn set_sge(qx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    set_last(qx, |_, w| {
        w.sges = vec![ibv_sge { addr, length, lkey }];
        w.inline = None;
        Ok(())
    });
}

unsafe extern "C" fn set_sge_list(qx: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    set_last(qx, |_, w| {
        w.sges = if n == 0 {
            Vec::new()
        } else if list.is_null() {
            return Err(libc::EINVAL);
        } else {
            // SAFETY: `n` entries at `list` (module contract).
            unsafe { std::slice::from_raw_parts(list, n) }.to_vec()
        };
        w.inline = None;
        Ok(())
    });
}

/// Appends `len` bytes at `addr` to the last request's inline data,
/// refusing more than the QP's `max_inline_data` (ENOSPC, as rxe's
/// builders).
///
/// # Safety
/// `len` readable bytes at `addr` (module contract).
unsafe fn add_inline(
    q: &Qp,
    w: &mut BuiltWr,
    addr: *const c_void,
    len: usize,
) -> Result<(), c_int> {
    let data = w.inline.get_or_insert_with(Vec::new);
    // Saturating: `len` comes from the application and may be any size.
    if data.len().saturating_add(len) > q.init.cap.max_inline_data as usize {
        return Err(libc::ENOSPC);
    }
    if len > 0 {
        if addr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        data.extend_from_slice(unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) });
    }
    Ok(())
}

unsafe extern "C" fn set_inline_data(qx: *mut ibv_qp_ex, addr: *mut c_void, len: usize) {
    set_last(qx, |q, w| {
        w.inline = None;
        w.sges.clear();
        // SAFETY: module contract.
        unsafe { add_inline(q, w, addr, len) }
    });
}

unsafe extern "C" fn set_inline_data_list(qx: *mut ibv_qp_ex, n: usize, list: *const ibv_data_buf) {
    set_last(qx, |q, w| {
        w.inline = None;
        w.sges.clear();
        w.inline = Some(Vec::new());
        if n == 0 {
            return Ok(());
        }
        if list.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `n` entries at `list` (module contract).
        for b in unsafe { std::slice::from_raw_parts(list, n) } {
            // SAFETY: module contract.
            unsafe { add_inline(q, w, b.addr, b.length) }?;
        }
        Ok(())
    });
}

/// `ibv_wr_bind_mw`: the bind is copied now.
unsafe extern "C" fn bind_mw(
    qx: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    // SAFETY: module contract.
    let Some(&bind_info) = (unsafe { info.as_ref() }) else {
        with_batch(qx, |_, b| {
            b.error.get_or_insert(libc::EINVAL);
        });
        return;
    };
    start(
        qx,
        BuiltWr {
            bind: Some(wr_bind_mw {
                mw,
                rkey,
                bind_info,
            }),
            ..op(WR_BIND_MW)
        },
    );
}

/// `ibv_wr_local_inv`.
unsafe extern "C" fn local_inv(qx: *mut ibv_qp_ex, rkey: u32) {
    start(
        qx,
        BuiltWr {
            imm: rkey,
            ..op(WR_LOCAL_INV)
        },
    );
}

/// `ibv_wr_send_inv`.
unsafe extern "C" fn send_inv(qx: *mut ibv_qp_ex, rkey: u32) {
    start(
        qx,
        BuiltWr {
            imm: rkey,
            ..op(WR_SEND_WITH_INV)
        },
    );
}

unsafe extern "C" fn lacking_tso(qx: *mut ibv_qp_ex, _hdr: *mut c_void, _sz: u16, _mss: u16) {
    lacking(qx);
}

/// `ibv_wr_atomic_write`: the 8 bytes at `value` are copied now, as inline
/// data (whatever `max_inline_data`), as rxe's provider copies them.
unsafe extern "C" fn atomic_write(qx: *mut ibv_qp_ex, rkey: u32, addr: u64, value: *const c_void) {
    if value.is_null() {
        with_batch(qx, |_, b| {
            b.error.get_or_insert(libc::EINVAL);
        });
        return;
    }
    // SAFETY: 8 readable bytes at `value` (module contract).
    let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), 8) }.to_vec();
    start(
        qx,
        BuiltWr {
            inline: Some(bytes),
            ..remote(WR_ATOMIC_WRITE, rkey, addr)
        },
    );
}
