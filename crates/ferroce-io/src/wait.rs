//! Sleeping without missing packets: a thread with nothing to do waits in
//! the kernel until the receive socket has a datagram, another thread wakes
//! it, or a timeout passes (the next timer), instead of sleeping blind.
//! [`EventFd`] is the same wake-up as a descriptor of its own, for
//! notifications other code (epoll, mio, tokio) watches.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::sys;

/// Sleeps on a socket and a wake-up event.
#[derive(Debug)]
pub struct Sleeper {
    event: OwnedFd,
}

impl Sleeper {
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            event: sys::eventfd()?,
        })
    }

    /// Ends the current or next [`sleep`](Self::sleep) or
    /// [`nap`](Self::nap) at once.
    pub fn wake(&self) {
        sys::eventfd_signal(self.event.as_raw_fd());
    }

    /// Waits until `socket` is readable, [`wake`](Self::wake) is called
    /// (before or during the wait), or `timeout` passes.
    pub fn sleep(&self, socket: RawFd, timeout: Duration) -> io::Result<()> {
        let event = self.event.as_raw_fd();
        sys::wait([socket, event], timeout)?;
        sys::eventfd_drain(event);
        Ok(())
    }

    /// Waits until [`wake`](Self::wake) is called (before or during the
    /// wait) or `timeout` passes, whatever the sockets do.
    pub fn nap(&self, timeout: Duration) -> io::Result<()> {
        let event = self.event.as_raw_fd();
        // poll(2) ignores a negative descriptor.
        sys::wait([-1, event], timeout)?;
        sys::eventfd_drain(event);
        Ok(())
    }
}

/// A Linux eventfd: a counter that is readable while non-zero. Signalling
/// adds one; [`take`](Self::take) reads and resets it. Non-blocking, so
/// readiness-based event loops can watch it through [`AsFd`].
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            fd: sys::eventfd()?,
        })
    }

    /// Adds one to the counter, which makes the descriptor readable.
    pub fn signal(&self) {
        sys::eventfd_signal(self.fd.as_raw_fd());
    }

    /// Reads and resets the counter: 0 if it was not readable.
    pub fn take(&self) -> u64 {
        sys::eventfd_drain(self.fd.as_raw_fd())
    }

    /// Waits until the descriptor is readable or `timeout` passes; returns
    /// whether it is readable (it stays so: nothing is read).
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        readable(self.fd.as_fd(), timeout)
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Waits until `fd` is readable or `timeout` passes (poll(2)); returns
/// whether it is readable. An interrupted wait returns `false` early.
pub fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    sys::wait([fd.as_raw_fd(), -1], timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eventfd_is_readable_until_taken() {
        let e = EventFd::new().unwrap();
        assert!(!e.wait_readable(Duration::ZERO).unwrap());
        e.signal();
        e.signal();
        assert!(e.wait_readable(Duration::from_secs(1)).unwrap());
        assert_eq!(e.take(), 2);
        assert!(!e.wait_readable(Duration::from_millis(1)).unwrap());
        assert_eq!(e.take(), 0);
    }
}
