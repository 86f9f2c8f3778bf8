//! Why an rdma_cm call was refused ([`CmIdError`]).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ferroce_cm::rdma_cm::RdmaCmError;

/// Why a call on a [`CmId`](super::CmId) or
/// [`EventChannel`](super::EventChannel) failed; each names the call and
/// what to do.
#[derive(Debug)]
pub enum CmIdError {
    /// The call does not fit the ID's state.
    WrongState {
        /// The call.
        call: &'static str,
        /// The ID's state.
        state: &'static str,
        /// What must happen first.
        needs: &'static str,
    },
    /// The address is already bound by another ID of the port space.
    AddrInUse(SocketAddr),
    /// The destination could not be resolved from the routing table (no
    /// route, a source that is not local, mixed families ...).
    Route(ferroce_io::route::RouteError),
    /// No ferroce device could be opened on the address.
    NoDevice {
        /// The address.
        addr: IpAddr,
        /// Why.
        cause: String,
    },
    /// Every ephemeral port of the port space is bound.
    NoFreePort,
    /// The CM refused (a state or field the protocol does not allow).
    Protocol(ferroce_cm::CmError),
    /// rdma_cm's rules refused (private data too long, depth too large).
    Rule(RdmaCmError),
    /// The RoCE settings (`default_roce_tos`, `ferroce config`) could not
    /// be read.
    Config(crate::roce_config::ConfigError),
    /// A blocking call gave up.
    TimedOut(&'static str),
    /// rdma_cm's multicast rules refused the join (not a group, an IPv6
    /// group on RoCE v2, the unspecified address).
    Multicast(ferroce_cm::rdma_cm::McJoinError),
    /// The ID joined the group already.
    AlreadyJoined(IpAddr),
    /// The ID did not join the group it leaves.
    NotJoined(IpAddr),
}

impl fmt::Display for CmIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongState { call, state, needs } => {
                write!(f, "{call} on an rdma_cm ID that is {state}: {needs}")
            }
            Self::AddrInUse(addr) => write!(
                f,
                "{addr} is already bound by another rdma_cm ID of this port space: \
                 use another port, or destroy that ID"
            ),
            Self::Route(e) => write!(f, "address resolution: {e}"),
            Self::NoDevice { addr, cause } => write!(
                f,
                "no ferroce device on {addr}: {cause}; give an address of this host"
            ),
            Self::NoFreePort => write!(
                f,
                "every ephemeral port is bound: destroy unused rdma_cm IDs"
            ),
            Self::Protocol(e) => write!(f, "connection manager: {e}"),
            Self::Rule(e) => e.fmt(f),
            Self::Config(e) => write!(f, "RoCE settings: {e}"),
            Self::TimedOut(what) => write!(f, "timed out waiting for {what}"),
            Self::Multicast(e) => write!(f, "join_multicast: {e}"),
            Self::AlreadyJoined(a) => write!(
                f,
                "join_multicast: this ID joined {a} already: leave it first, or use it"
            ),
            Self::NotJoined(a) => write!(
                f,
                "leave_multicast: this ID has not joined {a}: leave only what it joined"
            ),
        }
    }
}

impl std::error::Error for CmIdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Route(e) => Some(e),
            Self::Config(e) => Some(e),
            Self::Protocol(e) => Some(e),
            Self::Rule(e) => Some(e),
            Self::Multicast(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ferroce_cm::CmError> for CmIdError {
    fn from(e: ferroce_cm::CmError) -> Self {
        Self::Protocol(e)
    }
}

impl From<RdmaCmError> for CmIdError {
    fn from(e: RdmaCmError) -> Self {
        Self::Rule(e)
    }
}

impl From<CmIdError> for crate::Error {
    fn from(e: CmIdError) -> Self {
        Self::Cm(e)
    }
}

impl From<ferroce_cm::CmError> for crate::Error {
    fn from(e: ferroce_cm::CmError) -> Self {
        Self::Cm(e.into())
    }
}

impl From<RdmaCmError> for crate::Error {
    fn from(e: RdmaCmError) -> Self {
        Self::Cm(e.into())
    }
}
