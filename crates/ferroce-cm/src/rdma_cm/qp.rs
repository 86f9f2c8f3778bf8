//! Responder resources / initiator depth, retry counts, and the QP
//! attributes rdma_cm sets at each transition.
//!
//! # When the QP moves (the kernel's cma.c and librdmacm agree)
//! - INIT when the QP is created on the ID, with no remote access yet
//!   ([`init`] with [`Access::NONE`]).
//! - Active side, on the REP, before the RTU is sent: INIT again with the
//!   CM's access flags ([`cm_access`]), then [`active_rtr`], then
//!   [`active_rts`]. The RTU goes out only if both succeeded.
//! - Passive side, in `rdma_accept`, before the REP is sent: INIT again,
//!   [`passive_rtr`] and [`passive_rts`]. The RTU (or the first packet on
//!   the QP, "comm established") only makes the ID ESTABLISHED; it moves no
//!   QP.
//!
//! # Whose value each attribute is
//! The IB CM keeps, per connection, what `ib_cm_init_qp_attr` hands out:
//! - PSNs: the REQ's starting PSN is what the *passive* side sends with, the
//!   REP's what the active side sends with (a rping capture confirms: the
//!   server's first packet carries the REQ's PSN). Each side receives from
//!   the PSN it advertised.
//! - Destination QPN: the peer's local QPN from its message. Path MTU: the
//!   REQ's, on both sides.
//! - Depths: each side's initiator depth is the peer's responder resources
//!   and its responder resources the peer's initiator depth, as the REP
//!   finally settled them ([`accept_depths`]).
//! - Retry counts: the REQ's retry count on both sides; the RNR retry count
//!   the *peer* asked for (REQ's on the passive side, REP's on the active).
//! - Local ACK timeout: active, [`cm_ack_timeout`] of the REP's target ACK
//!   delay and the path's packet life time; passive, the REQ's local ACK
//!   timeout (cm.c takes the life time as that − 1 and adds 1 back).
//! - Minimum RNR timer: 0 (655.36 ms in IBA's table): ib_cm's choice.
//!
//! The address vector (`QpAttr::path`) is left `None`: it comes from the
//! route, which the driver resolves; these functions see only the messages.

use ferroce_core::verbs::{Access, Mtu, QpAttr, QpState};
use ferroce_wire::Psn;
use ferroce_wire::mad::{CmRep, CmReq};

use super::RdmaCmError;

/// rdma_cm's CM response timeout in REQs (4.096 µs × 2^20, about 4.3 s),
/// cma.c's `CMA_CM_RESPONSE_TIMEOUT`.
pub const CMA_CM_RESPONSE_TIMEOUT: u8 = 20;
/// How often rdma_cm lets the CM resend a REQ, REP or DREQ
/// (`CMA_MAX_CM_RETRIES`).
pub const CMA_MAX_CM_RETRIES: u8 = 15;
/// The largest retry count a QP takes (3 bits); RNR's 7 means forever.
const MAX_RETRY: u8 = 7;

/// What the application asks for one depth: librdmacm's `RDMA_MAX_RESP_RES`
/// / `RDMA_MAX_INIT_DEPTH` (0xFF) is [`Depth::Max`], "as much as possible".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    Max,
    Exactly(u8),
}

/// The device's limits (`ibv_device_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// `max_qp_rd_atom`: reads/atomics a QP answers at once.
    pub max_responder_resources: u8,
    /// `max_qp_init_rd_atom`: reads/atomics a QP has outstanding.
    pub max_initiator_depth: u8,
}

/// Responder resources and initiator depth, as carried in a REQ or REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Depths {
    pub responder_resources: u8,
    pub initiator_depth: u8,
}

impl Depths {
    /// What a peer's REQ or REP offers us: its responder resources are our
    /// initiator depth and the other way round.
    pub const fn offered_by(peer: Self) -> Self {
        Self {
            responder_resources: peer.initiator_depth,
            initiator_depth: peer.responder_resources,
        }
    }
}

/// Retry count and RNR retry count as rdma_cm puts them in a REQ or REP:
/// each capped at 7; without connection parameters, 7 and 7 (librdmacm).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryCounts {
    pub retry_count: u8,
    pub rnr_retry_count: u8,
}

impl RetryCounts {
    /// librdmacm's choice when `rdma_connect`/`rdma_accept` get no parameters.
    pub const DEFAULT: Self = Self {
        retry_count: MAX_RETRY,
        rnr_retry_count: MAX_RETRY,
    };

    /// The application's counts, capped as cma.c does.
    pub fn new(retry_count: u8, rnr_retry_count: u8) -> Self {
        Self {
            retry_count: retry_count.min(MAX_RETRY),
            rnr_retry_count: rnr_retry_count.min(MAX_RETRY),
        }
    }
}

/// An explicit depth must fit the device; [`Depth::Max`] becomes `cap`.
fn settle(what: &'static str, asked: Depth, device: u8, cap: u8) -> Result<u8, RdmaCmError> {
    match asked {
        Depth::Max => Ok(cap),
        Depth::Exactly(asked) if asked > device => Err(RdmaCmError::DepthTooLarge {
            what,
            asked,
            device,
        }),
        Depth::Exactly(asked) => Ok(asked),
    }
}

/// The depths the active side puts in its REQ: what the application asked
/// for, the device's maximum for [`Depth::Max`]; more than the device has
/// is refused (librdmacm's `rdma_connect`).
pub fn connect_depths(
    responder_resources: Depth,
    initiator_depth: Depth,
    device: DeviceLimits,
) -> Result<Depths, RdmaCmError> {
    let (res, init) = (device.max_responder_resources, device.max_initiator_depth);
    Ok(Depths {
        responder_resources: settle("responder_resources", responder_resources, res, res)?,
        initiator_depth: settle("initiator_depth", initiator_depth, init, init)?,
    })
}

/// The depths the passive side puts in its REP: for [`Depth::Max`], the
/// smaller of what the REQ offers ([`Depths::offered_by`]) and the device's
/// limit; an explicit value is taken as asked, if the device has it
/// (librdmacm's `rdma_accept`; the peer's offer is not enforced there).
pub fn accept_depths(
    responder_resources: Depth,
    initiator_depth: Depth,
    offered: Depths,
    device: DeviceLimits,
) -> Result<Depths, RdmaCmError> {
    let (res, init) = (device.max_responder_resources, device.max_initiator_depth);
    Ok(Depths {
        responder_resources: settle(
            "responder_resources",
            responder_resources,
            res,
            offered.responder_resources.min(res),
        )?,
        initiator_depth: settle(
            "initiator_depth",
            initiator_depth,
            init,
            offered.initiator_depth.min(init),
        )?,
    })
}

/// The local ACK timeout the kernel's CM gives an active QP (cm.c's
/// `cm_ack_timeout`): the path's round trip, 2 × life time (one more
/// exponent), grown by the responder's ACK delay when that is comparable.
pub fn cm_ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let round_trip = i32::from(packet_life_time) + 1;
    let delay = i32::from(ca_ack_delay);
    let timeout = if round_trip >= delay {
        round_trip + i32::from(delay >= round_trip - 1)
    } else {
        delay + i32::from(round_trip >= delay - 1)
    };
    timeout.min(31) as u8
}

/// The remote access rdma_cm's CM grants at the second INIT: writes always,
/// reads and atomics when the QP answers any (`responder_resources > 0`).
pub fn cm_access(responder_resources: u8) -> Access {
    if responder_resources == 0 {
        return Access::REMOTE_WRITE;
    }
    Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
}

/// INIT: the port, the partition and the access flags.
pub fn init(port: u8, pkey_index: u16, access: Access) -> QpAttr {
    QpAttr {
        state: Some(QpState::Init),
        port: Some(port),
        pkey_index: Some(pkey_index),
        access: Some(access),
        ..QpAttr::default()
    }
}

/// INIT of a UD QP: as [`init`], with the Q_Key instead of access flags
/// (see `PortSpace::default_qkey`).
pub fn ud_init(port: u8, pkey_index: u16, qkey: u32) -> QpAttr {
    QpAttr {
        state: Some(QpState::Init),
        port: Some(port),
        pkey_index: Some(pkey_index),
        qkey: Some(qkey),
        ..QpAttr::default()
    }
}

/// What an application may set on an ID to override the CM's choice
/// (the kernel's `rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)` and
/// `rdma_set_min_rnr_timer`): applied only to a transition that sets the
/// attribute anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpOptions {
    /// Local ACK timeout (5 bits), for RTS.
    pub ack_timeout: Option<u8>,
    /// Minimum RNR NAK timer code (5 bits), for RTR.
    pub min_rnr_timer: Option<u8>,
}

impl QpOptions {
    /// `attr` with the options put over the CM's values it carries.
    pub fn apply(self, mut attr: QpAttr) -> QpAttr {
        if attr.timeout.is_some() && self.ack_timeout.is_some() {
            attr.timeout = self.ack_timeout;
        }
        if attr.min_rnr_timer.is_some() && self.min_rnr_timer.is_some() {
            attr.min_rnr_timer = self.min_rnr_timer;
        }
        attr
    }
}

/// The active side's INIT on the REP: [`init`] with [`cm_access`] of the
/// responder resources the REP settled.
pub fn active_init(port: u8, pkey_index: u16, rep: &CmRep) -> QpAttr {
    init(port, pkey_index, cm_access(rep.initiator_depth))
}

fn mtu(req: &CmReq) -> Result<Mtu, RdmaCmError> {
    let code = req.path_packet_mtu;
    Mtu::from_code(code).ok_or(RdmaCmError::BadPathMtu { code })
}

fn rtr(
    req: &CmReq,
    dest_qpn: u32,
    rq_psn: Psn,
    max_dest_rd_atomic: u8,
) -> Result<QpAttr, RdmaCmError> {
    Ok(QpAttr {
        state: Some(QpState::Rtr),
        path_mtu: Some(mtu(req)?),
        dest_qpn: Some(dest_qpn),
        rq_psn: Some(rq_psn),
        max_dest_rd_atomic: Some(max_dest_rd_atomic),
        min_rnr_timer: Some(0),
        ..QpAttr::default()
    })
}

/// The active side's RTR, on the REP: receive from the REQ's PSN, send to
/// the REP's QP, answer as many reads as the REP's initiator depth.
pub fn active_rtr(req: &CmReq, rep: &CmRep) -> Result<QpAttr, RdmaCmError> {
    rtr(req, rep.local_qpn, req.starting_psn, rep.initiator_depth)
}

/// The active side's RTS, on the REP, after [`active_rtr`]; `packet_life_time`
/// is the path's (the one the REQ was built with).
pub fn active_rts(req: &CmReq, rep: &CmRep, packet_life_time: u8) -> QpAttr {
    QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(rep.starting_psn),
        max_rd_atomic: Some(rep.responder_resources),
        timeout: Some(cm_ack_timeout(rep.target_ack_delay, packet_life_time)),
        retry_cnt: Some(req.retry_count),
        rnr_retry: Some(rep.rnr_retry_count),
        ..QpAttr::default()
    }
}

/// The passive side's RTR, in accept before the REP: receive from the REP's
/// PSN, send to the REQ's QP, answer the REP's responder resources.
pub fn passive_rtr(req: &CmReq, rep: &CmRep) -> Result<QpAttr, RdmaCmError> {
    rtr(
        req,
        req.local_qpn,
        rep.starting_psn,
        rep.responder_resources,
    )
}

/// The passive side's RTS, in accept right after [`passive_rtr`].
pub fn passive_rts(req: &CmReq, rep: &CmRep) -> QpAttr {
    QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(req.starting_psn),
        max_rd_atomic: Some(rep.initiator_depth),
        timeout: Some(req.primary_path.local_ack_timeout.max(1)),
        retry_cnt: Some(req.retry_count),
        rnr_retry: Some(req.rnr_retry_count),
        ..QpAttr::default()
    }
}
