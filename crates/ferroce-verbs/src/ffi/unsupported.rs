//! The verbs of rdma-core 44 that ferroce does not have: they exist so
//! that programs linked against them load (libfabric binds
//! `ibv_reg_dmabuf_mr@IBVERBS_1.12` at load time), and fail as rdma-core
//! 44 fails them with the rxe provider, whose missing ops are rdma-core's
//! "dummy" ops: NULL with `errno` EOPNOTSUPP for an object, nothing for a
//! release. Each logs its name at debug level (`FERROCE_LOG=debug`).
//!
//! Safety: pointers are not dereferenced, except the descriptor
//! `ibv_import_device` passes to `fstat` (any int is safe there).

use std::ffi::{c_char, c_int, c_void};

use super::set_errno;
use crate::abi::{ibv_context, ibv_mr, ibv_pd};
use crate::config::init_logging;

/// Logs that `call`, which ferroce does not have, was made.
pub(super) fn log_unsupported(call: &str) {
    init_logging();
    tracing::debug!(call, "not supported by ferroce");
}

/// NULL with `errno` set to `e`, after logging `call`.
fn refuse<T>(call: &str, e: c_int) -> *mut T {
    log_unsupported(call);
    set_errno(e);
    std::ptr::null_mut()
}

/// `ibv_reg_dmabuf_mr@IBVERBS_1.12`: a dma-buf is device memory, which a
/// software device cannot reach (rxe has no `reg_dmabuf_mr` op).
pub(super) unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    let e = if pd.is_null() {
        libc::EINVAL
    } else {
        libc::EOPNOTSUPP
    };
    refuse("ibv_reg_dmabuf_mr", e)
}

/// `ibv_import_device@IBVERBS_1.10`: rdma-core opens the context of the
/// uverbs character device `cmd_fd` names; EINVAL when it is no character
/// device, ENODEV when it is none of the listed devices, which no
/// character device is here (ferroce's devices have none).
pub(super) unsafe extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `st` is a writable stat buffer; fstat checks the descriptor.
    let ok = unsafe { libc::fstat(cmd_fd, st.as_mut_ptr()) } == 0;
    // SAFETY: zeroed, then filled by fstat on success.
    let mode = unsafe { st.assume_init() }.st_mode;
    let char_dev = ok && mode & libc::S_IFMT == libc::S_IFCHR;
    let e = if char_dev { libc::ENODEV } else { libc::EINVAL };
    refuse("ibv_import_device", e)
}

/// `ibv_import_pd@IBVERBS_1.10`: objects are shared between processes
/// through the kernel's handles, which ferroce's objects do not have.
pub(super) unsafe extern "C" fn ibv_import_pd(
    _context: *mut ibv_context,
    _handle: u32,
) -> *mut ibv_pd {
    refuse("ibv_import_pd", libc::EOPNOTSUPP)
}

/// `ibv_import_mr@IBVERBS_1.10`, as `ibv_import_pd`.
pub(super) unsafe extern "C" fn ibv_import_mr(_pd: *mut ibv_pd, _handle: u32) -> *mut ibv_mr {
    refuse("ibv_import_mr", libc::EOPNOTSUPP)
}

/// `ibv_import_dm@IBVERBS_1.13`, as `ibv_import_pd` (there is no device
/// memory either).
pub(super) unsafe extern "C" fn ibv_import_dm(
    _context: *mut ibv_context,
    _handle: u32,
) -> *mut c_void {
    refuse("ibv_import_dm", libc::EOPNOTSUPP)
}

/// `ibv_unimport_pd@IBVERBS_1.10`: nothing was imported, nothing to drop.
pub(super) unsafe extern "C" fn ibv_unimport_pd(_pd: *mut ibv_pd) {
    log_unsupported("ibv_unimport_pd");
}

/// `ibv_unimport_mr@IBVERBS_1.10`, as `ibv_unimport_pd`.
pub(super) unsafe extern "C" fn ibv_unimport_mr(_mr: *mut ibv_mr) {
    log_unsupported("ibv_unimport_mr");
}

/// `ibv_unimport_dm@IBVERBS_1.13`, as `ibv_unimport_pd`.
pub(super) unsafe extern "C" fn ibv_unimport_dm(_dm: *mut c_void) {
    log_unsupported("ibv_unimport_dm");
}

/// `ibv_read_ibdev_sysfs_file@IBVERBS_PRIVATE_34` (a provider's read of
/// its kernel device's sysfs attribute; variadic, the format's arguments
/// are not read): no device of this library has a sysfs directory, so
/// the file is not found, -1 with ENOENT as a failed open gives.
pub(super) unsafe extern "C" fn ibv_read_ibdev_sysfs_file(
    _buf: *mut c_char,
    _size: usize,
    _sysfs_dev: *mut c_void,
    _fnfmt: *const c_char,
) -> c_int {
    log_unsupported("ibv_read_ibdev_sysfs_file");
    set_errno(libc::ENOENT);
    -1
}

/// `ibv_register_driver@IBVERBS_1.1`, the pre-rdma-core 13 driver
/// registration: rdma-core 44 keeps it as a no-op (old libfabric usnic
/// providers call it), and so does ferroce.
pub(super) unsafe extern "C" fn ibv_register_driver(_name: *const c_char, _init: *mut c_void) {
    log_unsupported("ibv_register_driver");
}
