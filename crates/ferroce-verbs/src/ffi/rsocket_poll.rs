//! `rpoll` and `rselect` over a mix of rsockets and other descriptors,
//! `rfcntl` (F_GETFL/F_SETFL: O_NONBLOCK), `rsetsockopt`/`rgetsockopt`.
//!
//! `rpoll` first looks at every rsocket (polling its CQ) and, with poll(2)
//! and no wait, at the other descriptors; if none is ready it arms each
//! rsocket's CQ, looks at it once more (a completion between the first
//! look and the arm fires no event), and sleeps in one poll(2) over the
//! other descriptors and the rsockets' completion channels (a listener:
//! its backlog's eventfd), then looks again. Options are those librdmacm keeps: sizes (SO_SNDBUF,
//! SO_RCVBUF, and SOL_RDMA's queue, inline and iomap sizes) apply to
//! connections made after; the rest are remembered and reported.
//! SO_KEEPALIVE is accepted and reported, and no keepalive is sent.
//! TCP_INFO (which iperf3 reads) is all zeros: no TCP runs underneath.
//!
//! Safety contract: `pollfd` arrays, `fd_set`s and option buffers are the
//! application's, valid for the counts and lengths given. `rfcntl` is
//! variadic in C; its one optional argument is read as the third integer
//! argument, where the x86-64 and AArch64 Linux calling conventions put it.

use std::ffi::{c_int, c_long, c_void};
use std::time::{Duration, Instant};

use super::rsocket::{Kind, RSocket, get, lookup, ret};
use super::rsocket_ep::Table;
use super::{guard, set_errno};

/// `SOL_RDMA` and its option names (rsocket.h).
const SOL_RDMA: c_int = 0x10000;
const RDMA_SQSIZE: c_int = 0;
const RDMA_RQSIZE: c_int = 1;
const RDMA_INLINE: c_int = 2;
const RDMA_IOMAPSIZE: c_int = 3;
/// Queue sizes are at most this.
const QP_MAX_SIZE: u32 = 0xFFFE;
/// The largest `struct tcp_info` that TCP_INFO fills (with zeros).
const TCP_INFO_LEN: usize = 512;
/// What TCP_MAXSEG reports (librdmacm's value without a path record).
const MAX_SEG: c_int = 2048;

/// Arm-and-look rounds [`rs_events`] makes at most while each look takes
/// the event its arm fired (completions keep coming); past it, the caller
/// sleeps briefly instead of on the channel.
const REARM_MAX: usize = 16;

/// The events of one rsocket that are ready, and the descriptor to sleep
/// on for more: `Some((fd, armed))`, where `armed` says a completion from
/// now on makes `fd` readable (`arm` asked for it and it held).
fn rs_events(s: &RSocket, events: i16, arm: bool) -> (i16, Option<(c_int, bool)>) {
    let mut st = s.lock();
    match &mut st.kind {
        Kind::Connected(ep) => {
            ep.progress();
            let mut r = ready(ep, events);
            // A completion between the look above and the arm fires no
            // event: look once more after arming, and again while a look
            // takes the event its arm fired (rdma-core's rsockets do the
            // same: arm, then poll, before sleeping on the channel).
            for _ in 0..REARM_MAX {
                if !arm || r != 0 || ep.armed() {
                    break;
                }
                ep.arm();
                ep.progress();
                r = ready(ep, events);
            }
            (r, Some((ep.wait_fd(), ep.armed())))
        }
        Kind::Listening(l) => {
            let fd = std::os::fd::AsRawFd::as_raw_fd(&l.backlog.ready);
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, 0) };
            ((p.revents & events), Some((fd, true)))
        }
        Kind::Failed => (
            libc::POLLERR | (events & (libc::POLLIN | libc::POLLOUT)),
            None,
        ),
        Kind::Idle(_) => (0, None),
    }
}

/// The events of a connected rsocket that are ready now.
fn ready(ep: &super::rsocket_ep::Endpoint, events: i16) -> i16 {
    let f = ep.stream.flags;
    let mut r = 0;
    if events & libc::POLLIN != 0 && (ep.stream.have_data() || !f.readable) {
        r |= libc::POLLIN;
    }
    if events & libc::POLLOUT != 0 && ep.stream.can_send(&Table(&ep.table)) {
        r |= libc::POLLOUT;
    }
    // A peer's close shows once its data is read (as TCP's FIN, which
    // poll(2) reports as POLLIN until then).
    if !f.connected && !ep.stream.have_data() {
        r |= if f.error.is_some() {
            libc::POLLERR
        } else {
            libc::POLLHUP
        };
    }
    r
}

/// What one look at every descriptor found.
struct Look {
    /// Descriptors with events.
    ready: c_int,
    /// What to sleep on for more.
    waits: Vec<libc::pollfd>,
    /// An rsocket could not be left armed (its completions kept firing):
    /// its channel may stay quiet, so the sleep is short.
    unarmed: bool,
}

/// One look at every descriptor (arming the rsockets' CQs if `arm`).
fn check(fds: &mut [libc::pollfd], arm: bool) -> Look {
    let mut look = Look {
        ready: 0,
        waits: Vec::new(),
        unarmed: false,
    };
    for p in fds.iter_mut() {
        p.revents = match lookup(p.fd) {
            Some(s) => {
                let (r, w) = rs_events(&s, p.events, arm);
                if let Some((fd, armed)) = w {
                    look.unarmed |= !armed;
                    look.waits.push(libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    });
                }
                r
            }
            None => {
                let mut q = libc::pollfd {
                    fd: p.fd,
                    events: p.events,
                    revents: 0,
                };
                look.waits.push(q);
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut q, 1, 0) };
                q.revents
            }
        };
        if p.revents != 0 {
            look.ready += 1;
        }
    }
    look
}

/// The longest sleep beside an rsocket left unarmed (see [`Look`]).
const UNARMED_SLEEP_MS: c_int = 1;

fn poll_fds(fds: &mut [libc::pollfd], timeout: c_int) -> Result<c_int, c_int> {
    let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        let look = check(fds, false);
        if look.ready > 0 || timeout == 0 {
            return Ok(look.ready);
        }
        // Armed now: a completion from here on wakes the poll below.
        let mut look = check(fds, true);
        if look.ready > 0 {
            return Ok(look.ready);
        }
        let mut left = match end {
            None => -1,
            Some(e) => {
                let now = Instant::now();
                if now >= e {
                    return Ok(0);
                }
                (e - now).as_millis().min(c_int::MAX as u128) as c_int + 1
            }
        };
        if look.unarmed {
            left = if left < 0 {
                UNARMED_SLEEP_MS
            } else {
                left.min(UNARMED_SLEEP_MS)
            };
        }
        let waits = &mut look.waits;
        // SAFETY: `waits` is a valid pollfd array.
        let r = unsafe { libc::poll(waits.as_mut_ptr(), waits.len() as libc::nfds_t, left) };
        if r < 0 {
            let e = super::rsocket_ep::errno_now();
            if e != libc::EINTR {
                return Err(e);
            }
        }
    }
}

pub(super) unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    guard(-1, || {
        if fds.is_null() && nfds > 0 {
            set_errno(libc::EFAULT);
            return -1;
        }
        let fds: &mut [libc::pollfd] = if nfds == 0 {
            &mut []
        } else {
            // SAFETY: module contract.
            unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) }
        };
        ret(poll_fds(fds, timeout))
    })
}

/// # Safety
/// `set` is NULL or a valid fd_set.
unsafe fn is_set(set: *mut libc::fd_set, fd: c_int) -> bool {
    // SAFETY: module contract.
    !set.is_null() && unsafe { libc::FD_ISSET(fd, set) }
}

pub(super) unsafe extern "C" fn rselect(
    nfds: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    guard(-1, || {
        let mut fds = Vec::new();
        for fd in 0..nfds.clamp(0, libc::FD_SETSIZE as c_int) {
            let mut ev = 0;
            // SAFETY: module contract.
            unsafe {
                if is_set(read, fd) {
                    ev |= libc::POLLIN;
                }
                if is_set(write, fd) {
                    ev |= libc::POLLOUT;
                }
                if is_set(except, fd) {
                    ev |= libc::POLLPRI;
                }
            }
            if ev != 0 {
                fds.push(libc::pollfd {
                    fd,
                    events: ev,
                    revents: 0,
                });
            }
        }
        // SAFETY: module contract.
        let ms = match unsafe { timeout.as_ref() } {
            None => -1,
            Some(t) => (t.tv_sec * 1000 + t.tv_usec / 1000).clamp(0, c_int::MAX as i64) as c_int,
        };
        if let Err(e) = poll_fds(&mut fds, ms) {
            set_errno(e);
            return -1;
        }
        let mut n = 0;
        // SAFETY: module contract.
        unsafe {
            for set in [read, write, except] {
                if !set.is_null() {
                    libc::FD_ZERO(set);
                }
            }
            for p in &fds {
                let bad = p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0;
                for (set, bit) in [
                    (read, libc::POLLIN),
                    (write, libc::POLLOUT),
                    (except, libc::POLLPRI),
                ] {
                    if !set.is_null()
                        && p.events & bit != 0
                        && (p.revents & bit != 0 || (bad && bit != libc::POLLPRI))
                    {
                        libc::FD_SET(p.fd, set);
                        n += 1;
                    }
                }
            }
        }
        n
    })
}

pub(super) unsafe extern "C" fn rfcntl(fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let mut st = s.lock();
            match cmd {
                libc::F_GETFL => Ok(st.fd_flags | libc::O_RDWR),
                libc::F_SETFL => {
                    st.fd_flags = arg as c_int;
                    Ok(0)
                }
                _ => Err(libc::ENOTSUP),
            }
        })())
    })
}

/// # Safety
/// `v` holds `len` bytes.
unsafe fn int_opt(v: *const c_void, len: u32) -> Result<u32, c_int> {
    if v.is_null() || (len as usize) < std::mem::size_of::<c_int>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: module contract.
    Ok(unsafe { v.cast::<u32>().read_unaligned() })
}

pub(super) unsafe extern "C" fn rsetsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    v: *const c_void,
    len: u32,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let mut st = s.lock();
            // SAFETY: module contract.
            let val = || unsafe { int_opt(v, len) };
            match (level, name) {
                (libc::SOL_SOCKET, libc::SO_RCVBUF) => st.cfg.rbuf_size = (val()? << 1).max(4096),
                (libc::SOL_SOCKET, libc::SO_SNDBUF) => st.cfg.sbuf_size = (val()? << 1).max(4096),
                (
                    libc::SOL_SOCKET,
                    libc::SO_REUSEADDR | libc::SO_KEEPALIVE | libc::SO_OOBINLINE,
                ) => {
                    if val()? != 0 {
                        st.so_opts |= 1 << name;
                    } else {
                        st.so_opts &= !(1 << name);
                    }
                }
                (libc::SOL_SOCKET, libc::SO_LINGER) => {}
                (
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY
                    | libc::TCP_KEEPIDLE
                    | libc::TCP_KEEPINTVL
                    | libc::TCP_KEEPCNT,
                ) => {
                    if val()? != 0 {
                        st.tcp_opts |= 1 << name;
                    } else {
                        st.tcp_opts &= !(1 << name);
                    }
                }
                (libc::IPPROTO_TCP, libc::TCP_MAXSEG) | (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => {
                }
                (SOL_RDMA, RDMA_SQSIZE) => st.cfg.sq_size = val()?.clamp(16, QP_MAX_SIZE) as u16,
                (SOL_RDMA, RDMA_RQSIZE) => st.cfg.rq_size = val()?.clamp(16, QP_MAX_SIZE) as u16,
                (SOL_RDMA, RDMA_INLINE) => st.cfg.sq_inline = val()?.min(QP_MAX_SIZE) as u16,
                (SOL_RDMA, RDMA_IOMAPSIZE) => {
                    let v = crate::rsocket::wire::scale_to_value(
                        crate::rsocket::wire::value_to_scale(val()?.min(0xFFFF), 8),
                        8,
                    );
                    st.cfg.iomap_size = v as u16;
                }
                _ => {
                    tracing::debug!(level, name, "rsetsockopt: not an rsocket option");
                    return Err(libc::ENOTSUP);
                }
            }
            if let Kind::Listening(l) = &st.kind {
                *l.backlog.cfg.lock().unwrap_or_else(|p| p.into_inner()) = st.cfg;
            }
            Ok(0)
        })())
    })
}

pub(super) unsafe extern "C" fn rgetsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    v: *mut c_void,
    len: *mut u32,
) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            if (level, name) == (libc::IPPROTO_TCP, libc::TCP_INFO) {
                // No TCP underneath: every counter is zero.
                if v.is_null() || len.is_null() {
                    return Err(libc::EFAULT);
                }
                // SAFETY: module contract.
                unsafe {
                    std::ptr::write_bytes(v.cast::<u8>(), 0, (*len as usize).min(TCP_INFO_LEN))
                };
                return Ok(0);
            }
            let mut st = s.lock();
            let on = |bits: u64| c_int::from(bits & (1 << name) != 0);
            let value: c_int = match (level, name) {
                (libc::SOL_SOCKET, libc::SO_RCVBUF) => (st.cfg.rbuf_size >> 1) as c_int,
                (libc::SOL_SOCKET, libc::SO_SNDBUF) => (st.cfg.sbuf_size >> 1) as c_int,
                (
                    libc::SOL_SOCKET,
                    libc::SO_REUSEADDR | libc::SO_KEEPALIVE | libc::SO_OOBINLINE,
                ) => on(st.so_opts),
                (libc::SOL_SOCKET, libc::SO_ERROR) => {
                    let e = std::mem::take(&mut st.err);
                    match &st.kind {
                        Kind::Connected(ep) => ep.stream.flags.error.unwrap_or(e),
                        _ => e,
                    }
                }
                (
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY
                    | libc::TCP_KEEPIDLE
                    | libc::TCP_KEEPINTVL
                    | libc::TCP_KEEPCNT,
                ) => on(st.tcp_opts),
                (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => MAX_SEG,
                (SOL_RDMA, RDMA_SQSIZE) => st.cfg.sq_size.into(),
                (SOL_RDMA, RDMA_RQSIZE) => st.cfg.rq_size.into(),
                (SOL_RDMA, RDMA_INLINE) => st.cfg.sq_inline.into(),
                (SOL_RDMA, RDMA_IOMAPSIZE) => st.cfg.iomap_size.into(),
                _ => {
                    tracing::debug!(level, name, "rgetsockopt: not an rsocket option");
                    return Err(libc::ENOTSUP);
                }
            };
            if v.is_null() || len.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: module contract.
            unsafe {
                let n = (*len as usize).min(std::mem::size_of::<c_int>());
                std::ptr::copy_nonoverlapping((&raw const value).cast::<u8>(), v.cast::<u8>(), n);
                *len = n as u32;
            }
            Ok(0)
        })())
    })
}
