//! rdma_cm's calls that ferroce does not have, answered as librdmacm
//! answers a device without them (never a crash), and `rpoll`/`rselect`,
//! which librdmacm's examples call on ordinary descriptors.
//!
//! * ECE (`rdma_set_local_ece`, `rdma_get_remote_ece`, `rdma_reject_ece`)
//!   and SRQs made by rdma_cm (`rdma_create_srq[_ex]`, `rdma_destroy_srq`):
//!   EOPNOTSUPP; `ibv_create_srq` and `rdma_create_qp` with `srq` set work.
//! * rsockets (`rsocket`, `rbind`, ... `riomap`): ENOSYS. `rpoll` and
//!   `rselect` are `poll(2)` and `select(2)`: with no rsocket open, every
//!   descriptor is an ordinary one, which librdmacm passes to the kernel.

use std::ffi::c_int;

use super::set_errno;

/// ECE and rdma_cm's SRQs: not in ferroce.
pub(super) unsafe extern "C" fn not_supported() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

/// rsockets: not in ferroce. `isize` so that callers of the `ssize_t` and
/// `off_t` calls see -1 too.
pub(super) unsafe extern "C" fn no_rsocket() -> isize {
    set_errno(libc::ENOSYS);
    -1
}

/// `rpoll`: `poll(2)` (no descriptor is an rsocket).
pub(super) unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: the caller's arguments, as poll(2) takes them.
    unsafe { libc::poll(fds, nfds, timeout) }
}

/// `rselect`: `select(2)`.
pub(super) unsafe extern "C" fn rselect(
    nfds: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    // SAFETY: the caller's arguments, as select(2) takes them.
    unsafe { libc::select(nfds, read, write, except, timeout) }
}
