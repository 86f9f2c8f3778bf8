//! The verbs vocabulary, shaped like libibverbs: access flags, QP types and
//! states, the attributes of `modify_qp`, work requests and completions, and
//! the errors a bad call gets. Plain data; the engine lives elsewhere.

use core::fmt;
use std::net::IpAddr;

use ferroce_wire::Psn;

/// Memory region access rights (`IBV_ACCESS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    pub const LOCAL_WRITE: Self = Self(1);
    pub const REMOTE_WRITE: Self = Self(1 << 1);
    pub const REMOTE_READ: Self = Self(1 << 2);
    pub const REMOTE_ATOMIC: Self = Self(1 << 3);
    /// No access beyond local read.
    pub const NONE: Self = Self(0);

    pub const fn bits(self) -> u32 {
        self.0
    }
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Transport service of a queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    Rc,
    Uc,
    Ud,
}

/// IBA QP states (`IBV_QPS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Sqd,
    Sqe,
    Err,
}

/// Path MTU (`IBV_MTU_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl Mtu {
    pub const fn bytes(self) -> usize {
        128 << self as usize
    }
}

/// Where a connected QP sends, or where a UD send goes (the address handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Path {
    /// The peer's address (its RoCE v2 GID as an IP address).
    pub remote: IpAddr,
    /// UDP source port of the flow (RoCE v2 entropy; 0xC000 | hash).
    pub udp_src_port: u16,
    /// DSCP and ECN bits for the IP header (the GRH traffic class).
    pub traffic_class: u8,
    pub hop_limit: u8,
}

/// The attributes `modify_qp` may set; `None` means "not in the mask".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttr {
    pub state: Option<QpState>,
    pub pkey_index: Option<u16>,
    pub port: Option<u8>,
    pub qkey: Option<u32>,
    pub access: Option<Access>,
    pub path: Option<Path>,
    pub path_mtu: Option<Mtu>,
    pub dest_qpn: Option<u32>,
    pub rq_psn: Option<Psn>,
    pub sq_psn: Option<Psn>,
    pub max_rd_atomic: Option<u8>,
    pub max_dest_rd_atomic: Option<u8>,
    /// RNR NAK timer code this QP sends (5 bits).
    pub min_rnr_timer: Option<u8>,
    /// Local ACK timeout: 4.096 us x 2^timeout; 0 means infinite.
    pub timeout: Option<u8>,
    pub retry_cnt: Option<u8>,
    /// 7 means retry forever.
    pub rnr_retry: Option<u8>,
}

/// One scatter/gather element: `len` bytes at `offset` in the region `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    pub lkey: u32,
    /// Byte offset from the start of the region (`addr - mr.addr` in ibverbs).
    pub offset: u64,
    pub len: u32,
}

/// What a send work request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendWithImm(u32),
    SendWithInv(u32),
    Write {
        remote_addr: u64,
        rkey: u32,
    },
    WriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    CompareSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
}

/// A send work request (`ibv_send_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: SendOp,
    pub sg: Vec<Sge>,
    /// Produce a completion even on a QP created with `sq_sig_all = false`.
    pub signaled: bool,
    /// Wait for earlier READs and atomics to complete before starting.
    pub fence: bool,
    pub solicited: bool,
    /// Data carried in the request itself instead of `sg` (`IBV_SEND_INLINE`).
    pub inline: Option<Vec<u8>>,
    /// For UD: destination and its QPN and Q_Key.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled request with no flags, inline data or UD destination.
    pub fn new(wr_id: u64, op: SendOp, sg: Vec<Sge>) -> Self {
        Self {
            wr_id,
            op,
            sg,
            signaled: true,
            fence: false,
            solicited: false,
            inline: None,
            ud: None,
        }
    }
}

/// The destination of a UD send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    pub path: Path,
    pub qpn: u32,
    pub qkey: u32,
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sg: Vec<Sge>,
}

/// What `modify_srq` changes (`ibv_srq_attr` with its mask); `None` leaves
/// an attribute as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    /// Resize the SRQ (`IBV_SRQ_MAX_WR`): at least the WQEs it holds now,
    /// and at least an armed limit.
    pub max_wr: Option<u32>,
    /// Arm the limit event (`IBV_SRQ_LIMIT`): [`AsyncEvent::SrqLimitReached`]
    /// once the WQEs left drop below this; 0 disarms it.
    pub srq_limit: Option<u32>,
}

/// What `query_srq` reports (`ibv_srq_attr`, and the WQEs waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqInfo {
    pub max_wr: u32,
    /// The armed limit; 0 when the limit event is not (or no longer) armed.
    pub srq_limit: u32,
    /// Receive WQEs posted and not yet taken by a QP (not in ibverbs).
    pub wqes: u32,
}

/// An asynchronous event (`ibv_get_async_event`). Only the events this
/// engine can produce are listed; each is reported once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AsyncEvent {
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`: a QP took a WQE from the SRQ and
    /// fewer than its armed limit were left. The limit is disarmed
    /// (`srq_limit` reads 0) until `modify_srq` arms it again.
    SrqLimitReached { srq: u32 },
    /// `IBV_EVENT_QP_FATAL`: the engine (not `modify_qp`) moved the QP to
    /// the error state: a NAK, retries or RNR retries exhausted, a
    /// protocol or local error. Its work requests are flushed.
    QpFatal { qpn: u32 },
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`: a QP that takes its receives from
    /// an SRQ entered the error state (by `modify_qp` or by an error); it
    /// will take no more WQEs from the SRQ, and the one it was filling has
    /// been flushed. Raised after `QpFatal` when both apply.
    QpLastWqeReached { qpn: u32 },
    /// `IBV_EVENT_CQ_ERR`: the CQ was full and a completion was lost
    /// (reported once per CQ; [`crate::Endpoint::cq_overflowed`] stays set).
    CqOverflow { cq: u32 },
}

/// Completion status (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    Success,
    LocLenErr,
    LocQpOpErr,
    LocProtErr,
    WrFlushErr,
    BadRespErr,
    LocAccessErr,
    RemInvReqErr,
    RemAccessErr,
    RemOpErr,
    RetryExcErr,
    RnrRetryExcErr,
    GeneralErr,
}

/// What a completion completes (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    CompSwap,
    FetchAdd,
    Recv,
    RecvRdmaWithImm,
}

/// A work completion (`ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub qpn: u32,
    /// Bytes received (receive completions).
    pub byte_len: u32,
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with invalidate.
    pub invalidated_rkey: Option<u32>,
    /// UD: the sender's QPN.
    pub src_qp: u32,
}

impl WorkCompletion {
    /// The completion of a work request flushed from a QP in error.
    pub fn flushed(wr_id: u64, opcode: WcOpcode, qpn: u32) -> Self {
        Self {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            qpn,
            byte_len: 0,
            imm: None,
            invalidated_rkey: None,
            src_qp: 0,
        }
    }
}

/// Why a verbs call was refused. Each names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerbsError {
    NoSuchPd(u32),
    NoSuchCq(u32),
    NoSuchQp(u32),
    NoSuchMr(u32),
    NoSuchSrq(u32),
    /// The object is still in use (`what` says by what).
    Busy(&'static str),
    /// `modify_qp` from `from` to `to` is not a legal transition.
    BadTransition {
        from: QpState,
        to: QpState,
    },
    /// An attribute the transition requires is missing.
    MissingAttr {
        to: QpState,
        attr: &'static str,
    },
    /// An attribute the transition does not allow is present.
    UnexpectedAttr {
        to: QpState,
        attr: &'static str,
    },
    /// A value out of range (`what` names it).
    BadValue {
        what: &'static str,
        value: u64,
    },
    /// The QP is in a state that does not accept this call.
    WrongState {
        qpn: u32,
        state: QpState,
        call: &'static str,
    },
    /// The queue is full.
    QueueFull {
        qpn: u32,
        queue: &'static str,
        depth: u32,
    },
    /// The shared receive queue is full.
    SrqFull {
        srq: u32,
        depth: u32,
    },
    /// `post_recv` on a QP that takes its receives from an SRQ: they are
    /// posted to the SRQ (`post_srq_recv`), as ibverbs requires.
    QpHasSrq {
        qpn: u32,
        srq: u32,
    },
    /// A scatter/gather element cannot be used; `why` says what is wrong
    /// (no such region, another PD, outside the region, no LOCAL_WRITE).
    BadSge {
        lkey: u32,
        offset: u64,
        len: u32,
        why: &'static str,
    },
    /// The operation does not exist on this QP type.
    BadOpForQpType {
        op: &'static str,
        qp_type: QpType,
    },
    /// An atomic's remote address is not 8-byte aligned.
    Unaligned(u64),
    /// Message longer than the device allows.
    TooLong {
        len: u64,
        max: u64,
    },
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchPd(h) => write!(f, "no protection domain {h}"),
            Self::NoSuchCq(h) => write!(f, "no completion queue {h}"),
            Self::NoSuchQp(n) => write!(f, "no queue pair {n:#x}"),
            Self::NoSuchMr(k) => write!(f, "no memory region with key {k:#x}"),
            Self::NoSuchSrq(h) => write!(f, "no shared receive queue {h}"),
            Self::Busy(what) => write!(f, "still in use: {what}"),
            Self::BadTransition { from, to } => {
                write!(f, "modify_qp: no transition from {from:?} to {to:?}")
            }
            Self::MissingAttr { to, attr } => {
                write!(f, "modify_qp to {to:?}: required attribute {attr} missing")
            }
            Self::UnexpectedAttr { to, attr } => {
                write!(f, "modify_qp to {to:?}: attribute {attr} not allowed")
            }
            Self::BadValue { what, value } => write!(f, "bad {what}: {value}"),
            Self::WrongState { qpn, state, call } => {
                write!(f, "{call} on QP {qpn:#x} in state {state:?}")
            }
            Self::QueueFull { qpn, queue, depth } => {
                write!(f, "QP {qpn:#x}: {queue} full ({depth} entries)")
            }
            Self::SrqFull { srq, depth } => {
                write!(f, "shared receive queue {srq} full ({depth} entries)")
            }
            Self::QpHasSrq { qpn, srq } => write!(
                f,
                "post_recv on QP {qpn:#x}, which takes its receives from shared \
                 receive queue {srq}: post them to the SRQ (post_srq_recv)"
            ),
            Self::BadSge {
                lkey,
                offset,
                len,
                why,
            } => write!(
                f,
                "scatter/gather element lkey {lkey:#x} offset {offset} length {len}: {why}"
            ),
            Self::BadOpForQpType { op, qp_type } => {
                write!(f, "{op} is not supported on a {qp_type:?} QP")
            }
            Self::Unaligned(a) => write!(f, "atomic address {a:#x} is not 8-byte aligned"),
            Self::TooLong { len, max } => write!(f, "message of {len} bytes exceeds {max}"),
        }
    }
}

impl std::error::Error for VerbsError {}
