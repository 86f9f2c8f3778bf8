//! The QP attributes rdma_cm gives each transition of an ID's QP
//! (`rdma_init_qp_attr`). One source for both users: the CM's own
//! transitions of a QP made with `create_qp` (in accept, and at the REP),
//! and an application that moves its own QP ([`CmId::qp_attr`]), so the
//! two cannot drift.
//!
//! What each state gets, as the kernel's `ib_cm_init_qp_attr`: INIT the
//! port, P_Key index and access flags (UD: the Q_Key instead); RTR the
//! path (GRH), MTU, the peer's QPN, the receive PSN, the responder
//! resources and the RNR timer; RTS the send PSN, the ACK timeout, the
//! retry counts and the initiator depth. RTR and RTS exist once the
//! exchange is known: the REQ on the passive side (before `accept`, with
//! the depths `accept` would settle with [`Depth::Max`]), the REP on the
//! active side.
//!
//! [`CmId::qp_attr`]: super::CmId::qp_attr
//! [`Depth::Max`]: super::Depth::Max

use ferroce_cm::RepParams;
use ferroce_cm::rdma_cm::{self, Depth, Depths, PortSpace, RDMA_UDP_QKEY};
use ferroce_core::verbs::{Access, QpAttr, QpState};
use ferroce_wire::Psn;
use ferroce_wire::mad::{CmRep, CmReq};

use super::id::{IdState, wrong_state};
use super::transitions::{self, PKEY_INDEX, PORT};
use crate::Result;

/// The packet life time rdma_cm puts in a RoCE path: 18 in the rig's
/// kernel (6.1; `CMA_IBOE_PACKET_LIFETIME`; newer kernels use 16).
pub(crate) const PACKET_LIFE_TIME: u8 = 18;

/// The exchange an ID's transitions come from.
enum Exchange<'a> {
    /// Passive: the REQ answered and the REP sent (or, before `accept`,
    /// the one it would send).
    Passive(&'a CmReq, CmRep),
    /// Active: the REQ sent and the REP received.
    Active(&'a CmReq, CmRep),
}

/// The attributes for moving the ID's QP to `state`, with the ID's
/// options (`rdma_set_option`) applied.
pub(crate) fn for_state(st: &IdState, ps: PortSpace, state: QpState) -> Result<QpAttr> {
    const CALL: &str = "init_qp_attr";
    if st.device.is_none() {
        return Err(wrong_state(
            CALL,
            st.phase,
            "resolve the address (or take the ID of a CONNECT_REQUEST) first",
        ));
    }
    if !ps.connects() {
        let qkey = ps.default_qkey().unwrap_or(RDMA_UDP_QKEY);
        return match state {
            QpState::Init => Ok(rdma_cm::ud_init(PORT, PKEY_INDEX, qkey)),
            QpState::Rtr | QpState::Rts => Ok(QpAttr {
                state: Some(state),
                ..QpAttr::default()
            }),
            _ => Err(wrong_state(CALL, st.phase, "ask for INIT, RTR or RTS")),
        };
    }
    let exchange = exchange(st)?;
    let attr = match (state, &exchange) {
        (QpState::Init, None) => rdma_cm::init(PORT, PKEY_INDEX, Access::NONE),
        (QpState::Init, Some(Exchange::Passive(_, rep))) => rdma_cm::init(
            PORT,
            PKEY_INDEX,
            rdma_cm::cm_access(rep.responder_resources),
        ),
        (QpState::Init, Some(Exchange::Active(_, rep))) => {
            rdma_cm::active_init(PORT, PKEY_INDEX, rep)
        }
        (QpState::Rtr | QpState::Rts, None) => {
            return Err(wrong_state(
                CALL,
                st.phase,
                "wait for CONNECT_REQUEST (passive) or CONNECT_RESPONSE (active)",
            ));
        }
        (QpState::Rtr, Some(x)) => rtr(st, x)?,
        (QpState::Rts, Some(Exchange::Passive(req, rep))) => rdma_cm::passive_rts(req, rep),
        (QpState::Rts, Some(Exchange::Active(req, rep))) => {
            rdma_cm::active_rts(req, rep, PACKET_LIFE_TIME)
        }
        _ => return Err(wrong_state(CALL, st.phase, "ask for INIT, RTR or RTS")),
    };
    Ok(st.options.apply(attr))
}

/// RTR with the connection's path.
fn rtr(st: &IdState, x: &Exchange<'_>) -> Result<QpAttr> {
    let (Some(local), Some(remote)) = (st.local, st.remote) else {
        return Err(wrong_state("init_qp_attr", st.phase, "connect first"));
    };
    let (mut attr, req, ports) = match x {
        Exchange::Passive(req, rep) => (
            rdma_cm::passive_rtr(req, rep)?,
            *req,
            (remote.port(), local.port()),
        ),
        Exchange::Active(req, rep) => (
            rdma_cm::active_rtr(req, rep)?,
            *req,
            (local.port(), remote.port()),
        ),
    };
    let mut path = transitions::path(remote.ip(), req, ports, st.tos());
    path.roce = st.roce;
    attr.path = Some(path);
    Ok(attr)
}

fn exchange(st: &IdState) -> Result<Option<Exchange<'_>>> {
    if let (Some(req), Some(rep)) = (&st.sent, &st.rep) {
        return Ok(Some(Exchange::Active(req, **rep)));
    }
    let Some(req) = &st.req else {
        return Ok(None);
    };
    let rep = match &st.rep {
        Some(rep) => **rep,
        None => provisional_rep(st, req)?,
    };
    Ok(Some(Exchange::Passive(req, rep)))
}

/// Before `accept`: the REP an accept with the device's depths would send.
fn provisional_rep(st: &IdState, req: &CmReq) -> Result<CmRep> {
    let Some(ctx) = &st.device else {
        return Err(wrong_state(
            "init_qp_attr",
            st.phase,
            "take a CONNECT_REQUEST",
        ));
    };
    let offered = Depths::offered_by(Depths {
        responder_resources: req.responder_resources,
        initiator_depth: req.initiator_depth,
    });
    let depths =
        rdma_cm::accept_depths(Depth::Max, Depth::Max, offered, super::active::limits(ctx))?;
    let params = RepParams {
        qpn: st.qp.map_or(0, |q| q.qpn),
        starting_psn: passive_psn(st, req),
        private_data: Vec::new(),
        responder_resources: depths.responder_resources,
        initiator_depth: depths.initiator_depth,
        rnr_retry_count: 7,
        srq: false,
    };
    Ok(rep_view(req, &params))
}

/// The PSN the passive side's REP carries: its QP's, or, for a QP the
/// application moves itself, one derived from the REQ (so the value
/// `init_qp_attr` gives before `accept` is the one `accept` sends).
pub(crate) fn passive_psn(st: &IdState, req: &CmReq) -> Psn {
    st.qp
        .map_or(Psn::new(req.starting_psn.value() ^ 0x5a_5a5a), |q| q.psn)
}

/// The REP the CM will send for `params`, as the QP attributes need it.
pub(crate) fn rep_view(req: &CmReq, params: &RepParams) -> CmRep {
    CmRep {
        local_comm_id: 0,
        remote_comm_id: req.local_comm_id,
        local_qkey: 0,
        local_qpn: params.qpn,
        local_eecn: 0,
        starting_psn: params.starting_psn,
        responder_resources: params.responder_resources,
        initiator_depth: params.initiator_depth,
        target_ack_delay: 0,
        failover_accepted: 0,
        end_to_end_flow_control: false,
        rnr_retry_count: params.rnr_retry_count,
        srq: params.srq,
        local_ca_guid: 0,
        private_data: [0; 196],
    }
}
