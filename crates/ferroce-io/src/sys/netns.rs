//! Moving the calling thread into another network namespace (`setns`), so
//! that the sockets it opens there (packet sockets, rtnetlink) belong to
//! that namespace and stay in it whichever thread uses them later. Used by
//! the raw backend's two-namespace tests.

use std::io;
use std::os::fd::AsRawFd;

/// Moves the calling thread (only it) into the network namespace that
/// `ns` (a `/run/netns/NAME` or `/proc/PID/ns/net` file) refers to.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn enter_netns(ns: &std::fs::File) -> io::Result<()> {
    // SAFETY: setns only reads its two integer arguments; `ns` is an open
    // file for the duration of the call.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
