//! Sleeping without missing packets: a thread with nothing to do waits in
//! the kernel until the receive socket has a datagram, another thread wakes
//! it, or a timeout passes (the next timer), instead of sleeping blind.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
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

    /// Ends the current or next [`sleep`](Self::sleep) at once.
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
}
