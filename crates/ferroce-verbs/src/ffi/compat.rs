//! The libibverbs 1.0 ABI (`ibv_get_device_list@IBVERBS_1.0`, ... the
//! non-default versions): rdma-core 44 keeps it for binaries linked
//! before libibverbs 1.1 (2007), wrapping every object in a struct of the
//! old layout. ferroce does not: its entry point, the 1.0 device list,
//! is NULL with `errno` ENOSYS (so no 1.0 object ever exists), and the
//! other calls, which could only be given objects of another library,
//! fail the same way (ENOSYS returned and set for an int, NULL for a
//! pointer, nothing for a release, GUID 0). Each logs its name at debug
//! level (`FERROCE_LOG=debug`).
//!
//! Safety: no argument is read; each stub is declared without the C
//! parameters, which the SysV calling conventions let a callee ignore.

use std::ffi::{c_int, c_void};

use super::set_errno;
use super::unsupported::log_unsupported;

/// Defines one stub per `name => kind`, logging `name@IBVERBS_1.0`.
macro_rules! compat_1_0 {
    ($($name:ident => $kind:ident;)*) => {$( compat_1_0!(@$kind $name); )*};
    (@ptr $name:ident) => {
        pub(super) unsafe extern "C" fn $name() -> *mut c_void {
            log_unsupported(concat!(stringify!($name), "@IBVERBS_1.0"));
            set_errno(libc::ENOSYS);
            std::ptr::null_mut()
        }
    };
    (@int $name:ident) => {
        pub(super) unsafe extern "C" fn $name() -> c_int {
            log_unsupported(concat!(stringify!($name), "@IBVERBS_1.0"));
            set_errno(libc::ENOSYS);
            libc::ENOSYS
        }
    };
    (@guid $name:ident) => {
        pub(super) unsafe extern "C" fn $name() -> u64 {
            log_unsupported(concat!(stringify!($name), "@IBVERBS_1.0"));
            0
        }
    };
    (@void $name:ident) => {
        pub(super) unsafe extern "C" fn $name() {
            log_unsupported(concat!(stringify!($name), "@IBVERBS_1.0"));
        }
    };
}

compat_1_0! {
    ibv_get_device_list => ptr;
    ibv_free_device_list => void;
    ibv_get_device_name => ptr;
    ibv_get_device_guid => guid;
    ibv_open_device => ptr;
    ibv_close_device => int;
    ibv_get_async_event => int;
    ibv_ack_async_event => void;
    ibv_query_device => int;
    ibv_query_port => int;
    ibv_query_gid => int;
    ibv_query_pkey => int;
    ibv_alloc_pd => ptr;
    ibv_dealloc_pd => int;
    ibv_reg_mr => ptr;
    ibv_dereg_mr => int;
    ibv_create_cq => ptr;
    ibv_resize_cq => int;
    ibv_destroy_cq => int;
    ibv_get_cq_event => int;
    ibv_ack_cq_events => void;
    ibv_create_srq => ptr;
    ibv_modify_srq => int;
    ibv_query_srq => int;
    ibv_destroy_srq => int;
    ibv_create_qp => ptr;
    ibv_query_qp => int;
    ibv_modify_qp => int;
    ibv_destroy_qp => int;
    ibv_create_ah => ptr;
    ibv_destroy_ah => int;
    ibv_attach_mcast => int;
    ibv_detach_mcast => int;
}
