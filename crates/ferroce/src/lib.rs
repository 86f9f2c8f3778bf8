#![doc = include_str!("../README.md")]
//!
//! ## Logging
//!
//! ferroce logs through [`tracing`](https://docs.rs/tracing) and prints
//! nothing unless the application installs a subscriber. Each device has
//! a span `device` (its address); inside it, at info the device opening,
//! at debug QP state changes and their cause, retransmissions, RNR waits,
//! NAKs and the counters at close, at trace every dropped packet and its
//! cause. The `ferroce` command's `-v`/`-q` and `FERROCE_LOG` choose.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "tokio")]
mod async_cq;
mod async_events;
mod backend;
mod channel;
pub mod cm;
mod config_raw;
mod context;
mod cq;
mod device;
mod driver;
mod endpoint;
pub mod env;
mod error;
mod exchange;
mod hold;
mod mcast;
mod mr;
mod mw;
mod pd;
mod qp;
mod rd;
mod remote;
pub mod roce_config;
mod srq;
mod xrcd;

#[cfg(feature = "tokio")]
pub use async_cq::AsyncChannel;
pub use backend::raw::{NeighStats, RawDeviceStats};
pub use backend::{BACKEND_ENV, BackendKind};
pub use channel::CompletionChannel;
pub use config_raw::{
    DEFAULT_LINK_MBPS, DEFAULT_ROCE_PRIORITY, PcpMap, PfcConfig, PfcStats, RawOptions,
};
pub use context::{Context, DeviceConfig};
pub use cq::CompletionQueue;
pub use device::*;
pub use endpoint::{ConnectOptions, QpEndpoint};
pub use error::{DecodeError, Error, Result};
pub use ferroce_core::verbs::{
    Access, AsyncEvent, FlushLevel, FlushType, INLINE_SGES, LocalErrors, McastRefusal, Mtu, MwBind,
    MwInfo, MwType, NetworkHeader, Path, QpAttr, QpState, QpType, RdDest, RecvWr, RemoteSlice,
    RoceMode, SendOp, SendWr, Sge, SrqAttr, SrqInfo, UdDest, VerbsError, WcError, WcOpcode,
    WcStatus, WorkCompletion, inc_rkey,
};
pub use ferroce_core::{Backing, MAX_MSG_SIZE, MadStats, MrInfo, RangeError, Stats};
pub use ferroce_core::{CongestionConfig, DcqcnConfig, NpConfig, QpCongestion};
pub use ferroce_core::{MULTICAST_QPN, multicast_group};
pub use ferroce_io::UdpStats;
pub use ferroce_wire::Psn;
pub use mr::MemoryRegion;

/// The zero-copy view of a region's bytes ([`MemoryRegion::volatile`]):
/// vm-memory's volatile slice and the traits whose methods read and write
/// through it.
pub mod volatile {
    pub use ferroce_core::{Bytes, VolatileMemory, VolatileSlice};
}
pub use mw::MemoryWindow;
pub use pd::ProtectionDomain;
pub use qp::{QpInitAttr, QueuePair, path_to};
pub use rd::{EeContext, RdDomain};
pub use remote::RemoteRegion;
pub use srq::SharedReceiveQueue;
pub use xrcd::XrcDomain;
