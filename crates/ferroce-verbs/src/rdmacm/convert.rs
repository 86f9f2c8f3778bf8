//! Between rdma_cm's C values and ferroce's: socket addresses as
//! `sockaddr_storage` bytes, port spaces, connection parameters, events
//! and their statuses, errors as errnos.

use std::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use ferroce::Error;
use ferroce::cm::{CmEventKind, CmIdError, ConnInfo, Depth, PortSpace, UdInfo};

use super::abi::*;
use ferroce::{Path, QpAttr};

use crate::abi::{
    QP_ACCESS_FLAGS, QP_AV, QP_DEST_QPN, QP_MAX_DEST_RD_ATOMIC, QP_MAX_QP_RD_ATOMIC,
    QP_MIN_RNR_TIMER, QP_PATH_MTU, QP_PKEY_INDEX, QP_PORT, QP_QKEY, QP_RETRY_CNT, QP_RNR_RETRY,
    QP_RQ_PSN, QP_SQ_PSN, QP_STATE, QP_TIMEOUT, QPT_RC, QPT_UD, ibv_ah_attr, ibv_global_route,
    ibv_qp_attr,
};
use crate::convert::{ip_gid, qp_state_code};

const AF_INET: u16 = libc::AF_INET as u16;
const AF_INET6: u16 = libc::AF_INET6 as u16;

/// `sockaddr_in` / `sockaddr_in6` sizes, for `ai_src_len`/`ai_dst_len`.
pub(crate) fn sockaddr_len(a: &SocketAddr) -> u32 {
    match a {
        SocketAddr::V4(_) => 16,
        SocketAddr::V6(_) => 28,
    }
}

/// `a` as the bytes of a `sockaddr_in` or `sockaddr_in6`.
pub(crate) fn to_storage(a: SocketAddr) -> sockaddr_storage {
    let mut s = sockaddr_storage::default();
    let b = &mut s.bytes;
    b[2..4].copy_from_slice(&a.port().to_be_bytes());
    match a {
        SocketAddr::V4(v4) => {
            b[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
            b[4..8].copy_from_slice(&v4.ip().octets());
        }
        SocketAddr::V6(v6) => {
            b[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
            b[4..8].copy_from_slice(&v6.flowinfo().to_be_bytes());
            b[8..24].copy_from_slice(&v6.ip().octets());
            b[24..28].copy_from_slice(&v6.scope_id().to_ne_bytes());
        }
    }
    s
}

/// The address in the first bytes of a `sockaddr` (`bytes` holds at least
/// the family's size); `None` for another family or too few bytes.
pub(crate) fn from_sockaddr(bytes: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(bytes.get(0..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
    match family {
        AF_INET => {
            let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }
        AF_INET6 => {
            let flow = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
            let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(bytes.get(24..28)?.try_into().ok()?);
            let v6 = SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope);
            // An IPv4-mapped address is the IPv4 one (as rdma_cm treats it).
            Some(match v6.ip().to_ipv4_mapped() {
                Some(v4) => SocketAddr::new(IpAddr::V4(v4), port),
                None => SocketAddr::V6(v6),
            })
        }
        _ => None,
    }
}

/// How many bytes a `sockaddr` of `family` has (what may be read).
pub(crate) fn family_len(family: u16) -> Option<usize> {
    match family {
        AF_INET => Some(16),
        AF_INET6 => Some(28),
        _ => None,
    }
}

/// The port space of `enum rdma_port_space`; IPoIB and IB addressing are
/// not ferroce's (EPROTONOSUPPORT, as librdmacm answers an unknown one).
pub(crate) fn port_space(ps: u32) -> Result<PortSpace, c_int> {
    match ps {
        RDMA_PS_TCP => Ok(PortSpace::Tcp),
        RDMA_PS_UDP => Ok(PortSpace::Udp),
        _ => Err(libc::EPROTONOSUPPORT),
    }
}

/// The QP type rdma_cm gives an ID of the port space (`rdma_create_id`).
pub(crate) fn qp_type_of(ps: u32) -> u32 {
    if ps == RDMA_PS_UDP { QPT_UD } else { QPT_RC }
}

/// `RDMA_MAX_RESP_RES`/`RDMA_MAX_INIT_DEPTH` (0xff) mean the device's most.
fn depth(v: u8) -> Depth {
    if v == RDMA_MAX_RESP_RES {
        Depth::Max
    } else {
        Depth::Exactly(v)
    }
}

/// A `rdma_conn_param` (its private data already copied out).
pub(crate) fn conn_param(p: &rdma_conn_param, private_data: Vec<u8>) -> ferroce::cm::ConnParam {
    ferroce::cm::ConnParam {
        private_data,
        responder_resources: depth(p.responder_resources),
        initiator_depth: depth(p.initiator_depth),
        retry_count: p.retry_count.min(7),
        rnr_retry_count: p.rnr_retry_count.min(7),
        qp_num: Some(p.qp_num & 0xff_ffff),
        srq: p.srq != 0,
    }
}

/// The event code of `kind` (`enum rdma_cm_event_type`).
pub(crate) fn event_code(kind: &CmEventKind) -> u32 {
    match kind {
        CmEventKind::AddrResolved => RDMA_CM_EVENT_ADDR_RESOLVED,
        CmEventKind::RouteResolved => RDMA_CM_EVENT_ROUTE_RESOLVED,
        CmEventKind::ConnectRequest { .. } => RDMA_CM_EVENT_CONNECT_REQUEST,
        CmEventKind::ConnectResponse { .. } => RDMA_CM_EVENT_CONNECT_RESPONSE,
        CmEventKind::ConnectError { .. } => RDMA_CM_EVENT_CONNECT_ERROR,
        CmEventKind::Unreachable { .. } => RDMA_CM_EVENT_UNREACHABLE,
        CmEventKind::Rejected { .. } => RDMA_CM_EVENT_REJECTED,
        CmEventKind::Established { .. } => RDMA_CM_EVENT_ESTABLISHED,
        CmEventKind::Disconnected => RDMA_CM_EVENT_DISCONNECTED,
        CmEventKind::TimewaitExit => RDMA_CM_EVENT_TIMEWAIT_EXIT,
        CmEventKind::MulticastJoin { .. } => RDMA_CM_EVENT_MULTICAST_JOIN,
    }
}

/// The private data an event carries, and its connection or UD
/// parameters (without the private data pointer, which the caller sets
/// to where it keeps the bytes).
pub(crate) enum EventParam<'a> {
    None,
    Conn(&'a ConnInfo),
    Ud(&'a UdInfo),
    Data(&'a [u8]),
}

pub(crate) fn event_param(kind: &CmEventKind) -> EventParam<'_> {
    match kind {
        CmEventKind::ConnectRequest { ud: Some(u), .. }
        | CmEventKind::Established { ud: Some(u), .. }
        | CmEventKind::MulticastJoin { ud: u, .. } => EventParam::Ud(u),
        CmEventKind::ConnectRequest { param, .. }
        | CmEventKind::ConnectResponse { param }
        | CmEventKind::Established { param, .. } => EventParam::Conn(param),
        CmEventKind::Rejected { private_data, .. } => EventParam::Data(private_data),
        _ => EventParam::None,
    }
}

/// `rdma_conn_param` of an event (private data pointer left NULL).
pub(crate) fn conn_info(c: &ConnInfo) -> rdma_conn_param {
    rdma_conn_param {
        private_data: std::ptr::null(),
        private_data_len: len_u8(c.private_data.len()),
        responder_resources: c.responder_resources,
        initiator_depth: c.initiator_depth,
        flow_control: 1,
        retry_count: c.retry_count,
        rnr_retry_count: c.rnr_retry_count,
        srq: u8::from(c.srq),
        qp_num: c.qp_num,
    }
}

/// `rdma_ud_param` of an event: the address vector to the peer (RoCE: a
/// GRH to its GID), its QPN and Q_Key.
pub(crate) fn ud_info(u: &UdInfo) -> rdma_ud_param {
    let path = &u.dest.path;
    rdma_ud_param {
        private_data: std::ptr::null(),
        private_data_len: len_u8(u.private_data.len()),
        ah_attr: ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ip_gid(path.remote),
                flow_label: 0,
                sgid_index: 0,
                hop_limit: path.hop_limit,
                traffic_class: path.traffic_class,
            },
            dlid: 0,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 1,
            port_num: 1,
        },
        qp_num: u.dest.qpn,
        qkey: u.dest.qkey,
    }
}

/// `rdma_init_qp_attr`'s answer: `attr` as `ibv_qp_attr` and the mask of
/// what it sets, as the kernel fills them (the path as a GRH to the peer's
/// GID with the connection's `flow_label`, source GID index 0, port 1).
pub(crate) fn init_qp_attr(attr: &QpAttr, flow_label: u32) -> (ibv_qp_attr, u32) {
    let mut a = ibv_qp_attr::default();
    let mut mask = 0;
    let mut set = |bit: u32, on: bool| {
        if on {
            mask |= bit;
        }
    };
    if let Some(s) = attr.state {
        a.qp_state = qp_state_code(s);
        set(QP_STATE, true);
    }
    if let Some(v) = attr.pkey_index {
        a.pkey_index = v;
        set(QP_PKEY_INDEX, true);
    }
    if let Some(v) = attr.port {
        a.port_num = v;
        set(QP_PORT, true);
    }
    if let Some(v) = attr.qkey {
        a.qkey = v;
        set(QP_QKEY, true);
    }
    if let Some(v) = attr.access {
        // ferroce's access bits are rdma-core's IBV_ACCESS_* values.
        a.qp_access_flags = v.bits();
        set(QP_ACCESS_FLAGS, true);
    }
    if let Some(p) = attr.path {
        a.ah_attr = path_ah(&p, flow_label);
        set(QP_AV, true);
    }
    if let Some(v) = attr.path_mtu {
        a.path_mtu = v as u32;
        set(QP_PATH_MTU, true);
    }
    if let Some(v) = attr.dest_qpn {
        a.dest_qp_num = v;
        set(QP_DEST_QPN, true);
    }
    if let Some(v) = attr.rq_psn {
        a.rq_psn = v.value();
        set(QP_RQ_PSN, true);
    }
    if let Some(v) = attr.sq_psn {
        a.sq_psn = v.value();
        set(QP_SQ_PSN, true);
    }
    if let Some(v) = attr.max_rd_atomic {
        a.max_rd_atomic = v;
        set(QP_MAX_QP_RD_ATOMIC, true);
    }
    if let Some(v) = attr.max_dest_rd_atomic {
        a.max_dest_rd_atomic = v;
        set(QP_MAX_DEST_RD_ATOMIC, true);
    }
    if let Some(v) = attr.min_rnr_timer {
        a.min_rnr_timer = v;
        set(QP_MIN_RNR_TIMER, true);
    }
    if let Some(v) = attr.timeout {
        a.timeout = v;
        set(QP_TIMEOUT, true);
    }
    if let Some(v) = attr.retry_cnt {
        a.retry_cnt = v;
        set(QP_RETRY_CNT, true);
    }
    if let Some(v) = attr.rnr_retry {
        a.rnr_retry = v;
        set(QP_RNR_RETRY, true);
    }
    (a, mask)
}

/// The address vector of an RC connection's path.
fn path_ah(p: &Path, flow_label: u32) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ip_gid(p.remote),
            flow_label,
            sgid_index: 0,
            hop_limit: p.hop_limit,
            traffic_class: p.traffic_class,
        },
        is_global: 1,
        port_num: 1,
        ..ibv_ah_attr::default()
    }
}

pub(crate) fn len_u8(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// The errno of a failed `ferroce::cm` call, as the kernel's rdma_cm
/// returns it for the same cause.
pub(crate) fn cm_errno(e: &Error) -> c_int {
    match e {
        Error::Cm(c) => match c {
            CmIdError::AddrInUse(_) => libc::EADDRINUSE,
            CmIdError::Route(r) => r.errno(),
            CmIdError::NoDevice { .. } => libc::ENODEV,
            CmIdError::NoFreePort => libc::EADDRNOTAVAIL,
            CmIdError::TimedOut(_) => libc::ETIMEDOUT,
            _ => libc::EINVAL,
        },
        other => crate::convert::errno(other),
    }
}

/// The name `rdma_event_str` gives an event code (NUL-terminated).
pub(crate) fn event_name(code: u32) -> &'static std::ffi::CStr {
    match code {
        RDMA_CM_EVENT_ADDR_RESOLVED => c"RDMA_CM_EVENT_ADDR_RESOLVED",
        RDMA_CM_EVENT_ADDR_ERROR => c"RDMA_CM_EVENT_ADDR_ERROR",
        RDMA_CM_EVENT_ROUTE_RESOLVED => c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        RDMA_CM_EVENT_ROUTE_ERROR => c"RDMA_CM_EVENT_ROUTE_ERROR",
        RDMA_CM_EVENT_CONNECT_REQUEST => c"RDMA_CM_EVENT_CONNECT_REQUEST",
        RDMA_CM_EVENT_CONNECT_RESPONSE => c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        RDMA_CM_EVENT_CONNECT_ERROR => c"RDMA_CM_EVENT_CONNECT_ERROR",
        RDMA_CM_EVENT_UNREACHABLE => c"RDMA_CM_EVENT_UNREACHABLE",
        RDMA_CM_EVENT_REJECTED => c"RDMA_CM_EVENT_REJECTED",
        RDMA_CM_EVENT_ESTABLISHED => c"RDMA_CM_EVENT_ESTABLISHED",
        RDMA_CM_EVENT_DISCONNECTED => c"RDMA_CM_EVENT_DISCONNECTED",
        RDMA_CM_EVENT_DEVICE_REMOVAL => c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        RDMA_CM_EVENT_MULTICAST_JOIN => c"RDMA_CM_EVENT_MULTICAST_JOIN",
        RDMA_CM_EVENT_MULTICAST_ERROR => c"RDMA_CM_EVENT_MULTICAST_ERROR",
        RDMA_CM_EVENT_ADDR_CHANGE => c"RDMA_CM_EVENT_ADDR_CHANGE",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
        _ => c"UNKNOWN EVENT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip() {
        for a in [
            "127.0.0.1:7471",
            "[::1]:20000",
            "[fe80::1%3]:1",
            "0.0.0.0:0",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            let s = to_storage(a);
            assert_eq!(from_sockaddr(&s.bytes), Some(a), "{a}");
        }
    }

    #[test]
    fn mapped_v6_is_v4_and_unknown_families_are_refused() {
        let a: SocketAddr = "[::ffff:10.0.0.1]:5".parse().unwrap();
        assert_eq!(
            from_sockaddr(&to_storage(a).bytes),
            Some("10.0.0.1:5".parse().unwrap())
        );
        let mut s = to_storage(a);
        s.bytes[0] = 99;
        s.bytes[1] = 0;
        assert_eq!(from_sockaddr(&s.bytes), None);
        assert_eq!(from_sockaddr(&[2, 0]), None);
    }

    #[test]
    fn event_names_and_port_spaces() {
        assert_eq!(
            event_name(RDMA_CM_EVENT_ESTABLISHED).to_str().unwrap(),
            "RDMA_CM_EVENT_ESTABLISHED"
        );
        assert_eq!(event_name(99).to_str().unwrap(), "UNKNOWN EVENT");
        assert_eq!(port_space(RDMA_PS_TCP), Ok(PortSpace::Tcp));
        assert_eq!(port_space(RDMA_PS_IB), Err(libc::EPROTONOSUPPORT));
        assert_eq!(qp_type_of(RDMA_PS_UDP), QPT_UD);
    }

    #[test]
    fn init_qp_attr_sets_what_the_attributes_carry_and_nothing_else() {
        let rtr = QpAttr {
            state: Some(ferroce::QpState::Rtr),
            path: Some(Path {
                remote: "127.0.0.1".parse().unwrap(),
                udp_src_port: 0xc123,
                traffic_class: 0x20,
                hop_limit: 64,
                roce: ferroce::RoceMode::V2,
            }),
            path_mtu: Some(ferroce::Mtu::Mtu1024),
            dest_qpn: Some(0x12),
            rq_psn: Some(ferroce::Psn::new(0x345)),
            max_dest_rd_atomic: Some(1),
            min_rnr_timer: Some(0),
            ..QpAttr::default()
        };
        let (a, mask) = init_qp_attr(&rtr, 0x8_c234);
        let want = QP_STATE
            | QP_AV
            | QP_PATH_MTU
            | QP_DEST_QPN
            | QP_RQ_PSN
            | QP_MAX_DEST_RD_ATOMIC
            | QP_MIN_RNR_TIMER;
        assert_eq!(mask, want);
        assert_eq!((a.qp_state, a.path_mtu, a.dest_qp_num), (2, 3, 0x12));
        assert_eq!((a.rq_psn, a.max_dest_rd_atomic), (0x345, 1));
        let grh = &a.ah_attr.grh;
        assert_eq!(a.ah_attr.is_global, 1);
        assert_eq!(
            (grh.flow_label, grh.hop_limit, grh.traffic_class),
            (0x8_c234, 64, 0x20)
        );
        assert_eq!(grh.dgid.raw, ip_gid("127.0.0.1".parse().unwrap()).raw);
        assert_eq!((a.sq_psn, a.timeout, a.qkey), (0, 0, 0));
    }
}
