//! Between ferroce's types and the C structs of [`crate::abi`]: device and
//! port attributes, completions, `ibv_modify_qp`'s attributes and mask,
//! access flags, and errors as errno values. Pure functions, no pointers.

use std::ffi::c_int;
use std::net::{IpAddr, Ipv6Addr};

use ferroce::{
    Access, DeviceAttr, Error, Mtu, Path, PortAttr, Psn, QpAttr, QpState, VerbsError, WcOpcode,
    WorkCompletion,
};
use ferroce_wire::udp::{flow_label_from_qpns, source_port_from_flow_label};

use crate::abi::*;
use crate::config::c_chars;

/// The errno rdma-core's providers return for what `e` says.
pub(crate) fn errno(e: &Error) -> c_int {
    match e {
        Error::Verbs(v) => match v {
            VerbsError::QueueFull { .. } | VerbsError::SrqFull { .. } => libc::ENOMEM,
            VerbsError::Busy(_) => libc::EBUSY,
            _ => libc::EINVAL,
        },
        Error::Io(io) => io.raw_os_error().unwrap_or(libc::EIO),
        _ => libc::EINVAL,
    }
}

/// Saturates a ferroce limit into ibverbs' `int` fields.
fn int(v: u32) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// A GUID as ibverbs holds it: big-endian in a `__be64`.
pub(crate) fn be64(v: u64) -> u64 {
    u64::from_ne_bytes(v.to_be_bytes())
}

pub(crate) fn device_attr(a: &DeviceAttr) -> ibv_device_attr {
    ibv_device_attr {
        fw_ver: c_chars(&a.fw_ver),
        node_guid: be64(a.node_guid.0),
        sys_image_guid: be64(a.sys_image_guid.0),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: int(a.max_qp),
        max_qp_wr: int(a.max_qp_wr),
        device_cap_flags: a.device_cap_flags.bits(),
        max_sge: int(a.max_sge),
        max_sge_rd: int(a.max_sge_rd),
        max_cq: int(a.max_cq),
        max_cqe: int(a.max_cqe),
        max_mr: int(a.max_mr),
        max_pd: int(a.max_pd),
        max_qp_rd_atom: int(a.max_qp_rd_atom),
        max_ee_rd_atom: int(a.max_ee_rd_atom),
        max_res_rd_atom: int(a.max_res_rd_atom),
        max_qp_init_rd_atom: int(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: int(a.max_ee_init_rd_atom),
        atomic_cap: a.atomic_cap as u32,
        max_ee: int(a.max_ee),
        max_rdd: int(a.max_rdd),
        max_mw: int(a.max_mw),
        max_raw_ipv6_qp: int(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: int(a.max_raw_ethy_qp),
        max_mcast_grp: int(a.max_mcast_grp),
        max_mcast_qp_attach: int(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: int(a.max_total_mcast_qp_attach),
        max_ah: int(a.max_ah),
        max_fmr: int(a.max_fmr),
        max_map_per_fmr: int(a.max_map_per_fmr),
        max_srq: int(a.max_srq),
        max_srq_wr: int(a.max_srq_wr),
        max_srq_sge: int(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    }
}

pub(crate) fn port_attr(p: &PortAttr) -> ibv_port_attr {
    ibv_port_attr {
        state: p.state as u32,
        max_mtu: p.max_mtu as u32,
        active_mtu: p.active_mtu as u32,
        gid_tbl_len: int(p.gid_tbl_len),
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state as u8,
        link_layer: p.link_layer as u8,
        flags: 0,
        port_cap_flags2: p.port_cap_flags2,
    }
}

/// A completion as `ibv_poll_cq` returns it; `ud` says the QP is UD (its
/// receives start with the 40-byte GRH, flagged `IBV_WC_GRH`).
pub(crate) fn wc(c: &WorkCompletion, ud: bool) -> ibv_wc {
    let opcode = match c.opcode {
        WcOpcode::Send => WC_SEND,
        WcOpcode::RdmaWrite => WC_RDMA_WRITE,
        WcOpcode::RdmaRead => WC_RDMA_READ,
        WcOpcode::CompSwap => WC_COMP_SWAP,
        WcOpcode::FetchAdd => WC_FETCH_ADD,
        WcOpcode::AtomicWrite => WC_ATOMIC_WRITE,
        WcOpcode::Flush => WC_FLUSH,
        WcOpcode::BindMw => WC_BIND_MW,
        WcOpcode::LocalInv => WC_LOCAL_INV,
        WcOpcode::Recv => WC_RECV,
        WcOpcode::RecvRdmaWithImm => WC_RECV_RDMA_WITH_IMM,
    };
    let mut flags = 0;
    let mut imm_data = 0;
    if let Some(imm) = c.imm {
        flags |= WC_WITH_IMM;
        imm_data = imm.to_be();
    } else if let Some(rkey) = c.invalidated_rkey {
        flags |= WC_WITH_INV;
        imm_data = rkey;
    }
    if ud && opcode == WC_RECV {
        flags |= WC_GRH;
    }
    ibv_wc {
        wr_id: c.wr_id,
        status: c.status.code(),
        opcode,
        byte_len: c.byte_len,
        imm_data,
        qp_num: c.qpn,
        src_qp: c.src_qp,
        wc_flags: flags,
        // A UD receive's SL is the RoCE packet type as mlx5 reports it
        // (rxe leaves 0): UCX's UD transport reads it to find the
        // destination address in the GRH area, and drops what it cannot match.
        sl: c.network.map_or(0, ferroce::NetworkHeader::roce_sl),
        ..ibv_wc::default()
    }
}

/// `ibv_access_flags` as ferroce's [`Access`]: the four ferroce has and
/// the two FLUSH ones (a region refuses FLUSH_PERSISTENT); hints of
/// `IBV_ACCESS_OPTIONAL_RANGE` and HUGETLB ignored; anything else (memory
/// windows, zero-based, on-demand paging) refused.
pub(crate) fn access(bits: u32) -> Result<Access, c_int> {
    let known = [
        (ACCESS_LOCAL_WRITE, Access::LOCAL_WRITE),
        (ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
        (ACCESS_REMOTE_READ, Access::REMOTE_READ),
        (ACCESS_REMOTE_ATOMIC, Access::REMOTE_ATOMIC),
        (ACCESS_MW_BIND, Access::MW_BIND),
        (ACCESS_ZERO_BASED, Access::ZERO_BASED),
        (ACCESS_FLUSH_GLOBAL, Access::FLUSH_GLOBAL),
        (ACCESS_FLUSH_PERSISTENT, Access::FLUSH_PERSISTENT),
    ];
    let rest = bits & !(ACCESS_OPTIONAL_RANGE | ACCESS_HUGETLB);
    let mut out = Access::NONE;
    let mut seen = 0;
    for (bit, a) in known {
        if rest & bit != 0 {
            out = out | a;
            seen |= bit;
        }
    }
    if rest & !seen != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(out)
}

/// The IP address a RoCE v2 GID stands for.
pub(crate) fn gid_ip(gid: &ibv_gid) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(gid.raw)).to_canonical()
}

/// The GID of an IP address (IPv4 as `::ffff:a.b.c.d`).
pub(crate) fn ip_gid(ip: IpAddr) -> ibv_gid {
    let v6 = match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    };
    ibv_gid { raw: v6.octets() }
}

pub(crate) fn qp_state(s: u32) -> Option<QpState> {
    Some(match s {
        QPS_RESET => QpState::Reset,
        QPS_INIT => QpState::Init,
        QPS_RTR => QpState::Rtr,
        QPS_RTS => QpState::Rts,
        QPS_SQD => QpState::Sqd,
        QPS_SQE => QpState::Sqe,
        QPS_ERR => QpState::Err,
        _ => return None,
    })
}

pub(crate) fn qp_state_code(s: QpState) -> u32 {
    match s {
        QpState::Reset => QPS_RESET,
        QpState::Init => QPS_INIT,
        QpState::Rtr => QPS_RTR,
        QpState::Rts => QPS_RTS,
        QpState::Sqd => QPS_SQD,
        QpState::Sqe => QPS_SQE,
        QpState::Err => QPS_ERR,
    }
}

fn mtu(code: u32) -> Option<Mtu> {
    Mtu::from_code(u8::try_from(code).ok()?)
}

/// The path an address vector describes, for a QP numbered `qpn` talking
/// to `dest_qpn`: RoCE needs the GRH (`is_global`), whose GID is the
/// peer's address. The UDP source port comes from the flow label, or from
/// the two QPNs when it is 0, as rdma-core and rxe derive it.
pub(crate) fn path(ah: &ibv_ah_attr, qpn: u32, dest_qpn: u32) -> Result<Path, c_int> {
    if ah.is_global == 0 {
        // No LIDs on RoCE: an address vector without a GID names no one.
        return Err(libc::EINVAL);
    }
    let grh = &ah.grh;
    let flow = if grh.flow_label != 0 {
        grh.flow_label
    } else {
        flow_label_from_qpns(qpn, dest_qpn)
    };
    Ok(Path {
        remote: gid_ip(&grh.dgid),
        udp_src_port: source_port_from_flow_label(flow),
        traffic_class: grh.traffic_class,
        hop_limit: grh.hop_limit,
        roce: ferroce::RoceMode::V2,
    })
}

/// Mask bits ferroce takes; CUR_STATE and EN_SQD_ASYNC_NOTIFY are
/// accepted and ignored, as rxe does.
const QP_MASK_KNOWN: u32 = QP_STATE
    | QP_CUR_STATE
    | QP_EN_SQD_ASYNC_NOTIFY
    | QP_ACCESS_FLAGS
    | QP_PKEY_INDEX
    | QP_PORT
    | QP_QKEY
    | QP_AV
    | QP_PATH_MTU
    | QP_TIMEOUT
    | QP_RETRY_CNT
    | QP_RNR_RETRY
    | QP_RQ_PSN
    | QP_MAX_QP_RD_ATOMIC
    | QP_MIN_RNR_TIMER
    | QP_SQ_PSN
    | QP_MAX_DEST_RD_ATOMIC
    | QP_DEST_QPN;

/// `ibv_modify_qp`'s attributes, as ferroce's [`QpAttr`]. `dest_qpn` is
/// the peer's QPN as known so far (for the UDP source port).
pub(crate) fn qp_attr(
    a: &ibv_qp_attr,
    mask: u32,
    qpn: u32,
    dest_qpn: u32,
) -> Result<QpAttr, c_int> {
    if mask & !QP_MASK_KNOWN != 0 {
        // Alternate paths, migration, caps and rate limits: not here.
        return Err(libc::EOPNOTSUPP);
    }
    let has = |bit: u32| mask & bit != 0;
    Ok(QpAttr {
        state: if has(QP_STATE) {
            Some(qp_state(a.qp_state).ok_or(libc::EINVAL)?)
        } else {
            None
        },
        pkey_index: has(QP_PKEY_INDEX).then_some(a.pkey_index),
        port: has(QP_PORT).then_some(a.port_num),
        qkey: has(QP_QKEY).then_some(a.qkey),
        access: if has(QP_ACCESS_FLAGS) {
            Some(access(a.qp_access_flags)?)
        } else {
            None
        },
        path: if has(QP_AV) {
            Some(path(&a.ah_attr, qpn, dest_qpn)?)
        } else {
            None
        },
        path_mtu: if has(QP_PATH_MTU) {
            Some(mtu(a.path_mtu).ok_or(libc::EINVAL)?)
        } else {
            None
        },
        dest_qpn: has(QP_DEST_QPN).then_some(a.dest_qp_num),
        rq_psn: has(QP_RQ_PSN).then_some(Psn::new(a.rq_psn)),
        sq_psn: has(QP_SQ_PSN).then_some(Psn::new(a.sq_psn)),
        max_rd_atomic: has(QP_MAX_QP_RD_ATOMIC).then_some(a.max_rd_atomic),
        max_dest_rd_atomic: has(QP_MAX_DEST_RD_ATOMIC).then_some(a.max_dest_rd_atomic),
        min_rnr_timer: has(QP_MIN_RNR_TIMER).then_some(a.min_rnr_timer),
        timeout: has(QP_TIMEOUT).then_some(a.timeout),
        retry_cnt: has(QP_RETRY_CNT).then_some(a.retry_cnt),
        rnr_retry: has(QP_RNR_RETRY).then_some(a.rnr_retry),
    })
}

/// Copies into `saved` (what `ibv_query_qp` reports) the attributes the
/// mask names.
pub(crate) fn remember(saved: &mut ibv_qp_attr, a: &ibv_qp_attr, mask: u32) {
    let copy = |bit: u32| mask & bit != 0;
    if copy(QP_STATE) {
        saved.qp_state = a.qp_state;
    }
    if copy(QP_ACCESS_FLAGS) {
        saved.qp_access_flags = a.qp_access_flags;
    }
    if copy(QP_PKEY_INDEX) {
        saved.pkey_index = a.pkey_index;
    }
    if copy(QP_PORT) {
        saved.port_num = a.port_num;
    }
    if copy(QP_QKEY) {
        saved.qkey = a.qkey;
    }
    if copy(QP_AV) {
        saved.ah_attr = a.ah_attr;
    }
    if copy(QP_PATH_MTU) {
        saved.path_mtu = a.path_mtu;
    }
    if copy(QP_TIMEOUT) {
        saved.timeout = a.timeout;
    }
    if copy(QP_RETRY_CNT) {
        saved.retry_cnt = a.retry_cnt;
    }
    if copy(QP_RNR_RETRY) {
        saved.rnr_retry = a.rnr_retry;
    }
    if copy(QP_RQ_PSN) {
        saved.rq_psn = a.rq_psn;
    }
    if copy(QP_MAX_QP_RD_ATOMIC) {
        saved.max_rd_atomic = a.max_rd_atomic;
    }
    if copy(QP_MIN_RNR_TIMER) {
        saved.min_rnr_timer = a.min_rnr_timer;
    }
    if copy(QP_SQ_PSN) {
        saved.sq_psn = a.sq_psn;
    }
    if copy(QP_MAX_DEST_RD_ATOMIC) {
        saved.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if copy(QP_DEST_QPN) {
        saved.dest_qp_num = a.dest_qp_num;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_keeps_known_bits_and_refuses_the_rest() {
        let a = access(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | (1 << 20)).unwrap();
        assert_eq!(a, Access::LOCAL_WRITE | Access::REMOTE_READ);
        assert_eq!(access(1 << 6), Err(libc::EOPNOTSUPP)); // on-demand paging
    }

    #[test]
    fn gids_and_addresses_round_trip() {
        for s in ["127.0.0.2", "::1", "fe80::1"] {
            let ip: IpAddr = s.parse().unwrap();
            assert_eq!(gid_ip(&ip_gid(ip)), ip);
        }
    }

    #[test]
    fn a_path_needs_a_gid() {
        let mut ah = ibv_ah_attr::default();
        assert_eq!(path(&ah, 0x11, 0x12), Err(libc::EINVAL));
        ah.is_global = 1;
        ah.grh.dgid = ip_gid("127.0.0.1".parse().unwrap());
        ah.grh.hop_limit = 1;
        let p = path(&ah, 0x11, 0x12).unwrap();
        assert_eq!(p.remote, "127.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(
            p.udp_src_port,
            ferroce::path_to(p.remote, 0x11, 0x12).udp_src_port
        );
    }

    #[test]
    fn modify_mask_maps_and_refuses_alternate_paths() {
        let a = ibv_qp_attr {
            qp_state: QPS_RTS,
            sq_psn: 0x123456,
            timeout: 14,
            ..ibv_qp_attr::default()
        };
        let q = qp_attr(&a, QP_STATE | QP_SQ_PSN | QP_TIMEOUT, 1, 2).unwrap();
        assert_eq!(q.state, Some(QpState::Rts));
        assert_eq!(q.sq_psn, Some(Psn::new(0x123456)));
        assert_eq!(q.timeout, Some(14));
        assert_eq!(q.retry_cnt, None);
        assert_eq!(
            qp_attr(&a, QP_STATE | (1 << 14), 1, 2),
            Err(libc::EOPNOTSUPP)
        );
        let bad = ibv_qp_attr { qp_state: 42, ..a };
        assert_eq!(qp_attr(&bad, QP_STATE, 1, 2), Err(libc::EINVAL));
    }
}
