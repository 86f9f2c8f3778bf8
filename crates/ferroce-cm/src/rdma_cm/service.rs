//! rdma_cm port spaces and the service IDs they map to.
//!
//! cma.c forms a service ID as `port space << 16 | port` (in host order,
//! sent big-endian), so every rdma_cm service ID has its high 32 bits zero
//! and one of the port spaces below in bits 16..32. A listener on
//! `(TCP, 7174)` answers REQs for `0x0000_0000_0106_1c06`.

use super::RdmaCmError;

/// The Q_Key rdma_cm gives UD QPs of the UDP and IB port spaces
/// (`RDMA_UDP_QKEY`), unless the application sets its own.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// rdma_cm's port spaces (`enum rdma_ucm_port_space`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// IPoIB-style UD endpoints.
    Ipoib,
    /// Reliable connections (RC), TCP-like.
    Tcp,
    /// UD endpoints resolved with SIDR, UDP-like.
    Udp,
    /// Native IB: RC or UD, either.
    Ib,
}

impl PortSpace {
    /// The value the kernel and librdmacm use for this port space.
    pub const fn value(self) -> u16 {
        match self {
            Self::Ipoib => 0x0002,
            Self::Tcp => 0x0106,
            Self::Udp => 0x0111,
            Self::Ib => 0x013f,
        }
    }

    /// The port space of `value`, if it is one of rdma_cm's.
    pub const fn from_value(value: u16) -> Option<Self> {
        match value {
            0x0002 => Some(Self::Ipoib),
            0x0106 => Some(Self::Tcp),
            0x0111 => Some(Self::Udp),
            0x013f => Some(Self::Ib),
            _ => None,
        }
    }

    /// Whether an ID of this port space connects (REQ/REP) rather than
    /// resolves a UD peer (SIDR). IB may do either; it connects here, as
    /// rdma_cm does for an RC QP.
    pub const fn connects(self) -> bool {
        matches!(self, Self::Tcp | Self::Ib)
    }

    /// The Q_Key cma.c sets on a UD QP of this port space by default:
    /// [`RDMA_UDP_QKEY`] for UDP and IB; none for TCP (RC), and for IPoIB the
    /// broadcast group's, which only the subnet administrator knows.
    pub const fn default_qkey(self) -> Option<u32> {
        match self {
            Self::Udp | Self::Ib => Some(RDMA_UDP_QKEY),
            Self::Tcp | Self::Ipoib => None,
        }
    }
}

/// A service ID split into rdma_cm's port space and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdmaService {
    pub port_space: PortSpace,
    pub port: u16,
}

impl RdmaService {
    pub const fn new(port_space: PortSpace, port: u16) -> Self {
        Self { port_space, port }
    }

    /// The service ID a REQ or SIDR_REQ to this port carries.
    pub const fn service_id(self) -> u64 {
        (self.port_space.value() as u64) << 16 | self.port as u64
    }

    /// Splits `service_id`, refusing one that is not rdma_cm's.
    pub const fn from_service_id(service_id: u64) -> Result<Self, RdmaCmError> {
        if service_id >> 32 != 0 {
            return Err(RdmaCmError::NotRdmaCm { service_id });
        }
        let port_space = (service_id >> 16) as u16;
        match PortSpace::from_value(port_space) {
            Some(port_space) => Ok(Self {
                port_space,
                port: service_id as u16,
            }),
            None => Err(RdmaCmError::UnknownPortSpace {
                service_id,
                port_space,
            }),
        }
    }
}
