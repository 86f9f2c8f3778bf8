//! rdma_cm's entry points: events. `rdma_get_cm_event` turns each ferroce
//! event into a C `rdma_cm_event` (for a CONNECT_REQUEST on a new C ID),
//! `rdma_ack_cm_event` frees it, and a synchronous ID's calls wait for
//! their own event ([`complete`], librdmacm's `ucma_complete`). Same
//! contract as `rdmacm.rs`.

use std::ffi::{c_char, c_int};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ferroce::cm::{CmEvent, CmEventKind};

use super::events::{interrupted, nonblocking, poll_readable};
use super::rdmacm::{channel_arc, guard_cm, id_obj, new_id, refresh};
use super::{put, take};
use crate::rdmacm::abi::*;
use crate::rdmacm::convert::*;
use crate::rdmacm::objects::{ChannelObj, EventObj, IdObj, find};

/// Acks the event a synchronous call left in `id->event`.
///
/// # Safety
/// `id` is a live ID of this library.
pub(super) unsafe fn ack_held(id: *mut rdma_cm_id) {
    // SAFETY: `id` is live; `event` is NULL or an unacked event of ours.
    unsafe {
        let ev = (&raw mut (*id).event).replace(std::ptr::null_mut());
        if !ev.is_null() {
            ack(ev);
        }
    }
}

/// The C event for `ev`: for a CONNECT_REQUEST, on a new C ID that
/// inherits the listener's channel and context. `None` for an event about
/// an ID the application destroyed (the kernel drops those too).
pub(super) fn deliver(ev: CmEvent) -> Option<*mut rdma_cm_event> {
    let (id, listen, owner) = match &ev.kind {
        CmEventKind::ConnectRequest { .. } => {
            let listen = find(ev.listen_id.as_ref()?)? as *mut rdma_cm_id;
            // SAFETY: a live ID (in `ids`).
            let l = unsafe { id_obj(listen) }.ok()?;
            // SAFETY: as above.
            let (context, ps) = unsafe { ((*listen).context, (*listen).ps) };
            let owner = l.owner.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let id = new_id(
                ev.id.clone(),
                (l.chan.clone(), owner),
                l.is_sync(),
                context,
                ps,
            );
            (id, listen, listen)
        }
        _ => {
            let id = find(&ev.id)? as *mut rdma_cm_id;
            (id, std::ptr::null_mut(), id)
        }
    };
    // SAFETY: live IDs (in `ids`, or just made).
    let (o, own) = unsafe { (id_obj(id).ok()?, id_obj(owner).ok()?) };
    // SAFETY: `id` is live.
    unsafe { refresh(id, o) };
    own.unacked.add();
    Some(event_obj(ev, id, listen, owner))
}

fn event_obj(
    ev: CmEvent,
    id: *mut rdma_cm_id,
    listen: *mut rdma_cm_id,
    owner: *mut rdma_cm_id,
) -> *mut rdma_cm_event {
    let mut param = rdma_cm_event_param {
        conn: conn_info(&Default::default()),
    };
    let private_data = match event_param(&ev.kind) {
        EventParam::Conn(c) => {
            param.conn = conn_info(c);
            c.private_data.clone()
        }
        EventParam::Ud(u) => {
            param.ud = ud_info(u);
            u.private_data.clone()
        }
        EventParam::Data(d) => {
            param.conn.private_data_len = len_u8(d.len());
            d.to_vec()
        }
        EventParam::None => {
            param.conn.private_data_len = 0;
            Vec::new()
        }
    };
    let raw = Box::into_raw(Box::new(EventObj {
        ev: rdma_cm_event {
            id,
            listen_id: listen,
            event: event_code(&ev.kind),
            status: ev.kind.status(),
            param,
        },
        private_data,
        owner: owner as usize,
        _held: ev,
    }));
    // SAFETY: `raw` is the Box just made; the data pointer names its own
    // Vec, which moves no more (both `conn` and `ud` start with it).
    unsafe {
        let data = &(*raw).private_data;
        if !data.is_empty() {
            (*raw).ev.param.conn.private_data = data.as_ptr().cast();
        }
    }
    // A join's event carries the join's context where the data pointer
    // is (librdmacm's `ucma_process_join`).
    if let CmEventKind::MulticastJoin { group, .. } = &held_kind(raw)
        // SAFETY: `id` is live (the caller's).
        && let Ok(o) = unsafe { id_obj(id) }
    {
        let context = super::rdmacm_mcast::context_of(o, *group);
        // SAFETY: `raw` is the Box just made.
        unsafe { (*raw).ev.param.ud.private_data = context.cast_const() };
    }
    raw.cast()
}

/// The kind of the ferroce event an event object holds.
fn held_kind(raw: *mut EventObj) -> CmEventKind {
    // SAFETY: `raw` is a live Box of this module.
    match unsafe { &(*raw)._held.kind } {
        CmEventKind::MulticastJoin { group, ud } => CmEventKind::MulticastJoin {
            group: *group,
            ud: ud.clone(),
        },
        _ => CmEventKind::Disconnected,
    }
}

/// Frees an event and counts it acknowledged.
///
/// # Safety
/// `ev` is an unacked event of this library.
unsafe fn ack(ev: *mut rdma_cm_event) {
    // SAFETY: module contract.
    let e = unsafe { take::<EventObj, _>(ev) };
    // SAFETY: the owner lives until its events are acked (destroy waits).
    if let Ok(o) = unsafe { id_obj(e.owner as *mut rdma_cm_id) } {
        o.unacked.done();
    }
    drop(e);
}

/// How long one wait of a blocking call lasts before it looks again.
const WAIT_STEP: Duration = Duration::from_secs(3600);

/// `rdma_get_cm_event`: blocks for the next event, or with `O_NONBLOCK`
/// set on the channel's descriptor fails with `EAGAIN`, as a `read` of
/// librdmacm's descriptor would; a signal handler that interrupts the wait
/// ends it with EINTR as it would end that `read` (`events::interrupted`).
pub(super) unsafe extern "C" fn ferroce_rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let ch = unsafe { channel_arc(channel) }?;
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the channel's own descriptor, live while `ch` is.
        let fd = unsafe { BorrowedFd::borrow_raw(ch.ch.fd) };
        let me = Arc::as_ptr(&ch) as usize;
        let mine = |e: &CmEvent| owner_of(e).is_none_or(|o| o == me);
        // The descriptor was readable last round, yet nothing there was
        // ours (another channel's events wait in a queue this one reads
        // too, and keep it readable): pause rather than spin.
        let mut busy = false;
        loop {
            let sources = live_sources(&ch);
            if let Some(ev) = take_now(&ch, &sources, &mine)? {
                if let Some(p) = deliver(ev) {
                    // SAFETY: module contract.
                    return unsafe { put(event, p) };
                }
                continue;
            }
            if nonblocking(fd) {
                return Err(libc::EAGAIN);
            }
            let waited = if busy {
                pause(BUSY_PAUSE_MS)
            } else {
                poll_readable(fd, -1)
            };
            busy = match waited {
                Ok(readable) => readable,
                Err(libc::EINTR) => {
                    interrupted()?;
                    false
                }
                Err(e) => return Err(e),
            };
        }
    })
}

/// The pause between looks at a descriptor kept readable by events of
/// other channels.
const BUSY_PAUSE_MS: c_int = 1;

/// Sleeps `ms` milliseconds in poll(2) (so a signal ends it as it ends a
/// wait on the descriptor); `Ok(false)`: nothing known to be readable.
fn pause(ms: c_int) -> Result<bool, c_int> {
    // SAFETY: no descriptors; poll(2) only sleeps.
    if unsafe { libc::poll(std::ptr::null_mut(), 0, ms) } < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    Ok(false)
}

/// The channel (address) that delivers `e`: its ID's owner, or for a
/// CONNECT_REQUEST its listener's; `None` for an ID no longer live.
fn owner_of(e: &CmEvent) -> Option<usize> {
    let id = match e.kind {
        CmEventKind::ConnectRequest { .. } => e.listen_id.as_ref()?,
        _ => &e.id,
    };
    let p = find(id)? as *mut rdma_cm_id;
    // SAFETY: a live ID (in `ids`).
    unsafe { id_obj(p) }.ok().map(IdObj::owner_addr)
}

/// The home channels of IDs migrated to `ch` that still exist.
fn live_sources(ch: &ChannelObj) -> Vec<Arc<ChannelObj>> {
    let mut s = ch.sources.lock().unwrap_or_else(|p| p.into_inner());
    s.retain(|w| w.strong_count() > 0);
    s.iter().filter_map(Weak::upgrade).collect()
}

/// An event for `ch` already waiting on it or on one of `sources`.
fn take_now(
    ch: &ChannelObj,
    sources: &[Arc<ChannelObj>],
    mine: &dyn Fn(&CmEvent) -> bool,
) -> Result<Option<CmEvent>, c_int> {
    for q in std::iter::once(ch).chain(sources.iter().map(|s| &**s)) {
        let got = q
            .inner
            .get_event_matching(Duration::ZERO, mine)
            .map_err(|e| cm_errno(&e))?;
        if got.is_some() {
            return Ok(got);
        }
    }
    Ok(None)
}

pub(super) unsafe extern "C" fn ferroce_rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    guard_cm(|| {
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: module contract.
        unsafe { ack(event) };
        Ok(())
    })
}

/// librdmacm's `ucma_complete`: a synchronous ID's call waits for the ID's
/// next event, which it keeps in `id->event` (acked by the next such call
/// or at destroy); a failure becomes the errno librdmacm gives
/// (ECONNREFUSED for REJECTED, else the status).
///
/// # Safety
/// `id` is a live ID of this library.
pub(super) unsafe fn complete(id: *mut rdma_cm_id, o: &IdObj) -> Result<(), c_int> {
    if !o.is_sync() {
        return Ok(());
    }
    // SAFETY: module contract.
    unsafe { ack_held(id) };
    let me = o.inner.clone();
    let ev = loop {
        let got = o
            .chan
            .inner
            .get_event_matching(WAIT_STEP, &|e| e.id == me)
            .map_err(|e| cm_errno(&e))?;
        if let Some(ev) = got {
            break ev;
        }
    };
    let p = deliver(ev).ok_or(libc::EINVAL)?;
    // SAFETY: `id` is live; `p` a new event.
    let (code, status) = unsafe {
        (&raw mut (*id).event).write(p);
        ((*p).event, (*p).status)
    };
    match (code, status) {
        (_, 0) => Ok(()),
        (RDMA_CM_EVENT_REJECTED, _) => Err(libc::ECONNREFUSED),
        (_, s) if s < 0 => Err(-s),
        (_, s) => Err(s),
    }
}

/// `rdma_event_str`.
pub(super) unsafe extern "C" fn ferroce_rdma_event_str(event: u32) -> *const c_char {
    event_name(event).as_ptr()
}
