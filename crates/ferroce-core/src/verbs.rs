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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    pub lkey: u32,
    /// Byte offset from the start of the region (`addr - mr.addr` in ibverbs).
    pub offset: u64,
    /// Bytes; one message is at most [`crate::MAX_MSG_SIZE`] (8 MiB, as
    /// rxe; IBA's DMA length allows 2 GiB), so 32 bits, as
    /// `ibv_sge::length`.
    pub len: u32,
}

/// A bounded range of a peer's registered memory: where a WRITE, READ or
/// atomic lands. Made by `RemoteRegion::at` in the `ferroce` crate, which
/// checks the range against the region the peer advertised, so that no
/// caller computes `addr + offset` by hand. A work request whose message is
/// longer than the slice is refused at post time.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteSlice {
    addr: u64,
    rkey: u32,
    len: u64,
}

impl RemoteSlice {
    /// A slice of `len` bytes at the peer's address `addr`, under `rkey`,
    /// taken on trust: for memory described by other means (another
    /// tool's exchange). The peer still checks every access.
    pub const fn new(addr: u64, rkey: u32, len: u64) -> Self {
        Self { addr, rkey, len }
    }

    /// The peer's virtual address of the slice's first byte (the RETH VA).
    pub const fn addr(&self) -> u64 {
        self.addr
    }

    /// The key the peer registered the region under.
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Bytes in the slice.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the slice holds no bytes (a zero-length WRITE or READ).
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for RemoteSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RemoteSlice {{ addr: {:#x}, rkey: {:#x}, len: {} }}",
            self.addr, self.rkey, self.len
        )
    }
}

/// What a send work request asks for (`ibv_wr_opcode` and its operands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// `IBV_WR_SEND`.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`: the peer's receive completion carries it.
    SendWithImm(u32),
    /// `IBV_WR_SEND_WITH_INV`: the peer invalidates this R_Key.
    SendWithInv(u32),
    /// `IBV_WR_RDMA_WRITE` into `remote`.
    Write { remote: RemoteSlice },
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: consumes a receive at the peer.
    WriteWithImm { remote: RemoteSlice, imm: u32 },
    /// `IBV_WR_RDMA_READ` from `remote` into the scatter list.
    Read { remote: RemoteSlice },
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` on the 8 bytes at `remote` (aligned);
    /// the original value lands in the 8-byte scatter list.
    CompareSwap {
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` on the 8 bytes at `remote` (aligned).
    FetchAdd { remote: RemoteSlice, add: u64 },
}

impl SendOp {
    /// The peer memory the operation touches, if any.
    pub const fn remote(&self) -> Option<RemoteSlice> {
        match *self {
            Self::Write { remote }
            | Self::WriteWithImm { remote, .. }
            | Self::Read { remote }
            | Self::CompareSwap { remote, .. }
            | Self::FetchAdd { remote, .. } => Some(remote),
            Self::Send | Self::SendWithImm(_) | Self::SendWithInv(_) => None,
        }
    }

    /// Whether the operation writes the scatter list (READ and atomics).
    pub const fn writes_local(&self) -> bool {
        matches!(
            self,
            Self::Read { .. } | Self::CompareSwap { .. } | Self::FetchAdd { .. }
        )
    }
}

/// A send work request (`ibv_send_wr`). It borrows its scatter list (and
/// inline data): `post_send` copies what it needs into the send queue, so
/// the caller's slices are free again when it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    pub op: SendOp,
    /// Local memory the message is gathered from (READ, atomics: scattered
    /// into).
    pub sg: &'a [Sge],
    /// Produce a completion even on a QP created with `sq_sig_all = false`.
    pub signaled: bool,
    /// Wait for earlier READs and atomics to complete before starting.
    pub fence: bool,
    /// Ask the peer to raise a solicited event.
    pub solicited: bool,
    /// Data carried in the request itself instead of `sg`
    /// (`IBV_SEND_INLINE`): copied at post, no registered memory needed.
    pub inline: Option<&'a [u8]>,
    /// For UD: destination and its QPN and Q_Key.
    pub ud: Option<UdDest>,
}

impl<'a> SendWr<'a> {
    /// A signaled request with no flags, inline data or UD destination.
    pub const fn new(wr_id: u64, op: SendOp, sg: &'a [Sge]) -> Self {
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

    /// A SEND of the bytes `sg` names.
    pub const fn send(wr_id: u64, sg: &'a [Sge]) -> Self {
        Self::new(wr_id, SendOp::Send, sg)
    }

    /// An RDMA WRITE of `sg` into `remote` (which must hold the message).
    pub const fn write(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice) -> Self {
        Self::new(wr_id, SendOp::Write { remote }, sg)
    }

    /// An RDMA READ of `remote` into `sg`.
    pub const fn read(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice) -> Self {
        Self::new(wr_id, SendOp::Read { remote }, sg)
    }

    /// A FETCH_ADD of `add` on the 8 bytes at `remote`; the old value
    /// lands in `sg` (8 bytes).
    pub const fn fetch_add(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice, add: u64) -> Self {
        Self::new(wr_id, SendOp::FetchAdd { remote, add }, sg)
    }

    /// A CMP_SWAP at `remote`: `swap` is stored if the 8 bytes there equal
    /// `compare`; the old value lands in `sg` (8 bytes).
    pub const fn compare_swap(
        wr_id: u64,
        sg: &'a [Sge],
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
    ) -> Self {
        Self::new(
            wr_id,
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            },
            sg,
        )
    }

    /// The same request, completing only on error (or with `sq_sig_all`).
    pub const fn unsignaled(mut self) -> Self {
        self.signaled = false;
        self
    }
}

/// The destination of a UD send (an address handle, QPN and Q_Key).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    pub path: Path,
    pub qpn: u32,
    pub qkey: u32,
}

impl fmt::Debug for UdDest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdDest")
            .field("path", &self.path)
            .field("qpn", &Hex(self.qpn))
            .field("qkey", &Hex(self.qkey))
            .finish()
    }
}

/// A receive work request (`ibv_recv_wr`), borrowing its scatter list as
/// [`SendWr`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the incoming message is scattered.
    pub sg: &'a [Sge],
}

impl<'a> RecvWr<'a> {
    /// A receive into `sg`.
    pub const fn new(wr_id: u64, sg: &'a [Sge]) -> Self {
        Self { wr_id, sg }
    }
}

/// Scatter/gather elements a queued work request keeps in place without
/// a heap allocation; longer lists go to the heap.
pub const INLINE_SGES: usize = 4;

/// A queued request's copy of its scatter list: up to [`INLINE_SGES`]
/// elements held in place (the common case posts without allocating).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum SgList {
    Inline { len: u8, sges: [Sge; INLINE_SGES] },
    Heap(Box<[Sge]>),
}

impl From<&[Sge]> for SgList {
    fn from(sg: &[Sge]) -> Self {
        if sg.len() <= INLINE_SGES {
            let mut sges = [Sge::default(); INLINE_SGES];
            sges[..sg.len()].copy_from_slice(sg);
            Self::Inline {
                len: sg.len() as u8,
                sges,
            }
        } else {
            Self::Heap(sg.into())
        }
    }
}

impl core::ops::Deref for SgList {
    type Target = [Sge];
    fn deref(&self) -> &[Sge] {
        match self {
            Self::Inline { len, sges } => &sges[..*len as usize],
            Self::Heap(sges) => sges,
        }
    }
}

impl<'a> IntoIterator for &'a SgList {
    type Item = &'a Sge;
    type IntoIter = core::slice::Iter<'a, Sge>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for SgList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A send work request as the send queue holds it: [`SendWr`] with its
/// borrowed parts copied.
#[derive(Debug, Clone)]
pub(crate) struct QueuedSend {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    pub(crate) sg: SgList,
    pub(crate) signaled: bool,
    pub(crate) fence: bool,
    pub(crate) solicited: bool,
    pub(crate) inline: Option<Box<[u8]>>,
    pub(crate) ud: Option<UdDest>,
}

impl From<&SendWr<'_>> for QueuedSend {
    fn from(wr: &SendWr<'_>) -> Self {
        Self {
            wr_id: wr.wr_id,
            op: wr.op,
            sg: wr.sg.into(),
            signaled: wr.signaled,
            fence: wr.fence,
            solicited: wr.solicited,
            inline: wr.inline.map(Box::from),
            ud: wr.ud,
        }
    }
}

/// A receive work request as a receive queue or SRQ holds it.
#[derive(Debug, Clone)]
pub(crate) struct QueuedRecv {
    pub(crate) wr_id: u64,
    pub(crate) sg: SgList,
}

impl From<&RecvWr<'_>> for QueuedRecv {
    fn from(wr: &RecvWr<'_>) -> Self {
        Self {
            wr_id: wr.wr_id,
            sg: wr.sg.into(),
        }
    }
}

/// Formats a QPN or key as rdma-core prints them: hex.
struct Hex(u32);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
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
/// engine can produce are listed; each is reported once. `Debug` prints
/// QPNs in hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
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

impl fmt::Debug for AsyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::SrqLimitReached { srq } => write!(f, "SrqLimitReached {{ srq: {srq} }}"),
            Self::QpFatal { qpn } => write!(f, "QpFatal {{ qpn: {:?} }}", Hex(qpn)),
            Self::QpLastWqeReached { qpn } => {
                write!(f, "QpLastWqeReached {{ qpn: {:?} }}", Hex(qpn))
            }
            Self::CqOverflow { cq } => write!(f, "CqOverflow {{ cq: {cq} }}"),
        }
    }
}

/// Completion status (`ibv_wc_status`): the statuses this engine
/// produces. `Display` gives rdma-core's `ibv_wc_status_str` wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// `IBV_WC_SUCCESS`.
    Success,
    /// `IBV_WC_LOC_LEN_ERR`: a message longer than the receive's buffers.
    LocLenErr,
    /// `IBV_WC_LOC_QP_OP_ERR`: the QP could not carry out the request.
    LocQpOpErr,
    /// `IBV_WC_LOC_PROT_ERR`: a scatter/gather element failed its check.
    LocProtErr,
    /// `IBV_WC_WR_FLUSH_ERR`: flushed from a QP in the error state.
    WrFlushErr,
    /// `IBV_WC_BAD_RESP_ERR`: the peer answered with something unexpected.
    BadRespErr,
    /// `IBV_WC_LOC_ACCESS_ERR`: local memory refused the access.
    LocAccessErr,
    /// `IBV_WC_REM_INV_REQ_ERR`: the peer found the request invalid.
    RemInvReqErr,
    /// `IBV_WC_REM_ACCESS_ERR`: the peer refused the R_Key, range or rights.
    RemAccessErr,
    /// `IBV_WC_REM_OP_ERR`: the peer could not carry out the operation.
    RemOpErr,
    /// `IBV_WC_RETRY_EXC_ERR`: no ACK after `retry_cnt` retransmissions.
    RetryExcErr,
    /// `IBV_WC_RNR_RETRY_EXC_ERR`: the peer had no receive posted, still,
    /// after `rnr_retry` tries.
    RnrRetryExcErr,
    /// `IBV_WC_GENERAL_ERR`.
    GeneralErr,
}

impl WcStatus {
    /// rdma-core's `ibv_wc_status_str` for this status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::LocLenErr => "local length error",
            Self::LocQpOpErr => "local QP operation error",
            Self::LocProtErr => "local protection error",
            Self::WrFlushErr => "Work Request Flushed Error",
            Self::BadRespErr => "bad response error",
            Self::LocAccessErr => "local access error",
            Self::RemInvReqErr => "remote invalid request error",
            Self::RemAccessErr => "remote access error",
            Self::RemOpErr => "remote operation error",
            Self::RetryExcErr => "transport retry counter exceeded",
            Self::RnrRetryExcErr => "RNR retry counter exceeded",
            Self::GeneralErr => "general error",
        }
    }

    /// The `ibv_wc_status` number (`IBV_WC_*`), for logs that compare
    /// with rdma-core's.
    pub const fn code(self) -> u32 {
        match self {
            Self::Success => 0,
            Self::LocLenErr => 1,
            Self::LocQpOpErr => 2,
            Self::LocProtErr => 4,
            Self::WrFlushErr => 5,
            Self::BadRespErr => 7,
            Self::LocAccessErr => 8,
            Self::RemInvReqErr => 9,
            Self::RemAccessErr => 10,
            Self::RemOpErr => 11,
            Self::RetryExcErr => 12,
            Self::RnrRetryExcErr => 13,
            Self::GeneralErr => 21,
        }
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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

/// A work completion (`ibv_wc`). `Debug` prints QPNs in hex; the
/// `Default` value (a successful SEND of wr_id 0) only fills buffers for
/// `poll_into`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The `wr_id` of the work request this completes.
    pub wr_id: u64,
    /// Success, or why the request failed ([`WorkCompletion::ok`]).
    pub status: WcStatus,
    /// What completed (for a failed request, what it was).
    pub opcode: WcOpcode,
    /// The local QP the work request was posted to.
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

impl WorkCompletion {
    /// The completion if it succeeded, else a [`WcError`] naming the
    /// status, work request and QP: `cq.poll(16)?.iter().map(|wc| wc.ok())`.
    pub fn ok(&self) -> Result<&Self, WcError> {
        if self.status == WcStatus::Success {
            Ok(self)
        } else {
            Err(WcError {
                status: self.status,
                opcode: self.opcode,
                wr_id: self.wr_id,
                qpn: self.qpn,
            })
        }
    }
}

impl Default for WorkCompletion {
    fn default() -> Self {
        Self {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            qpn: 0,
            byte_len: 0,
            imm: None,
            invalidated_rkey: None,
            src_qp: 0,
        }
    }
}

impl fmt::Debug for WorkCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkCompletion")
            .field("wr_id", &self.wr_id)
            .field("status", &self.status)
            .field("opcode", &self.opcode)
            .field("qpn", &Hex(self.qpn))
            .field("byte_len", &self.byte_len)
            .field("imm", &self.imm.map(Hex))
            .field("invalidated_rkey", &self.invalidated_rkey.map(Hex))
            .field("src_qp", &Hex(self.src_qp))
            .finish()
    }
}

/// A work request that completed with an error ([`WorkCompletion::ok`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WcError {
    /// The failed status (never [`WcStatus::Success`]).
    pub status: WcStatus,
    /// What the work request was.
    pub opcode: WcOpcode,
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// The QP it was posted to.
    pub qpn: u32,
}

impl fmt::Display for WcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "work request {} ({:?}) on QP {:#x} failed: {} ({})",
            self.wr_id,
            self.opcode,
            self.qpn,
            self.status,
            self.status.code()
        )
    }
}

impl std::error::Error for WcError {}

/// Why a verbs call was refused. Each names what is wrong. `Debug`
/// prints QPNs and keys in hex, as `Display` and rdma-core do.
#[derive(Clone, PartialEq, Eq)]
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
    /// A WRITE or READ longer than the remote slice it targets, or an
    /// atomic whose slice is shorter than 8 bytes.
    RemoteTooShort {
        len: u64,
        remote: RemoteSlice,
    },
    /// `offset`..`offset + len` is not inside a remote region of `size`
    /// bytes (`RemoteRegion::at`).
    OutsideRemote {
        offset: u64,
        len: u64,
        size: u64,
    },
}

impl fmt::Debug for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NoSuchPd(h) => f.debug_tuple("NoSuchPd").field(&h).finish(),
            Self::NoSuchCq(h) => f.debug_tuple("NoSuchCq").field(&h).finish(),
            Self::NoSuchQp(n) => f.debug_tuple("NoSuchQp").field(&Hex(n)).finish(),
            Self::NoSuchMr(k) => f.debug_tuple("NoSuchMr").field(&Hex(k)).finish(),
            Self::NoSuchSrq(h) => f.debug_tuple("NoSuchSrq").field(&h).finish(),
            Self::Busy(what) => f.debug_tuple("Busy").field(&what).finish(),
            Self::BadTransition { from, to } => f
                .debug_struct("BadTransition")
                .field("from", &from)
                .field("to", &to)
                .finish(),
            Self::MissingAttr { to, attr } => f
                .debug_struct("MissingAttr")
                .field("to", &to)
                .field("attr", &attr)
                .finish(),
            Self::UnexpectedAttr { to, attr } => f
                .debug_struct("UnexpectedAttr")
                .field("to", &to)
                .field("attr", &attr)
                .finish(),
            Self::BadValue { what, value } => f
                .debug_struct("BadValue")
                .field("what", &what)
                .field("value", &value)
                .finish(),
            Self::WrongState { qpn, state, call } => f
                .debug_struct("WrongState")
                .field("qpn", &Hex(qpn))
                .field("state", &state)
                .field("call", &call)
                .finish(),
            Self::QueueFull { qpn, queue, depth } => f
                .debug_struct("QueueFull")
                .field("qpn", &Hex(qpn))
                .field("queue", &queue)
                .field("depth", &depth)
                .finish(),
            Self::SrqFull { srq, depth } => f
                .debug_struct("SrqFull")
                .field("srq", &srq)
                .field("depth", &depth)
                .finish(),
            Self::QpHasSrq { qpn, srq } => f
                .debug_struct("QpHasSrq")
                .field("qpn", &Hex(qpn))
                .field("srq", &srq)
                .finish(),
            Self::BadSge {
                lkey,
                offset,
                len,
                why,
            } => f
                .debug_struct("BadSge")
                .field("lkey", &Hex(lkey))
                .field("offset", &offset)
                .field("len", &len)
                .field("why", &why)
                .finish(),
            Self::BadOpForQpType { op, qp_type } => f
                .debug_struct("BadOpForQpType")
                .field("op", &op)
                .field("qp_type", &qp_type)
                .finish(),
            Self::Unaligned(a) => write!(f, "Unaligned({a:#x})"),
            Self::TooLong { len, max } => f
                .debug_struct("TooLong")
                .field("len", &len)
                .field("max", &max)
                .finish(),
            Self::RemoteTooShort { len, remote } => f
                .debug_struct("RemoteTooShort")
                .field("len", &len)
                .field("remote", &remote)
                .finish(),
            Self::OutsideRemote { offset, len, size } => f
                .debug_struct("OutsideRemote")
                .field("offset", &offset)
                .field("len", &len)
                .field("size", &size)
                .finish(),
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchPd(h) => write!(f, "no protection domain {h}"),
            Self::NoSuchCq(h) => write!(f, "no completion queue {h}"),
            Self::NoSuchQp(n @ 0..=1) => write!(
                f,
                "queue pair {n} is reserved (QP0 the SMI, QP1 the GSI, the endpoint's own): \
                 MADs go through send_mad and poll_mad"
            ),
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
            Self::RemoteTooShort { len, remote } => write!(
                f,
                "message of {len} bytes does not fit the remote slice of {} bytes at \
                 {:#x}: take a longer slice or post a shorter message",
                remote.len(),
                remote.addr()
            ),
            Self::OutsideRemote { offset, len, size } => write!(
                f,
                "{len} bytes at offset {offset} are outside the remote region of {size} \
                 bytes: take a range inside it"
            ),
        }
    }
}

impl std::error::Error for VerbsError {}
