//! The objects handed to C: each is a Rust struct whose first field is
//! the public C struct (`#[repr(C)]`), so the pointer the application
//! holds is also the pointer to the whole object, and the ferroce object
//! that does the work sits behind it. `src/ffi` turns the pointers back
//! into these; nothing here is `unsafe`.
//!
//! Objects that others depend on count their users (a context its PDs,
//! CQs, channels and XRC domains; a PD its MRs, QPs, SRQs and AHs; a CQ
//! its QPs and XRC SRQs; a channel its CQs; an SRQ its QPs; an XRC domain
//! its XRC SRQs and target QPs), so that
//! destroying one still in use returns `EBUSY`, as rdma-core's kernel
//! objects do, instead of leaving a dangling pointer in the application.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use ferroce::{
    CompletionChannel, CompletionQueue, Context, MemoryRegion, MemoryWindow, ProtectionDomain,
    QpType, QueuePair, SharedReceiveQueue,
};

use crate::abi::*;

/// A device: one configured address ([`crate::config`]). Lives for the
/// process; the ferroce [`Context`] behind it is opened by the first
/// `ibv_open_device` and closed by the last `ibv_close_device`.
#[repr(C)]
pub(crate) struct Device {
    pub(crate) dev: ibv_device,
    pub(crate) addr: IpAddr,
    pub(crate) open: Mutex<OpenDevice>,
}

/// The device's open ferroce context and how many `ibv_context`s share it
/// (one UDP port 4791 per address, so one engine per device and process).
#[derive(Default)]
pub(crate) struct OpenDevice {
    pub(crate) ctx: Option<Context>,
    pub(crate) users: usize,
    /// The open `ibv_context`s (their [`Ctx`]'s addresses), among which
    /// the device's asynchronous events are shared out by owner (see
    /// `ffi::events`).
    pub(crate) contexts: Vec<usize>,
}

/// Where a registered region starts in the application's memory, so that
/// an `ibv_sge` address becomes an offset into the region.
#[derive(Clone, Copy)]
pub(crate) struct Span {
    pub(crate) base: u64,
}

/// An open device (`ibv_open_device`); `vctx.context` is the
/// `ibv_context` the application holds.
#[repr(C)]
pub(crate) struct Ctx {
    pub(crate) vctx: verbs_context,
    pub(crate) device: &'static Device,
    pub(crate) inner: Context,
    /// lkey -> the region's place in application memory.
    pub(crate) spans: RwLock<HashMap<u32, Span>>,
    /// CQ handle -> its `ibv_cq` (as an address), for `ibv_get_cq_event`.
    pub(crate) cqs: Mutex<HashMap<u32, usize>>,
    /// QPN -> its `ibv_qp` (as an address), for async events.
    pub(crate) qps: Mutex<HashMap<u32, usize>>,
    /// SRQ handle -> its `ibv_srq` (as an address), for async events.
    pub(crate) srqs: Mutex<HashMap<u32, usize>>,
    /// The UD QPs: their receive completions carry a GRH.
    pub(crate) ud_qps: RwLock<HashSet<u32>>,
    /// `async_fd`: readable while this context has an asynchronous event
    /// or the device has some not yet shared out (see `ffi::events`).
    pub(crate) async_fd: OwnedFd,
    /// This context's asynchronous events.
    pub(crate) inbox: crate::ffi::Inbox,
    /// Its PDs, CQs and completion channels: while any lives,
    /// `ibv_close_device` keeps the context's memory (they point at it).
    pub(crate) users: Users,
}

#[repr(C)]
pub(crate) struct Pd {
    pub(crate) pd: ibv_pd,
    pub(crate) inner: ProtectionDomain,
    pub(crate) users: Users,
}

#[repr(C)]
pub(crate) struct Mr {
    pub(crate) mr: ibv_mr,
    pub(crate) inner: MemoryRegion,
}

#[repr(C)]
pub(crate) struct Mw {
    pub(crate) mw: ibv_mw,
    pub(crate) inner: MemoryWindow,
}

#[repr(C)]
pub(crate) struct Channel {
    pub(crate) ch: ibv_comp_channel,
    pub(crate) inner: CompletionChannel,
    pub(crate) users: Users,
}

/// Every CQ is an `ibv_cq_ex` (an `ibv_cq` is its prefix), so that
/// `ibv_create_cq` and `ibv_create_cq_ex` make the same object.
#[repr(C)]
pub(crate) struct Cq {
    pub(crate) cq: ibv_cq_ex,
    pub(crate) inner: CompletionQueue,
    pub(crate) users: Users,
    /// The completion `ibv_start_poll` / `ibv_next_poll` took last, which
    /// the `ibv_wc_read_*` callbacks read.
    pub(crate) current: Mutex<ibv_wc>,
}

#[repr(C)]
pub(crate) struct Srq {
    pub(crate) srq: ibv_srq,
    pub(crate) inner: SharedReceiveQueue,
    pub(crate) attr: Mutex<ibv_srq_attr>,
    pub(crate) users: Users,
    /// An XRC SRQ's domain and CQ (as addresses), which it holds.
    pub(crate) xrc: Option<(usize, usize)>,
}

impl Srq {
    /// The object of `inner`, created in `context` for `pd` with the
    /// application's `srq_context` and requested `attr`.
    pub(crate) fn new(
        context: *mut ibv_context,
        pd: *mut ibv_pd,
        srq_context: *mut libc::c_void,
        inner: SharedReceiveQueue,
        attr: ibv_srq_attr,
        xrc: Option<(usize, usize)>,
    ) -> Box<Self> {
        Box::new(Self {
            srq: ibv_srq {
                context,
                srq_context,
                pd,
                handle: inner.handle(),
                mutex: [0; 5],
                cond: [0; 6],
                events_completed: 0,
            },
            inner,
            // At least one SGE per receive, as a QP's (qp.rs); posts past
            // max_sge fail (post.rs).
            attr: Mutex::new(ibv_srq_attr {
                max_sge: attr.max_sge.max(1),
                ..attr
            }),
            users: Users::default(),
            xrc,
        })
    }
}

/// An XRC domain (`ibv_open_xrcd`).
#[repr(C)]
pub(crate) struct Xrcd {
    pub(crate) xrcd: ibv_xrcd,
    pub(crate) inner: ferroce::XrcDomain,
    /// Its XRC SRQs and target QPs.
    pub(crate) users: Users,
}

/// Every QP is an `ibv_qp_ex` (an `ibv_qp` is its prefix); only those
/// created with send operations (`ibv_create_qp_ex`) hand it out through
/// `ibv_qp_to_qp_ex`, as rdma-core's providers do.
#[repr(C)]
pub(crate) struct Qp {
    pub(crate) qp: ibv_qp_ex,
    pub(crate) inner: QueuePair,
    pub(crate) qp_type: QpType,
    /// What `ibv_create_qp` was given (with the caps granted), for
    /// `ibv_query_qp`.
    pub(crate) init: ibv_qp_init_attr,
    /// Every attribute `ibv_modify_qp` set so far, for `ibv_query_qp`.
    pub(crate) attr: Mutex<ibv_qp_attr>,
    /// The `send_ops_flags` of `ibv_create_qp_ex` (`None`: not created
    /// for the `ibv_wr_*` interface).
    pub(crate) send_ops: Option<u64>,
    /// The requests built since `ibv_wr_start`.
    pub(crate) batch: Mutex<WrBatch>,
    /// An XRC target's domain (as an address; 0 for other QPs), which it
    /// holds.
    pub(crate) xrcd: usize,
}

/// What the `ibv_wr_*` builders collected since `ibv_wr_start`: posted by
/// `ibv_wr_complete`, dropped by `ibv_wr_abort`.
#[derive(Default)]
pub(crate) struct WrBatch {
    pub(crate) wrs: Vec<BuiltWr>,
    /// The first error a builder met (an operation this QP was not created
    /// for, inline data too long): `ibv_wr_complete` returns it and posts
    /// nothing.
    pub(crate) error: Option<i32>,
}

/// One request of a batch, as an `ibv_send_wr` would carry it.
#[derive(Clone, Default)]
pub(crate) struct BuiltWr {
    pub(crate) wr_id: u64,
    pub(crate) flags: u32,
    pub(crate) opcode: u32,
    /// Big-endian, as `ibv_send_wr::imm_data`.
    pub(crate) imm: u32,
    pub(crate) rkey: u32,
    pub(crate) remote_addr: u64,
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    /// UD: the AH (as an address), remote QPN and Q_Key.
    pub(crate) ud: Option<(usize, u32, u32)>,
    pub(crate) sges: Vec<ibv_sge>,
    /// Inline data, copied when the builder was called.
    pub(crate) inline: Option<Vec<u8>>,
    /// BIND_MW: the window, its new R_Key and the bind.
    pub(crate) bind: Option<wr_bind_mw>,
    /// XRC: the target's SRQ number (`ibv_wr_set_xrc_srqn`).
    pub(crate) xrc_srqn: u32,
}

#[repr(C)]
pub(crate) struct Ah {
    pub(crate) ah: ibv_ah,
    pub(crate) remote: IpAddr,
    pub(crate) grh: ibv_global_route,
}

/// A count of the objects that depend on this one.
#[derive(Default)]
pub(crate) struct Users(AtomicUsize);

impl Users {
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn remove(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn any(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

impl Ctx {
    /// The region an `ibv_sge` names, and the offset of its address in it.
    /// An unknown lkey (or an address below the region) gives an offset
    /// the engine refuses with a message naming the lkey.
    pub(crate) fn offset(&self, lkey: u32, addr: u64) -> u64 {
        let spans = self.spans.read().unwrap_or_else(|p| p.into_inner());
        match spans.get(&lkey) {
            Some(s) if addr >= s.base => addr - s.base,
            _ => u64::MAX,
        }
    }
}

/// A fresh `verbs_context` whose `ibv_context` names `device`, with the
/// ops of `crate::ffi` and the extended-ABI marker.
pub(crate) fn new_verbs_context(
    device: *mut ibv_device,
    ops: ibv_context_ops,
    query_port: QueryPortFn,
    query_device_ex: QueryDeviceExFn,
    async_fd: i32,
) -> verbs_context {
    verbs_context {
        query_port: Some(query_port),
        advise_mr: 0,
        alloc_null_mr: 0,
        read_counters: 0,
        attach_counters_point_flow: 0,
        create_counters: 0,
        destroy_counters: 0,
        reg_dm_mr: 0,
        alloc_dm: 0,
        free_dm: 0,
        modify_flow_action_esp: 0,
        destroy_flow_action: 0,
        create_flow_action_esp: 0,
        modify_qp_rate_limit: 0,
        alloc_parent_domain: 0,
        dealloc_td: 0,
        alloc_td: 0,
        modify_cq: 0,
        post_srq_ops: 0,
        destroy_rwq_ind_table: 0,
        create_rwq_ind_table: 0,
        destroy_wq: 0,
        modify_wq: 0,
        create_wq: 0,
        query_rt_values: 0,
        create_cq_ex: None,
        priv_: 0,
        query_device_ex: Some(query_device_ex),
        ibv_destroy_flow: 0,
        ABI_placeholder2: 0,
        ibv_create_flow: 0,
        ABI_placeholder1: 0,
        open_qp: 0,
        create_qp_ex: None,
        get_srq_num: None,
        create_srq_ex: None,
        open_xrcd: None,
        close_xrcd: None,
        _ABI_placeholder3: 0,
        sz: size_of::<verbs_context>(),
        context: ibv_context {
            device,
            ops,
            cmd_fd: -1,
            async_fd,
            num_comp_vectors: 1,
            mutex: [0; 5],
            abi_compat: VERBS_ABI_IS_EXTENDED as *mut _,
        },
    }
}
