//! rdma_cm's calls that ferroce does not have, answered as librdmacm
//! answers a device without them (never a crash).
//!
//! * ECE (`rdma_set_local_ece`, `rdma_get_remote_ece`, `rdma_reject_ece`)
//!   and SRQs made by rdma_cm (`rdma_create_srq[_ex]`, `rdma_destroy_srq`):
//!   EOPNOTSUPP; `ibv_create_srq` and `rdma_create_qp` with `srq` set work.

use std::ffi::c_int;

use super::set_errno;

/// ECE and rdma_cm's SRQs: not in ferroce.
pub(super) unsafe extern "C" fn not_supported() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}
