//! The attribute types `ibv_query_device` and `ibv_query_port` report
//! (GUIDs, capability flags, port state, speed and width) and the limits
//! ferroce reports in them.

use std::fmt;

use crate::Mtu;

/// The largest path MTU the engine segments to (rxe: the same).
pub const MAX_MTU: Mtu = Mtu::Mtu4096;

/// The largest value an `int` field of `ibv_device_attr` holds: what
/// ferroce reports for a resource it does not limit itself (only memory
/// does).
pub const UNLIMITED: u32 = i32::MAX as u32;

/// The extended device capability of ATOMIC WRITE (the kernel's
/// `IB_UVERBS_DEVICE_ATOMIC_WRITE`, which rxe sets on 64-bit hosts).
pub const DEVICE_ATOMIC_WRITE: u64 = 1 << 40;

/// The extended device capability of FLUSH to global visibility (the
/// kernel's `IB_UVERBS_DEVICE_FLUSH_GLOBAL`); ferroce has no persistent
/// memory, so not `FLUSH_PERSISTENT` (bit 39).
pub const DEVICE_FLUSH_GLOBAL: u64 = 1 << 38;

/// Work requests per send or receive queue: `Endpoint::create_qp` refuses
/// more (rxe `RXE_MAX_QP_WR`: 0x4000).
pub const MAX_QP_WR: u32 = 1 << 15;

/// Work requests per shared receive queue: `Endpoint::create_srq` and
/// `modify_srq` refuse more (rxe: `RXE_MAX_SRQ_WR`).
pub const MAX_SRQ_WR: u32 = 1 << 15;

/// Entries per completion queue: `Endpoint::create_cq` refuses more (rxe:
/// `(1 << RXE_MAX_LOG_CQE) - 1` = 32767).
pub const MAX_CQE: u32 = ferroce_core::MAX_CQE;

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
        Self(u64::from_be_bytes(ferroce_io::route::neigh::eui64(mac)))
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
    /// * MEM_WINDOW, MEM_WINDOW_TYPE_2B: type 1 and type 2B memory windows.
    /// * XRC: XRC domains, XRC SRQs and XRC initiator and target QPs (rxe
    ///   has none).
    ///
    /// Not set, unlike rxe: BAD_PKEY_CNTR (the P_Key is not checked or
    /// counted), AUTO_PATH_MIG, CHANGE_PHY_PORT and UD_AV_PORT_ENFORCE (one
    /// port, one path), PORT_ACTIVE_EVENT (the port raises no events; the
    /// async events are QP, CQ and SRQ ones), MEM_MGT_EXTENSIONS (no fast
    /// registration).
    pub const FERROCE: Self = Self(
        Self::BAD_QKEY_CNTR.0
            | Self::SYS_IMAGE_GUID.0
            | Self::RC_RNR_NAK_GEN.0
            | Self::SRQ_RESIZE.0
            | Self::MEM_WINDOW.0
            | Self::XRC.0
            | Self::MEM_WINDOW_TYPE_2B.0,
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
    /// low 32 bits; of the extended ones, [`DEVICE_ATOMIC_WRITE`] and
    /// [`DEVICE_FLUSH_GLOBAL`].
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
    /// ([`crate::Stats::rx_bad_pkey`]; [`Context::query_port`](crate::Context::query_port) fills it
    /// in; the address-only [`query_port`](super::query_port) has no engine: 0).
    pub bad_pkey_cntr: u32,
    /// UD receives dropped for a wrong Q_Key ([`Context::query_port`](crate::Context::query_port)
    /// fills it in; the address-only [`query_port`](super::query_port) has no engine: 0).
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
