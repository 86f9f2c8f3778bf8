//! What an [`EventChannel`](super::EventChannel) delivers: rdma_cm's events
//! (`struct rdma_cm_event`), named as `rdma_event_str` names them.

use std::fmt;

use crate::UdDest;

use super::CmId;

/// One event about one ID (`rdma_get_cm_event`).
#[derive(Debug)]
pub struct CmEvent {
    /// The ID the event is about; for `ConnectRequest`, a new ID for the
    /// connection being requested (accept or reject it).
    pub id: CmId,
    /// For `ConnectRequest`: the listening ID the request came to.
    pub listen_id: Option<CmId>,
    /// What happened.
    pub kind: CmEventKind,
}

/// The connection parameters an event carries (`rdma_conn_param` as
/// librdmacm fills it in an event).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnInfo {
    /// The peer's private data: after a REQ, what follows rdma_cm's
    /// 36-byte header (56 bytes); after a REP or REJ, the whole field
    /// (the CM carries no length, so trailing zeros are the peer's or
    /// padding).
    pub private_data: Vec<u8>,
    /// Reads and atomics this side will answer at once.
    pub responder_resources: u8,
    /// Reads and atomics this side may have outstanding.
    pub initiator_depth: u8,
    /// The REQ's retry count.
    pub retry_count: u8,
    /// The RNR retry count the peer asked for (7: forever).
    pub rnr_retry_count: u8,
    /// The peer's QP takes receives from an SRQ.
    pub srq: bool,
    /// The peer's QP number.
    pub qp_num: u32,
}

/// A UD peer as a SIDR exchange resolved it (`rdma_ud_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdInfo {
    /// Where to send: the peer's address, QPN and Q_Key, for
    /// [`crate::SendWr`]'s UD destination.
    pub dest: UdDest,
    /// The peer's private data (the whole SIDR_REP field on the active
    /// side; after the rdma_cm header on the passive side).
    pub private_data: Vec<u8>,
}

/// What happened (`enum rdma_cm_event_type`).
#[derive(Debug)]
pub enum CmEventKind {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`: the ID is bound to the device that
    /// reaches the destination.
    AddrResolved,
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`: the path (MTU, hop limit, traffic
    /// class) is known; create the QP and connect.
    RouteResolved,
    /// `RDMA_CM_EVENT_CONNECT_REQUEST`: a peer asks to connect (RC) or to
    /// resolve this service (UD, with `ud` set).
    ConnectRequest {
        /// Its parameters.
        param: ConnInfo,
        /// For a UD request, where the peer is.
        ud: Option<UdInfo>,
    },
    /// `RDMA_CM_EVENT_CONNECT_RESPONSE`: the peer accepted, and this ID
    /// has no QP for the CM to move; call [`CmId::establish`] after moving
    /// your own.
    ConnectResponse {
        /// The REP's parameters.
        param: ConnInfo,
    },
    /// `RDMA_CM_EVENT_CONNECT_ERROR`: the connection could not be set up on
    /// this side (the QP refused a transition); the peer was sent a REJ.
    ConnectError {
        /// Why.
        reason: String,
    },
    /// `RDMA_CM_EVENT_UNREACHABLE`: the peer never answered (every REQ,
    /// REP or SIDR_REQ went unanswered), or refused a SIDR request.
    Unreachable {
        /// Why, in words.
        reason: String,
        /// librdmacm's `status`: -110 (`-ETIMEDOUT`) when nothing answered,
        /// the SIDR_REP's status when the peer refused a UD request (1: no
        /// listener), as the kernel reports them.
        status: i32,
    },
    /// `RDMA_CM_EVENT_REJECTED`: the peer rejected the REQ or REP.
    Rejected {
        /// The IBA REJ reason (8: nothing listens on the port, 28: the
        /// application rejected).
        reason: u16,
        /// The REJ's private data (the consumer's, for reason 28).
        private_data: Vec<u8>,
        /// The whole story, as [`fmt::Display`] tells it.
        message: String,
    },
    /// `RDMA_CM_EVENT_ESTABLISHED`: connected (RC), or the SIDR reply
    /// arrived (UD, with `ud` set).
    Established {
        /// The parameters the connection settled on.
        param: ConnInfo,
        /// For UD: where the peer is.
        ud: Option<UdInfo>,
    },
    /// `RDMA_CM_EVENT_DISCONNECTED`: the connection is closed (by either
    /// side); the QP is in the error state. Call [`CmId::disconnect`] if
    /// the peer started it, so it gets its DREP now rather than at destroy.
    Disconnected,
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the QP may be reused.
    TimewaitExit,
    /// `RDMA_CM_EVENT_MULTICAST_JOIN`: the ID is in `group`
    /// ([`CmId::join_multicast`]); send to it with `ud.dest`.
    MulticastJoin {
        /// The address joined.
        group: std::net::IpAddr,
        /// The group's UD destination: its GID, QPN 0xFFFFFF, rdma_cm's
        /// Q_Key.
        ud: UdInfo,
    },
}

impl CmEventKind {
    /// The name `rdma_event_str` gives this event.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            Self::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            Self::ConnectRequest { .. } => "RDMA_CM_EVENT_CONNECT_REQUEST",
            Self::ConnectResponse { .. } => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            Self::ConnectError { .. } => "RDMA_CM_EVENT_CONNECT_ERROR",
            Self::Unreachable { .. } => "RDMA_CM_EVENT_UNREACHABLE",
            Self::Rejected { .. } => "RDMA_CM_EVENT_REJECTED",
            Self::Established { .. } => "RDMA_CM_EVENT_ESTABLISHED",
            Self::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            Self::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            Self::MulticastJoin { .. } => "RDMA_CM_EVENT_MULTICAST_JOIN",
        }
    }

    /// The event's `status` as librdmacm reports it: the REJ reason for
    /// `Rejected`, `-ETIMEDOUT` (-110) or the SIDR status for `Unreachable`,
    /// `-EINVAL` (-22) for `ConnectError`, 0 otherwise.
    pub fn status(&self) -> i32 {
        match self {
            Self::Rejected { reason, .. } => i32::from(*reason),
            Self::Unreachable { status, .. } => *status,
            Self::ConnectError { .. } => -22,
            _ => 0,
        }
    }
}

impl fmt::Display for CmEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.name())?;
        match &self.kind {
            CmEventKind::ConnectError { reason } | CmEventKind::Unreachable { reason, .. } => {
                write!(f, ": {reason}")
            }
            CmEventKind::Rejected { message, .. } => write!(f, ": {message}"),
            _ => Ok(()),
        }
    }
}
