//! rdma_cm's rules on top of the IB CM, as pure functions: no state, no
//! clock, no socket. The layer that drives [`crate::Cm`] for an rdma_cm-style
//! API calls these to build what it sends and to know what to set on its QP.
//!
//! # Contract
//! - [`service`]: an rdma_cm service ID is `port space << 16 | port` in the
//!   low 32 bits ([`RdmaService`]); anything else is not rdma_cm's and is
//!   refused with an [`RdmaCmError`] naming why.
//! - [`private_data`]: the 36-byte header rdma_cm puts ahead of the
//!   application's private data in a REQ and a SIDR_REQ ([`CmaHeader`]), and
//!   how many bytes of private data the application may give per message
//!   ([`app_limit`]); too many is an error naming the message and the limit.
//! - [`qp`]: responder resources / initiator depth as librdmacm settles them
//!   ([`connect_depths`], [`accept_depths`]), the retry counts and CM timers
//!   rdma_cm puts in a REQ ([`CMA_CM_RESPONSE_TIMEOUT`],
//!   [`CMA_MAX_CM_RETRIES`]), and the `QpAttr` of each QP transition derived
//!   from the REQ and REP ([`active_rtr`], [`passive_rtr`], ...), with the
//!   application's overrides ([`QpOptions`]) and a UD QP's Q_Key
//!   ([`PortSpace::default_qkey`], [`ud_init`]).
//! - [`multicast`]: `rdma_join_multicast` on RoCE (a local join: the
//!   MGID from the address, rdma_cm's Q_Key, the hop limit, whether the IP
//!   group is joined), as the kernel's `cma_iboe_join_multicast`.
//!
//! # Where this follows the kernel and librdmacm
//! IBA defines only the CM messages; the port spaces, the header and the
//! negotiation are rdma_cm's, so ferroce does what the kernel's
//! `drivers/infiniband/core/cma.c` (with `cm.c` under it) and rdma-core's
//! `librdmacm/cma.c` do, learned from their source:
//! - The header's version is 0, the IP version sits in the high nibble of
//!   byte 1, then the *source* port (the destination port is in the service
//!   ID), then source and destination address in 16-byte fields, an IPv4
//!   address in the last 4 bytes after 12 zero bytes. It is present unless
//!   the ID uses native IB (AF_IB) addressing, which ferroce does not offer.
//! - rdma_cm sends RTU, DREQ, DREP and MRA without private data, so an
//!   application has none to give there.
//! - The QP moves when rdma_cm moves it: INIT when the QP is created on the
//!   ID (access flags none yet); on the active side INIT again (with the CM's
//!   access flags), RTR and RTS when the REP arrives, before the RTU goes
//!   out; on the passive side INIT, RTR *and* RTS in `rdma_accept`, before
//!   the REP goes out (both the kernel's `cma_accept_ib` and librdmacm's
//!   `rdma_accept` do RTS there, not on the RTU). See [`qp`].

pub mod multicast;
pub mod private_data;
pub mod qp;
pub mod service;

use core::fmt;

pub use multicast::{McJoin, McJoinError};
pub use private_data::{
    CMA_HEADER_LEN, CmaHeader, Message, app_limit, check_app_data, ib_cm_limit, req_private_data,
    sidr_req_private_data,
};
pub use qp::{
    CMA_CM_RESPONSE_TIMEOUT, CMA_MAX_CM_RETRIES, Depth, Depths, DeviceLimits, QpOptions,
    RetryCounts, accept_depths, active_init, active_rtr, active_rts, cm_access, cm_ack_timeout,
    connect_depths, init, passive_rtr, passive_rts, ud_init,
};
pub use service::{PortSpace, RDMA_UDP_QKEY, RdmaService};

/// Why an rdma_cm rule refused its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaCmError {
    /// The service ID has bits above the low 32: an IB service, not rdma_cm's.
    NotRdmaCm { service_id: u64 },
    /// The port-space half of the service ID is none of rdma_cm's.
    UnknownPortSpace { service_id: u64, port_space: u16 },
    /// More private data than rdma_cm lets the application give.
    PrivateDataTooLong {
        message: Message,
        len: usize,
        limit: usize,
    },
    /// The private data is shorter than the rdma_cm header.
    HeaderTruncated { len: usize },
    /// The header's version byte is not 0.
    HeaderVersion { version: u8 },
    /// The header's IP version is neither 4 nor 6.
    HeaderIpVersion { ip_version: u8 },
    /// Source and destination addresses of different families.
    MixedFamilies,
    /// A REQ whose path MTU code is none of IBA's 256..4096 (1..=5).
    BadPathMtu { code: u8 },
    /// An explicit depth beyond what the device supports.
    DepthTooLarge {
        what: &'static str,
        asked: u8,
        device: u8,
    },
}

impl fmt::Display for RdmaCmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NotRdmaCm { service_id } => write!(
                f,
                "service ID {service_id:#018x} is not an rdma_cm one (bits above the low 32 are set); use the IB CM directly for it"
            ),
            Self::UnknownPortSpace {
                service_id,
                port_space,
            } => write!(
                f,
                "service ID {service_id:#018x} names port space {port_space:#06x}, none of rdma_cm's (TCP 0x0106, UDP 0x0111, IB 0x013f, IPoIB 0x0002)"
            ),
            Self::PrivateDataTooLong {
                message,
                len,
                limit,
            } => write!(
                f,
                "{len} bytes of private data for a {message:?}, rdma_cm allows at most {limit}; shorten it"
            ),
            Self::HeaderTruncated { len } => write!(
                f,
                "private data of {len} bytes cannot hold the {CMA_HEADER_LEN}-byte rdma_cm header"
            ),
            Self::HeaderVersion { version } => {
                write!(f, "rdma_cm header version {version}, only 0 exists")
            }
            Self::HeaderIpVersion { ip_version } => {
                write!(f, "rdma_cm header IP version {ip_version}, expected 4 or 6")
            }
            Self::MixedFamilies => {
                write!(f, "rdma_cm header addresses must both be IPv4 or both IPv6")
            }
            Self::BadPathMtu { code } => write!(
                f,
                "REQ path MTU code {code}, expected 1 (256) to 5 (4096); the peer's REQ is malformed"
            ),
            Self::DepthTooLarge {
                what,
                asked,
                device,
            } => write!(
                f,
                "{what} {asked} exceeds the device's {device}; ask for at most {device}, or Depth::Max"
            ),
        }
    }
}

impl std::error::Error for RdmaCmError {}
