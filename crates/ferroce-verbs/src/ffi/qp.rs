//! Queue pairs: create, modify, query, destroy. Posting is in `post.rs`.

use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferroce::{QpInitAttr, QpType};

use super::{ctx, guard_errno, guard_ptr, obj, put, take};
use crate::abi::*;
use crate::convert::{errno, qp_attr, qp_state_code, remember};
use crate::objects::{Cq, Pd, Qp, Srq};

/// The most inline data a send may carry (`ibv_qp_cap::max_inline_data`);
/// the engine copies it at post, as rxe does.
pub(crate) const MAX_INLINE_DATA: u32 = 1024;

/// Bytes of a request's room one SGE takes (`struct ibv_sge`).
const SGE_BYTES: u32 = std::mem::size_of::<crate::abi::ibv_sge>() as u32;

pub(super) unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    guard_ptr(|| {
        // SAFETY: module contract.
        let a = unsafe { init.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: module contract.
        unsafe { new_qp(pd, a, None) }.map(|q| q.cast())
    })
}

/// A QP as `init` asks (its `cap` updated to what was granted), for
/// `ibv_create_qp` and, with its `send_ops_flags`, `ibv_create_qp_ex`.
///
/// # Safety
/// Module contract: `pd` and the objects `init` names are this library's.
pub(super) unsafe fn new_qp(
    pd: *mut ibv_pd,
    init: &mut ibv_qp_init_attr,
    send_ops: Option<u64>,
) -> Result<*mut Qp, c_int> {
    // SAFETY: module contract.
    let p: &Pd = unsafe { obj(pd) }?;
    // SAFETY: module contract.
    let c = unsafe { ctx(p.pd.context) }?;
    let mut a = *init;
    let qp_type = match a.qp_type {
        QPT_RC => QpType::Rc,
        QPT_UC => QpType::Uc,
        QPT_UD => QpType::Ud,
        QPT_XRC_SEND => QpType::XrcIni,
        _ => return Err(libc::EOPNOTSUPP),
    };
    // SAFETY: module contract.
    let send: &Cq = unsafe { obj(a.send_cq) }?;
    // An XRC initiator receives nothing: its recv_cq may be NULL.
    let xrc_ini = qp_type == QpType::XrcIni;
    if xrc_ini && a.recv_cq.is_null() {
        a.recv_cq = a.send_cq;
    }
    // SAFETY: module contract.
    let recv: &Cq = unsafe { obj(a.recv_cq) }?;
    let srq: Option<&Srq> = if a.srq.is_null() {
        None
    } else {
        // SAFETY: module contract.
        Some(unsafe { obj(a.srq) }?)
    };
    if a.cap.max_inline_data > MAX_INLINE_DATA {
        return Err(libc::EINVAL);
    }
    let attr = QpInitAttr {
        max_send_wr: a.cap.max_send_wr.max(1),
        max_recv_wr: a.cap.max_recv_wr.max(1),
        sq_sig_all: a.sq_sig_all != 0,
        srq: srq.map(|s| &s.inner),
        ..QpInitAttr::new(qp_type, &send.inner, &recv.inner)
    };
    let inner = p.inner.create_qp(&attr).map_err(|e| errno(&e))?;
    // rdma-core's posts take a request whose lkey is bad (another PD's, a
    // deregistered region's, bytes outside it) and fail it in a completion,
    // LOC_PROT_ERR, the QP then in ERR: the engine does the same.
    inner
        .set_local_errors(ferroce::LocalErrors::Completion)
        .map_err(|e| errno(&e))?;
    let qpn = inner.qpn();
    // The caps granted are the caps asked for, as the caller's struct
    // then reports, with room for at least one SGE per request (as a NIC's
    // smallest WQE; rxe grants 0 and refuses every post then) and, on the
    // send queue, for the inline data, 16 bytes (one ibv_sge) a slot, as
    // rxe rounds it. Posts past them fail (post.rs).
    a.cap.max_send_sge = a
        .cap
        .max_send_sge
        .max(a.cap.max_inline_data / SGE_BYTES)
        .max(1);
    a.cap.max_recv_sge = a.cap.max_recv_sge.max(1);
    a.cap.max_send_wr = attr.max_send_wr;
    a.cap.max_recv_wr = if srq.is_some() || xrc_ini {
        0
    } else {
        attr.max_recv_wr
    };
    if xrc_ini {
        a.cap.max_recv_sge = 0;
        a.recv_cq = init.recv_cq;
    }
    init.cap = a.cap;
    let qp = Box::into_raw(Box::new(Qp {
        qp: super::qp_ex::qp_ex(ibv_qp {
            context: p.pd.context,
            qp_context: a.qp_context,
            pd,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            handle: qpn,
            qp_num: qpn,
            state: AtomicU32::new(QPS_RESET),
            qp_type: a.qp_type,
            mutex: [0; 5],
            cond: [0; 6],
            events_completed: 0,
        }),
        inner,
        qp_type,
        init: a,
        attr: Mutex::new(ibv_qp_attr::default()),
        send_ops,
        batch: Default::default(),
        xrcd: 0,
    }));
    p.users.add();
    send.users.add();
    if !a.recv_cq.is_null() {
        recv.users.add();
    }
    if let Some(s) = srq {
        s.users.add();
    }
    c.qps
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(qpn, qp as usize);
    if qp_type == QpType::Ud {
        c.ud_qps
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(qpn);
    }
    Ok(qp)
}

pub(super) unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        // SAFETY: module contract.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        let mask = mask as u32;
        let mut saved = q.attr.lock().unwrap_or_else(|p| p.into_inner());
        let dest = if mask & QP_DEST_QPN != 0 {
            a.dest_qp_num
        } else {
            saved.dest_qp_num
        };
        let wanted = qp_attr(a, mask, q.qp.qp_base.qp_num, dest)?;
        q.inner.modify(&wanted).map_err(|e| errno(&e))?;
        remember(&mut saved, a, mask);
        if let Some(s) = wanted.state {
            q.qp.qp_base
                .state
                .store(qp_state_code(s), Ordering::Release);
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        let mut a = *q.attr.lock().unwrap_or_else(|p| p.into_inner());
        let state = q.inner.state().map_err(|e| errno(&e))?;
        a.qp_state = qp_state_code(state);
        a.cur_qp_state = a.qp_state;
        a.cap = q.init.cap;
        q.qp.qp_base.state.store(a.qp_state, Ordering::Release);
        // SAFETY: module contract.
        unsafe {
            put(attr, a)?;
            put(init, q.init)
        }
    })
}

pub(super) unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Qp = unsafe { obj(qp) }?;
        // As the kernel's uverbs: a QP still attached to a multicast
        // group is busy until the application detaches it.
        if !q.inner.mcast_groups().is_empty() {
            return Err(libc::EBUSY);
        }
        // SAFETY: module contract: the objects a QP uses outlive it (EBUSY).
        // An XRC target has no PD or CQ, an initiator maybe no receive CQ.
        unsafe {
            let b = &q.qp.qp_base;
            if !b.pd.is_null() {
                obj::<Pd, _>(b.pd)?.users.remove();
            }
            for cq in [b.send_cq, b.recv_cq] {
                if !cq.is_null() {
                    obj::<Cq, _>(cq)?.users.remove();
                }
            }
            if !b.srq.is_null() {
                obj::<Srq, _>(b.srq)?.users.remove();
            }
            if q.xrcd != 0 {
                obj::<crate::objects::Xrcd, _>(q.xrcd as *mut ibv_xrcd)?
                    .users
                    .remove();
            }
        }
        // SAFETY: module contract.
        let c = unsafe { ctx(q.qp.qp_base.context) }?;
        if owes_peer(&q.inner) {
            settle(&c.inner);
        }
        c.qps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&q.qp.qp_base.qp_num);
        c.ud_qps
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&q.qp.qp_base.qp_num);
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Qp, _>(qp) });
        Ok(())
    })
}

/// Whether `ibv_destroy_qp` lets the device send what the QP owes first
/// ([`settle`]): not for a QP in Error or Reset, which sends nothing
/// more. rdma_cm programs destroy their QPs in Error (`rdma_disconnect`
/// moves the QP there first), and UCX its own; there the wait cost each
/// connection's teardown a millisecond or more (up to [`SETTLE_MAX`]
/// while other connections kept the device sending).
fn owes_peer(qp: &ferroce::QueuePair) -> bool {
    use ferroce::QpState;
    !matches!(qp.state(), Ok(QpState::Err | QpState::Reset))
}

/// How long `ibv_destroy_qp` lets the device send what it owes: until
/// nothing has left for [`QUIET`], at most [`SETTLE_MAX`].
const QUIET: Duration = Duration::from_millis(1);
const SETTLE_MAX: Duration = Duration::from_millis(20);

/// Lets the ACK of the last request a QP received leave before the QP
/// goes: programs destroy their QP right after their last completion, and
/// a peer whose last request is never acknowledged retries it and fails
/// (ibv_rc_pingpong's server did, with `-e`). Flushing once is not enough
/// on a loaded machine: the ACK is sometimes made a moment later (seen in
/// the engine's counters, cause not found yet), so this flushes until the
/// device has sent nothing for a millisecond, within 20 ms.
fn settle(ctx: &ferroce::Context) {
    let start = Instant::now();
    let mut sent = ctx.stats().tx_packets;
    loop {
        ctx.flush_now();
        std::thread::sleep(QUIET);
        ctx.flush_now();
        let now = ctx.stats().tx_packets;
        if now == sent || start.elapsed() > SETTLE_MAX {
            return;
        }
        sent = now;
    }
}

/// `ibv_query_qp_data_in_order@IBVERBS_1.14`: 0, as rxe's provider answers:
/// ferroce places each packet's bytes with one copy, in PSN order, but
/// promises no order of the bytes inside a copy, which is what this asks.
pub(super) unsafe extern "C" fn ibv_query_qp_data_in_order(
    _qp: *mut ibv_qp,
    _op: u32,
    _flags: u32,
) -> c_int {
    0
}
