//! rsockets' data calls: `rsend`/`rwrite`/`rsendto`/`rsendmsg`/`rwritev`,
//! `rrecv`/`rread`/`rrecvfrom`/`rrecvmsg`/`rreadv`, and the direct writes
//! (`riomap`, `riounmap`, `riowrite`). Every call waits, unless the
//! rsocket is O_NONBLOCK or MSG_DONTWAIT is given, in [`wait_conn`]: it
//! polls the CQ (for 10 us, as librdmacm), then sleeps in poll(2) on the
//! completion channel once the CQ is armed, with the socket's lock released.
//!
//! As librdmacm's: `rrecvmsg`/`rreadv` fill only the first buffer, control
//! messages are ENOTSUP, a peer's orderly close reads as end of file, and
//! a send on a connection closed for writing fails with ECONNRESET.
//!
//! Safety contract: buffers and iovecs are the application's, valid for
//! the lengths given (as for send(2)/recv(2)); a `riomap`ped buffer stays
//! valid until `riounmap` or `rclose` (as `ibv_reg_mr`'s).

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use super::rsocket::{Kind, RSocket, get, ret, wait_readable};
use super::rsocket_ep::{Endpoint, Region, Table, errno_now};
use super::{guard, memory, set_errno};
use crate::abi::*;
use crate::rsocket::stream::{Chunk, FIRST_TRANSFER};
use crate::rsocket::wire::{IoMapEntry, Sge};

/// The longest single sleep of a wait: a bound, in case an event is
/// consumed by another thread waiting on the same rsocket.
const WAIT_STEP_MS: c_int = 100;
/// How long a wait polls the CQ before it sleeps (librdmacm's default
/// `polling_time`).
const POLL_TIME: Duration = Duration::from_micros(10);

/// A buffer the application mapped with `riomap`.
pub(super) struct IoMap {
    /// Its entry in the peer's iomap table (None: a local mapping).
    index: Option<u32>,
    mr: *mut ibv_mr,
    offset: u64,
    sent: bool,
}

impl Drop for IoMap {
    fn drop(&mut self) {
        // SAFETY: registered by riomap, deregistered once.
        unsafe { memory::ibv_dereg_mr(self.mr) };
    }
}

/// Runs `f` on the connection until it returns Some, waiting for
/// completions between tries: EAGAIN at once if `nonblock`, ETIMEDOUT
/// after `limit`, ENOTCONN if the rsocket has no connection.
pub(super) fn wait_conn<T>(
    s: &RSocket,
    nonblock: bool,
    limit: Option<Duration>,
    mut f: impl FnMut(&mut Endpoint) -> Option<T>,
) -> Result<T, c_int> {
    let end = limit.map(|l| Instant::now() + l);
    let spin_until = Instant::now() + POLL_TIME;
    loop {
        let mut st = s.lock();
        let Kind::Connected(ep) = &mut st.kind else {
            return Err(libc::ENOTCONN);
        };
        ep.progress();
        if let Some(t) = f(ep) {
            return Ok(t);
        }
        if nonblock {
            return Err(libc::EAGAIN);
        }
        let now = Instant::now();
        if end.is_some_and(|e| now >= e) {
            return Err(libc::ETIMEDOUT);
        }
        if now < spin_until {
            continue;
        }
        if !ep.armed() {
            ep.arm();
            continue;
        }
        let fd = ep.wait_fd();
        drop(st);
        wait_readable(fd, WAIT_STEP_MS);
    }
}

fn nonblocking(s: &RSocket, flags: c_int) -> bool {
    s.lock().fd_flags & libc::O_NONBLOCK != 0 || flags & libc::MSG_DONTWAIT != 0
}

/// Copies `len` bytes of `iov`, from byte `pos` on, into `r` at `off`.
fn stage(r: &Region, mut off: usize, iov: &[&[u8]], mut pos: usize, mut len: usize) {
    for b in iov {
        if len == 0 {
            break;
        }
        if pos >= b.len() {
            pos -= b.len();
            continue;
        }
        let n = (b.len() - pos).min(len);
        r.write(off, &b[pos..pos + n]);
        off += n;
        len -= n;
        pos = 0;
    }
}

/// Copies `c`'s bytes of `iov`, from byte `from` on, into the send buffer
/// and posts its WRITE: the bytes it carries. A failed post fails the
/// stream.
fn send_chunk(ep: &mut Endpoint, c: &Chunk, iov: &[&[u8]], from: usize) -> Result<usize, c_int> {
    let mut pos = from;
    for &(off, len) in &c.pieces {
        stage(&ep.sbuf, off as usize, iov, pos, len as usize);
        pos += len as usize;
    }
    if let Err(e) = ep.post_chunk(c) {
        ep.stream.fail(e);
        return Err(e);
    }
    Ok(c.bytes() as usize)
}
/// Sends the iomap entries not yet sent; None if it must wait for room.
fn send_iomaps(ep: &mut Endpoint) -> Option<Result<(), c_int>> {
    while let Some(i) = ep.iomaps.iter().position(|m| m.index.is_some() && !m.sent) {
        if !ep.stream.can_send(&Table(&ep.table)) {
            return None;
        }
        let m = &ep.iomaps[i];
        // SAFETY: a live MR.
        let (addr, len, key) =
            unsafe { ((*m.mr).addr as u64, (*m.mr).length as u32, (*m.mr).rkey) };
        let e = IoMapEntry {
            offset: m.offset,
            sge: Sge {
                addr,
                key,
                length: len,
            },
        };
        let index = m.index.unwrap_or(0);
        let (msg, at, rkey) = ep.stream.iomap_write(index);
        if let Err(e) = ep.post_iomap(e, msg, at, rkey) {
            ep.stream.fail(e);
            return Some(Err(e));
        }
        ep.iomaps[i].sent = true;
    }
    Some(Ok(()))
}

/// Sends all of `iov` (or, nonblocking, what fits): the bytes sent.
fn send_iov(fd: c_int, iov: &[&[u8]], flags: c_int) -> Result<usize, c_int> {
    let s = get(fd)?;
    let total: usize = iov.iter().map(|b| b.len()).sum();
    let nonblock = nonblocking(&s, flags);
    let (mut sent, mut olen) = (0usize, FIRST_TRANSFER);
    let r = wait_conn(&s, nonblock, None, |ep| {
        if !ep.stream.flags.writable {
            return Some(Err(libc::ECONNRESET));
        }
        match send_iomaps(ep) {
            None => return None,
            Some(Err(e)) => return Some(Err(e)),
            Some(Ok(())) => {}
        }
        while sent < total {
            let mut t = Table(&ep.table);
            if !ep.stream.can_send(&t) {
                return None;
            }
            let c = ep.stream.next_chunk(total - sent, &mut olen, &mut t);
            match send_chunk(ep, &c, iov, sent) {
                Ok(n) => sent += n,
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(()))
    });
    match r {
        Ok(Ok(())) => Ok(total),
        Ok(Err(e)) | Err(e) if sent == 0 || total == 0 => Err(e),
        _ => Ok(sent),
    }
}

/// Receives into `buf`: the bytes received (0: end of stream).
fn recv_into(fd: c_int, buf: &mut [u8], flags: c_int) -> Result<usize, c_int> {
    let s = get(fd)?;
    let nonblock = nonblocking(&s, flags);
    let peek = flags & libc::MSG_PEEK != 0;
    let waitall = flags & libc::MSG_WAITALL != 0 && !peek;
    let mut got = 0;
    let r = wait_conn(&s, nonblock, None, |ep| {
        if ep.stream.have_data() {
            for (off, n) in ep.stream.take(buf.len() - got, peek) {
                ep.rbuf.read(off as usize, &mut buf[got..got + n as usize]);
                got += n as usize;
            }
            if !peek {
                ep.give_credits();
            }
            if waitall && got < buf.len() && ep.stream.flags.readable {
                return None;
            }
            Some(())
        } else if !ep.stream.flags.readable || buf.is_empty() {
            Some(())
        } else {
            None
        }
    });
    match r {
        Ok(()) => Ok(got),
        Err(_) if got > 0 => Ok(got),
        Err(e) => Err(e),
    }
}

fn ret_size(r: Result<usize, c_int>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The application's buffer as a slice (empty for NULL or 0 bytes).
///
/// # Safety
/// `buf` holds `len` bytes (module contract).
unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> &'a [u8] {
    if buf.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: module contract.
    unsafe { std::slice::from_raw_parts(buf.cast(), len) }
}

/// # Safety
/// As [`bytes`], writable.
unsafe fn bytes_mut<'a>(buf: *mut c_void, len: usize) -> &'a mut [u8] {
    if buf.is_null() || len == 0 {
        return &mut [];
    }
    // SAFETY: module contract.
    unsafe { std::slice::from_raw_parts_mut(buf.cast(), len) }
}

/// # Safety
/// `iov` holds `n` valid iovecs (module contract).
unsafe fn iovecs<'a>(iov: *const libc::iovec, n: c_int) -> Result<Vec<&'a [u8]>, c_int> {
    if n < 0 || (iov.is_null() && n > 0) {
        return Err(libc::EINVAL);
    }
    // SAFETY: module contract.
    let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    // SAFETY: module contract.
    Ok(v.iter()
        .map(|i| unsafe { bytes(i.iov_base, i.iov_len) })
        .collect())
}

pub(super) unsafe extern "C" fn rsend(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> isize {
    guard(-1, || {
        // SAFETY: module contract: `buf` holds `len` readable bytes.
        let data = unsafe { bytes(buf, len) };
        ret_size(send_iov(fd, &[data], flags))
    })
}

pub(super) unsafe extern "C" fn rwrite(fd: c_int, buf: *const c_void, len: usize) -> isize {
    // SAFETY: module contract.
    unsafe { rsend(fd, buf, len, 0) }
}

/// `rsendto`: a stream rsocket is connected, so an address is EISCONN.
pub(super) unsafe extern "C" fn rsendto(
    fd: c_int,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    to: *const c_void,
    tolen: u32,
) -> isize {
    if !to.is_null() || tolen != 0 {
        set_errno(libc::EISCONN);
        return -1;
    }
    // SAFETY: module contract.
    unsafe { rsend(fd, buf, len, flags) }
}

pub(super) unsafe extern "C" fn rwritev(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    guard(-1, || {
        // SAFETY: module contract.
        ret_size(unsafe { iovecs(iov, n) }.and_then(|v| send_iov(fd, &v, 0)))
    })
}

pub(super) unsafe extern "C" fn rsendmsg(
    fd: c_int,
    msg: *const libc::msghdr,
    flags: c_int,
) -> isize {
    guard(-1, || {
        // SAFETY: module contract.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return ret_size(Err(libc::EINVAL));
        };
        if !m.msg_control.is_null() && m.msg_controllen != 0 {
            return ret_size(Err(libc::ENOTSUP));
        }
        // SAFETY: module contract.
        ret_size(
            unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }
                .and_then(|v| send_iov(fd, &v, flags)),
        )
    })
}

pub(super) unsafe extern "C" fn rrecv(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
) -> isize {
    guard(-1, || {
        // SAFETY: module contract: `buf` holds `len` writable bytes.
        let into = unsafe { bytes_mut(buf, len) };
        ret_size(recv_into(fd, into, flags))
    })
}

pub(super) unsafe extern "C" fn rread(fd: c_int, buf: *mut c_void, len: usize) -> isize {
    // SAFETY: module contract.
    unsafe { rrecv(fd, buf, len, 0) }
}

pub(super) unsafe extern "C" fn rrecvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    from: *mut c_void,
    fromlen: *mut u32,
) -> isize {
    // SAFETY: module contract.
    let n = unsafe { rrecv(fd, buf, len, flags) };
    if n > 0 && !from.is_null() {
        // SAFETY: module contract.
        unsafe { super::rsocket::rgetpeername(fd, from, fromlen) };
    }
    n
}

pub(super) unsafe extern "C" fn rreadv(fd: c_int, iov: *const libc::iovec, n: c_int) -> isize {
    if n < 1 || iov.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: module contract; only the first buffer, as librdmacm.
    unsafe { rrecv(fd, (*iov).iov_base, (*iov).iov_len, 0) }
}

pub(super) unsafe extern "C" fn rrecvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize {
    // SAFETY: module contract.
    let Some(m) = (unsafe { msg.as_ref() }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if !m.msg_control.is_null() && m.msg_controllen != 0 {
        set_errno(libc::ENOTSUP);
        return -1;
    }
    if m.msg_iovlen < 1 || m.msg_iov.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: module contract.
    unsafe { rrecv(fd, (*m.msg_iov).iov_base, (*m.msg_iov).iov_len, flags) }
}

/// `riomap`: registers `buf`; with PROT_WRITE the peer may `riowrite` it
/// (its entry goes out with the next send). The mapping's offset.
pub(super) unsafe extern "C" fn riomap(
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    prot: c_int,
    _flags: c_int,
    offset: i64,
) -> i64 {
    guard(-1, || {
        let r = (|| {
            let s = get(fd)?;
            let mut st = s.lock();
            let Kind::Connected(ep) = &mut st.kind else {
                return Err(libc::EINVAL);
            };
            if prot & !libc::PROT_WRITE != 0 {
                return Err(libc::EINVAL);
            }
            let write = prot & libc::PROT_WRITE != 0;
            let index = if write {
                let n = ep.stream.remote_iomap.length;
                let free = (0..n).find(|i| !ep.iomaps.iter().any(|m| m.index == Some(*i)));
                Some(free.ok_or(libc::ENOMEM)?)
            } else {
                None
            };
            let access = ACCESS_LOCAL_WRITE | if write { ACCESS_REMOTE_WRITE } else { 0 };
            // SAFETY: the ID's PD; the application's buffer (module contract).
            let mr = unsafe { memory::ibv_reg_mr((*ep.id).pd, buf, len, access as c_int) };
            if mr.is_null() {
                return Err(errno_now());
            }
            let offset = if offset == -1 { buf as i64 } else { offset };
            ep.iomaps.push(IoMap {
                index,
                mr,
                offset: offset as u64,
                sent: false,
            });
            Ok(offset)
        })();
        r.unwrap_or_else(|e| {
            set_errno(e);
            -1
        })
    })
}

pub(super) unsafe extern "C" fn riounmap(fd: c_int, buf: *mut c_void, len: usize) -> c_int {
    guard(-1, || {
        ret((|| {
            let s = get(fd)?;
            let mut st = s.lock();
            let Kind::Connected(ep) = &mut st.kind else {
                return Err(libc::EINVAL);
            };
            // SAFETY: live MRs.
            let at = ep
                .iomaps
                .iter()
                .position(|m| unsafe { (*m.mr).addr == buf && (*m.mr).length == len });
            ep.iomaps.remove(at.ok_or(libc::EINVAL)?);
            Ok(0)
        })())
    })
}

/// `riowrite`: writes into what the peer mapped at `offset` (RDMA WRITE,
/// no message): the bytes written.
pub(super) unsafe extern "C" fn riowrite(
    fd: c_int,
    buf: *const c_void,
    count: usize,
    offset: i64,
    flags: c_int,
) -> usize {
    guard(usize::MAX, || {
        // SAFETY: module contract.
        let data = unsafe { bytes(buf, count) };
        ret_size(io_write(fd, data, offset as u64, flags)) as usize
    })
}

fn io_write(fd: c_int, data: &[u8], offset: u64, flags: c_int) -> Result<usize, c_int> {
    let s = get(fd)?;
    let nonblock = nonblocking(&s, flags);
    let (mut done, mut olen) = (0usize, FIRST_TRANSFER);
    let r = wait_conn(&s, nonblock, None, |ep| {
        if !ep.stream.flags.writable {
            return Some(Err(libc::ECONNRESET));
        }
        match send_iomaps(ep) {
            None => return None,
            Some(Err(e)) => return Some(Err(e)),
            Some(Ok(())) => {}
        }
        while done < data.len() {
            let t = Table(&ep.table);
            let at = offset + done as u64;
            let found = (0..usize::from(ep.stream.cfg.iomap_size))
                .map(|i| t.iomap(i))
                .find(|e| {
                    e.sge.length > 0 && at >= e.offset && at < e.offset + u64::from(e.sge.length)
                });
            let Some(e) = found else {
                return Some(Ok(()));
            };
            if !ep.stream.can_send(&t) {
                return None;
            }
            let room = (e.offset + u64::from(e.sge.length) - at) as u32;
            let remote = (e.sge.addr + at - e.offset, e.sge.key, room);
            let c = ep.stream.next_direct(data.len() - done, &mut olen, remote);
            match send_chunk(ep, &c, &[data], done) {
                Ok(n) => done += n,
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(()))
    });
    match r {
        Ok(Ok(())) => Ok(done),
        Ok(Err(e)) | Err(e) if done == 0 => Err(e),
        _ => Ok(done),
    }
}
