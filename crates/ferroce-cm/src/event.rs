//! What the CM tells the upper layer, in the order it happened.

use crate::{CmId, PeerAddr};
use ferroce_wire::mad::{CmRep, CmReq};

/// Why a connection attempt ended without a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Every REQ went unanswered (the kernel's REQ_ERROR).
    Req,
    /// Every REP went unanswered (the kernel's REP_ERROR).
    Rep,
}

/// One event; private data is the whole field (the CM carries no length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a service we listen on; answer with accept, reject or
    /// send_mra.
    ReqReceived {
        id: CmId,
        peer: PeerAddr,
        req: Box<CmReq>,
    },
    /// The passive side accepted; move the QP to RTR/RTS, then call `rtu`.
    RepReceived { id: CmId, rep: Box<CmRep> },
    /// The peer needs more time; the wait was extended.
    MraReceived { id: CmId, service_timeout: u8 },
    /// Both sides are connected (RTU sent, or received).
    Established { id: CmId },
    /// The peer rejected the REQ or REP, or its connection.
    Rejected {
        id: CmId,
        reason: u16,
        ari: Vec<u8>,
        private_data: Vec<u8>,
    },
    /// No answer after every retry; the peer was sent a REJ ("timeout" for
    /// a REQ, consumer reject for a REP).
    Unreachable { id: CmId, unanswered: Unanswered },
    /// The peer asked to disconnect; answer with `disconnect` (the DREP).
    DisconnectRequest { id: CmId, private_data: Vec<u8> },
    /// The connection is closed (DREP received, DREP sent, or every DREQ
    /// unanswered); TimeWait follows.
    Disconnected { id: CmId, dreq_unanswered: bool },
    /// TimeWait is over; the comm ID may be reused.
    TimewaitExit { id: CmId },
    /// A SIDR_REQ for a service we listen on; answer with `sidr_reply`.
    SidrRequest {
        id: CmId,
        peer: PeerAddr,
        service_id: u64,
        partition_key: u16,
        private_data: Vec<u8>,
    },
    /// The answer to our SIDR_REQ.
    SidrReply {
        id: CmId,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: Vec<u8>,
    },
    /// Every SIDR_REQ went unanswered.
    SidrTimeout { id: CmId },
}
