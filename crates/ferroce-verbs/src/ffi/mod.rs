//! The C entry points. Every `unsafe` of the crate is in this module and
//! its files, and rests on one contract, the one every libibverbs provider
//! relies on:
//!
//! * A pointer the application passes is NULL (refused with `EINVAL`) or
//!   points to a valid, initialized object of the C type the header
//!   declares, for the duration of the call. Object pointers (`ibv_pd *`,
//!   `ibv_qp *`, ...) are ones this library returned and has not yet
//!   destroyed: each is the first field of a Box'd object of
//!   [`crate::objects`], so casting back to that object is sound.
//! * Memory given to `ibv_reg_mr` stays valid (mapped, readable and
//!   writable) until `ibv_dereg_mr`; that is `Backing::from_raw`'s
//!   contract, said in C. The engine reaches it only through ferroce-mem's
//!   volatile copies and atomics, as a NIC's DMA would, so the C program
//!   reading or writing it meanwhile (outside Rust) is a race of its own
//!   making, as with a NIC, never undefined behaviour of ours. Inline send
//!   data is read during `ibv_post_send`.
//! * No panic crosses into C: every entry point runs its body in
//!   [`guard`], which turns a panic into an error return.
//!
//! `export.rs` gives each exported function its symbol version.

#![allow(unsafe_code)]

use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::*;
use crate::objects::Ctx;

mod compat;
mod cq;
mod device;
mod export;
mod memory;
mod misc;
mod path_rec;
mod post;
mod private;
mod qp;
mod rates;
mod rdmacm;
mod rdmacm_addr;
mod rdmacm_conn;
mod rdmacm_event;
mod rdmacm_exit;
mod rdmacm_mcast;
mod rdmacm_qp;
mod rdmacm_stubs;
mod rsocket;
mod rsocket_ep;
mod rsocket_io;
mod rsocket_listen;
mod rsocket_poll;
mod srq_ah;
mod unsupported;
mod windows;

// The extended verbs (`ibv_create_cq_ex`, `ibv_create_qp_ex`, `ibv_wr_*`)
// and the event descriptors.
mod cq_ex;
mod events;
pub(crate) use events::Inbox;
mod qp_ex;
mod xrc;

/// The context ops: what the header's inline verbs call.
fn context_ops() -> ibv_context_ops {
    ibv_context_ops {
        _compat_query_device: 0,
        _compat_query_port: 0,
        _compat_alloc_pd: 0,
        _compat_dealloc_pd: 0,
        _compat_reg_mr: 0,
        _compat_rereg_mr: 0,
        _compat_dereg_mr: 0,
        alloc_mw: Some(windows::alloc_mw),
        bind_mw: Some(windows::bind_mw),
        dealloc_mw: Some(windows::dealloc_mw),
        _compat_create_cq: 0,
        poll_cq: Some(cq::poll_cq),
        req_notify_cq: Some(cq::req_notify_cq),
        _compat_cq_event: 0,
        _compat_resize_cq: 0,
        _compat_destroy_cq: 0,
        _compat_create_srq: 0,
        _compat_modify_srq: 0,
        _compat_query_srq: 0,
        _compat_destroy_srq: 0,
        post_srq_recv: Some(post::post_srq_recv),
        _compat_create_qp: 0,
        _compat_query_qp: 0,
        _compat_modify_qp: 0,
        _compat_destroy_qp: 0,
        post_send: Some(post::post_send),
        post_recv: Some(post::post_recv),
        _compat_create_ah: 0,
        _compat_destroy_ah: 0,
        _compat_attach_mcast: 0,
        _compat_detach_mcast: 0,
        _compat_async_event: 0,
    }
}

/// Runs `f`, turning a panic into `on_panic`.
pub(crate) fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// For calls that return an errno (0 on success).
fn guard_errno(f: impl FnOnce() -> Result<(), c_int>) -> c_int {
    guard(libc::EIO, || match f() {
        Ok(()) => 0,
        Err(e) => e,
    })
}

/// For calls that return an object (NULL and `errno` on failure).
fn guard_ptr<T>(f: impl FnOnce() -> Result<*mut T, c_int>) -> *mut T {
    match guard(Err(libc::EIO), f) {
        Ok(p) => p,
        Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
    }
}

/// Sets the calling thread's `errno`.
fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is the calling thread's, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The object behind a C pointer this library handed out (its first field).
///
/// # Safety
/// `p` is NULL or was returned by this library as the first field of a
/// live `T` (the module contract).
unsafe fn obj<'a, T, C>(p: *mut C) -> Result<&'a T, c_int> {
    // SAFETY: by the contract, `p` is the address of a live `T`.
    unsafe { p.cast::<T>().as_ref() }.ok_or(libc::EINVAL)
}

/// The [`Ctx`] whose `vctx.context` is `p`.
///
/// # Safety
/// As [`obj`], for an `ibv_context` from `ibv_open_device`.
unsafe fn ctx<'a>(p: *mut ibv_context) -> Result<&'a Ctx, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    let off = std::mem::offset_of!(Ctx, vctx) + std::mem::offset_of!(verbs_context, context);
    // SAFETY: `p` is the `context` field of the `verbs_context` at the
    // start of a live, Box'd `Ctx`.
    unsafe { obj(p.cast::<u8>().sub(off)) }
}

/// Takes back ownership of a Box'd object (for the destroy calls).
///
/// # Safety
/// As [`obj`]; the application does not use `p` again.
unsafe fn take<T, C>(p: *mut C) -> Box<T> {
    // SAFETY: `p` came from `Box::into_raw` of a `T`.
    unsafe { Box::from_raw(p.cast::<T>()) }
}

/// `list` as a C array with a NULL after the last entry (the device lists),
/// its length written to `num` unless that is NULL; freed by
/// [`free_null_terminated`].
///
/// # Safety
/// `num` is NULL or valid for a write of an `int`.
unsafe fn null_terminated<T>(mut list: Vec<*mut T>, num: *mut c_int) -> *mut *mut T {
    if !num.is_null() {
        // SAFETY: non-NULL, and an `int *` by the contract.
        unsafe { num.write(list.len() as c_int) };
    }
    list.push(std::ptr::null_mut());
    Box::into_raw(list.into_boxed_slice()).cast()
}

/// Frees an array from [`null_terminated`]; NULL is ignored.
///
/// # Safety
/// `list` is NULL or such an array, not freed yet.
unsafe fn free_null_terminated<T>(list: *mut *mut T) {
    if list.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: a NULL-terminated array by the contract.
    while !unsafe { *list.add(n) }.is_null() {
        n += 1;
    }
    // SAFETY: it was a boxed slice of n + 1 pointers.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, n + 1)) });
}

/// `*out = v`, refusing a NULL `out`.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, v: T) -> Result<(), c_int> {
    if out.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-NULL and valid by the contract.
    unsafe { out.write(v) };
    Ok(())
}
