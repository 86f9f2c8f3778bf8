//! The extended verbs of `<infiniband/verbs.h>`: `struct ibv_cq_ex` (the
//! `ibv_start_poll` / `ibv_wc_read_*` interface), `struct ibv_qp_ex` (the
//! `ibv_wr_*` send interface), their creation attributes, and the enum
//! values the library checks them against (see the parent module for the
//! conventions).
//!
//! The fields the application reads while the library writes them
//! (`ibv_cq_ex::status` and `wr_id`, after each poll) and the ones it
//! writes for the library to read (`ibv_qp_ex::wr_id` and `wr_flags`, before
//! each builder call) are atomics of the C field's size: the library
//! reaches them through shared references.

#![allow(non_camel_case_types, missing_docs)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64};

use super::{ibv_ah, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_cap, ibv_sge};
use super::{ibv_mw, ibv_mw_bind_info, ibv_srq, ibv_srq_attr, pthread_cond_t, pthread_mutex_t};

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

pub type StartPollFn = unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int;
pub type NextPollFn = unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int;
pub type EndPollFn = unsafe extern "C" fn(*mut ibv_cq_ex);
pub type ReadU32Fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u32;
pub type ReadU8Fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u8;
pub type ReadU16Fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u16;
pub type ReadU64Fn = unsafe extern "C" fn(*mut ibv_cq_ex) -> u64;
pub type ReadTmFn = unsafe extern "C" fn(*mut ibv_cq_ex, *mut c_void);

/// `struct ibv_cq_ex`: `struct ibv_cq`'s fields, then the polling state
/// and callbacks. Every ferroce CQ is one (an `ibv_cq` is its prefix).
#[repr(C)]
pub struct ibv_cq_ex {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
    pub comp_mask: u32,
    /// `enum ibv_wc_status` of the current completion.
    pub status: AtomicU32,
    pub wr_id: AtomicU64,
    pub start_poll: Option<StartPollFn>,
    pub next_poll: Option<NextPollFn>,
    pub end_poll: Option<EndPollFn>,
    pub read_opcode: Option<ReadU32Fn>,
    pub read_vendor_err: Option<ReadU32Fn>,
    pub read_byte_len: Option<ReadU32Fn>,
    pub read_imm_data: Option<ReadU32Fn>,
    pub read_qp_num: Option<ReadU32Fn>,
    pub read_src_qp: Option<ReadU32Fn>,
    pub read_wc_flags: Option<ReadU32Fn>,
    pub read_slid: Option<ReadU32Fn>,
    pub read_sl: Option<ReadU8Fn>,
    pub read_dlid_path_bits: Option<ReadU8Fn>,
    pub read_completion_ts: Option<ReadU64Fn>,
    pub read_cvlan: Option<ReadU16Fn>,
    pub read_flow_tag: Option<ReadU32Fn>,
    pub read_tm_info: Option<ReadTmFn>,
    pub read_completion_wallclock_ns: Option<ReadU64Fn>,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `struct ibv_rx_hash_conf` (RSS; refused here, laid out for the size).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `struct ibv_qp_init_attr`'s fields, then
/// the extended ones `comp_mask` says are valid.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `struct ibv_data_buf` (`ibv_wr_set_inline_data_list`).
#[repr(C)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

type Qx = *mut ibv_qp_ex;

/// `struct ibv_qp_ex`: `struct ibv_qp`, then the fields and builder calls
/// of the `ibv_wr_*` interface, in the header's order.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    /// Written by the application before each builder call.
    pub wr_id: AtomicU64,
    pub wr_flags: AtomicU32,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(Qx, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(Qx, u32, u64, u64)>,
    pub wr_bind_mw: Option<unsafe extern "C" fn(Qx, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(Qx, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(Qx, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(Qx, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(Qx, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(Qx)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(Qx, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(Qx, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(Qx, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(Qx, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(Qx, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(Qx, *mut c_void, usize)>,
    pub wr_set_inline_data_list: Option<unsafe extern "C" fn(Qx, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(Qx, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(Qx, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(Qx)>,
    pub wr_complete: Option<unsafe extern "C" fn(Qx) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(Qx)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(Qx, u32, u64, *const c_void)>,
}

pub type CreateCqExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
pub type CreateQpExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;

// `enum ibv_create_cq_wc_flags`.
pub const WC_EX_WITH_BYTE_LEN: u64 = 1;
pub const WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
/// `IBV_WC_STANDARD_FLAGS`: byte_len, imm, qp_num, src_qp, slid, sl and
/// dlid_path_bits, the fields ferroce fills (as rxe's provider).
pub const WC_STANDARD_FLAGS: u64 = 0x7f;

// `enum ibv_cq_init_attr_mask`, `enum ibv_create_cq_attr_flags`.
pub const CQ_INIT_ATTR_MASK_FLAGS: u32 = 1;
pub const CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
pub const CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1;

// `enum ibv_qp_init_attr_mask`.
pub const QP_INIT_ATTR_PD: u32 = 1;
pub const QP_INIT_ATTR_XRCD: u32 = 1 << 1;
pub const QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
/// `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB` (`create_flags`).
pub const QP_CREATE_BLOCK_SELF_MCAST_LB: u32 = 1 << 1;
pub const QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

// `enum ibv_qp_create_send_ops_flags`: the ones ferroce has.
pub const QP_EX_WITH_RDMA_WRITE: u64 = 1;
pub const QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const QP_EX_WITH_SEND: u64 = 1 << 2;
pub const QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;
/// Every operation the `ibv_wr_*` builders of this library can post.
pub const QP_EX_SUPPORTED: u64 = 0x3ff | QP_EX_WITH_ATOMIC_WRITE;

/// `struct ibv_xrcd_init_attr` (`ibv_open_xrcd`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_xrcd_init_attr {
    pub comp_mask: u32,
    pub fd: c_int,
    pub oflags: c_int,
}

/// `struct ibv_xrcd`.
#[repr(C)]
pub struct ibv_xrcd {
    pub context: *mut ibv_context,
}

/// `struct ibv_tm_cap` (tag matching, not here).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex` (`ibv_create_srq_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

pub const SRQT_BASIC: u32 = 0;
pub const SRQT_XRC: u32 = 1;
pub const SRQ_INIT_ATTR_TYPE: u32 = 1;
pub const SRQ_INIT_ATTR_PD: u32 = 1 << 1;
pub const SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
pub const SRQ_INIT_ATTR_CQ: u32 = 1 << 3;
pub const XRCD_INIT_ATTR_FD: u32 = 1;
pub const XRCD_INIT_ATTR_OFLAGS: u32 = 1 << 1;
