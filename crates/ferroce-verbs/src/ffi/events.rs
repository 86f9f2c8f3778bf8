//! Asynchronous events and the descriptors of events: `ibv_get_async_event`
//! / `ibv_ack_async_event` on the context's `async_fd`, and the helpers
//! completion channels share with them. Both descriptors start blocking, as
//! rdma-core's do, so that an O_NONBLOCK the application sets is the only
//! one the library sees: without an event, the calls then fail with EAGAIN
//! (rdma-core's read(2) would), and otherwise block in poll(2), failing
//! with EINTR where that read(2) would (see [`interrupted`]).

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;

use ferroce::AsyncEvent;
use rustix::event::{EventfdFlags, epoll, eventfd};

use crate::objects::Ctx;

use super::{ctx, guard_errno, put, set_errno};
use crate::abi::*;

/// One `ibv_context`'s asynchronous events. The device's events (one
/// engine per device and process) are shared out to the context that owns
/// each one's object, as the kernel gives each context the events of its
/// own objects: UCX opens a device more than once and waits on each
/// context's `async_fd` for that context's events, and a context that
/// took another's event left that one blocked in `ibv_get_async_event`.
pub(crate) struct Inbox {
    events: Mutex<VecDeque<AsyncEvent>>,
    /// Readable while `events` holds one (an eventfd).
    ready: OwnedFd,
    /// The device's own descriptor, in the context's epoll set.
    _device: OwnedFd,
}

impl Inbox {
    fn push(&self, e: AsyncEvent) {
        let mut q = self.events.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(e);
        if q.len() == 1 {
            let _ = rustix::io::write(&self.ready, &1u64.to_ne_bytes());
        }
    }

    fn pop(&self) -> Option<AsyncEvent> {
        let mut q = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let e = q.pop_front();
        if q.is_empty() {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&self.ready, &mut count);
        }
        e
    }
}

/// A new context's `async_fd` and inbox. The descriptor is an epoll
/// instance of its own (so the application's O_NONBLOCK on it is this
/// context's alone) watching the inbox and the device's descriptor: it is
/// readable while the context has an event, or while the device has
/// events not yet shared out (perhaps another context's: a call then
/// shares them out and finds none of its own). It starts blocking, as
/// rdma-core's does.
pub(super) fn async_fd(dev: &ferroce::Context) -> Result<(OwnedFd, Inbox), c_int> {
    let os = |e: rustix::io::Errno| e.raw_os_error();
    let device = dev
        .async_event_fd()
        .try_clone_to_owned()
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
    let ready = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(os)?;
    let set = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(os)?;
    for fd in [device.as_fd(), ready.as_fd()] {
        let data = epoll::EventData::new_u64(fd.as_raw_fd() as u64);
        epoll::add(&set, fd, data, epoll::EventFlags::IN).map_err(os)?;
    }
    let inbox = Inbox {
        events: Mutex::new(VecDeque::new()),
        ready,
        _device: device,
    };
    Ok((set, inbox))
}

/// Shares the device's waiting events out to the inboxes of the contexts
/// that own their objects; an event whose object is gone is dropped, as
/// the kernel drops a destroyed object's events.
fn share_out(c: &Ctx) {
    let open = super::device::lock_open(&c.device.open);
    while let Some(e) = c.inner.poll_async_event() {
        for &addr in &open.contexts {
            // SAFETY: a context is registered in `contexts` from
            // `ibv_open_device` until `ibv_close_device` takes it out,
            // both under this lock, and lives at least that long.
            let owner = unsafe { &*(addr as *const Ctx) };
            if owns(owner, &e) {
                owner.inbox.push(e);
                break;
            }
        }
    }
}

/// Whether `e`'s object is one of `c`'s.
fn owns(c: &Ctx, e: &AsyncEvent) -> bool {
    let has = |map: &Mutex<std::collections::HashMap<u32, usize>>, k: &u32| {
        map.lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(k)
    };
    match e {
        AsyncEvent::QpFatal { qpn } | AsyncEvent::QpLastWqeReached { qpn } => has(&c.qps, qpn),
        AsyncEvent::CqOverflow { cq } => has(&c.cqs, cq),
        AsyncEvent::SrqLimitReached { srq } => has(&c.srqs, srq),
    }
}

/// Clears O_NONBLOCK on `fd`.
pub(super) fn set_blocking(fd: BorrowedFd<'_>) -> Result<(), c_int> {
    // SAFETY: fcntl on a descriptor we hold, with integer arguments.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0
        // SAFETY: as above.
        || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0
    {
        return Err(last_errno());
    }
    Ok(())
}

/// Whether the application set O_NONBLOCK on `fd`.
pub(super) fn nonblocking(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: fcntl on a descriptor we hold.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

/// Blocks (without spinning) until `fd` is readable. A signal whose
/// handler runs meanwhile ends the wait with EINTR unless read(2) would
/// have been restarted (see [`interrupted`]), as rdma-core's read(2) of its
/// event descriptors behaves.
pub(super) fn wait_readable(fd: BorrowedFd<'_>) -> Result<(), c_int> {
    loop {
        match poll_readable(fd, -1) {
            Err(libc::EINTR) => interrupted()?,
            r => return r.map(|_| ()),
        }
    }
}

/// One poll(2) of `fd` for reading, up to `timeout_ms` (-1: no limit):
/// whether it is readable, or the errno (EINTR included).
pub(super) fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: c_int) -> Result<bool, c_int> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 { Err(last_errno()) } else { Ok(n > 0) }
}

/// What a wait interrupted by a signal handler does: `Err(EINTR)` if a
/// read(2) would have failed, `Ok` to wait again.
///
/// poll(2) fails with EINTR after any handler, but rdma-core blocks in
/// read(2), which the kernel restarts after a handler installed with
/// `SA_RESTART`. The signal that interrupted is not known here, so the
/// wait fails when any signal this thread can receive has a handler
/// without `SA_RESTART` (qperf's SIGALRM, for instance) and goes on when
/// every such handler restarts (as a program whose handlers all use
/// `SA_RESTART` expects).
pub(super) fn interrupted() -> Result<(), c_int> {
    // SAFETY: sigset_t is plain data that sigemptyset initializes; the
    // calls only read the signal mask and the dispositions.
    unsafe {
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut blocked);
        for sig in 1..=libc::SIGRTMAX() {
            if libc::sigismember(&blocked, sig) == 1 {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut act) != 0 {
                continue;
            }
            let handled = act.sa_sigaction != libc::SIG_DFL && act.sa_sigaction != libc::SIG_IGN;
            if handled && act.sa_flags & libc::SA_RESTART == 0 {
                return Err(libc::EINTR);
            }
        }
    }
    Ok(())
}

fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `ibv_get_async_event`: the device's next asynchronous event (QP fatal,
/// last WQE reached, SRQ limit, CQ overflow). Without one it blocks in
/// poll(2) on `async_fd` until the device's driver thread queues one, or,
/// if the application set O_NONBLOCK on `async_fd`, fails with EAGAIN, and
/// with EINTR when a signal handler interrupts the wait (see
/// [`interrupted`]), as rdma-core's read(2) of its descriptor does.
pub(super) unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    let r = guard_errno(|| {
        // SAFETY: module contract.
        let c = unsafe { ctx(context) }?;
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        loop {
            share_out(c);
            let Some(e) = c.inbox.pop() else {
                if nonblocking(c.async_fd.as_fd()) {
                    return Err(libc::EAGAIN);
                }
                wait_readable(c.async_fd.as_fd())?;
                continue;
            };
            let lookup = |map: &std::sync::Mutex<std::collections::HashMap<u32, usize>>, k| {
                let m = map.lock().unwrap_or_else(|p| p.into_inner());
                m.get(&k).copied()
            };
            let (element, kind) = match e {
                AsyncEvent::QpFatal { qpn } => (lookup(&c.qps, qpn), EVENT_QP_FATAL),
                AsyncEvent::QpLastWqeReached { qpn } => {
                    (lookup(&c.qps, qpn), EVENT_QP_LAST_WQE_REACHED)
                }
                AsyncEvent::CqOverflow { cq } => (lookup(&c.cqs, cq), EVENT_CQ_ERR),
                AsyncEvent::SrqLimitReached { srq } => {
                    (lookup(&c.srqs, srq), EVENT_SRQ_LIMIT_REACHED)
                }
            };
            let Some(element) = element else {
                // Its object is already destroyed: nothing to report.
                continue;
            };
            let ev = ibv_async_event {
                element: element as *mut c_void,
                event_type: kind,
            };
            // SAFETY: module contract.
            return unsafe { put(event, ev) };
        }
    });
    if r == 0 {
        0
    } else {
        set_errno(r);
        -1
    }
}

/// `ibv_ack_async_event`: ferroce's events hold nothing to release.
pub(super) unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}
