//! rsockets' descriptors and connections: `rsocket`, `rbind`, `rlisten`,
//! `raccept`, `rconnect`, `rshutdown`, `rclose`, `rgetsockname`,
//! `rgetpeername` (the protocol is [`crate::rsocket`]; data calls are in
//! `rsocket_io.rs`, `rpoll`/`rselect` and options in `rsocket_poll.rs`).
//!
//! * An rsocket's descriptor is a real one (an eventfd the rsocket owns),
//!   so its number never collides with the process's own; `rpoll` tells
//!   rsockets from other descriptors by this table.
//! * Connections are set up with synchronous rdma_cm IDs: `rconnect`
//!   resolves, connects and exchanges the private data before it returns,
//!   also on an O_NONBLOCK rsocket (it then never says EINPROGRESS).
//! * A listening rsocket's requests are accepted by a thread of its own
//!   (`rsocket_listen.rs`), as librdmacm's service thread does.
//! * Only SOCK_STREAM over AF_INET/AF_INET6: SOCK_DGRAM (rsockets over
//!   UD) and AF_IB are ENOTSUP, so `librspreload.so` falls back to a
//!   kernel socket for them.
//!
//! Safety contract: pointers from the application follow the socket
//! calls' own contracts (a `sockaddr` of `addrlen` bytes, a `socklen_t`
//! in/out length, buffers of the stated length). Raw rdma_cm IDs here are
//! owned by exactly one [`Kind`] and destroyed when it drops.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use super::rsocket_ep::{Endpoint, destroy_id, errno_now};
use super::{guard, rdmacm, rdmacm_conn, set_errno};
use crate::rdmacm::abi::*;
use crate::rsocket::stream::Config;
use crate::rsocket::wire::{ConnData, Ctrl};

/// Address and route resolution timeout of `rconnect`.
const RESOLVE_MS: c_int = 2000;
/// How long `rclose` lets the last sends (the disconnect) complete.
const CLOSE_DRAIN: Duration = Duration::from_secs(1);

/// An rdma_cm ID owned by one rsocket.
pub(super) struct IdPtr(pub(super) *mut rdma_cm_id);

// SAFETY: the ID is used under its socket's lock only (module contract).
unsafe impl Send for IdPtr {}

/// Where an rsocket is in its life.
pub(super) enum Kind {
    /// Made, maybe bound.
    Idle(IdPtr),
    Listening(super::rsocket_listen::Listener),
    Connected(Box<Endpoint>),
    /// A connect failed (`SO_ERROR` tells why); nothing left.
    Failed,
}

impl Drop for IdPtr {
    fn drop(&mut self) {
        if !self.0.is_null() {
            destroy_id(self.0);
        }
    }
}

/// One rsocket's state.
pub(super) struct State {
    pub(super) kind: Kind,
    pub(super) cfg: Config,
    pub(super) fd_flags: c_int,
    /// Socket options set (bit = option name), as getsockopt reports them.
    pub(super) so_opts: u64,
    pub(super) tcp_opts: u64,
    /// The pending `SO_ERROR`.
    pub(super) err: c_int,
}

pub(super) struct RSocket {
    fd: OwnedFd,
    st: Mutex<State>,
}

impl RSocket {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn fd(&self) -> c_int {
        self.fd.as_raw_fd()
    }
}

fn table() -> MutexGuard<'static, HashMap<c_int, Arc<RSocket>>> {
    static T: OnceLock<Mutex<HashMap<c_int, Arc<RSocket>>>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The rsocket behind descriptor `fd`, if it is one.
pub(super) fn lookup(fd: c_int) -> Option<Arc<RSocket>> {
    table().get(&fd).cloned()
}

/// As [`lookup`], EBADF if `fd` is no rsocket.
pub(super) fn get(fd: c_int) -> Result<Arc<RSocket>, c_int> {
    lookup(fd).ok_or(libc::EBADF)
}

pub(super) fn new_fd(flags: c_int) -> Result<OwnedFd, c_int> {
    // SAFETY: a plain syscall; the descriptor is owned at once.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | flags) };
    if fd < 0 {
        return Err(errno_now());
    }
    // SAFETY: just made, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Registers a new rsocket; its descriptor number.
pub(super) fn insert(kind: Kind, cfg: Config, fd_flags: c_int) -> Result<c_int, c_int> {
    let s = Arc::new(RSocket {
        fd: new_fd(0)?,
        st: Mutex::new(State {
            kind,
            cfg,
            fd_flags,
            so_opts: 0,
            tcp_opts: 0,
            err: 0,
        }),
    });
    let n = s.fd();
    table().insert(n, s);
    Ok(n)
}

/// An int-returning call's result as C sees it.
pub(super) fn ret(r: Result<c_int, c_int>) -> c_int {
    match r {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The current settings' defaults (rdma-core's, or what the files under
/// rdma-core's configuration directory would change: not read here).
fn default_cfg() -> Config {
    Config::default()
}

pub(super) unsafe extern "C" fn rsocket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    guard(-1, || {
        ret((|| {
            let stream =
                kind == libc::SOCK_STREAM && (protocol == 0 || protocol == libc::IPPROTO_TCP);
            if !(domain == libc::AF_INET || domain == libc::AF_INET6) || !stream {
                return Err(libc::ENOTSUP);
            }
            let mut id = std::ptr::null_mut();
            // SAFETY: a synchronous ID into `id`.
            let rc = unsafe {
                rdmacm::ferroce_rdma_create_id(
                    std::ptr::null_mut(),
                    &mut id,
                    std::ptr::null_mut(),
                    RDMA_PS_TCP,
                )
            };
            if rc != 0 {
                return Err(errno_now());
            }
            insert(Kind::Idle(IdPtr(id)), default_cfg(), 0)
        })())
    })
}

pub(super) unsafe extern "C" fn rbind(fd: c_int, addr: *const c_void, _len: u32) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let st = s.lock();
            let Kind::Idle(id) = &st.kind else {
                return Err(libc::EINVAL);
            };
            // SAFETY: a live ID; the caller's sockaddr (module contract).
            if unsafe { rdmacm_conn::ferroce_rdma_bind_addr(id.0, addr.cast_mut()) } != 0 {
                return Err(errno_now());
            }
            Ok(0)
        })())
    })
}

pub(super) fn conn_param(data: &[u8; ConnData::LEN]) -> rdma_conn_param {
    rdma_conn_param {
        private_data: data.as_ptr().cast(),
        private_data_len: ConnData::LEN as u8,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    }
}

/// poll(2) for POLLIN on one descriptor, at most `ms`.
pub(super) fn wait_readable(fd: c_int, ms: c_int) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
}

pub(super) unsafe extern "C" fn rconnect(fd: c_int, addr: *const c_void, _len: u32) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let mut st = s.lock();
            let id = match &mut st.kind {
                Kind::Idle(id) => std::mem::replace(&mut id.0, std::ptr::null_mut()),
                Kind::Connected(_) => return Err(libc::EISCONN),
                _ => return Err(libc::EINVAL),
            };
            let cfg = st.cfg;
            match connect(id, addr, cfg) {
                Ok(ep) => {
                    st.kind = Kind::Connected(Box::new(ep));
                    Ok(0)
                }
                Err(e) => {
                    st.kind = Kind::Failed;
                    st.err = e;
                    Err(e)
                }
            }
        })())
    })
}

/// Resolves, sets up the endpoint and connects `id` (which it owns).
fn connect(id: *mut rdma_cm_id, addr: *const c_void, cfg: Config) -> Result<Endpoint, c_int> {
    // SAFETY: a live ID; the caller's sockaddr (module contract).
    let resolved = unsafe {
        rdmacm_conn::ferroce_rdma_resolve_addr(
            id,
            std::ptr::null_mut(),
            addr.cast_mut(),
            RESOLVE_MS,
        ) == 0
            && rdmacm_conn::ferroce_rdma_resolve_route(id, RESOLVE_MS) == 0
    };
    if !resolved {
        let e = errno_now();
        destroy_id(id);
        return Err(e);
    }
    let mut ep = Endpoint::new(id, cfg)?;
    let mine = ep.conn_data().encode();
    let mut param = conn_param(&mine);
    // SAFETY: a live ID and valid parameters.
    if unsafe { rdmacm_conn::ferroce_rdma_connect(id, &mut param) } != 0 {
        return Err(errno_now());
    }
    // SAFETY: the connect's event, held on the ID.
    let peer = unsafe {
        let ev = (*id).event;
        if ev.is_null() {
            None
        } else {
            let c = (*ev).param.conn;
            if c.private_data.is_null() {
                None
            } else {
                ConnData::decode(std::slice::from_raw_parts(
                    c.private_data.cast::<u8>(),
                    c.private_data_len.into(),
                ))
            }
        }
    };
    let peer = peer.ok_or(libc::ENOTSUP)?;
    ep.accept_peer(&peer);
    Ok(ep)
}

pub(super) unsafe extern "C" fn rshutdown(fd: c_int, how: c_int) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            shutdown(&s, how);
            Ok(0)
        })())
    })
}

/// Closes directions of a connected rsocket, telling the peer.
fn shutdown(s: &RSocket, how: c_int) {
    let ctrl = {
        let mut st = s.lock();
        let Kind::Connected(ep) = &mut st.kind else {
            return;
        };
        let f = &mut ep.stream.flags;
        if !f.connected {
            return;
        }
        match how {
            libc::SHUT_RDWR => {
                f.readable = false;
                f.writable = false;
                Ctrl::Disconnect
            }
            libc::SHUT_WR => {
                f.writable = false;
                if f.readable {
                    Ctrl::Shutdown
                } else {
                    Ctrl::Disconnect
                }
            }
            _ => {
                f.readable = false;
                if f.writable {
                    return;
                }
                Ctrl::Disconnect
            }
        }
    };
    let sent = super::rsocket_io::wait_conn(s, false, Some(CLOSE_DRAIN), |ep| {
        if !ep.stream.ctrl_ready() {
            return None;
        }
        Some(match ep.stream.ctrl(ctrl) {
            Some(m) => ep.post_ctrl(
                &crate::rsocket::stream::CtrlPost {
                    msg: m,
                    write: None,
                },
                0,
            ),
            None => Ok(()),
        })
    });
    if let Ok(Ok(())) = sent {
        let drained = super::rsocket_io::wait_conn(s, false, Some(CLOSE_DRAIN), |ep| {
            ep.stream.all_sends_done().then_some(())
        });
        if drained.is_err() {
            tracing::debug!("rsocket: closing with sends not completed");
        }
    }
}

pub(super) unsafe extern "C" fn rclose(fd: c_int) -> c_int {
    guard(-1, || {
        let Some(s) = table().remove(&fd) else {
            set_errno(libc::EBADF);
            return -1;
        };
        shutdown(&s, libc::SHUT_RDWR);
        let kind = std::mem::replace(&mut s.lock().kind, Kind::Failed);
        drop(kind);
        0
    })
}

/// Copies a socket address out as getsockname(2) does.
///
/// # Safety
/// `addr` holds `*len` bytes; `len` is valid.
unsafe fn copy_addr(
    storage: &sockaddr_storage,
    addr: *mut c_void,
    len: *mut u32,
) -> Result<c_int, c_int> {
    if addr.is_null() || len.is_null() {
        return Err(libc::EFAULT);
    }
    let family = u16::from_ne_bytes([storage.bytes[0], storage.bytes[1]]);
    let full = if c_int::from(family) == libc::AF_INET6 {
        std::mem::size_of::<libc::sockaddr_in6>()
    } else {
        std::mem::size_of::<libc::sockaddr_in>()
    };
    // SAFETY: module contract.
    unsafe {
        let n = full.min(*len as usize);
        std::ptr::copy_nonoverlapping(storage.bytes.as_ptr(), addr.cast::<u8>(), n);
        *len = full as u32;
    }
    Ok(0)
}

/// The ID of a rsocket (None: it has none, as after a failed connect).
fn id_of(st: &State) -> Option<*mut rdma_cm_id> {
    match &st.kind {
        Kind::Idle(id) => Some(id.0),
        Kind::Connected(ep) => Some(ep.id),
        _ => None,
    }
}

/// # Safety
/// As `getpeername(2)`.
pub(super) unsafe extern "C" fn rgetpeername(fd: c_int, addr: *mut c_void, len: *mut u32) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let st = s.lock();
            let id = id_of(&st).filter(|p| !p.is_null()).ok_or(libc::ENOTCONN)?;
            // SAFETY: a live ID; module contract.
            unsafe { copy_addr(&(*id).route.addr.dst_storage, addr, len) }
        })())
    })
}

pub(super) unsafe extern "C" fn rgetsockname(fd: c_int, addr: *mut c_void, len: *mut u32) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let st = s.lock();
            if let Kind::Listening(l) = &st.kind {
                // SAFETY: module contract.
                return unsafe { copy_addr(&l.local, addr, len) };
            }
            let id = id_of(&st).filter(|p| !p.is_null()).ok_or(libc::EINVAL)?;
            // SAFETY: a live ID; module contract.
            unsafe { copy_addr(&(*id).route.addr.src_storage, addr, len) }
        })())
    })
}
