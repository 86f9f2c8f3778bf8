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
//! | `ibv_alloc_pd` / `ibv_reg_mr` | [`Context::alloc_pd`] / [`ProtectionDomain::reg_mr`] |
//! | `ibv_create_cq` / `ibv_poll_cq` | [`Context::create_cq`] / [`CompletionQueue::poll`] |
//! | `ibv_create_comp_channel` / `ibv_req_notify_cq` / `ibv_get_cq_event` | [`Context::create_comp_channel`], [`Context::create_cq_with_channel`] / [`CompletionQueue::req_notify`] / [`CompletionChannel::get_event`] (no `ibv_ack_cq_events`: events are not counted) |
//! | (blocking poll) | [`CompletionQueue::wait`]; with the `tokio` feature, `AsyncChannel` and `CompletionQueue::wait_async` / `next` |
//! | `ibv_create_qp` / `ibv_modify_qp` | [`ProtectionDomain::create_qp`] / [`QueuePair::modify`] |
//! | `ibv_post_send` / `ibv_post_recv` | [`QueuePair::post_send`] / [`QueuePair::post_recv`] |
//! | `ibv_create_srq` / `ibv_post_srq_recv` | [`ProtectionDomain::create_srq`] / [`SharedReceiveQueue::post_recv`] |
//! | `ibv_modify_srq` / `ibv_query_srq` | [`SharedReceiveQueue::arm_limit`], [`SharedReceiveQueue::modify`] / [`SharedReceiveQueue::query`] |
//! | `ibv_get_async_event` | [`Context::poll_async_event`] (no wait, nothing to acknowledge) |
//!
//! Registered memory is owned by ferroce (a remote peer writes into it at
//! any time, from the driver thread). The application reaches it through
//! [`MemoryRegion::read`], [`MemoryRegion::write`] and
//! [`MemoryRegion::with_bytes`], which take the same lock the driver takes:
//! no data race and no `unsafe` are reachable from this API.
//!
//! ferroce logs through [`tracing`](https://docs.rs/tracing) and prints
//! nothing unless the application installs a subscriber. Each device has
//! a span `device` (its address); inside it, at info the device opening,
//! at debug QP state changes and their cause, retransmissions, RNR waits,
//! NAKs and the counters at close, at trace every dropped packet and its
//! cause. The `ferroce` command's `-v`/`-q` and `FERROCE_LOG` choose.

#[cfg(feature = "tokio")]
mod async_cq;
mod channel;
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

#[cfg(feature = "tokio")]
pub use async_cq::AsyncChannel;
pub use channel::CompletionChannel;
pub use context::{Context, DeviceConfig};
pub use cq::CompletionQueue;
pub use device::*;
pub use error::{Error, Result};
pub use ferroce_core::verbs::{
    Access, AsyncEvent, Mtu, Path, QpAttr, QpState, QpType, RecvWr, SendOp, SendWr, Sge, SrqAttr,
    SrqInfo, UdDest, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
pub use ferroce_core::{MAX_MSG_SIZE, MrInfo, Stats};
pub use ferroce_io::UdpStats;
pub use ferroce_wire::Psn;
pub use mr::MemoryRegion;
pub use pd::ProtectionDomain;
pub use qp::{QpInitAttr, QueuePair, connect_qp, path_to};
pub use srq::SharedReceiveQueue;
