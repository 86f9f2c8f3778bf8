//! Completions and asynchronous events: `WorkCompletion` with its status
//! and opcode, the `WcError` a failed one turns into, and `AsyncEvent`.

use core::fmt;

use super::Hex;

/// An asynchronous event (`ibv_get_async_event`). Only the events this
/// engine can produce are listed; each is reported once. `Debug` prints
/// QPNs in hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum AsyncEvent {
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`: a QP took a WQE from the SRQ and
    /// fewer than its armed limit were left. The limit is disarmed
    /// (`srq_limit` reads 0) until `modify_srq` arms it again.
    SrqLimitReached {
        /// The SRQ's handle.
        srq: u32,
    },
    /// `IBV_EVENT_QP_FATAL`: the engine (not `modify_qp`) moved the QP to
    /// the error state: a NAK, retries or RNR retries exhausted, a
    /// protocol or local error. Its work requests are flushed.
    QpFatal {
        /// The QP.
        qpn: u32,
    },
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`: a QP that takes its receives from
    /// an SRQ entered the error state (by `modify_qp` or by an error); it
    /// will take no more WQEs from the SRQ, and the one it was filling has
    /// been flushed. Raised after `QpFatal` when both apply.
    QpLastWqeReached {
        /// The QP.
        qpn: u32,
    },
    /// `IBV_EVENT_CQ_ERR`: the CQ was full and a completion was lost
    /// (reported once per CQ; [`crate::Endpoint::cq_overflowed`] stays set).
    CqOverflow {
        /// The CQ's handle.
        cq: u32,
    },
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
    /// `IBV_WC_MW_BIND_ERR`: a BIND_MW broke a rule of memory windows.
    MwBindErr,
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
    /// `IBV_WC_REM_INV_RD_REQ_ERR`: the peer's EE context refused an RD
    /// request (no such RD QP there, of its domain, or another Q_Key).
    RemInvRdReqErr,
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
            Self::MwBindErr => "memory bind operation error",
            Self::BadRespErr => "bad response error",
            Self::LocAccessErr => "local access error",
            Self::RemInvReqErr => "remote invalid request error",
            Self::RemAccessErr => "remote access error",
            Self::RemOpErr => "remote operation error",
            Self::RetryExcErr => "transport retry counter exceeded",
            Self::RnrRetryExcErr => "RNR retry counter exceeded",
            Self::RemInvRdReqErr => "remote invalid RD request",
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
            Self::MwBindErr => 6,
            Self::BadRespErr => 7,
            Self::LocAccessErr => 8,
            Self::RemInvReqErr => 9,
            Self::RemAccessErr => 10,
            Self::RemOpErr => 11,
            Self::RetryExcErr => 12,
            Self::RnrRetryExcErr => 13,
            Self::RemInvRdReqErr => 15,
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
    /// `IBV_WC_SEND`: a SEND (with or without immediate or invalidate).
    Send,
    /// `IBV_WC_RDMA_WRITE`: an RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// `IBV_WC_RDMA_READ`: an RDMA READ.
    RdmaRead,
    /// `IBV_WC_COMP_SWAP`: an atomic Compare & Swap.
    CompSwap,
    /// `IBV_WC_FETCH_ADD`: an atomic Fetch & Add.
    FetchAdd,
    /// An ATOMIC WRITE (IBA 1.5).
    AtomicWrite,
    /// A FLUSH (IBA 1.5).
    Flush,
    /// A BIND_MW.
    BindMw,
    /// A LOCAL_INV.
    LocalInv,
    /// `IBV_WC_RECV`: a receive consumed by an incoming SEND.
    Recv,
    /// `IBV_WC_RECV_RDMA_WITH_IMM`: a receive consumed by an incoming
    /// RDMA WRITE with immediate.
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
    /// Receives: the immediate data of a SEND or WRITE with immediate, in
    /// host order (`IBV_WC_WITH_IMM`, `imm_data`).
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with invalidate.
    pub invalidated_rkey: Option<u32>,
    /// UD: the sender's QPN.
    pub src_qp: u32,
    /// UD receives: the header the 40-byte GRH area holds (see
    /// [`NetworkHeader`]); `None` for every other completion.
    pub network: Option<NetworkHeader>,
}

/// The network header of a received UD message, which its receive buffer's
/// first 40 bytes hold (ibverbs' `IBV_WC_GRH` area): a RoCE v1 GRH, or a
/// RoCE v2 packet's IPv6 header (the whole area) or IPv4 header (its last
/// 20 bytes). A RoCE NIC reports which in the completion (the kernel's
/// `network_hdr_type`; mlx5 in the SL field, see [`NetworkHeader::roce_sl`]),
/// as a reader of the area must know where the addresses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkHeader {
    /// RoCE v1: an IBA GRH fills the 40 bytes.
    Grh,
    /// RoCE v2 over IPv6: the IPv6 header fills the 40 bytes.
    Ipv6,
    /// RoCE v2 over IPv4: the IPv4 header is in the last 20 bytes.
    Ipv4,
}

impl NetworkHeader {
    /// The SL a ConnectX (mlx5) reports for a RoCE UD receive: bits 2..0
    /// the L3 header type (0 GRH, 1 IPv6, 2 IPv4), bit 3 set for RoCE v2
    /// (a UDP header). UCX's UD transport reads it to find the destination
    /// address in the GRH area.
    pub const fn roce_sl(self) -> u8 {
        const UDP: u8 = 0x8;
        match self {
            Self::Grh => 0,
            Self::Ipv6 => UDP | 1,
            Self::Ipv4 => UDP | 2,
        }
    }
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
            network: None,
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
            network: None,
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
            "work request {:#x} ({:?}) on QP {:#x} failed: {} ({})",
            self.wr_id,
            self.opcode,
            self.qpn,
            self.status,
            self.status.code()
        )
    }
}

impl std::error::Error for WcError {}
