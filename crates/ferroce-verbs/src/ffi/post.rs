//! `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`: the context ops
//! the header's inline wrappers call. Each walks the application's linked
//! list, turns every request into ferroce's (`ibv_sge` addresses become
//! offsets into their regions) and posts it; the first one refused stops
//! the walk, is named in `*bad_wr`, and its errno is returned.

use std::ffi::c_int;

use ferroce::{RecvWr, RemoteSlice, SendOp, SendWr, Sge, UdDest};

use super::{ctx, guard, obj};
use crate::abi::*;
use crate::convert::errno;
use crate::objects::{Ah, Ctx, Qp, Srq};

/// The scatter list of a request as ferroce's, and its total length.
///
/// # Safety
/// `list` holds `n` entries (module contract).
unsafe fn sges(c: &Ctx, list: *const ibv_sge, n: c_int) -> Result<(Vec<Sge>, u64), c_int> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok((Vec::new(), 0));
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `n` entries at `list` (module contract).
    let list = unsafe { std::slice::from_raw_parts(list, n) };
    let out: Vec<Sge> = list
        .iter()
        .map(|s| Sge {
            lkey: s.lkey,
            offset: c.offset(s.lkey, s.addr),
            len: s.length,
        })
        .collect();
    Ok((out, list.iter().map(|s| u64::from(s.length)).sum()))
}

/// A queue's SGE cap as `num_sge` compares with it.
fn sge_cap(max: u32) -> c_int {
    c_int::try_from(max).unwrap_or(c_int::MAX)
}

/// Inline data: the bytes the scatter list points at, copied now (their
/// keys are not checked, as IBA allows for inline data).
///
/// # Safety
/// Each element points at `length` readable bytes (module contract).
unsafe fn inline_bytes(list: *const ibv_sge, n: c_int) -> Vec<u8> {
    let n = usize::try_from(n).unwrap_or(0);
    let mut out = Vec::new();
    if list.is_null() {
        return out;
    }
    // SAFETY: `n` entries at `list`.
    for s in unsafe { std::slice::from_raw_parts(list, n) } {
        if s.length > 0 && s.addr != 0 {
            // SAFETY: `length` readable bytes at `addr` (module contract).
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
            });
        }
    }
    out
}

/// What one `ibv_send_wr` asks for.
///
/// # Safety
/// `wr` is a valid request (module contract).
unsafe fn send_op(wr: &ibv_send_wr, len: u64) -> Result<SendOp, c_int> {
    // SAFETY: the union member the opcode names (module contract).
    let (rdma, atomic) = unsafe { (wr.wr.rdma, wr.wr.atomic) };
    let remote = RemoteSlice::new(rdma.remote_addr, rdma.rkey, len);
    let at = RemoteSlice::new(atomic.remote_addr, atomic.rkey, 8);
    Ok(match wr.opcode {
        WR_SEND => SendOp::Send,
        WR_SEND_WITH_IMM => SendOp::SendWithImm(u32::from_be(wr.imm_data)),
        WR_SEND_WITH_INV => SendOp::SendWithInv(wr.imm_data),
        WR_RDMA_WRITE => SendOp::Write { remote },
        WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
            remote,
            imm: u32::from_be(wr.imm_data),
        },
        WR_RDMA_READ => SendOp::Read { remote },
        WR_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote: at,
            compare: atomic.compare_add,
            swap: atomic.swap,
        },
        WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
            remote: at,
            add: atomic.compare_add,
        },
        // Its 8 bytes are the request's data (inline, from
        // `ibv_wr_atomic_write`, or a scatter list).
        WR_ATOMIC_WRITE => SendOp::AtomicWrite {
            remote: RemoteSlice::new(rdma.remote_addr, rdma.rkey, 8),
        },
        WR_LOCAL_INV => SendOp::LocalInv(wr.imm_data),
        // SAFETY: the `bind_mw` member, for a BIND_MW (module contract).
        WR_BIND_MW => unsafe {
            let b = wr.bind_mw;
            super::windows::bind_op(b.mw, b.rkey, &b.bind_info)
        }?,
        _ => return Err(libc::EINVAL),
    })
}

/// Posts one send request.
///
/// # Safety
/// `wr` is a valid request (module contract).
pub(super) unsafe fn post_one_send(c: &Ctx, q: &Qp, wr: &ibv_send_wr) -> Result<(), c_int> {
    // More SGEs than the QP was created for: rxe's EINVAL.
    if wr.num_sge > sge_cap(q.init.cap.max_send_sge) {
        return Err(libc::EINVAL);
    }
    // SAFETY: module contract.
    let (sg, len) = unsafe { sges(c, wr.sg_list, wr.num_sge) }?;
    // SAFETY: module contract.
    let op = unsafe { send_op(wr, len) }?;
    let flags = wr.send_flags;
    let inline = if flags & SEND_INLINE != 0 {
        // An ATOMIC WRITE's 8 bytes ride as inline data whatever the QP's
        // `max_inline_data` (rxe copies them into the request too).
        if len > u64::from(q.init.cap.max_inline_data) && wr.opcode != WR_ATOMIC_WRITE {
            // More than the QP was created for: rxe's EINVAL.
            return Err(libc::EINVAL);
        }
        // SAFETY: module contract.
        Some(unsafe { inline_bytes(wr.sg_list, wr.num_sge) })
    } else {
        None
    };
    let ud = if q.qp_type == ferroce::QpType::Ud {
        // SAFETY: the `ud` member, for a UD QP (module contract).
        let u = unsafe { wr.wr.ud };
        // SAFETY: module contract.
        let ah: &Ah = unsafe { obj(u.ah) }?;
        let mut path = ferroce::path_to(ah.remote, q.qp.qp_base.qp_num, u.remote_qpn);
        path.udp_src_port = ferroce_wire::udp::ud_source_port(q.qp.qp_base.qp_num);
        path.traffic_class = ah.grh.traffic_class;
        path.hop_limit = ah.grh.hop_limit;
        Some(UdDest {
            path,
            qpn: u.remote_qpn,
            qkey: u.remote_qkey,
        })
    } else {
        None
    };
    let send = SendWr {
        signaled: flags & SEND_SIGNALED != 0,
        fence: flags & SEND_FENCE != 0,
        solicited: flags & SEND_SOLICITED != 0,
        inline: inline.as_deref(),
        ud,
        // An XRC initiator's request names the target's SRQ.
        remote_srqn: (q.qp_type == ferroce::QpType::XrcIni).then_some(wr.qp_type),
        ..SendWr::new(wr.wr_id, op, if inline.is_some() { &[] } else { &sg })
    };
    q.inner.post_send(send).map_err(|e| errno(&e))
}

/// Walks a linked list of requests, stopping at the first refused.
///
/// # Safety
/// `first` is NULL or a valid list; `bad` is NULL or writable.
unsafe fn walk<W>(
    first: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&W) -> Result<(), c_int>,
) -> c_int {
    let mut p = first;
    // SAFETY: each node is valid until its `next` is NULL.
    while let Some(wr) = unsafe { p.as_ref() } {
        if let Err(e) = post(wr) {
            if !bad.is_null() {
                // SAFETY: writable (module contract).
                unsafe { bad.write(p) };
            }
            return e;
        }
        p = next(wr);
    }
    0
}

pub(super) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Ok(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: module contract.
        let Ok(c) = (unsafe { ctx(q.qp.qp_base.context) }) else {
            return libc::EINVAL;
        };
        // SAFETY: module contract.
        unsafe { walk(wr, bad, |w| w.next, |w| post_one_send(c, q, w)) }
    })
}

pub(super) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Ok(q) = (unsafe { obj::<Qp, _>(qp) }) else {
            return libc::EINVAL;
        };
        // SAFETY: module contract.
        let Ok(c) = (unsafe { ctx(q.qp.qp_base.context) }) else {
            return libc::EINVAL;
        };
        let post = |w: &ibv_recv_wr| {
            if w.num_sge > sge_cap(q.init.cap.max_recv_sge) {
                return Err(libc::EINVAL);
            }
            // SAFETY: module contract.
            let (sg, _) = unsafe { sges(c, w.sg_list, w.num_sge) }?;
            q.inner
                .post_recv(RecvWr::new(w.wr_id, &sg))
                .map_err(|e| errno(&e))
        };
        // SAFETY: module contract.
        unsafe { walk(wr, bad, |w| w.next, post) }
    })
}

pub(super) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Ok(s) = (unsafe { obj::<Srq, _>(srq) }) else {
            return libc::EINVAL;
        };
        // SAFETY: module contract.
        let Ok(c) = (unsafe { ctx(s.srq.context) }) else {
            return libc::EINVAL;
        };
        let max_sge = s.attr.lock().unwrap_or_else(|p| p.into_inner()).max_sge;
        let post = |w: &ibv_recv_wr| {
            if w.num_sge > sge_cap(max_sge) {
                return Err(libc::EINVAL);
            }
            // SAFETY: module contract.
            let (sg, _) = unsafe { sges(c, w.sg_list, w.num_sge) }?;
            s.inner
                .post_recv(RecvWr::new(w.wr_id, &sg))
                .map_err(|e| errno(&e))
        };
        // SAFETY: module contract.
        unsafe { walk(wr, bad, |w| w.next, post) }
    })
}
