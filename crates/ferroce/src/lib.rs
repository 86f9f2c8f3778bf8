//! ferroce: RDMA over Converged Ethernet (RoCE v2) in userspace, with an API
//! an ibverbs user recognises.
//!
//! ```no_run
//! use ferroce::{Access, Context, QpInitAttr, QpType};
//! # fn main() -> Result<(), ferroce::Error> {
//! let ctx = Context::open("127.0.0.1".parse().unwrap())?;
//! let pd = ctx.alloc_pd();
//! let cq = ctx.create_cq(256)?;
//! let mr = pd.reg_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))?;
//! // modify_qp to INIT, RTR, RTS with the peer's QPN and PSN, then
//! // post_send / post_recv, and poll the CQ.
//! # let _ = (mr, qp); Ok(()) }
//! ```
//!
//! | ibverbs | ferroce |
//! |---|---|
//! | `ibv_open_device` | [`Context::open`] (binds UDP port 4791 on an address) |
//! | `ibv_alloc_pd` / `ibv_reg_mr` | [`Context::alloc_pd`] / [`ProtectionDomain::reg_mr`], [`ProtectionDomain::reg_mr_with`] (the caller's buffer, no copy) |
//! | `ibv_create_cq` / `ibv_poll_cq` | [`Context::create_cq`] / [`CompletionQueue::poll`] |
//! | `ibv_create_qp` / `ibv_modify_qp` | [`ProtectionDomain::create_qp`] / [`QueuePair::modify`] |
//! | `ibv_post_send` / `ibv_post_recv` | [`QueuePair::post_send`] / [`QueuePair::post_recv`] |
//! | `ibv_create_srq` / `ibv_post_srq_recv` | [`ProtectionDomain::create_srq`] / [`SharedReceiveQueue::post_recv`] |
//! | `ibv_modify_srq` / `ibv_query_srq` | [`SharedReceiveQueue::arm_limit`], [`SharedReceiveQueue::modify`] / [`SharedReceiveQueue::query`] |
//! | `ibv_get_async_event` | [`Context::poll_async_event`] (no wait, nothing to acknowledge) |
//!
//! Registered memory is shared with the engine (a remote peer writes into
//! it at any time, from the driver thread). Each region has a lock of its
//! own: the application reaches the bytes through
//! [`MemoryRegion::with_range`] (read-only), [`MemoryRegion::with_range_mut`],
//! [`MemoryRegion::read`] and [`MemoryRegion::write`], which hold back
//! only that region, and the engine never waits for them (it sets a
//! packet for a held region aside and goes on). A buffer of the caller's
//! is registered without a copy by [`ProtectionDomain::reg_mr_with`] and
//! given back by [`MemoryRegion::into_inner`]; memory the application
//! owns (a C caller's) is lent with the `unsafe` [`Backing::from_raw`]. No
//! data race and no other `unsafe` are reachable from this API.
//!
//! ferroce logs through [`tracing`](https://docs.rs/tracing) and prints
//! nothing unless the application installs a subscriber. Each device has
//! a span `device` (its address); inside it, at info the device opening,
//! at debug QP state changes and their cause, retransmissions, RNR waits,
//! NAKs and the counters at close, at trace every dropped packet and its
//! cause. The `ferroce` command's `-v`/`-q` and `FERROCE_LOG` choose.

mod context;
mod cq;
mod device;
mod driver;
mod error;
mod hold;
mod mr;
mod pd;
mod qp;
mod srq;

pub use context::{Context, DeviceConfig};
pub use cq::CompletionQueue;
pub use device::*;
pub use error::{Error, Result};
pub use ferroce_core::verbs::{
    Access, AsyncEvent, Mtu, Path, QpAttr, QpState, QpType, RecvWr, SendOp, SendWr, Sge, SrqAttr,
    SrqInfo, UdDest, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
pub use ferroce_core::{Backing, MAX_MSG_SIZE, MrInfo, RangeError, Stats};
pub use ferroce_io::UdpStats;
pub use ferroce_wire::Psn;
pub use mr::MemoryRegion;
pub use pd::ProtectionDomain;
pub use qp::{QpInitAttr, QueuePair, connect_qp, path_to};
pub use srq::SharedReceiveQueue;
