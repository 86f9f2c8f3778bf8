//! Queue pair and SRQ attributes: access flags, QP types and states, path
//! MTU, the address path, and what `modify_qp`, `modify_srq` and `query_srq`
//! carry.

use std::net::IpAddr;

use ferroce_wire::Psn;

/// Memory region access rights (`IBV_ACCESS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// The local QP may write the memory: receives, READ responses and
    /// atomic results land there (`IBV_ACCESS_LOCAL_WRITE`).
    pub const LOCAL_WRITE: Self = Self(1);
    /// Peers may RDMA WRITE (and ATOMIC WRITE) into it
    /// (`IBV_ACCESS_REMOTE_WRITE`).
    pub const REMOTE_WRITE: Self = Self(1 << 1);
    /// Peers may RDMA READ from it (`IBV_ACCESS_REMOTE_READ`).
    pub const REMOTE_READ: Self = Self(1 << 2);
    /// Peers may run Compare & Swap and Fetch & Add on it
    /// (`IBV_ACCESS_REMOTE_ATOMIC`).
    pub const REMOTE_ATOMIC: Self = Self(1 << 3);
    /// Memory windows may be bound to the region (`IBV_ACCESS_MW_BIND`).
    pub const MW_BIND: Self = Self(1 << 4);
    /// A window addressed from 0 by its peers (`IBV_ACCESS_ZERO_BASED`;
    /// in a window's bind only).
    pub const ZERO_BASED: Self = Self(1 << 5);
    /// Remote FLUSH to global visibility (`IBV_ACCESS_FLUSH_GLOBAL`).
    pub const FLUSH_GLOBAL: Self = Self(1 << 8);
    /// Remote FLUSH to persistence (`IBV_ACCESS_FLUSH_PERSISTENT`): only
    /// for persistent memory, which ferroce's regions never are, so a
    /// region is refused it.
    pub const FLUSH_PERSISTENT: Self = Self(1 << 9);
    /// No access beyond local read.
    pub const NONE: Self = Self(0);

    /// The `IBV_ACCESS_*` bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every right of `other` is among these.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// How a posted work request whose scatter/gather list fails the local
/// checks (no such lkey, a region of another protection domain, a range
/// outside the region, a receive into a region without LOCAL_WRITE) is
/// reported. The checks are the same either way; only the reporting differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LocalErrors {
    /// The post fails with [`crate::verbs::VerbsError::BadSge`] naming the
    /// cause, and the QP is unharmed: the Rust API's default.
    #[default]
    Immediate,
    /// The post succeeds; when the request executes (a send request as it
    /// starts, a receive request when a message is to be placed into it) it
    /// completes with [`crate::verbs::WcStatus::LocProtErr`] and the QP
    /// moves to the error state, flushing the rest: IBA's local protection
    /// error (section 10.8, 11.6.2), what rdma-core programs expect.
    Completion,
}

/// Transport service of a queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected (`IBV_QPT_RC`): acknowledged, retransmitted,
    /// every operation.
    Rc,
    /// Unreliable connected (`IBV_QPT_UC`): SEND and RDMA WRITE only, no
    /// acknowledgements; a lost packet drops its message.
    Uc,
    /// Unreliable datagram (`IBV_QPT_UD`): SENDs of at most the port MTU,
    /// each to the address handle, QPN and Q_Key its work request names.
    Ud,
    /// XRC initiator (`IBV_QPT_XRC_SEND`): an RC-like send queue whose
    /// requests each name the target's XRC SRQ (`SendWr::remote_srqn`); no
    /// receive queue.
    XrcIni,
    /// XRC target (`IBV_QPT_XRC_RECV`): the responder side only, in an XRC
    /// domain, with no PD, CQ or queue of its own: each request names the
    /// XRC SRQ that takes it (see `Endpoint::create_xrc_tgt_qp`).
    XrcTgt,
    /// Reliable datagram (IBA 9.7, RD): one QP reaches any RD QP of its
    /// reliable datagram domain, reliably, through EE contexts
    /// (`Endpoint::create_rd_qp`, `create_eec`); every send names its EE
    /// context, destination QP and Q_Key (`SendWr::via`).
    Rd,
}

impl QpType {
    /// Whether the transport acknowledges and retransmits (RC and both XRC
    /// halves).
    pub const fn is_reliable(self) -> bool {
        matches!(self, Self::Rc | Self::XrcIni | Self::XrcTgt)
    }

    /// Whether it is one half of XRC.
    pub const fn is_xrc(self) -> bool {
        matches!(self, Self::XrcIni | Self::XrcTgt)
    }
}

/// IBA QP states (`IBV_QPS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// `IBV_QPS_RESET`: as created; nothing may be posted.
    Reset,
    /// `IBV_QPS_INIT`: receives may be posted, nothing is sent or received.
    Init,
    /// `IBV_QPS_RTR`, ready to receive: the responder takes packets.
    Rtr,
    /// `IBV_QPS_RTS`, ready to send: requester and responder both run.
    Rts,
    /// `IBV_QPS_SQD`, send queue drained: no new send request starts.
    Sqd,
    /// `IBV_QPS_SQE`, send queue error (UC, UD): a send request failed;
    /// the receive side still runs.
    Sqe,
    /// `IBV_QPS_ERR`: every work request is flushed with `WrFlushErr`.
    Err,
}

/// Path MTU (`IBV_MTU_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    /// 256 bytes of payload per packet (`IBV_MTU_256`).
    Mtu256 = 1,
    /// 512 bytes (`IBV_MTU_512`).
    Mtu512 = 2,
    /// 1024 bytes (`IBV_MTU_1024`).
    Mtu1024 = 3,
    /// 2048 bytes (`IBV_MTU_2048`).
    Mtu2048 = 4,
    /// 4096 bytes (`IBV_MTU_4096`).
    Mtu4096 = 5,
}

impl Mtu {
    /// Every MTU IBA defines, smallest first.
    pub const ALL: [Self; 5] = [
        Self::Mtu256,
        Self::Mtu512,
        Self::Mtu1024,
        Self::Mtu2048,
        Self::Mtu4096,
    ];

    /// The largest payload of one packet, in bytes (256 to 4096).
    pub const fn bytes(self) -> usize {
        128 << self as usize
    }

    /// The MTU of an IBA (and `IBV_MTU_*`) code: 1 = 256 ... 5 = 4096.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| *m as u8 == code)
    }

    /// The MTU of exactly `bytes` bytes, if IBA has one.
    pub fn from_bytes(bytes: usize) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.bytes() == bytes)
    }
}

/// Where a connected QP sends, or where a UD send goes (the address handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Path {
    /// The peer's address (its RoCE v2 GID as an IP address).
    pub remote: IpAddr,
    /// UDP source port of the flow (RoCE v2 entropy; 0xC000 | hash).
    pub udp_src_port: u16,
    /// DSCP and ECN bits for the IP header (the GRH traffic class).
    pub traffic_class: u8,
    /// IP TTL / hop limit (the GRH hop limit).
    pub hop_limit: u8,
    /// How packets go on the wire: RoCE v2 (UDP/IP) or RoCE v1 (a GRH
    /// over Ethernet), as the type of the source GID index picks it. A
    /// connected QP takes packets of its path's version only.
    pub roce: RoceMode,
}

/// The RoCE version of a path (the type of its GID table entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RoceMode {
    /// Ethertype 0x8915: a GRH, then the transport. Only the raw-Ethernet
    /// backend sends it.
    V1,
    /// UDP to port 4791 over IPv4 or IPv6.
    #[default]
    V2,
}

/// The attributes `modify_qp` may set; `None` means "not in the mask".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttr {
    /// The state to move to (`qp_state`); `None`: stay, changing only what
    /// the current state's self-transition allows.
    pub state: Option<QpState>,
    /// `pkey_index`: 0, the only P_Key (the default 0xffff).
    pub pkey_index: Option<u16>,
    /// `port_num`: 1, the only port.
    pub port: Option<u8>,
    /// `qkey` (UD, RD): the Q_Key incoming datagrams must carry, and the
    /// one sent for a destination Q_Key with the high bit set.
    pub qkey: Option<u32>,
    /// `qp_access_flags`: what peers may do through this QP
    /// (`REMOTE_WRITE`, `REMOTE_READ`, `REMOTE_ATOMIC`), checked besides
    /// the region's own rights.
    pub access: Option<Access>,
    /// `ah_attr`: where a connected QP sends (RC, UC, XRC).
    pub path: Option<Path>,
    /// `path_mtu`: the payload per packet of a connected QP's messages.
    pub path_mtu: Option<Mtu>,
    /// `dest_qp_num`: the peer QP of a connected QP (24 bits).
    pub dest_qpn: Option<u32>,
    /// `rq_psn`: the PSN the responder expects first.
    pub rq_psn: Option<Psn>,
    /// `sq_psn`: the PSN of the first request the QP sends.
    pub sq_psn: Option<Psn>,
    /// `max_rd_atomic`: READs and atomics this QP keeps outstanding at
    /// the peer at once (0 acts as 1).
    pub max_rd_atomic: Option<u8>,
    /// `max_dest_rd_atomic`: READ and atomic responses this QP owes at
    /// once; further such requests are dropped for the requester to send
    /// again (0 acts as 1).
    pub max_dest_rd_atomic: Option<u8>,
    /// RNR NAK timer code this QP sends (5 bits).
    pub min_rnr_timer: Option<u8>,
    /// Local ACK timeout: 4.096 us x 2^timeout; 0 means infinite.
    pub timeout: Option<u8>,
    /// `retry_cnt`: retransmissions after local ACK timeouts before the
    /// request fails with `RetryExcErr` (0 to 7).
    pub retry_cnt: Option<u8>,
    /// 7 means retry forever.
    pub rnr_retry: Option<u8>,
}

/// What `modify_srq` changes (`ibv_srq_attr` with its mask); `None` leaves
/// an attribute as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    /// Resize the SRQ (`IBV_SRQ_MAX_WR`): at least the WQEs it holds now,
    /// and at least an armed limit.
    pub max_wr: Option<u32>,
    /// Arm the limit event (`IBV_SRQ_LIMIT`): [`AsyncEvent::SrqLimitReached`]
    /// once the WQEs left drop below this; 0 disarms it.
    ///
    /// [`AsyncEvent::SrqLimitReached`]: super::AsyncEvent::SrqLimitReached
    pub srq_limit: Option<u32>,
}

/// What `query_srq` reports (`ibv_srq_attr`, and the WQEs waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqInfo {
    /// The SRQ's depth in receive WQEs (`max_wr`).
    pub max_wr: u32,
    /// The armed limit; 0 when the limit event is not (or no longer) armed.
    pub srq_limit: u32,
    /// Receive WQEs posted and not yet taken by a QP (not in ibverbs).
    pub wqes: u32,
}
