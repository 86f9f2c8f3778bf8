//! The active side: connect (REQ or SIDR_REQ), the REP and its QP
//! transitions, the RTU, and disconnect.

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use ferroce_cm::rdma_cm::{
    self, CMA_CM_RESPONSE_TIMEOUT, CMA_MAX_CM_RETRIES, CmaHeader, DeviceLimits, QpOptions,
    RdmaService, RetryCounts,
};
use ferroce_cm::{CmId as CommId, ConnectParams, PeerAddr, SidrParams};
use ferroce_core::Instant;
use ferroce_wire::Psn;
use ferroce_wire::mad::{CmRep, SIDR_STATUS_OK};

use super::device::DeviceCm;
use super::id::{ConnParam, IdInner, Phase, wrong_state};
use super::{CmEventKind, ConnInfo, UdInfo, qp_attr, transitions};
use crate::driver::Shared;
use crate::{Context, Result, UdDest};
use ferroce_core::verbs::QpState;

/// The depths a device allows (`ibv_device_attr`), for the negotiation:
/// read once per device (`query_device` reads the interface from the
/// system; done per connection, it was a fifth of a setup's time).
pub(crate) fn limits(ctx: &Context) -> DeviceLimits {
    *ctx.shared.cm.limits.get_or_init(|| {
        let attr = ctx.query_device().ok();
        let cap = |v: Option<u32>| v.map_or(16, |v| v.min(255) as u8);
        DeviceLimits {
            max_responder_resources: cap(attr.as_ref().map(|a| a.max_qp_rd_atom)),
            max_initiator_depth: cap(attr.as_ref().map(|a| a.max_qp_init_rd_atom)),
        }
    })
}

/// `rdma_connect`.
pub(crate) fn connect(inner: &Arc<IdInner>, param: &ConnParam) -> Result<()> {
    let mut st = inner.state();
    if st.phase != Phase::RouteResolved {
        return Err(wrong_state(
            "connect",
            st.phase,
            "resolve the address and the route first (ROUTE_RESOLVED)",
        ));
    }
    let (Some(ctx), Some(local), Some(remote), Some(route)) =
        (st.device.clone(), st.local, st.remote, st.route)
    else {
        return Err(wrong_state("connect", st.phase, "resolve the route first"));
    };
    let header = CmaHeader {
        source_port: local.port(),
        source: local.ip(),
        destination: remote.ip(),
    };
    let service = RdmaService::new(inner.port_space, remote.port()).service_id();
    let peer = PeerAddr::gsi_via(st.roce, remote.ip());
    if !inner.port_space.connects() {
        let params = SidrParams {
            peer,
            service_id: service,
            partition_key: 0xffff,
            private_data: rdma_cm::sidr_req_private_data(&header, &param.private_data)?.to_vec(),
            timeout: ferroce_cm::timing::cm_time(CMA_CM_RESPONSE_TIMEOUT),
            max_retries: CMA_MAX_CM_RETRIES,
        };
        st.phase = Phase::Connecting;
        drop(st);
        return start(inner, &ctx, |dcm, now| {
            Ok(dcm.cm.sidr_request(now, &params)?)
        });
    }
    let (qpn, psn) = match (st.qp, param.qp_num) {
        (Some(qp), _) => (qp.qpn, qp.psn),
        (None, Some(qpn)) => (qpn, Psn::new(RandomState::new().hash_one(qpn) as u32)),
        (None, None) => {
            return Err(wrong_state(
                "connect",
                st.phase,
                "create a QP on the ID (create_qp), or give ConnParam::qp_num",
            ));
        }
    };
    let depths = rdma_cm::connect_depths(
        param.responder_resources,
        param.initiator_depth,
        limits(&ctx),
    )?;
    let retries = RetryCounts::new(param.retry_count, param.rnr_retry_count);
    let mut params = ConnectParams::new(peer, service, qpn, psn);
    params.private_data = rdma_cm::req_private_data(&header, &param.private_data)?.to_vec();
    params.responder_resources = depths.responder_resources;
    params.initiator_depth = depths.initiator_depth;
    params.retry_count = retries.retry_count;
    params.rnr_retry_count = retries.rnr_retry_count;
    params.packet_life_time = qp_attr::PACKET_LIFE_TIME;
    params.path_mtu = route.mtu as u8;
    params.path.local_port_gid = transitions::gid(local.ip());
    params.path.remote_port_gid = transitions::gid(remote.ip());
    params.path.flow_label = ferroce_wire::udp::flow_label_from_ports(local.port(), remote.port());
    params.path.traffic_class = st.tos();
    params.path.hop_limit = route.hop_limit;
    st.phase = Phase::Connecting;
    drop(st);
    start(inner, &ctx, |dcm, now| {
        let req = dcm.cm.request(&params)?;
        let comm = dcm.cm.connect(now, &params)?;
        inner.state().sent = Some(Box::new(req));
        Ok(comm)
    })
}

/// Starts the communication `begin` makes and records it on the ID; on
/// failure the ID is back where it was.
fn start(
    inner: &Arc<IdInner>,
    ctx: &Context,
    begin: impl FnOnce(&mut DeviceCm, Instant) -> Result<CommId>,
) -> Result<()> {
    let result = ctx.shared.with_cm(|dcm, now| {
        let comm = begin(dcm, now)?;
        dcm.ids.insert(comm.0, Arc::downgrade(inner));
        inner.state().comm = Some(comm);
        Ok(comm)
    });
    if result.is_err() {
        inner.state().phase = Phase::RouteResolved;
    }
    result.map(|_| ())
}

/// The REP: INIT, RTR and RTS on the ID's QP, then the RTU; or, for an ID
/// without a QP, CONNECT_RESPONSE. A refused transition rejects the REP.
pub(crate) fn on_rep(dcm: &mut DeviceCm, shared: &Shared, now: Instant, comm: CommId, rep: &CmRep) {
    let Some(inner) = dcm.id_of(comm) else {
        return;
    };
    let mut st = inner.state();
    let Some(req) = st.sent.clone() else {
        return;
    };
    let depths = rdma_cm::Depths::offered_by(rdma_cm::Depths {
        responder_resources: rep.responder_resources,
        initiator_depth: rep.initiator_depth,
    });
    st.info = ConnInfo {
        private_data: rep.private_data.to_vec(),
        responder_resources: depths.responder_resources,
        initiator_depth: depths.initiator_depth,
        retry_count: req.retry_count,
        rnr_retry_count: rep.rnr_retry_count,
        srq: rep.srq,
        qp_num: rep.local_qpn,
    };
    st.rep = Some(Box::new(*rep));
    let Some(qp) = st.qp else {
        let param = st.info.clone();
        drop(st);
        inner.report(CmEventKind::ConnectResponse { param }, None);
        return;
    };
    let attrs: std::result::Result<Vec<_>, _> = [QpState::Init, QpState::Rtr, QpState::Rts]
        .into_iter()
        .map(|state| qp_attr::for_state(&st, inner.port_space, state))
        .collect();
    let moved = match attrs {
        Ok(attrs) => transitions::apply(shared, qp.qpn, &attrs, QpOptions::default())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match moved {
        Ok(()) => {
            drop(st);
            // Established (and the event) follows from the CM.
            let _ = dcm.cm.rtu(comm, &[]);
        }
        Err(reason) => {
            st.phase = Phase::Failed;
            transitions::to_error(shared, qp.qpn);
            drop(st);
            let _ = dcm
                .cm
                .reject(now, comm, ferroce_cm::reason::CONSUMER_DEFINED, &[]);
            inner.report(
                CmEventKind::ConnectError {
                    reason: format!("the QP refused the REP's attributes: {reason}"),
                },
                None,
            );
        }
    }
}

/// The SIDR_REP: ESTABLISHED with the peer's QPN and Q_Key, or
/// UNREACHABLE with the status.
pub(crate) fn on_sidr_rep(
    dcm: &mut DeviceCm,
    comm: CommId,
    status: u8,
    qpn: u32,
    qkey: u32,
    private_data: Vec<u8>,
) {
    let Some(inner) = dcm.id_of(comm) else {
        return;
    };
    dcm.ids.remove(&comm.0);
    let mut st = inner.state();
    st.comm = None;
    let Some(remote) = st.remote else {
        return;
    };
    if status != SIDR_STATUS_OK {
        st.phase = Phase::Failed;
        drop(st);
        let reason = format!(
            "{} answered the SIDR request for port {} with status {status} ({})",
            remote.ip(),
            remote.port(),
            super::sidr_status_name(status)
        );
        inner.report(
            CmEventKind::Unreachable {
                reason,
                status: i32::from(status),
            },
            None,
        );
        return;
    }
    st.phase = Phase::Connected;
    let local_qpn = st.qp.map_or(0, |q| q.qpn);
    let mut path = crate::path_to(remote.ip(), local_qpn, qpn);
    path.udp_src_port = ferroce_wire::udp::ud_source_port(local_qpn);
    path.traffic_class = st.tos();
    path.roce = st.roce;
    let param = ConnInfo {
        private_data: private_data.clone(),
        qp_num: qpn,
        ..ConnInfo::default()
    };
    drop(st);
    let ud = UdInfo {
        dest: UdDest { path, qpn, qkey },
        private_data,
    };
    inner.report(
        CmEventKind::Established {
            param,
            ud: Some(ud),
        },
        None,
    );
}

/// `rdma_establish`.
pub(crate) fn establish(inner: &Arc<IdInner>) -> Result<()> {
    let st = inner.state();
    let (Some(ctx), Some(comm)) = (st.device.clone(), st.comm) else {
        return Err(wrong_state(
            "establish",
            st.phase,
            "wait for CONNECT_RESPONSE",
        ));
    };
    if st.phase != Phase::Connecting || st.qp.is_some() {
        return Err(wrong_state(
            "establish",
            st.phase,
            "only an ID without a QP, after CONNECT_RESPONSE",
        ));
    }
    drop(st);
    ctx.shared.with_cm(|dcm, _| Ok(dcm.cm.rtu(comm, &[])?))
}

/// `rdma_disconnect`.
pub(crate) fn disconnect(inner: &Arc<IdInner>) -> Result<()> {
    let st = inner.state();
    let ctx = st.device.clone();
    let comm = st.comm;
    let qp = st.qp;
    let phase = st.phase;
    drop(st);
    let Some(ctx) = ctx else {
        return Err(wrong_state("disconnect", phase, "connect first"));
    };
    if !matches!(
        phase,
        Phase::Connected | Phase::Disconnected | Phase::Accepted | Phase::Connecting
    ) {
        return Err(wrong_state("disconnect", phase, "connect first"));
    }
    if let Some(qp) = qp {
        transitions::to_error(&ctx.shared, qp.qpn);
    }
    let Some(comm) = comm else {
        return Ok(());
    };
    ctx.shared.with_cm(|dcm, now| {
        // Already closed (a DREP sent, or TimeWait): nothing to send, as
        // the kernel's rdma_disconnect then.
        let _ = dcm.cm.disconnect(now, comm, &[]);
        Ok(())
    })
}
