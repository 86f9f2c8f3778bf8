//! The passive side: listen, a REQ or SIDR_REQ becoming a CONNECT_REQUEST
//! on a new ID, accept (QP to RTS, then the REP), and reject.

use std::net::SocketAddr;
use std::sync::Arc;

use ferroce_cm::rdma_cm::{
    self, CMA_HEADER_LEN, CmaHeader, Depths, QpOptions, RDMA_UDP_QKEY, RdmaService,
};
use ferroce_cm::{CmId as CommId, PeerAddr, RepParams, SidrReplyParams, reason};
use ferroce_core::Instant;
use ferroce_wire::mad::{CmReq, SIDR_STATUS_OK, SIDR_STATUS_REJECT, TRANSPORT_RC};

use super::device::DeviceCm;
use super::id::{CmId, ConnParam, IdInner, IdState, Phase, Route, wrong_state};
use super::{CmEventKind, ConnInfo, qp_attr, registry, transitions};
use crate::{Context, Mtu, Result};
use ferroce_core::verbs::QpState;

/// `rdma_listen`.
pub(crate) fn listen(inner: &Arc<IdInner>) -> Result<()> {
    let mut st = inner.state();
    if st.phase != Phase::AddrBound {
        return Err(wrong_state("listen", st.phase, "bind_addr first"));
    }
    let Some(local) = st.local else {
        return Err(wrong_state("listen", st.phase, "bind_addr first"));
    };
    st.phase = Phase::Listening;
    let ps = inner.port_space;
    let Some(ctx) = st.device.clone() else {
        st.wildcard = true;
        drop(st);
        registry::listen_wildcard(ps, local.port(), local.is_ipv6(), inner);
        return Ok(());
    };
    drop(st);
    let service = RdmaService::new(ps, local.port());
    ctx.shared.with_cm(|dcm, _| {
        dcm.listeners
            .insert((ps, local.port()), Arc::downgrade(inner));
        dcm.cm.listen(service.service_id());
        Ok(())
    })
}

/// A REQ for a service: a new ID on the listener's channel and
/// CONNECT_REQUEST; or a REJ with the reason the kernel gives.
pub(crate) fn on_req(dcm: &mut DeviceCm, now: Instant, comm: CommId, peer: PeerAddr, req: CmReq) {
    let refuse = |dcm: &mut DeviceCm, why: u16| {
        let _ = dcm.cm.reject(now, comm, why, &[]);
    };
    let Ok(service) = RdmaService::from_service_id(req.service_id) else {
        return refuse(dcm, reason::INVALID_SERVICE_ID);
    };
    let Some(listener) = dcm.listener(service) else {
        return refuse(dcm, reason::INVALID_SERVICE_ID);
    };
    // The kernel's rdma_cm refuses a QP type other than the listener's
    // (RC) and ib_cm sends REJ 28 for it; an MTU it cannot use fails the
    // application's accept, and the ID's destruction sends REJ 28 too.
    // IBA has reasons of their own (9, 26); the kernel's peers see 28.
    if req.transport_service_type != TRANSPORT_RC || !service.port_space.connects() {
        return refuse(dcm, reason::CONSUMER_DEFINED);
    }
    let Some(mtu) = Mtu::from_code(req.path_packet_mtu) else {
        return refuse(dcm, reason::CONSUMER_DEFINED);
    };
    // A REQ without rdma_cm's header is not an rdma_cm peer's.
    let Ok(header) = CmaHeader::parse(&req.private_data) else {
        return refuse(dcm, reason::CONSUMER_DEFINED);
    };
    let Some(device) = dcm.device.upgrade().map(Context::from_handle) else {
        return refuse(dcm, reason::NO_RESOURCES);
    };
    let offered = Depths::offered_by(Depths {
        responder_resources: req.responder_resources,
        initiator_depth: req.initiator_depth,
    });
    let param = ConnInfo {
        private_data: req.private_data[CMA_HEADER_LEN..].to_vec(),
        responder_resources: offered.responder_resources,
        initiator_depth: offered.initiator_depth,
        retry_count: req.retry_count,
        rnr_retry_count: req.rnr_retry_count,
        srq: req.srq,
        qp_num: req.local_qpn,
    };
    let mut st = child_state(&listener, device, peer, &header, service.port);
    st.route = Some(Route {
        mtu,
        hop_limit: req.primary_path.hop_limit,
    });
    st.tos = st.tos.or(Some(req.primary_path.traffic_class));
    st.comm = Some(comm);
    st.req = Some(Box::new(req));
    let child = CmId::with_state(listener.queue.clone(), listener.port_space, st);
    dcm.ids.insert(comm.0, Arc::downgrade(&child.inner));
    let listen_id = CmId { inner: listener };
    child.inner.report(
        CmEventKind::ConnectRequest { param, ud: None },
        Some(listen_id),
    );
}

/// The state of a new passive ID: the listener's device and options, the
/// addresses from rdma_cm's header (the peer's from the MAD if the header
/// names none of this family), and the RoCE version the request came in,
/// as the kernel's CM takes the GID type of the request's work completion.
fn child_state(
    listener: &Arc<IdInner>,
    device: Context,
    peer: PeerAddr,
    header: &CmaHeader,
    port: u16,
) -> IdState {
    let parent = listener.state();
    let mut st = IdState::new();
    st.phase = Phase::Requested;
    st.local = Some(SocketAddr::new(device.local(), port));
    st.roce = peer.roce;
    let source = if header.source.is_unspecified() {
        peer.ip
    } else {
        header.source
    };
    st.remote = Some(SocketAddr::new(source, header.source_port));
    st.options = parent.options;
    st.tos = parent.tos;
    st.device = Some(device);
    st
}

/// A SIDR_REQ for a UDP-space service: CONNECT_REQUEST on a new ID.
pub(crate) fn on_sidr_req(
    dcm: &mut DeviceCm,
    comm: CommId,
    peer: PeerAddr,
    service_id: u64,
    private_data: &[u8],
) {
    let refuse = |dcm: &mut DeviceCm, status: u8| {
        let reply = SidrReplyParams {
            status,
            ..SidrReplyParams::default()
        };
        let _ = dcm.cm.sidr_reply(comm, &reply);
    };
    let Ok(service) = RdmaService::from_service_id(service_id) else {
        return refuse(dcm, ferroce_wire::mad::SIDR_STATUS_UNSUPPORTED);
    };
    let (Some(listener), Ok(header)) = (dcm.listener(service), CmaHeader::parse(private_data))
    else {
        return refuse(dcm, ferroce_wire::mad::SIDR_STATUS_UNSUPPORTED);
    };
    let Some(device) = dcm.device.upgrade().map(Context::from_handle) else {
        return refuse(dcm, SIDR_STATUS_REJECT);
    };
    let param = ConnInfo {
        private_data: private_data[CMA_HEADER_LEN..].to_vec(),
        ..ConnInfo::default()
    };
    let mut st = child_state(&listener, device, peer, &header, service.port);
    st.comm = Some(comm);
    let child = CmId::with_state(listener.queue.clone(), listener.port_space, st);
    dcm.ids.insert(comm.0, Arc::downgrade(&child.inner));
    let listen_id = CmId { inner: listener };
    child.inner.report(
        CmEventKind::ConnectRequest { param, ud: None },
        Some(listen_id),
    );
}

/// `rdma_accept`.
pub(crate) fn accept(inner: &Arc<IdInner>, param: &ConnParam) -> Result<()> {
    let mut st = inner.state();
    let (Some(ctx), Some(comm)) = (st.device.clone(), st.comm) else {
        return Err(wrong_state(
            "accept",
            st.phase,
            "accept the ID of a CONNECT_REQUEST",
        ));
    };
    if st.phase != Phase::Requested {
        return Err(wrong_state(
            "accept",
            st.phase,
            "accept the ID of a CONNECT_REQUEST, once",
        ));
    }
    if !inner.port_space.connects() {
        let Some(qp) = st.qp else {
            return Err(wrong_state(
                "accept",
                st.phase,
                "create a UD QP on the ID first",
            ));
        };
        rdma_cm::check_app_data(rdma_cm::Message::SidrRep, param.private_data.len())?;
        let reply = SidrReplyParams {
            status: SIDR_STATUS_OK,
            qpn: qp.qpn,
            qkey: inner.port_space.default_qkey().unwrap_or(RDMA_UDP_QKEY),
            private_data: param.private_data.clone(),
        };
        st.phase = Phase::Connected;
        drop(st);
        return ctx.shared.with_cm(|dcm, _| {
            dcm.ids.remove(&comm.0);
            Ok(dcm.cm.sidr_reply(comm, &reply)?)
        });
    }
    let Some(req) = st.req.clone() else {
        return Err(wrong_state(
            "accept",
            st.phase,
            "accept the ID of a CONNECT_REQUEST",
        ));
    };
    let (qpn, psn) = match (st.qp, param.qp_num) {
        (Some(qp), _) => (qp.qpn, qp.psn),
        (None, Some(qpn)) => (qpn, qp_attr::passive_psn(&st, &req)),
        (None, None) => {
            return Err(wrong_state(
                "accept",
                st.phase,
                "create a QP on the ID (create_qp), or give ConnParam::qp_num",
            ));
        }
    };
    rdma_cm::check_app_data(rdma_cm::Message::Rep, param.private_data.len())?;
    let offered = Depths::offered_by(Depths {
        responder_resources: req.responder_resources,
        initiator_depth: req.initiator_depth,
    });
    let depths = rdma_cm::accept_depths(
        param.responder_resources,
        param.initiator_depth,
        offered,
        super::active::limits(&ctx),
    )?;
    let params = RepParams {
        qpn,
        starting_psn: psn,
        private_data: param.private_data.clone(),
        responder_resources: depths.responder_resources,
        initiator_depth: depths.initiator_depth,
        rnr_retry_count: param.rnr_retry_count.min(7),
        srq: param.srq,
    };
    st.rep = Some(Box::new(qp_attr::rep_view(&req, &params)));
    if let Some(qp) = st.qp {
        let moved = move_qp(&st, inner, &ctx, qp.qpn);
        if moved.is_err() {
            st.rep = None;
        }
        moved?;
    }
    st.info = ConnInfo {
        private_data: req.private_data[CMA_HEADER_LEN..].to_vec(),
        responder_resources: depths.responder_resources,
        initiator_depth: depths.initiator_depth,
        retry_count: req.retry_count,
        rnr_retry_count: req.rnr_retry_count,
        srq: req.srq,
        qp_num: req.local_qpn,
    };
    st.phase = Phase::Accepted;
    drop(st);
    let result = ctx
        .shared
        .with_cm(|dcm, now| Ok(dcm.cm.accept(now, comm, &params)?));
    if result.is_err() {
        let mut st = inner.state();
        st.phase = Phase::Requested;
        st.rep = None;
    }
    result
}

/// The CM's own transitions of the ID's QP in accept: INIT, RTR and RTS
/// with the attributes `init_qp_attr` gives.
fn move_qp(st: &IdState, inner: &IdInner, ctx: &Context, qpn: u32) -> Result<()> {
    let mut attrs = Vec::with_capacity(3);
    for state in [QpState::Init, QpState::Rtr, QpState::Rts] {
        attrs.push(qp_attr::for_state(st, inner.port_space, state)?);
    }
    Ok(transitions::apply(
        &ctx.shared,
        qpn,
        &attrs,
        QpOptions::default(),
    )?)
}

/// `rdma_reject`.
pub(crate) fn reject(inner: &Arc<IdInner>, private_data: &[u8]) -> Result<()> {
    let mut st = inner.state();
    let (Some(ctx), Some(comm)) = (st.device.clone(), st.comm) else {
        return Err(wrong_state(
            "reject",
            st.phase,
            "reject the ID of a CONNECT_REQUEST",
        ));
    };
    if st.phase != Phase::Requested {
        return Err(wrong_state(
            "reject",
            st.phase,
            "reject the ID of a CONNECT_REQUEST, once",
        ));
    }
    let sidr = !inner.port_space.connects();
    let message = if sidr {
        rdma_cm::Message::SidrRep
    } else {
        rdma_cm::Message::Rej
    };
    rdma_cm::check_app_data(message, private_data.len())?;
    st.phase = Phase::Failed;
    st.comm = None;
    drop(st);
    ctx.shared.with_cm(|dcm, now| {
        dcm.ids.remove(&comm.0);
        if sidr {
            let reply = SidrReplyParams {
                status: SIDR_STATUS_REJECT,
                private_data: private_data.to_vec(),
                ..SidrReplyParams::default()
            };
            Ok(dcm.cm.sidr_reply(comm, &reply)?)
        } else {
            Ok(dcm
                .cm
                .reject(now, comm, reason::CONSUMER_DEFINED, private_data)?)
        }
    })
}
