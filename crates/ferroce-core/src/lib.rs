#![doc = include_str!("../README.md")]
//!
//! ## Where things are
//!
//! | where | what |
//! |---|---|
//! | [`endpoint`] | the objects and the input/output loop; UD multicast groups (`endpoint::mcast`) |
//! | [`verbs`] | ibverbs-shaped types: attributes, work requests, completions, errors |
//! | `qp::requester` / `qp::responder` / `qp::completer` | the three engines |
//! | `qp::state` | the `modify_qp` state machine |
//! | `mr` | registered memory (owned by the engine) and key checks |
//! | `srq` | shared receive queues and their limit event |
//! | `log` | what the engine tells `tracing` (nothing is printed unless a subscriber asks) |
//! | [`cc`] | congestion control: ECN, CNPs, DCQCN and the pacer |
//!
//! XRC (domains, XRC SRQs, initiator and target QPs) is in `endpoint::xrc`,
//! reliable datagram in `endpoint::rd`, UD multicast in `endpoint::mcast`,
//! memory windows in `endpoint::windows`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
mod cq;
pub mod endpoint;
mod log;
mod mr;
mod qp;
mod srq;
mod stats;
mod tables;
pub mod time;
mod timers;
mod transmit;
pub mod verbs;

#[cfg(test)]
mod tests;

pub use cc::{CongestionConfig, DcqcnConfig, NpConfig};
pub use cq::{CqFired, CqReader, MAX_CQE};
pub use endpoint::Grh;
pub use endpoint::MAX_MW;
pub use endpoint::{
    Ecn, EmitError, Endpoint, EndpointConfig, MAX_IN_FLIGHT, MAX_MSG_SIZE, PacketKind, Stats,
    Transmit,
};
pub use endpoint::{GSI_QKEY, GSI_QPN, MAD_LEN, MAX_QUEUED_MADS, Mad, MadStats};
pub use endpoint::{MAX_MCAST_GROUPS, MAX_MCAST_QP_ATTACH, MULTICAST_QPN, multicast_group};
pub use endpoint::{MAX_QUEUED_CNPS, QpCongestion};
pub use ferroce_mem::{Backing, Bytes, Fault as MemFault, VolatileMemory, VolatileSlice};
pub use mr::{MrInfo, RangeError, Region};
pub use qp::QpInit;
pub use qp::posts::{QpPoster, SrqPoster};
pub use time::Instant;
