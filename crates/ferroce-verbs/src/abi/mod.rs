//! The C structures of rdma-core 44's `<infiniband/verbs.h>` (x86-64 and
//! other LP64 Linux targets), laid out as the header lays them out, and the
//! enum values this library reads or writes. Names are the header's, so
//! that a reader can put this file beside it; `tests` (the C layout test)
//! compiles C against the real header and checks every size and offset
//! named here.
//!
//! Fields whose C type is an enum are `u32`/`i32` (C enums are `int`);
//! `pthread_mutex_t`/`pthread_cond_t`, which the application never reads
//! in these objects, are opaque bytes of glibc's size, zeroed (glibc's
//! static initializer).

#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use std::ffi::{c_char, c_int, c_void};

mod ext;
mod queues;

pub use ext::*;
pub use queues::*;

/// glibc's `pthread_mutex_t` on LP64: 40 bytes, 8-aligned.
pub type pthread_mutex_t = [u64; 5];
/// glibc's `pthread_cond_t`: 48 bytes, 8-aligned.
pub type pthread_cond_t = [u64; 6];

/// `IBV_SYSFS_NAME_MAX`, `IBV_SYSFS_PATH_MAX`.
pub const SYSFS_NAME_MAX: usize = 64;
pub const SYSFS_PATH_MAX: usize = 256;

/// `union ibv_gid`: 16 bytes, 8-aligned (its other member is two `__be64`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

#[repr(C)]
pub struct _ibv_device_ops {
    pub _dummy1: usize,
    pub _dummy2: usize,
}

#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: i32,
    pub transport_type: i32,
    pub name: [c_char; SYSFS_NAME_MAX],
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_odp_caps` (none here: zero).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// The start of `struct ibv_device_attr_ex`, up to the last field ferroce
/// fills (`device_cap_flags_ex`); the rest (TSO, RSS, tag matching, ...)
/// is zero, since ferroce has none of it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `struct ibv_gid_entry` (`ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

pub type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub type ReqNotifyFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type PostSendFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
pub type PostRecvFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type PostSrqRecvFn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type AllocMwFn = unsafe extern "C" fn(*mut ibv_pd, u32) -> *mut ibv_mw;
pub type BindMwFn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int;
pub type DeallocMwFn = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
pub type QueryDeviceExFn =
    unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut ibv_device_attr_ex, usize) -> c_int;
pub type QueryPortFn =
    unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;

/// `struct ibv_context_ops`: the slots the header's inline verbs call
/// (`ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_post_send`, `ibv_post_recv`,
/// `ibv_post_srq_recv`, and the memory-window ones), the rest unused by
/// rdma-core 44 (`_compat_*`, left NULL).
#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: usize,
    pub _compat_query_port: usize,
    pub _compat_alloc_pd: usize,
    pub _compat_dealloc_pd: usize,
    pub _compat_reg_mr: usize,
    pub _compat_rereg_mr: usize,
    pub _compat_dereg_mr: usize,
    pub alloc_mw: Option<AllocMwFn>,
    pub bind_mw: Option<BindMwFn>,
    pub dealloc_mw: Option<DeallocMwFn>,
    pub _compat_create_cq: usize,
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyFn>,
    pub _compat_cq_event: usize,
    pub _compat_resize_cq: usize,
    pub _compat_destroy_cq: usize,
    pub _compat_create_srq: usize,
    pub _compat_modify_srq: usize,
    pub _compat_query_srq: usize,
    pub _compat_destroy_srq: usize,
    pub post_srq_recv: Option<PostSrqRecvFn>,
    pub _compat_create_qp: usize,
    pub _compat_query_qp: usize,
    pub _compat_modify_qp: usize,
    pub _compat_destroy_qp: usize,
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    pub _compat_create_ah: usize,
    pub _compat_destroy_ah: usize,
    pub _compat_attach_mcast: usize,
    pub _compat_detach_mcast: usize,
    pub _compat_async_event: usize,
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: `ibv_context::abi_compat` of a context that
/// has a `verbs_context` in front of it.
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// `struct verbs_context`: the extended ops, found by the header's
/// `verbs_get_ctx_op` at a fixed offset before `context`. Only
/// `query_port` (so that `ibv_query_port` fills the whole
/// `ibv_port_attr`), `query_device_ex`, `create_cq_ex` and `create_qp_ex`
/// are set; every other op is NULL, which the header's inline wrappers
/// turn into `EOPNOTSUPP`.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<QueryPortFn>,
    pub advise_mr: usize,
    pub alloc_null_mr: usize,
    pub read_counters: usize,
    pub attach_counters_point_flow: usize,
    pub create_counters: usize,
    pub destroy_counters: usize,
    pub reg_dm_mr: usize,
    pub alloc_dm: usize,
    pub free_dm: usize,
    pub modify_flow_action_esp: usize,
    pub destroy_flow_action: usize,
    pub create_flow_action_esp: usize,
    pub modify_qp_rate_limit: usize,
    pub alloc_parent_domain: usize,
    pub dealloc_td: usize,
    pub alloc_td: usize,
    pub modify_cq: usize,
    pub post_srq_ops: usize,
    pub destroy_rwq_ind_table: usize,
    pub create_rwq_ind_table: usize,
    pub destroy_wq: usize,
    pub modify_wq: usize,
    pub create_wq: usize,
    pub query_rt_values: usize,
    pub create_cq_ex: Option<CreateCqExFn>,
    pub priv_: usize,
    pub query_device_ex: Option<QueryDeviceExFn>,
    pub ibv_destroy_flow: usize,
    pub ABI_placeholder2: usize,
    pub ibv_create_flow: usize,
    pub ABI_placeholder1: usize,
    pub open_qp: usize,
    pub create_qp_ex: Option<CreateQpExFn>,
    pub get_srq_num: Option<unsafe extern "C" fn(*mut ibv_srq, *mut u32) -> c_int>,
    pub create_srq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_srq_init_attr_ex) -> *mut ibv_srq>,
    pub open_xrcd:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd>,
    pub close_xrcd: Option<unsafe extern "C" fn(*mut ibv_xrcd) -> c_int>,
    pub _ABI_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

// Enum values (the header's names without the IBV_ prefix).
pub const NODE_CA: i32 = 1;
pub const TRANSPORT_IB: i32 = 0;

pub const QPT_RC: u32 = 2;
pub const QPT_UC: u32 = 3;
pub const QPT_UD: u32 = 4;
pub const QPT_XRC_SEND: u32 = 9;
pub const QPT_XRC_RECV: u32 = 10;

pub const QPS_RESET: u32 = 0;
pub const QPS_INIT: u32 = 1;
pub const QPS_RTR: u32 = 2;
pub const QPS_RTS: u32 = 3;
pub const QPS_SQD: u32 = 4;
pub const QPS_SQE: u32 = 5;
pub const QPS_ERR: u32 = 6;

pub const QP_STATE: u32 = 1;
pub const QP_CUR_STATE: u32 = 1 << 1;
pub const QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
pub const QP_ACCESS_FLAGS: u32 = 1 << 3;
pub const QP_PKEY_INDEX: u32 = 1 << 4;
pub const QP_PORT: u32 = 1 << 5;
pub const QP_QKEY: u32 = 1 << 6;
pub const QP_AV: u32 = 1 << 7;
pub const QP_PATH_MTU: u32 = 1 << 8;
pub const QP_TIMEOUT: u32 = 1 << 9;
pub const QP_RETRY_CNT: u32 = 1 << 10;
pub const QP_RNR_RETRY: u32 = 1 << 11;
pub const QP_RQ_PSN: u32 = 1 << 12;
pub const QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
pub const QP_MIN_RNR_TIMER: u32 = 1 << 15;
pub const QP_SQ_PSN: u32 = 1 << 16;
pub const QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
pub const QP_CAP: u32 = 1 << 19;
pub const QP_DEST_QPN: u32 = 1 << 20;

pub const ACCESS_LOCAL_WRITE: u32 = 1;
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1;
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
pub const ACCESS_MW_BIND: u32 = 1 << 4;
pub const ACCESS_ZERO_BASED: u32 = 1 << 5;
pub const ACCESS_HUGETLB: u32 = 1 << 7;
pub const ACCESS_FLUSH_GLOBAL: u32 = 1 << 8;
pub const ACCESS_FLUSH_PERSISTENT: u32 = 1 << 9;
/// `IBV_ACCESS_OPTIONAL_RANGE`: hints a provider may ignore.
pub const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

pub const WR_RDMA_WRITE: u32 = 0;
pub const WR_RDMA_WRITE_WITH_IMM: u32 = 1;
pub const WR_SEND: u32 = 2;
pub const WR_SEND_WITH_IMM: u32 = 3;
pub const WR_RDMA_READ: u32 = 4;
pub const WR_ATOMIC_CMP_AND_SWP: u32 = 5;
pub const WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
pub const WR_LOCAL_INV: u32 = 7;
pub const WR_BIND_MW: u32 = 8;
pub const WR_SEND_WITH_INV: u32 = 9;
/// `IBV_WR_ATOMIC_WRITE` (rdma-core posts it through `ibv_wr_atomic_write`
/// only: `ibv_send_wr` has no field for its 8 bytes).
pub const WR_ATOMIC_WRITE: u32 = 15;
/// `IBV_WR_FLUSH` (posted through `ibv_wr_flush` only, like ATOMIC WRITE).
pub const WR_FLUSH: u32 = 14;

pub const SEND_FENCE: u32 = 1;
pub const SEND_SIGNALED: u32 = 1 << 1;
pub const SEND_SOLICITED: u32 = 1 << 2;
pub const SEND_INLINE: u32 = 1 << 3;

pub const WC_SEND: u32 = 0;
pub const WC_RDMA_WRITE: u32 = 1;
pub const WC_RDMA_READ: u32 = 2;
pub const WC_COMP_SWAP: u32 = 3;
pub const WC_FETCH_ADD: u32 = 4;
pub const WC_BIND_MW: u32 = 5;
pub const WC_LOCAL_INV: u32 = 6;
/// `IBV_WC_ATOMIC_WRITE` (rdma-core's value; `IBV_WC_FLUSH` is 8).
pub const WC_ATOMIC_WRITE: u32 = 9;
pub const WC_FLUSH: u32 = 8;
pub const WC_RECV: u32 = 1 << 7;
pub const WC_RECV_RDMA_WITH_IMM: u32 = WC_RECV + 1;

pub const WC_GRH: u32 = 1;
pub const WC_WITH_IMM: u32 = 1 << 1;
pub const WC_WITH_INV: u32 = 1 << 3;

/// `enum ibv_mw_type`.
pub const MW_TYPE_1: u32 = 1;
pub const MW_TYPE_2: u32 = 2;

pub const SRQ_MAX_WR: u32 = 1;
pub const SRQ_LIMIT: u32 = 1 << 1;

pub const EVENT_CQ_ERR: u32 = 0;
pub const EVENT_QP_FATAL: u32 = 1;
pub const EVENT_SRQ_LIMIT_REACHED: u32 = 15;
pub const EVENT_QP_LAST_WQE_REACHED: u32 = 16;

/// `enum ibv_gid_type` (`ibv_gid_entry::gid_type`).
pub const GID_TYPE_ROCE_V2: u32 = 2;
/// `enum ibv_gid_type_sysfs` (`ibv_query_gid_type`).
pub const GID_TYPE_SYSFS_ROCE_V2: u32 = 1;
