//! The QP transitions rdma_cm makes, applied to the engine, and the path a
//! connection's packets take.

use std::net::IpAddr;

use ferroce_cm::rdma_cm::{self, PortSpace, QpOptions, RDMA_UDP_QKEY};
use ferroce_core::verbs::{Access, Path, QpAttr, QpState, VerbsError};
use ferroce_wire::mad::CmReq;
use ferroce_wire::udp::{flow_label_from_ports, source_port_from_flow_label};

use crate::driver::Shared;
use crate::{QueuePair, Result};

/// The port and P_Key index every ferroce device has.
pub(crate) const PORT: u8 = 1;
pub(crate) const PKEY_INDEX: u16 = 0;

/// What `rdma_create_qp` does to a new QP: INIT with no remote access (RC),
/// or INIT, RTR and RTS with rdma_cm's Q_Key (UD).
pub(crate) fn init_qp(qp: &QueuePair, port_space: PortSpace) -> Result<()> {
    if port_space.connects() {
        return qp.modify(&rdma_cm::init(PORT, PKEY_INDEX, Access::NONE));
    }
    let qkey = port_space.default_qkey().unwrap_or(RDMA_UDP_QKEY);
    qp.modify(&rdma_cm::ud_init(PORT, PKEY_INDEX, qkey))?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rtr),
        ..QpAttr::default()
    })?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(qp.psn()),
        ..QpAttr::default()
    })
}

/// The path of an rdma_cm connection: its UDP source port comes from the
/// REQ's flow label, as rxe derives it on both sides; rdma_cm fills that
/// label from the IP ports of the two ends (`flow_label_from_ports`), and
/// the ports stand in for a REQ that carries none. RoCE v2; the caller
/// sets the ID's version.
pub(crate) fn path(remote: IpAddr, req: &CmReq, ports: (u16, u16), tos: u8) -> Path {
    let label = flow_label(req, ports);
    Path {
        remote,
        udp_src_port: source_port_from_flow_label(label),
        traffic_class: tos,
        hop_limit: req.primary_path.hop_limit,
        roce: ferroce_core::verbs::RoceMode::V2,
    }
}

/// The GRH flow label of an rdma_cm connection (see [`path`]); `ports`
/// are (active side's, passive side's).
pub(crate) fn flow_label(req: &CmReq, ports: (u16, u16)) -> u32 {
    match req.primary_path.flow_label {
        0 => flow_label_from_ports(ports.0, ports.1),
        label => label,
    }
}

/// Applies `attrs` in order to QP `qpn`, each with the ID's options; stops
/// at the first refusal.
pub(crate) fn apply(
    shared: &Shared,
    qpn: u32,
    attrs: &[QpAttr],
    options: QpOptions,
) -> std::result::Result<(), VerbsError> {
    let mut ep = shared.engine();
    for attr in attrs {
        ep.modify_qp(qpn, &options.apply(*attr))?;
    }
    Ok(())
}

/// Moves QP `qpn` to the error state, as rdma_cm does when a connection
/// fails or ends (a QP already gone or in error is left as it is).
pub(crate) fn to_error(shared: &Shared, qpn: u32) {
    let attr = QpAttr {
        state: Some(QpState::Err),
        ..QpAttr::default()
    };
    let _ = shared.engine().modify_qp(qpn, &attr);
}

/// A GID as the CM's path carries it: an IPv4 address IPv4-mapped.
pub(crate) fn gid(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}
