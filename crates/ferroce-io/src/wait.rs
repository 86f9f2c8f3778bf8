//! Sleeping without missing packets: a thread with nothing to do waits in
//! the kernel until the receive socket has a datagram, another thread wakes
//! it, or a timeout passes (the next timer), instead of sleeping blind.
//! [`EventFd`] is the same wake-up as a descriptor of its own, for
//! notifications other code (epoll, mio, tokio) watches.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};

use crate::sys;

/// Sleeps on a socket and a wake-up event.
#[derive(Debug)]
pub struct Sleeper {
    event: OwnedFd,
}

impl Sleeper {
    pub fn new() -> io::Result<Self> {
        Ok(Self { event: eventfd()? })
    }

    /// Ends the current or next [`sleep_on`](Self::sleep_on) or
    /// [`nap`](Self::nap) at once.
    pub fn wake(&self) {
        eventfd_signal(self.event.as_fd());
    }

    /// Waits until `socket` is readable, [`wake`](Self::wake) is called
    /// (before or during the wait), or `timeout` passes.
    pub fn sleep_on(&self, socket: BorrowedFd<'_>, timeout: Duration) -> io::Result<()> {
        let event = self.event.as_fd();
        wait(&[socket, event], timeout)?;
        eventfd_drain(event);
        Ok(())
    }

    /// [`sleep_on`](Self::sleep_on) with a raw descriptor, which must stay
    /// open for the call.
    #[deprecated(note = "use `Sleeper::sleep_on` with a `BorrowedFd` (e.g. `UdpBackend::wait_fd`)")]
    pub fn sleep(&self, socket: RawFd, timeout: Duration) -> io::Result<()> {
        self.sleep_on(sys::borrow_raw(socket), timeout)
    }

    /// Waits until [`wake`](Self::wake) is called (before or during the
    /// wait) or `timeout` passes, whatever the sockets do.
    pub fn nap(&self, timeout: Duration) -> io::Result<()> {
        let event = self.event.as_fd();
        wait(&[event], timeout)?;
        eventfd_drain(event);
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
        Ok(Self { fd: eventfd()? })
    }

    /// Adds one to the counter, which makes the descriptor readable.
    pub fn signal(&self) {
        eventfd_signal(self.fd.as_fd());
    }

    /// Reads and resets the counter: 0 if it was not readable.
    pub fn take(&self) -> u64 {
        eventfd_drain(self.fd.as_fd())
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

/// How long the calling thread has waited on a run queue for a CPU
/// (Linux's `/proc/thread-self/schedstat`, second field): a thread that
/// spins reads it to learn whether it is keeping another thread from its
/// core (the wait grows only while a runnable thread waits behind others).
#[derive(Debug)]
pub struct RunQueueWait(std::fs::File);

impl RunQueueWait {
    /// Opens the calling thread's counter; `None` where the kernel does not
    /// keep it (no `CONFIG_SCHED_INFO`).
    pub fn of_this_thread() -> Option<Self> {
        std::fs::File::open("/proc/thread-self/schedstat")
            .ok()
            .map(Self)
    }

    /// Nanoseconds waited so far, or `None` if the counter cannot be read.
    pub fn waited_ns(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }
}

/// Lets the calling thread's timed waits end at most `slack` late (Linux
/// lets them run late by 50 µs by default, to batch wake-ups). Best effort:
/// on a kernel that refuses, waits keep the default.
pub fn set_timer_slack(slack: Duration) {
    let ns = std::num::NonZeroU64::new(slack.as_nanos().max(1) as u64);
    if let Err(e) = rustix::thread::set_current_timer_slack(ns) {
        tracing::debug!(error = %e, "timer slack not set");
    }
}

/// Waits until `fd` is readable or `timeout` passes (poll(2)); returns
/// whether it is readable. An interrupted wait returns `false` early.
pub fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    wait(&[fd], timeout)
}

/// A non-blocking eventfd.
fn eventfd() -> io::Result<OwnedFd> {
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
    )?)
}

/// Adds 1 to an eventfd's counter (which makes it readable). A full
/// counter (EAGAIN) already means "readable", so the result is ignored.
fn eventfd_signal(fd: BorrowedFd<'_>) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// Resets an eventfd's counter and returns what it held (0 if it was not
/// readable: the descriptor is non-blocking).
fn eventfd_drain(fd: BorrowedFd<'_>) -> u64 {
    let mut v = [0; 8];
    match rustix::io::read(fd, &mut v) {
        Ok(8) => u64::from_ne_bytes(v),
        _ => 0,
    }
}

/// Sleeps until one of `fds` is readable or `timeout` has passed (ppoll);
/// returns whether one is readable. A signal ends the wait early (false).
fn wait(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<bool> {
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|&fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
        .collect();
    let ts = Timespec {
        tv_sec: timeout.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    match rustix::event::poll(&mut pfds, Some(&ts)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
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
