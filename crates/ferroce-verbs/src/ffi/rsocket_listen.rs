//! Listening rsockets: `rlisten` starts a thread that takes each connect
//! request of the rdma_cm ID, sets up its endpoint and accepts it, as
//! librdmacm's service thread does; `raccept` takes the next accepted
//! connection and gives it its descriptor then (O_NONBLOCK: EAGAIN when
//! none is waiting). Settings made on the listener after `rlisten` apply
//! to the connections accepted after.
//!
//! Safety contract: as `rsocket.rs`; the listener's ID belongs to its
//! thread until the thread returns it, when the listener drops.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::rsocket::{
    IdPtr, Kind, conn_param, get, insert, lookup, new_fd, ret, rgetpeername, wait_readable,
};
use super::rsocket_ep::{Endpoint, destroy_id, errno_now};
use super::{guard, rdmacm_conn};
use crate::rdmacm::abi::*;
use crate::rsocket::stream::Config;
use crate::rsocket::wire::ConnData;

/// How long a listener's thread waits for a request before it looks at
/// whether its socket was closed.
const ACCEPT_STEP: Duration = Duration::from_millis(100);

/// A listening rsocket: its ID, accepting thread and accepted backlog.
pub(super) struct Listener {
    pub(super) backlog: Arc<Backlog>,
    /// The bound address (the ID is the thread's).
    pub(super) local: sockaddr_storage,
    thread: Option<JoinHandle<IdPtr>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.backlog.stop.store(true, Ordering::Release);
        // The thread hands the ID back; dropping it destroys it.
        if let Some(t) = self.thread.take() {
            drop(t.join());
        }
    }
}

/// Accepted connections waiting for `raccept`; `ready` (an eventfd in
/// semaphore mode) counts them for poll(2).
pub(super) struct Backlog {
    /// Accepted connections; each gets its descriptor in `raccept`, so
    /// that its number is newer than any the caller opened before (as
    /// librspreload, which maps its own descriptors in order, expects).
    queue: Mutex<VecDeque<(Box<Endpoint>, Config)>>,
    /// The listener's settings, which accepted connections take.
    pub(super) cfg: Mutex<Config>,
    pub(super) ready: OwnedFd,
    stop: AtomicBool,
}

pub(super) unsafe extern "C" fn rlisten(fd: c_int, backlog: c_int) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let mut st = s.lock();
            let id = match &mut st.kind {
                Kind::Listening(_) => return Ok(0),
                Kind::Idle(id) => std::mem::replace(&mut id.0, std::ptr::null_mut()),
                _ => return Err(libc::EINVAL),
            };
            // SAFETY: a live ID.
            if unsafe { rdmacm_conn::ferroce_rdma_listen(id, backlog) } != 0 {
                let e = errno_now();
                st.kind = Kind::Idle(IdPtr(id));
                return Err(e);
            }
            let b = Arc::new(Backlog {
                queue: Mutex::new(VecDeque::new()),
                cfg: Mutex::new(st.cfg),
                ready: new_fd(libc::EFD_SEMAPHORE)?,
                stop: AtomicBool::new(false),
            });
            // SAFETY: a live ID.
            let local = unsafe { (*id).route.addr.src_storage };
            let (bb, id) = (b.clone(), IdPtr(id));
            let thread = std::thread::Builder::new()
                .name("rsocket-accept".into())
                .spawn(move || accept_loop(id, &bb))
                .map_err(|_| libc::ENOMEM)?;
            st.kind = Kind::Listening(Listener {
                backlog: b,
                local,
                thread: Some(thread),
            });
            Ok(0)
        })())
    })
}

/// The listener's thread: accepts each request until the socket closes.
fn accept_loop(id: IdPtr, b: &Backlog) -> IdPtr {
    while !b.stop.load(Ordering::Acquire) {
        // SAFETY: the listener's ID, alive until this thread returns it.
        match unsafe { rdmacm_conn::get_request_within(id.0, ACCEPT_STEP) } {
            Ok(Some(new)) => {
                match accept_one(new, *b.cfg.lock().unwrap_or_else(|p| p.into_inner())) {
                    Ok(fd) => {
                        b.queue
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push_back(fd);
                        // SAFETY: writes 8 bytes to the backlog's eventfd.
                        unsafe {
                            libc::write(b.ready.as_raw_fd(), (&1u64 as *const u64).cast(), 8)
                        };
                    }
                    Err(e) => {
                        tracing::debug!(errno = e, "rsocket: a connect request was not accepted")
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(errno = e, "rsocket: the listener stops");
                std::thread::sleep(ACCEPT_STEP);
            }
        }
    }
    id
}

/// Sets up the endpoint of a request's ID and accepts it.
fn accept_one(new: *mut rdma_cm_id, cfg: Config) -> Result<(Box<Endpoint>, Config), c_int> {
    // SAFETY: the new ID holds its request event (get_request_within).
    let peer = unsafe {
        let ev = (*new).event;
        let c = (*ev).param.conn;
        if c.private_data.is_null() {
            None
        } else {
            let b =
                std::slice::from_raw_parts(c.private_data.cast::<u8>(), c.private_data_len.into());
            ConnData::decode(b)
        }
    };
    let Some(peer) = peer else {
        // SAFETY: a live ID; no private data back.
        unsafe { rdmacm_conn::ferroce_rdma_reject(new, std::ptr::null(), 0) };
        destroy_id(new);
        return Err(libc::EPROTO);
    };
    let mut ep = Endpoint::new(new, cfg)?;
    ep.accept_peer(&peer);
    let mine = ep.conn_data().encode();
    let mut param = conn_param(&mine);
    // SAFETY: a live ID and valid parameters.
    if unsafe { rdmacm_conn::ferroce_rdma_accept(new, &mut param) } != 0 {
        return Err(errno_now());
    }
    Ok((Box::new(ep), cfg))
}

pub(super) unsafe extern "C" fn raccept(fd: c_int, addr: *mut c_void, len: *mut u32) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let (b, nonblock) = {
                let st = s.lock();
                let Kind::Listening(l) = &st.kind else {
                    return Err(libc::EINVAL);
                };
                (l.backlog.clone(), st.fd_flags & libc::O_NONBLOCK != 0)
            };
            let mut n = 0u64;
            loop {
                // SAFETY: reads 8 bytes from the backlog's eventfd.
                let r = unsafe { libc::read(b.ready.as_raw_fd(), (&raw mut n).cast(), 8) };
                if r == 8 {
                    break;
                }
                if nonblock || lookup(fd).is_none() {
                    return Err(libc::EAGAIN);
                }
                wait_readable(b.ready.as_raw_fd(), 200);
            }
            let (ep, cfg) = b
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
                .ok_or(libc::EAGAIN)?;
            let new = insert(Kind::Connected(ep), cfg, 0)?;
            if !addr.is_null() && !len.is_null() {
                // SAFETY: the caller's buffers (module contract).
                unsafe { rgetpeername(new, addr, len) };
            }
            Ok(new)
        })())
    })
}
