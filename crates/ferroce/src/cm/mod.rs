//! Connecting by IP address as librdmacm does (rdma_cm): an
//! [`EventChannel`], [`CmId`]s that resolve, connect, listen, accept,
//! reject and disconnect, and the events they report ([`CmEvent`]),
//! wire-compatible with the kernel's rdma_cm (rping, ucmatose, udaddy,
//! perftest -R).
//!
//! ```no_run
//! use std::time::Duration;
//! use ferroce::cm::{ConnParam, EventChannel, PortSpace};
//! use ferroce::{QpInitAttr, QpType};
//!
//! let ch = EventChannel::new()?;
//! let id = ch.create_id(PortSpace::Tcp)?;
//! let t = Duration::from_secs(2);
//! id.resolve_addr(None, "198.18.0.11:7471".parse()?, t)?;
//! ch.get_event()?; // ADDR_RESOLVED
//! id.resolve_route(t)?;
//! ch.get_event()?; // ROUTE_RESOLVED
//! let ctx = id.verbs().expect("bound to a device");
//! let (pd, cq) = (ctx.alloc_pd(), ctx.create_cq(64)?);
//! let qp = id.create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq))?;
//! id.connect(&ConnParam::default())?;
//! println!("{}", ch.get_event()?); // RDMA_CM_EVENT_ESTABLISHED, or why not
//! # drop(qp);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Contract
//! - Each device runs the IB CM of `ferroce_cm` (sans-IO) over its QP1; its
//!   driver feeds it the MADs QP1 receives and its timers, off the data
//!   path (a round enters the CM only when QP1 has MADs or a CM timer is
//!   due). The rules of rdma_cm (service IDs, the private-data header,
//!   depth negotiation, QP attributes) are `ferroce_cm::rdma_cm`'s.
//! - An ID binds to the ferroce device on its local address, opening one
//!   (port 4791) if the process has none there; [`CmId::verbs`] gives it
//!   for the PD and CQs. A wildcard listener listens on every device of its
//!   family, open now or later.
//! - The QP created on an ID ([`CmId::create_qp`]) is moved by the CM when
//!   rdma_cm moves it: INIT at creation; on the active side INIT, RTR and
//!   RTS when the REP arrives, before the RTU; on the passive side INIT,
//!   RTR and RTS in [`CmId::accept`], before the REP. Its packets use the
//!   UDP source port rxe derives from the connection's IP ports.
//! - RoCE version, as the kernel's `cma.c`: an ID that connects takes its
//!   port's `default_roce_mode` ([`crate::roce_config`]) when it resolves
//!   its address (RoCE v1 on a UDP-backend device is refused there); an ID
//!   made by a request takes the version the request came in. The
//!   connection's MADs and its QP's path (or UD destination) use it.
//! - Events come in the order the CM makes them, on the channel the ID was
//!   created on (for a CONNECT_REQUEST, the listener's), and need no
//!   acknowledgement. Resolution is immediate (ADDR_RESOLVED and
//!   ROUTE_RESOLVED are queued before the call returns).
//! - Dropping the last handle of an ID destroys it as `rdma_destroy_id`:
//!   the CM sends what the state owes the peer (REJ, DREQ, DREP), and the
//!   ID leaves the multicast groups it joined.
//! - Multicast ([`CmId::join_multicast`]) is a local join, as the kernel's
//!   on RoCE (no SA): see `multicast`.
//!
//! # Where this differs from librdmacm
//! No `rdma_ack_cm_event` (events own their ID); no AF_IB addressing or
//! IPoIB port space; `resolve_addr` uses the routing table's choice of
//! source address at once rather than resolving the neighbour.

mod active;
mod channel;
mod device;
mod error;
mod event;
pub(crate) mod hub;
mod id;
mod multicast;
mod passive;
mod qp_attr;
pub(crate) mod registry;
mod route;
mod state;
mod transitions;

use std::fmt;
use std::net::SocketAddr;

pub use channel::EventChannel;
pub use error::CmIdError;
pub use event::{CmEvent, CmEventKind, ConnInfo, UdInfo};
pub use ferroce_cm::CmStats;
pub use ferroce_cm::rdma_cm::{Depth, McJoinError, PortSpace};
pub use id::CmId;
pub use state::ConnParam;

/// How many communications a device's CM holds ([`crate::Context::cm_tables`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmTables {
    /// Not yet established, both sides (at most `CmConfig::max_pending`).
    pub pending: usize,
    /// In TimeWait (at most `CmConfig::max_timewait`).
    pub timewait: usize,
    /// In any state.
    pub total: usize,
}

/// The peer of an ID, for messages: its address, or "the peer".
pub(crate) struct PeerName(pub(crate) Option<SocketAddr>);

impl fmt::Display for PeerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{}", a.ip()),
            None => write!(f, "the peer"),
        }
    }
}

/// What a REJ tells the application, in words.
pub(crate) fn reject_message(peer: PeerName, reason: u16) -> String {
    use ferroce_cm::reason;
    let by = format!("rejected by {peer}");
    match reason {
        reason::INVALID_SERVICE_ID => match peer.0 {
            Some(a) => format!("{by}: no listener on port {} (REJ reason 8)", a.port()),
            None => format!("{by}: no listener on the port (REJ reason 8)"),
        },
        reason::CONSUMER_DEFINED => {
            format!("{by}: the application refused the connection (REJ reason 28, consumer reject)")
        }
        other => format!("{by}: {} (REJ reason {other})", reason::name(other)),
    }
}

/// A SIDR_REP status in words.
pub(crate) fn sidr_status_name(status: u8) -> &'static str {
    match status {
        0 => "success",
        1 => "no listener for the service",
        2 => "rejected",
        3 => "no QP",
        4 => "redirect",
        5 => "unsupported class version",
        _ => "unknown status",
    }
}
