//! Deriving the device and port attributes from the interface that owns the
//! device's address: node GUID, active MTU, link speed and width.

use std::net::IpAddr;

use super::{
    AtomicCap, DEVICE_ATOMIC_WRITE, DEVICE_FLUSH_GLOBAL, DeviceAttr, DeviceCapFlags, GID_TABLE_LEN,
    Guid, Interface, LinkLayer, MAX_CQE, MAX_MTU, MAX_QP, MAX_QP_RD_ATOM, MAX_QP_WR, MAX_SRQ_WR,
    PhysState, PortAttr, PortState, UNLIMITED, speed, width,
};
use crate::Mtu;

/// `IBV_PORT_CM_SUP`: the port answers CM MADs on QP1 (`ferroce::cm`),
/// the one flag rxe sets.
pub const PORT_CM_SUP: u32 = 1 << 16;

/// The RoCE v2 UDP/IP and transport headers the active MTU must leave room
/// for: IPv6 (40) + UDP (8) + BTH (12) + RETH (16) + ImmDt (4) + ICRC (4) =
/// 84 bytes, the largest headers a full-MTU packet of ferroce's carries
/// (RDMA WRITE_ONLY_WITH_IMMEDIATE over IPv6).
///
/// rxe subtracts `RXE_MAX_HDR_LENGTH` = 80 (`rxe_param.h`,
/// `eth_mtu_int_to_enum`), which leaves out the ImmDt; with it a netdev MTU
/// of 1104..=1107 (and likewise just above 336, 592, 2128, 4176) gets rxe an
/// IB MTU whose largest packet does not fit. ferroce answers one step lower
/// there and the same as rxe everywhere else (1500 -> 1024, 9000 -> 4096).
pub const MTU_HEADER_BUDGET: u32 = 84;
/// The active IB MTU for an interface MTU: the largest of 256..=4096 that
/// fits `netdev_mtu` less [`MTU_HEADER_BUDGET`], as rxe's `rxe_set_mtu`
/// (which also answers 256 when not even that fits).
pub fn active_mtu(netdev_mtu: u32) -> Mtu {
    match netdev_mtu.saturating_sub(MTU_HEADER_BUDGET) {
        0..512 => Mtu::Mtu256,
        512..1024 => Mtu::Mtu512,
        1024..2048 => Mtu::Mtu1024,
        2048..4096 => Mtu::Mtu2048,
        _ => MAX_MTU,
    }
}

/// IB speed and width for an Ethernet link speed in Mbit/s, as the kernel's
/// `ib_get_eth_speed` answers for rxe when the driver reports no lane
/// count; an unknown speed counts as 1000 Mbit/s there too. Returns
/// `(active_speed, active_width)`.
pub fn eth_speed_to_ib(mbps: Option<u32>) -> (u8, u8) {
    match mbps.unwrap_or(1000) {
        0..=1_000 => (speed::SDR, width::X1),
        1_001..=10_000 => (speed::FDR10, width::X1),
        10_001..=20_000 => (speed::DDR, width::X4),
        20_001..=25_000 => (speed::EDR, width::X1),
        25_001..=40_000 => (speed::FDR10, width::X4),
        40_001..=50_000 => (speed::EDR, width::X2),
        50_001..=100_000 => (speed::EDR, width::X4),
        100_001..=200_000 => (speed::HDR, width::X4),
        _ => (speed::NDR, width::X4),
    }
}

/// The node GUID of a device on `local`, an address of `iface`: the EUI-64
/// of the interface's MAC, or for an interface without one, of the pseudo
/// MAC `02:00:` + the IPv4 address (or an FNV-1a hash of the IPv6 one).
pub fn node_guid_for(iface: &Interface, local: IpAddr) -> Guid {
    let mac = iface.mac.unwrap_or_else(|| {
        let tail = match local.to_canonical() {
            IpAddr::V4(a) => a.octets(),
            IpAddr::V6(a) => fnv1a32(&a.octets()).to_be_bytes(),
        };
        [0x02, 0x00, tail[0], tail[1], tail[2], tail[3]]
    });
    Guid::from_mac(mac)
}

fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The device attributes of a ferroce device on `local`, an address of
/// `iface`.
pub fn device_attr_for(iface: &Interface, local: IpAddr) -> DeviceAttr {
    let guid = node_guid_for(iface, local);
    let flags = DeviceCapFlags::FERROCE;
    DeviceAttr {
        fw_ver: env!("CARGO_PKG_VERSION").to_owned(),
        node_guid: guid,
        sys_image_guid: guid,
        // Regions are heap allocations: at most isize::MAX bytes (rxe:
        // u64::MAX).
        max_mr_size: isize::MAX as u64,
        // Regions have no pages; any page size is as good (rxe's value).
        page_size_cap: 0xffff_f000,
        // IBTA "no vendor ID", as rxe.
        vendor_id: 0x00ff_ffff,
        vendor_part_id: 0,
        hw_ver: 0,
        max_qp: MAX_QP,
        max_qp_wr: MAX_QP_WR,
        device_cap_flags: flags,
        // Scatter/gather lists are plain vectors (rxe: 32).
        max_sge: UNLIMITED,
        max_sge_rd: UNLIMITED,
        // CQ, MR and PD handles are not drawn from fixed tables (rxe:
        // 16384 CQs, 256K MRs, 0x7ffc PDs).
        max_cq: UNLIMITED,
        max_cqe: MAX_CQE,
        max_mr: UNLIMITED,
        max_pd: UNLIMITED,
        max_qp_rd_atom: MAX_QP_RD_ATOM,
        // No reliable datagram (EE) service, as rxe.
        max_ee_rd_atom: 0,
        // Responder resources are per QP, with no device-wide pool (rxe:
        // 0x3f000).
        max_res_rd_atom: UNLIMITED,
        max_qp_init_rd_atom: MAX_QP_RD_ATOM,
        max_ee_init_rd_atom: 0,
        // Atomics run under the engine's lock, so they are atomic among
        // this device's QPs (as rxe). Local CPU access to registered memory
        // takes that lock too, but other devices' does not: HCA, not GLOB.
        atomic_cap: AtomicCap::Hca,
        max_ee: 0,
        max_rdd: 0,
        // Type 1 and type 2B windows, in a table of their own (rxe 6.1:
        // 4096, RXE_MAX_MW).
        max_mw: ferroce_core::MAX_MW,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        // UD multicast with rxe's limits: 8192 groups, 56 QPs each,
        // 0x70000 attachments in all.
        max_mcast_grp: ferroce_core::MAX_MCAST_GROUPS as u32,
        max_mcast_qp_attach: ferroce_core::MAX_MCAST_QP_ATTACH as u32,
        max_total_mcast_qp_attach: (ferroce_core::MAX_MCAST_GROUPS
            * ferroce_core::MAX_MCAST_QP_ATTACH) as u32,
        // A UD destination travels in each work request; there are no
        // address handle objects to run out of (rxe: a table).
        max_ah: UNLIMITED,
        max_fmr: 0,
        max_map_per_fmr: 0,
        // SRQ handles are not drawn from a fixed table (rxe's are), and
        // their scatter/gather lists are plain vectors, as QPs' are (rxe:
        // 27 SGEs).
        max_srq: UNLIMITED,
        max_srq_wr: MAX_SRQ_WR,
        max_srq_sge: UNLIMITED,
        // One P_Key, the default 0xffff, as rxe.
        max_pkeys: 1,
        // rxe's value: ACKs leave within the driver's next round, far under
        // 4.096 us * 2^15.
        local_ca_ack_delay: 15,
        phys_port_cnt: 1,
        device_cap_flags_ex: u64::from(flags.bits()) | DEVICE_ATOMIC_WRITE | DEVICE_FLUSH_GLOBAL,
        // Completion channels exist; the driver thread is their only
        // source of events.
        num_comp_vectors: 1,
    }
}

/// The attributes of port 1 of a device on `iface`.
pub fn port_attr_for(iface: &Interface) -> PortAttr {
    let active = iface.up && iface.running;
    let state = if active {
        PortState::Active
    } else {
        PortState::Down
    };
    let phys_state = if active {
        PhysState::LinkUp
    } else if iface.up {
        PhysState::Polling
    } else {
        PhysState::Disabled
    };
    // /sys did not give the MTU: assume Ethernet's.
    let mtu = if iface.mtu == 0 { 1500 } else { iface.mtu };
    let (active_speed, active_width) = eth_speed_to_ib(iface.speed_mbps);
    PortAttr {
        state,
        max_mtu: MAX_MTU,
        active_mtu: active_mtu(mtu),
        gid_tbl_len: GID_TABLE_LEN,
        port_cap_flags: PORT_CM_SUP,
        max_msg_sz: ferroce_core::MAX_MSG_SIZE as u32,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        active_width,
        active_speed,
        phys_state,
        link_layer: LinkLayer::Ethernet,
        port_cap_flags2: 0,
    }
}
