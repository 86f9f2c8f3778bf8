//! Device and port attributes and the GID table: what `ibv_query_device`,
//! `ibv_query_port` and `ibv_query_gid` report, shaped as the kernel's
//! Soft-RoCE (`rdma_rxe`) reports them, with values that are true for
//! ferroce.
//!
//! A ferroce device is one address of the host (the one [`Context::open`]
//! binds). Its attributes come from the interface that owns that address:
//!
//! * **node GUID** (and system image GUID): the EUI-64 of the interface's
//!   MAC, ff:fe inserted and the universal/local bit flipped, as rxe does
//!   (`52:54:00:52:00:0a` -> `5054:00ff:fe52:000a`). An interface without a
//!   MAC (`lo`) has none to derive it from; ferroce then takes the EUI-64 of
//!   a locally administered pseudo-MAC `02:00:xx:xx:xx:xx` whose last four
//!   bytes are the IPv4 address (or a 32-bit FNV-1a hash of the IPv6
//!   address): stable for the address, and marked local by the U/L bit.
//! * **active MTU**: the largest IB MTU that fits the interface MTU less the
//!   RoCE v2 headers ([`active_mtu`]), as rxe's `rxe_set_mtu`.
//! * **GID table**: built as the kernel's `roce_gid_mgmt.c` fills rxe's
//!   ([`gid_table_for`]): the default GID (`fe80::` + EUI-64 of the MAC)
//!   first, then each IPv4 address as `::ffff:a.b.c.d`, then the IPv6
//!   addresses, all RoCE v2.
//! * **port state**: ACTIVE while the interface is up with carrier, as rxe's
//!   `ib_get_curr_port_state`; speed and width from its link speed, as
//!   `ib_get_eth_speed`.
//!
//! Everything here reads the host's interface list and `/sys`; nothing binds
//! a socket or needs root.
//!
//! # Where ferroce differs from rxe
//!
//! The values rxe reports are from `drivers/infiniband/sw/rxe/rxe_param.h`
//! (Linux 6.x) and, for the observed ones, from a 6.1 guest's
//! `ibv_devinfo -v` (`shared/rig/README.md` §3). ferroce reports what its
//! engine enforces; every field that differs says so on its constant below.
//! In short: no memory windows, multicast, APM or port events (so those
//! counts and flags are 0), one completion vector (completion channels are
//! served by the one driver thread; rxe: one per CPU), a per-QP RDMA READ/atomic
//! depth of 16 (rxe: 128), larger queue limits (QP and SRQ 32768 WRs, CQ
//! 1048576 CQEs), no limit of its own on QPs, CQs, SRQs, MRs, PDs, AHs or
//! SGEs (reported as `i32::MAX`), no CM (`port_cap_flags` 0, rxe sets CM_SUP),
//! `fw_ver` the crate version, and a header budget 4 bytes larger than rxe's
//! when deriving the active MTU.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use ferroce_io::netif::{self, Interface};

use crate::{Context, Mtu, Result};

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

/// The largest path MTU the engine segments to (rxe: the same).
pub const MAX_MTU: Mtu = Mtu::Mtu4096;

/// GID table slots (rxe's `RXE_PORT_GID_TBL_LEN`). ferroce's table holds
/// the interface's addresses; more than this many are not listed.
pub const GID_TABLE_LEN: u32 = 1024;

/// The largest value an `int` field of `ibv_device_attr` holds: what
/// ferroce reports for a resource it does not limit itself (only memory
/// does).
pub const UNLIMITED: u32 = i32::MAX as u32;

/// Work requests per send or receive queue: `Endpoint::create_qp` refuses
/// more (rxe `RXE_MAX_QP_WR`: 0x4000).
pub const MAX_QP_WR: u32 = 1 << 15;

/// Work requests per shared receive queue: `Endpoint::create_srq` and
/// `modify_srq` refuse more (rxe: `RXE_MAX_SRQ_WR`).
pub const MAX_SRQ_WR: u32 = 1 << 15;

/// Entries per completion queue: `Endpoint::create_cq` refuses more (rxe:
/// `(1 << RXE_MAX_LOG_CQE) - 1` = 32767).
pub const MAX_CQE: u32 = 1 << 20;

/// Outstanding RDMA READ and atomic requests per QP, as initiator and as
/// responder: the depth [`crate::ConnectOptions`] sets by default and ferroce is tested
/// at (rxe `RXE_MAX_QP_RD_ATOM`: 128).
pub const MAX_QP_RD_ATOM: u32 = 16;

/// QP numbers: user QPs are numbered from 0x11 (as rxe's) up to the 24-bit
/// limit 0xffffff, with no table of their own (rxe `RXE_MAX_QP`: 0x10000).
pub const MAX_QP: u32 = 0x00ff_ffff - 0x11 + 1;

/// A 64-bit GUID (node, system image or port GUID), held in host order.
/// Displays as `ibv_devinfo` prints it: `5054:00ff:fe52:000a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid(pub u64);

impl Guid {
    /// The modified EUI-64 of a 48-bit MAC: `ff:fe` inserted in the middle
    /// and the universal/local bit flipped (RFC 4291 appendix A; the
    /// kernel's `addrconf_addr_eui48`, which rxe uses for its GUIDs).
    pub const fn from_mac(mac: [u8; 6]) -> Self {
        Self(u64::from_be_bytes([
            mac[0] ^ 0x02,
            mac[1],
            mac[2],
            0xff,
            0xfe,
            mac[3],
            mac[4],
            mac[5],
        ]))
    }

    /// The GUID in wire (network) order, as `ibv_device_attr` holds it.
    pub const fn to_be_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        write!(
            f,
            "{:04x}:{:04x}:{:04x}:{:04x}",
            (g >> 48) & 0xffff,
            (g >> 32) & 0xffff,
            (g >> 16) & 0xffff,
            g & 0xffff
        )
    }
}

/// `ibv_atomic_cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicCap {
    /// No atomics.
    None = 0,
    /// Atomic among the QPs of this device.
    Hca = 1,
    /// Atomic with every other accessor of the memory too.
    Glob = 2,
}

impl AtomicCap {
    /// The ibverbs name without `IBV_`: `ATOMIC_HCA`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "ATOMIC_NONE",
            Self::Hca => "ATOMIC_HCA",
            Self::Glob => "ATOMIC_GLOB",
        }
    }
}

/// `ibv_device_cap_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeviceCapFlags(u32);

// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
impl DeviceCapFlags {
    pub const RESIZE_MAX_WR: Self = Self(1);
    pub const BAD_PKEY_CNTR: Self = Self(1 << 1);
    pub const BAD_QKEY_CNTR: Self = Self(1 << 2);
    pub const RAW_MULTI: Self = Self(1 << 3);
    pub const AUTO_PATH_MIG: Self = Self(1 << 4);
    pub const CHANGE_PHY_PORT: Self = Self(1 << 5);
    pub const UD_AV_PORT_ENFORCE: Self = Self(1 << 6);
    pub const CURR_QP_STATE_MOD: Self = Self(1 << 7);
    pub const SHUTDOWN_PORT: Self = Self(1 << 8);
    pub const INIT_TYPE: Self = Self(1 << 9);
    pub const PORT_ACTIVE_EVENT: Self = Self(1 << 10);
    pub const SYS_IMAGE_GUID: Self = Self(1 << 11);
    pub const RC_RNR_NAK_GEN: Self = Self(1 << 12);
    pub const SRQ_RESIZE: Self = Self(1 << 13);
    pub const N_NOTIFY_CQ: Self = Self(1 << 14);
    pub const MEM_WINDOW: Self = Self(1 << 17);
    pub const UD_IP_CSUM: Self = Self(1 << 18);
    pub const XRC: Self = Self(1 << 20);
    pub const MEM_MGT_EXTENSIONS: Self = Self(1 << 21);
    pub const MEM_WINDOW_TYPE_2A: Self = Self(1 << 23);
    pub const MEM_WINDOW_TYPE_2B: Self = Self(1 << 24);
    pub const RC_IP_CSUM: Self = Self(1 << 25);
    pub const RAW_IP_CSUM: Self = Self(1 << 26);
    pub const MANAGED_FLOW_STEERING: Self = Self(1 << 29);

    /// Every flag with its ibverbs name, in `ibv_devinfo`'s order.
    pub const ALL: [(Self, &'static str); 24] = [
        (Self::RESIZE_MAX_WR, "RESIZE_MAX_WR"),
        (Self::BAD_PKEY_CNTR, "BAD_PKEY_CNTR"),
        (Self::BAD_QKEY_CNTR, "BAD_QKEY_CNTR"),
        (Self::RAW_MULTI, "RAW_MULTI"),
        (Self::AUTO_PATH_MIG, "AUTO_PATH_MIG"),
        (Self::CHANGE_PHY_PORT, "CHANGE_PHY_PORT"),
        (Self::UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE"),
        (Self::CURR_QP_STATE_MOD, "CURR_QP_STATE_MOD"),
        (Self::SHUTDOWN_PORT, "SHUTDOWN_PORT"),
        (Self::INIT_TYPE, "INIT_TYPE"),
        (Self::PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT"),
        (Self::SYS_IMAGE_GUID, "SYS_IMAGE_GUID"),
        (Self::RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN"),
        (Self::SRQ_RESIZE, "SRQ_RESIZE"),
        (Self::N_NOTIFY_CQ, "N_NOTIFY_CQ"),
        (Self::MEM_WINDOW, "MEM_WINDOW"),
        (Self::UD_IP_CSUM, "UD_IP_CSUM"),
        (Self::XRC, "XRC"),
        (Self::MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS"),
        (Self::MEM_WINDOW_TYPE_2A, "MEM_WINDOW_TYPE_2A"),
        (Self::MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B"),
        (Self::RC_IP_CSUM, "RC_IP_CSUM"),
        (Self::RAW_IP_CSUM, "RAW_IP_CSUM"),
        (Self::MANAGED_FLOW_STEERING, "MANAGED_FLOW_STEERING"),
    ];

    /// What rxe reports (Linux 6.1, observed: `0x01223c76`): BAD_PKEY_CNTR,
    /// BAD_QKEY_CNTR, AUTO_PATH_MIG, CHANGE_PHY_PORT, UD_AV_PORT_ENFORCE,
    /// PORT_ACTIVE_EVENT, SYS_IMAGE_GUID, RC_RNR_NAK_GEN, SRQ_RESIZE,
    /// MEM_WINDOW, MEM_MGT_EXTENSIONS, MEM_WINDOW_TYPE_2B.
    pub const RXE: Self = Self(0x0122_3c76);

    /// What ferroce reports: only what it does.
    /// * BAD_QKEY_CNTR: UD receives with a wrong Q_Key are counted
    ///   ([`crate::Stats::rx_bad_qkey`], the port's `qkey_viol_cntr`).
    /// * SYS_IMAGE_GUID: the system image GUID is set.
    /// * RC_RNR_NAK_GEN: an RC responder with no receive posted (in its
    ///   receive queue or its SRQ) sends RNR NAKs.
    /// * SRQ_RESIZE: `modify_srq` takes a new `max_wr`. (ibverbs has no flag
    ///   for SRQ support itself: `max_srq` above 0 says it.)
    ///
    /// Not set, unlike rxe: BAD_PKEY_CNTR (the P_Key is not checked or
    /// counted), AUTO_PATH_MIG, CHANGE_PHY_PORT and UD_AV_PORT_ENFORCE (one
    /// port, one path), PORT_ACTIVE_EVENT (the port raises no events; the
    /// async events are QP, CQ and SRQ ones), MEM_WINDOW/MEM_WINDOW_TYPE_2B
    /// and MEM_MGT_EXTENSIONS (no memory windows, fast registration or local
    /// invalidate).
    pub const FERROCE: Self = Self(
        Self::BAD_QKEY_CNTR.0
            | Self::SYS_IMAGE_GUID.0
            | Self::RC_RNR_NAK_GEN.0
            | Self::SRQ_RESIZE.0,
    );

    pub const fn bits(self) -> u32 {
        self.0
    }
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The names of the flags set, in `ibv_devinfo`'s order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::ALL
            .into_iter()
            .filter(move |(f, _)| self.contains(*f))
            .map(|(_, n)| n)
    }

    /// The bits set that no named flag covers.
    pub const fn unknown_bits(self) -> u32 {
        let mut known = 0;
        let mut i = 0;
        while i < Self::ALL.len() {
            known |= Self::ALL[i].0.0;
            i += 1;
        }
        self.0 & !known
    }
}

impl core::ops::BitOr for DeviceCapFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// What `ibv_query_device` (and the `_ex` fields `ibv_devinfo -v` prints)
/// reports. Field names are ibverbs'.
// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceAttr {
    /// ferroce's version (rxe: `0.0.0`).
    pub fw_ver: String,
    pub node_guid: Guid,
    pub sys_image_guid: Guid,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: DeviceCapFlags,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    pub atomic_cap: AtomicCap,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    /// `ibv_device_attr_ex::device_cap_flags_ex`: the flags above in the
    /// low 32 bits; ferroce has none of the extended ones.
    pub device_cap_flags_ex: u64,
    /// Completion vectors (rxe: one per CPU). ferroce has completion
    /// channels ([`crate::CompletionChannel`]), all fed by its one driver
    /// thread, and a CQ names no vector: 1.
    pub num_comp_vectors: u32,
}

/// `ibv_port_state`.
// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortState {
    Down = 1,
    Init = 2,
    Armed = 3,
    Active = 4,
}

impl PortState {
    /// As `ibv_devinfo` prints it: `PORT_ACTIVE`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Down => "PORT_DOWN",
            Self::Init => "PORT_INIT",
            Self::Armed => "PORT_ARMED",
            Self::Active => "PORT_ACTIVE",
        }
    }
}

/// The port's physical state (IBA PortPhysicalState).
// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PhysState {
    Sleep = 1,
    Polling = 2,
    Disabled = 3,
    PortConfigurationTraining = 4,
    LinkUp = 5,
    LinkErrorRecovery = 6,
    PhyTest = 7,
}

/// `ibv_port_attr::link_layer`.
// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    Unspecified = 0,
    InfiniBand = 1,
    Ethernet = 2,
}

/// IB link width (`ibv_port_attr::active_width`): 1X, 4X, 8X, 12X, 2X.
// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
pub mod width {
    pub const X1: u8 = 1;
    pub const X4: u8 = 2;
    pub const X8: u8 = 4;
    pub const X12: u8 = 8;
    pub const X2: u8 = 16;
}

/// IB lane speed (`ibv_port_attr::active_speed`).
pub mod speed {
    /// 2.5 Gbit/s.
    pub const SDR: u8 = 1;
    /// 5 Gbit/s.
    pub const DDR: u8 = 2;
    /// 10 Gbit/s.
    pub const QDR: u8 = 4;
    /// 10 Gbit/s (64b/66b).
    pub const FDR10: u8 = 8;
    /// 14 Gbit/s.
    pub const FDR: u8 = 16;
    /// 25 Gbit/s.
    pub const EDR: u8 = 32;
    /// 50 Gbit/s.
    pub const HDR: u8 = 64;
    /// 100 Gbit/s.
    pub const NDR: u8 = 128;
}

/// What `ibv_query_port` reports for port 1, the only one.
// Named as ibverbs names them (`man ibv_query_device`, `ibv_query_port`);
// a line each would repeat the name.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    pub gid_tbl_len: u32,
    /// `IB_PORT_*` capability bits. ferroce: 0. rxe sets IB_PORT_CM_SUP
    /// (0x00010000); ferroce does not answer CM MADs on QP1 yet.
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    /// Packets dropped for a BTH P_Key of another partition
    /// ([`crate::Stats::rx_bad_pkey`]; [`Context::query_port`] fills it
    /// in; the address-only [`query_port`] has no engine: 0).
    pub bad_pkey_cntr: u32,
    /// UD receives dropped for a wrong Q_Key ([`Context::query_port`]
    /// fills it in; the address-only [`query_port`] has no engine: 0).
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    /// RoCE has no LIDs: 0.
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    /// One of [`width`].
    pub active_width: u8,
    /// One of [`speed`].
    pub active_speed: u8,
    pub phys_state: PhysState,
    pub link_layer: LinkLayer,
    pub port_cap_flags2: u16,
}

/// How a GID is used on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidType {
    /// RoCE v1 (Ethernet, ethertype 0x8915). ferroce's UDP backend does
    /// not send it.
    RoceV1,
    /// RoCE v2 (UDP/IP, port 4791).
    RoceV2,
}

impl GidType {
    /// As `ibv_devinfo` and `/sys/class/infiniband/*/gid_attrs/types` name
    /// it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::RoceV1 => "RoCE v1",
            Self::RoceV2 => "RoCE v2",
        }
    }
}

/// One GID table entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gid {
    /// The GID in wire order (an IPv6 address; IPv4 as `::ffff:a.b.c.d`).
    pub raw: [u8; 16],
    /// RoCE v1 or v2.
    pub kind: GidType,
    /// The interface it belongs to (`/sys/.../gid_attrs/ndevs`).
    pub netdev: String,
}

impl Gid {
    /// The RoCE v2 GID of an IP address, as the kernel's `rdma_ip2gid`.
    pub fn from_ip(addr: IpAddr, netdev: &str) -> Self {
        let v6 = match addr {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        Self {
            raw: v6.octets(),
            kind: GidType::RoceV2,
            netdev: netdev.to_owned(),
        }
    }

    /// The IP address the GID stands for (IPv4 for an IPv4-mapped GID).
    pub fn ip(&self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self.raw)).to_canonical()
    }

    /// The 8 groups of 4 hex digits sysfs shows
    /// (`0000:0000:0000:0000:0000:ffff:c612:000b`), which `ibv_devinfo`
    /// prints for RoCE v1 GIDs.
    pub fn long_form(&self) -> String {
        let r = &self.raw;
        (0..8)
            .map(|i| format!("{:02x}{:02x}", r[2 * i], r[2 * i + 1]))
            .collect::<Vec<_>>()
            .join(":")
    }
}

/// As glibc's `inet_ntop(AF_INET6)`, which `ibv_devinfo` prints RoCE v2
/// GIDs with: RFC 5952 text, except that an address whose first 96 bits
/// are zero and whose next 16 are not prints its last 32 bits dotted
/// (`::1.2.3.4`), and an IPv4-mapped one as `::ffff:1.2.3.4`.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.raw;
        if r[..10] == [0; 10] {
            let v4 = Ipv4Addr::new(r[12], r[13], r[14], r[15]);
            if r[10..12] == [0xff, 0xff] {
                return write!(f, "::ffff:{v4}");
            }
            if r[10..12] == [0, 0] && (r[12] | r[13]) != 0 {
                return write!(f, "::{v4}");
            }
        }
        fmt::Display::fmt(&Ipv6Addr::from(*r), f)
    }
}

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
        // No memory windows (rxe 6.x supports type 2B windows).
        max_mw: 0,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        // No multicast (rxe: 8192 groups, 56 QPs each, 0x70000 in all).
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
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
        device_cap_flags_ex: u64::from(flags.bits()),
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
        port_cap_flags: 0,
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

/// The GID table of a device on `iface`, as the kernel fills rxe's when the
/// device is created (`roce_gid_mgmt.c`: default GIDs, then IPv4, then
/// IPv6 addresses; an address equal to an entry already present is not
/// listed twice):
///
/// 0. the default GID `fe80::` + EUI-64 of the MAC, whether or not the
///    interface has that link-local address (it is the usual one; under
///    stable-privacy addressing the real link-local comes later with the
///    other IPv6 addresses). An interface without a MAC has no default GID;
///    ferroce lists its link-local addresses first instead;
/// 1. each IPv4 address, as `::ffff:a.b.c.d`;
/// 2. each IPv6 address, in the kernel's order.
///
/// All RoCE v2: ferroce sends RoCE v2 only (rxe lists no RoCE v1 GIDs
/// either, see the rig README §3). A long-running rxe appends addresses
/// added later and reuses freed slots, so its indices can drift from this
/// order; ferroce rebuilds the table from the current addresses on every
/// query.
pub fn gid_table_for(iface: &Interface) -> Vec<Gid> {
    let mut out: Vec<Gid> = Vec::new();
    let mut push = |gid: Gid| {
        if out.len() < GID_TABLE_LEN as usize && !out.iter().any(|g| g.raw == gid.raw) {
            out.push(gid);
        }
    };
    let v6 = || {
        iface.addrs.iter().filter_map(|a| match a {
            IpAddr::V6(a) => Some(*a),
            IpAddr::V4(_) => None,
        })
    };
    match iface.mac {
        Some(mac) => {
            let mut raw = [0u8; 16];
            raw[0] = 0xfe;
            raw[1] = 0x80;
            raw[8..].copy_from_slice(&Guid::from_mac(mac).to_be_bytes());
            push(Gid {
                raw,
                kind: GidType::RoceV2,
                netdev: iface.name.clone(),
            });
        }
        None => {
            for a in v6().filter(Ipv6Addr::is_unicast_link_local) {
                push(Gid::from_ip(IpAddr::V6(a), &iface.name));
            }
        }
    }
    for a in iface.addrs.iter().filter(|a| a.is_ipv4()) {
        push(Gid::from_ip(*a, &iface.name));
    }
    for a in v6() {
        push(Gid::from_ip(IpAddr::V6(a), &iface.name));
    }
    out
}

/// The index of `addr`'s GID in `table` (an IPv4 address finds its
/// IPv4-mapped GID): what `ibv_rc_pingpong -g` and perftest `-x` take.
pub fn gid_index(table: &[Gid], addr: IpAddr) -> Option<usize> {
    let raw = Gid::from_ip(addr.to_canonical(), "").raw;
    table.iter().position(|g| g.raw == raw)
}

/// The interface `local` belongs to, or a NotFound error.
fn bound_interface(local: IpAddr) -> io::Result<Interface> {
    netif::interface_of(local)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{local} is not an address of this host"),
        )
    })
}

/// `ibv_query_device` for a ferroce device on `local` (one of this host's
/// addresses).
pub fn query_device(local: IpAddr) -> io::Result<DeviceAttr> {
    Ok(device_attr_for(&bound_interface(local)?, local))
}

/// `ibv_query_port` (port 1) for a ferroce device on `local`.
pub fn query_port(local: IpAddr) -> io::Result<PortAttr> {
    Ok(port_attr_for(&bound_interface(local)?))
}

/// The GID table of a ferroce device on `local`: [`gid_table_for`] of its
/// interface, plus `local` itself at the end if the interface does not list
/// it (an address of 127.0.0.0/8 other than 127.0.0.1, which Linux routes to
/// `lo` without listing it).
pub fn gid_table(local: IpAddr) -> io::Result<Vec<Gid>> {
    let iface = bound_interface(local)?;
    let mut table = gid_table_for(&iface);
    if gid_index(&table, local).is_none() && table.len() < GID_TABLE_LEN as usize {
        table.push(Gid::from_ip(local.to_canonical(), &iface.name));
    }
    Ok(table)
}

/// Device queries on an open device (`ibv_query_device`, `ibv_query_port`,
/// `ibv_query_gid`), for the address it is bound to. The device can send
/// from that address only: the other GIDs of the table belong to the same
/// interface but to no open ferroce device.
impl Context {
    /// `ibv_query_device` (with the `_ex` fields `ibv_devinfo -v` prints).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        Ok(query_device(self.local())?)
    }

    /// Port 1, with the P_Key and Q_Key violation counters of this
    /// device's engine.
    pub fn query_port(&self) -> Result<PortAttr> {
        let mut port = query_port(self.local())?;
        let stats = self.stats();
        port.bad_pkey_cntr = u32::try_from(stats.rx_bad_pkey).unwrap_or(u32::MAX);
        port.qkey_viol_cntr = u32::try_from(stats.rx_bad_qkey).unwrap_or(u32::MAX);
        Ok(port)
    }

    /// The GID table of the device's interface, in rxe's order.
    pub fn gid_table(&self) -> Result<Vec<Gid>> {
        Ok(gid_table(self.local())?)
    }

    /// The index of the device's own GID in [`Context::gid_table`].
    pub fn gid_index(&self) -> Result<usize> {
        let table = self.gid_table()?;
        gid_index(&table, self.local()).ok_or_else(|| {
            crate::Error::Io(io::Error::new(
                io::ErrorKind::NotFound,
                "the device's address is not in its GID table",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{QpType, VerbsError};
    use ferroce_core::{Endpoint, EndpointConfig, QpInit};

    const RIG_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x52, 0x00, 0x0a];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn iface(name: &str, mac: Option<[u8; 6]>, mtu: u32, addrs: &[&str]) -> Interface {
        Interface {
            name: name.into(),
            mac,
            mtu,
            addrs: addrs.iter().map(|a| ip(a)).collect(),
            up: true,
            running: true,
            loopback: mac.is_none(),
            speed_mbps: None,
        }
    }

    fn texts(table: &[Gid]) -> Vec<String> {
        table.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn eui64_of_the_rig_mac() {
        // shared/rig/README.md §3: node_guid 5054:00ff:fe52:000a.
        assert_eq!(Guid::from_mac(RIG_MAC).to_string(), "5054:00ff:fe52:000a");
        assert_eq!(
            Guid::from_mac(RIG_MAC).to_be_bytes(),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x52, 0x00, 0x0a]
        );
        // The U/L bit flips both ways.
        let local_mac = [0x02, 0xfc, 0, 0, 0, 1];
        assert_eq!(Guid::from_mac(local_mac).to_string(), "00fc:00ff:fe00:0001");
        let eth0 = iface("eth0", Some(RIG_MAC), 1500, &["198.18.0.11"]);
        let attr = device_attr_for(&eth0, ip("198.18.0.11"));
        assert_eq!(attr.node_guid, Guid::from_mac(RIG_MAC));
        assert_eq!(attr.sys_image_guid, attr.node_guid);
    }

    #[test]
    fn guid_without_a_mac_is_stable_and_local() {
        let lo = iface("lo", None, 65536, &["127.0.0.1", "::1"]);
        let g = node_guid_for(&lo, ip("127.0.0.1"));
        assert_eq!(g.to_string(), "0000:7fff:fe00:0001");
        assert_eq!(g, node_guid_for(&lo, ip("::ffff:127.0.0.1")));
        assert_eq!(node_guid_for(&lo, ip("::1")), node_guid_for(&lo, ip("::1")));
        assert_ne!(node_guid_for(&lo, ip("::1")), g);
        // Modified EUI-64 "u" bit clear: not a universal (IEEE) identifier.
        assert_eq!(node_guid_for(&lo, ip("::1")).to_be_bytes()[0] & 0x02, 0);
    }

    #[test]
    fn mtu_mapping() {
        let cases = [
            (1500, Mtu::Mtu1024), // rxe: 1024 (3), rig README §3
            (9000, Mtu::Mtu4096), // rxe: 4096 (5) with RIG_MTU=9000
            (1400, Mtu::Mtu1024),
            (65536, Mtu::Mtu4096), // lo
            (4096 + 84, Mtu::Mtu4096),
            (4096 + 83, Mtu::Mtu2048),
            (2048 + 84, Mtu::Mtu2048),
            (1024 + 84, Mtu::Mtu1024),
            // rxe says 1024 here (1104 - 80); a 1024-byte WRITE_ONLY_WITH_IMM
            // over IPv6 would be 1108 bytes.
            (1104, Mtu::Mtu512),
            (576, Mtu::Mtu256),
            (68, Mtu::Mtu256), // rxe's floor
            (0, Mtu::Mtu256),
        ];
        for (netdev, want) in cases {
            assert_eq!(active_mtu(netdev), want, "netdev MTU {netdev}");
        }
        // The budget covers the largest headers on a full-MTU packet.
        let ipv6_udp = 40 + 8;
        let bth_reth_immdt = 12 + 16 + 4;
        let icrc = 4;
        assert_eq!(MTU_HEADER_BUDGET, ipv6_udp + bth_reth_immdt + icrc);
    }

    #[test]
    fn gid_order_as_on_the_rig() {
        // getifaddrs lists IPv4 first, then IPv6 with wider scope first.
        let eth0 = iface(
            "eth0",
            Some(RIG_MAC),
            1500,
            &["198.18.0.11", "fd52:6f43:4500::11", "fe80::5054:ff:fe52:a"],
        );
        let table = gid_table_for(&eth0);
        assert_eq!(
            texts(&table),
            [
                "fe80::5054:ff:fe52:a",
                "::ffff:198.18.0.11",
                "fd52:6f43:4500::11"
            ]
        );
        // sysfs spells the IPv4 one 0000:...:ffff:c612:000b.
        assert_eq!(
            table[1].long_form(),
            "0000:0000:0000:0000:0000:ffff:c612:000b"
        );
        assert!(table.iter().all(|g| g.kind == GidType::RoceV2));
        assert!(table.iter().all(|g| g.netdev == "eth0"));
        assert_eq!(gid_index(&table, ip("198.18.0.11")), Some(1));
        assert_eq!(gid_index(&table, ip("::ffff:198.18.0.11")), Some(1));
        assert_eq!(gid_index(&table, ip("fd52:6f43:4500::11")), Some(2));
        assert_eq!(gid_index(&table, ip("198.18.0.12")), None);
    }

    #[test]
    fn gid_order_other_shapes() {
        // Stable-privacy link-local: the default GID stays at 0 and the
        // real link-local comes with the other IPv6 addresses.
        let eth0 = iface(
            "eth0",
            Some(RIG_MAC),
            1500,
            &[
                "2001:db8::5",
                "fe80::1234:5678:9abc:def0",
                "10.0.0.1",
                "10.0.0.2",
            ],
        );
        assert_eq!(
            texts(&gid_table_for(&eth0)),
            [
                "fe80::5054:ff:fe52:a",
                "::ffff:10.0.0.1",
                "::ffff:10.0.0.2",
                "2001:db8::5",
                "fe80::1234:5678:9abc:def0"
            ]
        );
        // IPv6 disabled: the default GID is there all the same, as on rxe.
        let v4only = iface("eth1", Some(RIG_MAC), 1500, &["10.0.0.1"]);
        assert_eq!(
            texts(&gid_table_for(&v4only)),
            ["fe80::5054:ff:fe52:a", "::ffff:10.0.0.1"]
        );
        // No MAC: link-local first, then IPv4, then the rest.
        let tun = iface("tun0", None, 1500, &["10.8.0.1", "2001:db8::1", "fe80::1"]);
        assert_eq!(
            texts(&gid_table_for(&tun)),
            ["fe80::1", "::ffff:10.8.0.1", "2001:db8::1"]
        );
        let lo = iface("lo", None, 65536, &["127.0.0.1", "::1"]);
        assert_eq!(texts(&gid_table_for(&lo)), ["::ffff:127.0.0.1", "::1"]);
        // The table stops at GID_TABLE_LEN.
        let many: Vec<String> = (0..1100).map(|i| format!("2001:db8::{i:x}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let big = iface("eth2", Some(RIG_MAC), 1500, &refs);
        assert_eq!(gid_table_for(&big).len(), GID_TABLE_LEN as usize);
    }

    #[test]
    fn gid_text_as_inet_ntop() {
        let show = |s: &str| Gid::from_ip(ip(s), "x").to_string();
        assert_eq!(show("198.18.0.11"), "::ffff:198.18.0.11");
        assert_eq!(show("::1"), "::1");
        assert_eq!(show("::"), "::");
        // glibc prints the deprecated IPv4-compatible form dotted...
        assert_eq!(show("::c612:b"), "::198.18.0.11");
        // ...but not when the 16 bits before the last are zero.
        assert_eq!(show("::2"), "::2");
        assert_eq!(show("fe80::5054:ff:fe52:a"), "fe80::5054:ff:fe52:a");
        assert_eq!(show("fd52:6f43:4500::11"), "fd52:6f43:4500::11");
        assert_eq!(show("2001:db8:0:1:0:0:0:1"), "2001:db8:0:1::1");
        assert_eq!(show("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(
            Gid::from_ip(ip("::ffff:198.18.0.11"), "x").ip(),
            ip("198.18.0.11")
        );
    }

    #[test]
    fn port_state_speed_and_limits() {
        let mut eth0 = iface("eth0", Some(RIG_MAC), 1500, &["198.18.0.11"]);
        let p = port_attr_for(&eth0);
        assert_eq!(p.state, PortState::Active);
        assert_eq!(p.phys_state, PhysState::LinkUp);
        assert_eq!((p.max_mtu, p.active_mtu), (Mtu::Mtu4096, Mtu::Mtu1024));
        assert_eq!(p.link_layer, LinkLayer::Ethernet);
        assert_eq!((p.gid_tbl_len, p.pkey_tbl_len), (1024, 1));
        assert_eq!(p.max_msg_sz, 0x80_0000);
        // Unknown link speed: 1X SDR, as rxe on virtio-net.
        assert_eq!((p.active_speed, p.active_width), (speed::SDR, width::X1));
        eth0.running = false;
        let p = port_attr_for(&eth0);
        assert_eq!(
            (p.state, p.phys_state),
            (PortState::Down, PhysState::Polling)
        );
        eth0.up = false;
        assert_eq!(port_attr_for(&eth0).phys_state, PhysState::Disabled);

        for (mbps, want) in [
            (100, (speed::SDR, width::X1)),
            (10_000, (speed::FDR10, width::X1)),
            (25_000, (speed::EDR, width::X1)),
            (40_000, (speed::FDR10, width::X4)),
            (100_000, (speed::EDR, width::X4)),
            (400_000, (speed::NDR, width::X4)),
        ] {
            assert_eq!(eth_speed_to_ib(Some(mbps)), want, "{mbps} Mbit/s");
        }
    }

    #[test]
    fn cap_flags() {
        let rxe: Vec<_> = DeviceCapFlags::RXE.names().collect();
        assert_eq!(
            rxe,
            [
                "BAD_PKEY_CNTR",
                "BAD_QKEY_CNTR",
                "AUTO_PATH_MIG",
                "CHANGE_PHY_PORT",
                "UD_AV_PORT_ENFORCE",
                "PORT_ACTIVE_EVENT",
                "SYS_IMAGE_GUID",
                "RC_RNR_NAK_GEN",
                "SRQ_RESIZE",
                "MEM_WINDOW",
                "MEM_MGT_EXTENSIONS",
                "MEM_WINDOW_TYPE_2B"
            ]
        );
        assert_eq!(DeviceCapFlags::RXE.unknown_bits(), 0);
        assert_eq!(DeviceCapFlags::FERROCE.bits(), 0x3804);
        assert!(DeviceCapFlags::FERROCE.contains(DeviceCapFlags::SRQ_RESIZE));
        assert_eq!(DeviceCapFlags::from_bits(1 << 31).unknown_bits(), 1 << 31);
    }

    /// The limits reported are the ones the engine enforces.
    #[test]
    fn limits_match_the_engine() {
        let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
        let pd = ep.alloc_pd();
        assert!(ep.create_cq(MAX_CQE).is_ok());
        assert!(matches!(
            ep.create_cq(MAX_CQE + 1),
            Err(VerbsError::BadValue { .. })
        ));
        let cq = ep.create_cq(16).unwrap();
        let init = |wr| QpInit {
            pd,
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: wr,
            max_recv_wr: wr,
            sq_sig_all: false,
            srq: None,
        };
        assert!(ep.create_qp(init(MAX_QP_WR)).is_ok());
        assert!(matches!(
            ep.create_qp(init(MAX_QP_WR + 1)),
            Err(VerbsError::BadValue { .. })
        ));
        let srq = ep.create_srq(pd, MAX_SRQ_WR, 0).unwrap();
        assert!(matches!(
            ep.create_srq(pd, MAX_SRQ_WR + 1, 0),
            Err(VerbsError::BadValue { .. })
        ));
        // SRQ_RESIZE: a new max_wr is taken, within the same limit.
        let resize = |max_wr| ferroce_core::verbs::SrqAttr {
            max_wr: Some(max_wr),
            srq_limit: None,
        };
        assert!(ep.modify_srq(srq, &resize(16)).is_ok());
        assert_eq!(ep.query_srq(srq).unwrap().max_wr, 16);
        assert!(matches!(
            ep.modify_srq(srq, &resize(MAX_SRQ_WR + 1)),
            Err(VerbsError::BadValue { .. })
        ));
        let lo = iface("lo", None, 65536, &["127.0.0.1"]);
        let port = port_attr_for(&lo);
        assert_eq!(u64::from(port.max_msg_sz), ferroce_core::MAX_MSG_SIZE);
        let dev = device_attr_for(&lo, ip("127.0.0.1"));
        assert_eq!(dev.vendor_id, 0xffffff);
        assert_eq!(dev.max_qp_rd_atom, 16);
        assert_eq!(dev.max_srq_wr, MAX_SRQ_WR);
        assert!(dev.max_srq > 0);
        assert_eq!(dev.atomic_cap, AtomicCap::Hca);
        assert_eq!(dev.phys_port_cnt, 1);
    }

    #[test]
    fn queries_on_this_host() {
        let local = ip("127.0.0.1");
        let table = gid_table(local).unwrap();
        assert_eq!(
            gid_index(&table, local),
            table.iter().position(|g| g.ip() == local)
        );
        assert!(gid_index(&table, local).is_some());
        // Another loopback address: not listed by lo, added at the end.
        let other = ip("127.0.0.33");
        let t2 = gid_table(other).unwrap();
        assert_eq!(gid_index(&t2, other), Some(t2.len() - 1));
        assert_eq!(query_port(local).unwrap().link_layer, LinkLayer::Ethernet);
        assert_eq!(query_device(local).unwrap().phys_port_cnt, 1);
        let err = query_device(ip("0.0.0.0")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn context_queries_its_own_address() {
        // An address and port no other test binds.
        let local = ip("127.0.0.41");
        let ctx = Context::open_with(crate::DeviceConfig {
            port: 47_941,
            seed: Some(1),
            ..crate::DeviceConfig::new(local)
        })
        .unwrap();
        let table = ctx.gid_table().unwrap();
        assert_eq!(table[ctx.gid_index().unwrap()].ip(), local);
        assert_eq!(ctx.query_port().unwrap().qkey_viol_cntr, 0);
        assert_eq!(
            ctx.query_device().unwrap().node_guid.to_string(),
            "0000:7fff:fe00:0029"
        );
    }
}
