//! Completion channels and completion queues: `ibv_poll_cq` and
//! `ibv_req_notify_cq` (the context ops the header's inline wrappers
//! call), `ibv_get_cq_event` / `ibv_ack_cq_events`.

use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsFd, AsRawFd};

use ferroce::WorkCompletion;

use super::{ctx, guard, guard_errno, guard_ptr, obj, put, set_errno, take};
use crate::abi::*;
use crate::convert::{errno, wc};
use crate::objects::{Channel, Cq};

pub(super) unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    guard_ptr(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        let inner = c.inner.create_comp_channel().map_err(|e| errno(&e))?;
        // Blocking, as rdma-core's channel descriptor starts: an O_NONBLOCK
        // the application sets is then its own, and `ibv_get_cq_event`
        // honours it. (ferroce's channel only polls its descriptor and
        // reads it only when signalled, so it works either way.)
        super::events::set_blocking(inner.as_fd())?;
        c.users.add();
        let ch = Box::new(Channel {
            ch: ibv_comp_channel {
                context,
                fd: inner.as_raw_fd(),
                refcnt: 0,
            },
            inner,
            users: Default::default(),
        });
        Ok(Box::into_raw(ch).cast())
    })
}

pub(super) unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let c: &Channel = unsafe { obj(ch) }?;
        if c.users.any() {
            return Err(libc::EBUSY);
        }
        // SAFETY: module contract.
        unsafe { ctx(c.ch.context) }?.users.remove();
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Channel, _>(ch) });
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    guard_ptr(|| {
        let depth = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
        // SAFETY: module contract.
        unsafe { new_cq(context, depth, cq_context, channel) }.map(|q| q.cast())
    })
}

/// A CQ of `depth` entries (refused if 0 or past the device's
/// `max_cqe`), with the `ibv_cq_ex` polling callbacks set: what both
/// `ibv_create_cq` and `ibv_create_cq_ex` make.
///
/// # Safety
/// Module contract: `context` and `channel` (NULL or not) are this
/// library's.
pub(super) unsafe fn new_cq(
    context: *mut ibv_context,
    depth: u32,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
) -> Result<*mut Cq, c_int> {
    // SAFETY: module contract.
    let c = unsafe { ctx(context) }?;
    if depth == 0 {
        return Err(libc::EINVAL);
    }
    let ch: Option<&Channel> = if channel.is_null() {
        None
    } else {
        // SAFETY: module contract.
        Some(unsafe { obj(channel) }?)
    };
    let inner = match ch {
        Some(ch) => c.inner.create_cq_with_channel(depth, &ch.inner),
        None => c.inner.create_cq(depth),
    }
    .map_err(|e| errno(&e))?;
    let handle = inner.handle();
    let cq = Box::into_raw(Box::new(Cq {
        cq: super::cq_ex::cq_ex(context, channel, cq_context, handle, depth),
        inner,
        users: Default::default(),
        current: Default::default(),
    }));
    if let Some(ch) = ch {
        ch.users.add();
    }
    c.users.add();
    let mut cqs = c.cqs.lock().unwrap_or_else(|p| p.into_inner());
    cqs.insert(handle, cq as usize);
    Ok(cq)
}

pub(super) unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Cq = unsafe { obj(cq) }?;
        if q.users.any() {
            return Err(libc::EBUSY);
        }
        // SAFETY: module contract.
        let c = unsafe { ctx(q.cq.context) }?;
        if !q.cq.channel.is_null() {
            // SAFETY: module contract (the channel outlives its CQs: EBUSY).
            let ch: &Channel = unsafe { obj(q.cq.channel) }?;
            ch.users.remove();
        }
        let mut cqs = c.cqs.lock().unwrap_or_else(|p| p.into_inner());
        cqs.remove(&q.cq.handle);
        drop(cqs);
        c.users.remove();
        // SAFETY: module contract; not used again.
        drop(unsafe { take::<Cq, _>(cq) });
        Ok(())
    })
}

/// `ibv_resize_cq`: the CQ holds `cqe` completions from now on (what it
/// holds now stays); `cq->cqe` says so. EINVAL below the completions it
/// holds, as rxe.
pub(super) unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    guard_errno(|| {
        let depth = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
        // SAFETY: module contract.
        let q: &Cq = unsafe { obj(cq) }?;
        q.inner.resize(depth).map_err(|e| errno(&e))?;
        // SAFETY: module contract; no reference to the CQ is held now.
        unsafe { (*cq).cqe = cqe };
        Ok(())
    })
}

/// `ibv_context_ops::poll_cq`: up to `n` completions into `out`, or -1.
/// Takes them from the CQ's ring without the engine's lock
/// ([`ferroce::CompletionQueue::poll_into`]).
pub(super) unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, out: *mut ibv_wc) -> c_int {
    guard(-1, || {
        // SAFETY: module contract.
        let Ok(q) = (unsafe { obj::<Cq, _>(cq) }) else {
            return -1;
        };
        // SAFETY: module contract.
        let Ok(c) = (unsafe { ctx(q.cq.context) }) else {
            return -1;
        };
        let want = usize::try_from(n).unwrap_or(0);
        if want > 0 && out.is_null() {
            return -1;
        }
        let mut batch = [WorkCompletion::default(); 16];
        let mut done = 0;
        while done < want {
            let k = (want - done).min(batch.len());
            let Ok(got) = q.inner.poll_into(&mut batch[..k]) else {
                return -1;
            };
            if got > 0 {
                // An empty poll (the busy-polling loop's usual case) takes
                // no lock at all: the CQ's ring needs none.
                let ud = c.ud_qps.read().unwrap_or_else(|p| p.into_inner());
                for w in &batch[..got] {
                    // SAFETY: `out` holds `n` entries (module contract).
                    unsafe { out.add(done).write(wc(w, ud.contains(&w.qpn))) };
                    done += 1;
                }
            }
            if got < k {
                break;
            }
        }
        done as c_int
    })
}

/// `ibv_context_ops::req_notify_cq`.
pub(super) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    guard_errno(|| {
        // SAFETY: module contract.
        let q: &Cq = unsafe { obj(cq) }?;
        if q.cq.channel.is_null() {
            // rdma-core arms such a CQ without complaint; no event can
            // come, as there is no channel to deliver it to.
            return Ok(());
        }
        q.inner
            .req_notify(solicited_only != 0)
            .map_err(|e| errno(&e))
    })
}

/// `ibv_get_cq_event`: the next event of the channel, blocking in poll(2)
/// on the channel's descriptor until one comes, or, if the application set
/// O_NONBLOCK on `channel->fd`, failing with EAGAIN when none waits, and
/// with EINTR when a signal handler interrupts the wait (both as
/// rdma-core's read(2) of its descriptor does; see `events::interrupted`).
pub(super) unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    let r = guard_errno(|| {
        // SAFETY: module contract.
        let ch: &Channel = unsafe { obj(channel) }?;
        // SAFETY: module contract.
        let c = unsafe { ctx(ch.ch.context) }?;
        let handle = loop {
            if let Some(h) = ch.inner.try_get_event() {
                break h;
            }
            if super::events::nonblocking(ch.inner.as_fd()) {
                return Err(libc::EAGAIN);
            }
            super::events::wait_readable(ch.inner.as_fd())?;
        };
        let cqs = c.cqs.lock().unwrap_or_else(|p| p.into_inner());
        let cq = *cqs.get(&handle).ok_or(libc::EINVAL)? as *mut ibv_cq;
        drop(cqs);
        // SAFETY: the map holds live CQs only (destroy removes them).
        let q: &Cq = unsafe { obj(cq) }?;
        // SAFETY: module contract.
        unsafe {
            put(cq_out, cq)?;
            put(cq_context, q.cq.cq_context)
        }
    });
    if r == 0 {
        0
    } else {
        set_errno(r);
        -1
    }
}

/// `ibv_ack_cq_events`: ferroce's events hold nothing (destroying a CQ
/// need not wait for them), so there is nothing to count.
pub(super) unsafe extern "C" fn ibv_ack_cq_events(_cq: *mut ibv_cq, _n: c_uint) {}
