//! An rdma_cm ID's state: where it is in its life ([`Phase`], rdma_cm's
//! states), what it is bound and connected to, and the parameters an
//! application gives `connect` and `accept` ([`ConnParam`]).

use std::net::SocketAddr;

use ferroce_cm::rdma_cm::{Depth, QpOptions};
use ferroce_wire::mad::{CmRep, CmReq};

use super::{CmIdError, ConnInfo};
use crate::{Context, Mtu};

/// What `connect` and `accept` take (`rdma_conn_param`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data for the peer: at most 56 bytes in a connect (rdma_cm's
    /// 36-byte header comes first), 196 in an accept, 180 for a UD
    /// request, 136 for a UD accept.
    pub private_data: Vec<u8>,
    /// Reads and atomics this side answers at once; [`Depth::Max`]: the
    /// device's limit (in accept: no more than the peer offered).
    pub responder_resources: Depth,
    /// Reads and atomics this side may have outstanding.
    pub initiator_depth: Depth,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits, 7: forever).
    pub rnr_retry_count: u8,
    /// The QP number to announce when the ID has no QP of its own
    /// ([`CmId::create_qp`](super::CmId::create_qp)); ignored otherwise.
    pub qp_num: Option<u32>,
    /// The QP takes receives from an SRQ (announced in the REQ/REP).
    pub srq: bool,
}

impl Default for ConnParam {
    /// librdmacm's choice without parameters: the device's depths, 7 and 7
    /// retries, no private data.
    fn default() -> Self {
        Self {
            private_data: Vec::new(),
            responder_resources: Depth::Max,
            initiator_depth: Depth::Max,
            retry_count: 7,
            rnr_retry_count: 7,
            qp_num: None,
            srq: false,
        }
    }
}

/// Where an ID is in its life; names are rdma_cm's (`enum rdma_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    AddrBound,
    AddrResolved,
    RouteResolved,
    Listening,
    /// Active: REQ (or SIDR_REQ) sent.
    Connecting,
    /// Passive: a CONNECT_REQUEST not yet answered.
    Requested,
    /// Passive: REP sent, waiting for the RTU.
    Accepted,
    Connected,
    Disconnected,
    /// Rejected, unreachable, or a failed transition.
    Failed,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Self::Idle => "idle (not bound)",
            Self::AddrBound => "bound",
            Self::AddrResolved => "address-resolved",
            Self::RouteResolved => "route-resolved",
            Self::Listening => "listening",
            Self::Connecting => "connecting",
            Self::Requested => "a connect request not yet answered",
            Self::Accepted => "accepted, waiting for the peer's RTU",
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
            Self::Failed => "failed (rejected, unreachable or refused)",
        }
    }
}

/// The QP the CM moves for an ID.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QpSlot {
    pub(crate) qpn: u32,
    pub(crate) psn: crate::Psn,
}

/// The path a resolved or requested ID uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub(crate) mtu: Mtu,
    pub(crate) hop_limit: u8,
}

#[derive(Debug)]
pub(crate) struct IdState {
    pub(crate) phase: Phase,
    pub(crate) device: Option<Context>,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) remote: Option<SocketAddr>,
    /// The port this ID bound in the registry (released at destroy).
    pub(crate) bound: Option<SocketAddr>,
    pub(crate) route: Option<Route>,
    pub(crate) qp: Option<QpSlot>,
    /// The IB CM communication, while one exists.
    pub(crate) comm: Option<ferroce_cm::CmId>,
    /// Passive side: the REQ being answered.
    pub(crate) req: Option<Box<CmReq>>,
    /// Active side: the REQ as sent, for the QP attributes at the REP.
    pub(crate) sent: Option<Box<CmReq>>,
    /// The REP: received (active side) or sent (passive side, at accept).
    pub(crate) rep: Option<Box<CmRep>>,
    /// What ESTABLISHED will report.
    pub(crate) info: ConnInfo,
    /// The ToS of this ID's connection (`rdma_set_option(RDMA_OPTION_ID_TOS)`).
    pub(crate) tos: Option<u8>,
    /// The port's `default_roce_tos` as the address resolution found it.
    pub(crate) default_tos: u8,
    /// The RoCE version of the connection's MADs and QP path: the port's
    /// `default_roce_mode` on the active side, the request's on the
    /// passive side.
    pub(crate) roce: ferroce_core::verbs::RoceMode,
    pub(crate) options: QpOptions,
    /// DISCONNECTED was reported (the peer's DREQ) and must not be twice.
    pub(crate) disconnect_reported: bool,
    /// Listening on every device of the family (a wildcard bind).
    pub(crate) wildcard: bool,
    /// The multicast groups joined.
    pub(crate) joined: Vec<super::multicast::Joined>,
}

pub(crate) fn wrong_state(call: &'static str, phase: Phase, needs: &'static str) -> crate::Error {
    CmIdError::WrongState {
        call,
        state: phase.name(),
        needs,
    }
    .into()
}

impl IdState {
    pub(crate) fn new() -> Self {
        Self {
            phase: Phase::Idle,
            device: None,
            local: None,
            remote: None,
            bound: None,
            route: None,
            qp: None,
            comm: None,
            req: None,
            sent: None,
            rep: None,
            info: ConnInfo::default(),
            tos: None,
            default_tos: 0,
            roce: ferroce_core::verbs::RoceMode::V2,
            options: QpOptions::default(),
            disconnect_reported: false,
            wildcard: false,
            joined: Vec::new(),
        }
    }

    /// The ToS of the connection: the ID's own, or the port's default.
    pub(crate) fn tos(&self) -> u8 {
        self.tos.unwrap_or(self.default_tos)
    }
}
