//! A raw descriptor lent for one call, for [`crate::Sleeper::sleep`]
//! (deprecated), which still takes one. The wake-up calls themselves
//! (eventfd, epoll, poll) go through rustix, in safe code.

use std::os::fd::{BorrowedFd, RawFd};

/// `fd` as a borrowed descriptor. The caller promises that `fd` is open
/// and stays open while the result is used (the deprecated
/// `Sleeper::sleep`'s contract: its descriptor is open for the call).
pub(crate) fn borrow_raw<'a>(fd: RawFd) -> BorrowedFd<'a> {
    // SAFETY: the caller's promise above; a closed or reused descriptor
    // makes the poll fail or wait on another file, never unsound memory.
    unsafe { BorrowedFd::borrow_raw(fd) }
}
