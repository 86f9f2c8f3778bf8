//! `libibverbs.so.1` over ferroce: rdma-core 44's C ABI (Debian 12's
//! libibverbs1), so that unmodified RDMA programs (`ibv_devinfo`,
//! `ibv_rc_pingpong`, perftest, ...) run on ferroce with
//! `LD_LIBRARY_PATH` pointing at this library.
//!
//! * Devices: one per address of `FERROCE_DEVICES` (default `127.0.0.1`),
//!   named `ferroce0`, `ferroce1`, ... ([`config`]). Each open device is a
//!   ferroce `Context` on that address, shared by the process's
//!   `ibv_open_device` calls on it.
//! * Objects: every C object handed out is a Box'd Rust struct whose first
//!   field is the C struct (the `objects` module); the context carries rdma-core's
//!   `struct verbs_context` in front of `struct ibv_context`, with the ops
//!   the header's inline `ibv_post_send`, `ibv_post_recv`,
//!   `ibv_post_srq_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`,
//!   `ibv_query_port`, `ibv_query_device_ex`, `ibv_create_cq_ex`,
//!   `ibv_create_qp_ex` and XRC's `ibv_open_xrcd`, `ibv_close_xrcd`,
//!   `ibv_create_srq_ex` and `ibv_get_srq_num` call. Every CQ is an
//!   `ibv_cq_ex` and every QP an `ibv_qp_ex`, for the extended polling and
//!   `ibv_wr_*` interfaces.
//! * Events: the context's `async_fd` and each completion channel's `fd`
//!   are readable while events wait, and honour the application's
//!   O_NONBLOCK.
//! * Memory: `ibv_reg_mr` registers the application's buffer in place.
//! * Errors: calls return rdma-core's conventions (an errno, or NULL / -1
//!   with `errno` set); verbs ferroce lacks return `EOPNOTSUPP`. No panic
//!   crosses into C.
//!
//! The layouts are in [`abi`], checked against the real header by a C
//! layout test; all `unsafe` is in `src/ffi`, under the contract written at
//! its top.

pub mod abi;
pub mod config;
mod convert;
mod ffi;
#[cfg(test)]
mod layout_tests;
mod objects;
pub mod rdmacm;
pub mod rsocket;
