//! The verbs vocabulary, shaped like libibverbs: access flags, QP types and
//! states, the attributes of `modify_qp`, work requests and completions, and
//! the errors a bad call gets. Plain data; the engine lives elsewhere.
//!
//! | file | holds |
//! |---|---|
//! | `qp` | access flags, QP types and states, MTU, path, QP and SRQ attributes |
//! | `wr` | SGEs, remote slices, send operations, work requests as posted and as queued |
//! | `completion` | work completions, their status and opcode, `WcError`, async events |
//! | `error` | `VerbsError` |

use core::fmt;

mod completion;
mod error;
mod mw;
mod qp;
mod wr;

pub use completion::{AsyncEvent, NetworkHeader, WcError, WcOpcode, WcStatus, WorkCompletion};
pub use error::{McastRefusal, VerbsError};
pub use mw::{MwBind, MwInfo, MwType, inc_rkey};
pub use qp::{Access, LocalErrors, Mtu, Path, QpAttr, QpState, QpType, RoceMode, SrqAttr, SrqInfo};
// Named outside this module only by the crate's tests.
#[cfg(test)]
pub(crate) use wr::SgList;
pub use wr::{
    FlushLevel, FlushType, INLINE_SGES, RdDest, RecvWr, RemoteSlice, SendOp, SendWr, Sge, UdDest,
};
pub(crate) use wr::{QueuedRecv, QueuedSend};

/// Formats a QPN or key as rdma-core prints them: hex.
struct Hex(u32);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
