//! Sleeping until a descriptor is readable and waking a sleeper: eventfd,
//! `ppoll` and epoll. Every `unsafe` block says why it is sound.

use std::io;
use std::os::fd::RawFd;

/// A non-blocking eventfd, for waking a thread that sleeps in [`wait`].
pub(crate) fn eventfd() -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative result is a new fd
    // that nothing else owns.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor owned by nothing else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Adds 1 to an eventfd's counter (which makes it readable).
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes the 8 bytes of a live u64, as eventfd expects. A full
    // counter (EAGAIN) already means "readable", so the result is ignored.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), size_of::<u64>()) };
}

/// Resets an eventfd's counter and returns what it held (0 if it was not
/// readable).
pub(crate) fn eventfd_drain(fd: RawFd) -> u64 {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64; a non-readable fd
    // gives EAGAIN (it is non-blocking), which leaves `v` 0.
    let n = unsafe { libc::read(fd, (&raw mut v).cast(), size_of::<u64>()) };
    if n == size_of::<u64>() as isize { v } else { 0 }
}

/// Sleeps until one of `fds` is readable or `timeout` has passed. A
/// negative fd is ignored (as poll(2) does). Returns whether one is
/// readable.
pub(crate) fn wait(fds: [RawFd; 2], timeout: std::time::Duration) -> io::Result<bool> {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfds` and `ts` are live for the call and their sizes are
    // what is passed; no signal mask is given.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &raw const ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        return Ok(false);
    }
    Ok(rc > 0)
}

/// A new epoll instance: one descriptor that turns readable when any of
/// the descriptors added to it ([`epoll_add`]) is readable, so that a
/// thread sleeping in [`wait`] on it wakes for all of them.
pub(crate) fn epoll_new() -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: epoll_create1 takes no pointers; a non-negative result is a
    // new fd that nothing else owns.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor owned by nothing else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Watches `fd` for readability in epoll instance `ep` (level-triggered).
pub(crate) fn epoll_add(ep: RawFd, fd: RawFd) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: fd as u64,
    };
    // SAFETY: `ev` is a live epoll_event for the call; the kernel copies it.
    let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &raw mut ev) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Stops watching `fd` in `ep` (closing `fd` would too; this is for
/// descriptors that stay open).
pub(crate) fn epoll_del(ep: RawFd, fd: RawFd) -> io::Result<()> {
    // SAFETY: EPOLL_CTL_DEL ignores the event pointer (null allowed since
    // Linux 2.6.9).
    let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The index of interface `name` (`if_nametoindex`).
pub(crate) fn if_index(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with a NUL"))?;
    // SAFETY: `c` is a live NUL-terminated string for the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i)
}
