//! Why a destination could not be resolved: [`RouteError`].

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv6Addr};

use super::ROCE_HEADER_BUDGET;

/// Why a destination could not be resolved. Each message names the
/// destination, what failed and what to do about it.
#[derive(Debug)]
pub enum RouteError {
    /// The unspecified address (0.0.0.0, ::) names no peer.
    Unspecified { dst: IpAddr },
    /// The source and destination are of different families.
    FamilyMismatch { dst: IpAddr, src: IpAddr },
    /// An IPv6 link-local address without a scope id (rdma_cm: EINVAL).
    NeedsScope { addr: Ipv6Addr },
    /// The given source is not an address of this host (rdma_cm's bind:
    /// EADDRNOTAVAIL).
    SourceNotLocal { dst: IpAddr, src: IpAddr },
    /// The routing table has no usable route (ENETUNREACH, or
    /// EHOSTUNREACH/EACCES/EINVAL for unreachable, prohibit and blackhole
    /// routes): rdma_cm's `RDMA_CM_EVENT_ADDR_ERROR`.
    NoRoute {
        dst: IpAddr,
        src: Option<IpAddr>,
        cause: io::Error,
    },
    /// The path MTU leaves no room for a 256-byte IB MTU (rdma_cm: EINVAL).
    MtuTooSmall {
        dst: IpAddr,
        interface: String,
        mtu: u32,
    },
    /// A system call or the kernel's answer failed in an unexpected way.
    System {
        dst: IpAddr,
        what: &'static str,
        cause: io::Error,
    },
}

impl RouteError {
    /// The errno rdma_cm reports for this failure (EINVAL, EADDRNOTAVAIL,
    /// ENETUNREACH, ...).
    pub fn errno(&self) -> i32 {
        match self {
            Self::Unspecified { .. }
            | Self::FamilyMismatch { .. }
            | Self::NeedsScope { .. }
            | Self::MtuTooSmall { .. } => libc::EINVAL,
            Self::SourceNotLocal { .. } => libc::EADDRNOTAVAIL,
            Self::NoRoute { cause, .. } => cause.raw_os_error().unwrap_or(libc::ENETUNREACH),
            Self::System { cause, .. } => cause.raw_os_error().unwrap_or(libc::EIO),
        }
    }
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unspecified { dst } => write!(
                f,
                "cannot resolve {dst}: the unspecified address names no peer; give the peer's address"
            ),
            Self::FamilyMismatch { dst, src } => write!(
                f,
                "cannot resolve {dst} from {src}: one is IPv4 and the other IPv6; \
                 give a source address of the destination's family, or none"
            ),
            Self::NeedsScope { addr } => write!(
                f,
                "{addr} is an IPv6 link-local address and needs a scope id (the interface, \
                 as in {addr}%eth0); give it (resolve_scoped) or use a global address"
            ),
            Self::SourceNotLocal { dst, src } => write!(
                f,
                "cannot resolve {dst} from {src}: {src} is not an address of this host \
                 (network namespace); give one that `ip addr` lists, or none"
            ),
            Self::NoRoute { dst, src, cause } => {
                write!(f, "no route to {dst}")?;
                if let Some(src) = src {
                    write!(f, " from {src}")?;
                }
                write!(
                    f,
                    ": add a route or pass a source address on the right interface \
                     (the kernel's answer: {cause})"
                )
            }
            Self::MtuTooSmall {
                dst,
                interface,
                mtu,
            } => write!(
                f,
                "the path to {dst} through {interface} has MTU {mtu}, below the {} bytes RoCE \
                 needs for 256-byte packets; raise the MTU (ip link set {interface} mtu 1500)",
                256 + ROCE_HEADER_BUDGET
            ),
            Self::System { dst, what, cause } => {
                write!(f, "cannot resolve {dst}: {what} failed: {cause}")
            }
        }
    }
}

impl std::error::Error for RouteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::NoRoute { cause, .. } | Self::System { cause, .. } => Some(cause),
            _ => None,
        }
    }
}
