//! The InfiniBand Communication Manager (IBA vol. 1 ch. 12) as a sans-IO
//! state machine: one [`Cm`] per device turns CM MADs received on QP1 into
//! [`CmEvent`]s and the upper layer's calls into MADs to send.
//!
//! # Contract
//! The CM never reads a clock and never touches a socket. The driver gives it
//! every MAD received on QP1 with [`Cm::handle_mad`], sends what
//! [`Cm::poll_transmit`] returns to the named peer's QP1, calls
//! [`Cm::handle_timeout`] at [`Cm::poll_timeout`], and reads
//! [`Cm::poll_event`]. The upper layer (rdma_cm's layer) calls `listen`,
//! `connect`, `accept`, `reject`, `send_mra`, `rtu`, `comm_established`,
//! `disconnect`, `destroy`, `sidr_request` and `sidr_reply`, and moves its
//! QPs through their states when the events say so; a call that does not
//! fit the state returns a [`CmError`] naming the state and leaves nothing
//! changed. Input is hostile: a malformed, foreign or
//! unknown MAD is counted in [`CmStats`] and dropped, never a panic. Every
//! table is bounded: communications not yet established (both sides) by
//! [`CmConfig::max_pending`], TimeWait by [`CmConfig::max_timewait`], and
//! the transmit and event queues by their own limits.
//!
//! # Where this follows the kernel's ib_cm rather than IBA alone
//! IBA ch. 12 defines the messages (§12.6, encoded by `ferroce_wire::mad`),
//! the communication state diagram (§12.9) and the REJ reasons, and
//! ferroce follows it there; it leaves timer values, duplicate handling and
//! stale-connection recovery partly to the implementation. Where it does, ferroce does what the Linux
//! kernel's `drivers/infiniband/core/cm.c` does, so that a kernel peer sees
//! the behaviour it was tested against:
//! - State names are the kernel's (`REQ_SENT`, `MRA_REP_RCVD`, ...).
//! - Times use the kernel's ms conversion of 4.096 µs × 2^t, 2^(t−8) ms,
//!   not IBA's exact value (see [`timing`]). The active side waits 2 × packet life time + the REQ's
//!   remote response timeout for a REP; the passive side waits the REQ's
//!   local response timeout for an RTU; both resend up to the REQ's
//!   max_cm_retries times. An MRA sets the wait to its service timeout plus
//!   the packet life time.
//! - Duplicates: a repeated REQ is answered with the MRA (see below), or in
//!   TimeWait with REJ "stale connection" (10), and otherwise dropped (a REP
//!   already resends on its own timer); a repeated REP is answered with the
//!   RTU, or the MRA before it; a repeated DREQ in TimeWait with the DREP.
//!   A duplicate never creates a second connection: REQs are keyed by the
//!   sender's CA GUID and comm ID.
//! - Stale connections: a REQ or REP naming a remote QP that still belongs
//!   to another connection is rejected with reason 10 and the old
//!   connection is sent a DREQ.
//! - No listener: REJ reason 8 (invalid service ID); SIDR: status 1. A
//!   consumer REJ of a REQ not yet MRAed carries local comm ID 0.
//! - A slow application: rdma_cm arms a *delayed* MRA (service timeout 24)
//!   when its consumer has not answered a REQ or REP at once; the MRA goes
//!   out only when the peer repeats the message. ferroce does the same
//!   ([`CmConfig::delayed_mra`]); `send_mra` sends one at once.
//! - Giving up after the last retry does what the kernel does when rdma_cm
//!   destroys the ID on the error event: a REQ is withdrawn with REJ
//!   "timeout" (4) carrying our CA GUID in the ARI (so the peer finds it
//!   without our comm ID), a REP with REJ 28 and TimeWait. `destroy` does
//!   the same in every state; a connection gets one DREQ and TimeWait.
//! - A DREQ that names no connection is still answered with a DREP.
//! - TimeWait lasts the time of (packet life time + 1), the passive side
//!   taking the life time as the REQ's local ACK timeout − 1.
//!
//! # Where ferroce adds limits the kernel does not have
//! TimeWait is capped at [`CmConfig::timewait_cap`] (the kernel would honour
//! a REQ's 31, over two hours), and a full TimeWait table ends its oldest
//! entry early. A REQ beyond `max_pending` gets REJ "no resources" (3).
//! Comm IDs are random from the configured seed and never reused while any
//! table, TimeWait included, still holds them. LAP/APR (path migration) and ClassPortInfo are counted
//! as unknown attributes.
//!
//! [`rdma_cm`] holds rdma_cm's rules over this CM (service IDs, the
//! private-data header and limits, depth negotiation, QP attributes) as
//! pure functions for the layer above.

#![forbid(unsafe_code)]

mod cm;
mod config;
mod conn;
mod event;
pub mod rdma_cm;
pub mod reason;
pub mod timing;

#[cfg(test)]
mod tests;

pub use cm::Cm;
pub use config::{CmConfig, ConnectParams, PeerAddr, RepParams, SidrParams, SidrReplyParams};
pub use conn::{CmInfo, CmState};
pub use event::{CmEvent, Unanswered};

/// A communication, named by its local comm ID (what the peer sees as the
/// remote comm ID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CmId(pub u32);

/// Why an upper-layer call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmError {
    /// No communication has this ID (it ended, or was never made).
    UnknownId(CmId),
    /// The call does not fit the state (for example `accept` after `reject`).
    WrongState {
        id: CmId,
        call: &'static str,
        state: CmState,
    },
    /// Private data longer than the message's field.
    PrivateDataTooLong {
        message: &'static str,
        len: usize,
        max: usize,
    },
    /// `max_pending` communications are already being set up.
    TooManyPending(usize),
    /// A value this CM does not support.
    Unsupported(&'static str),
    /// A value wider than its field.
    Wire(ferroce_wire::Error),
}

impl core::fmt::Display for CmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnknownId(id) => write!(
                f,
                "no CM communication {:#010x}: it ended or never existed; use the ID from connect or ReqReceived",
                id.0
            ),
            Self::WrongState { id, call, state } => write!(
                f,
                "{call} on CM communication {:#010x} in state {state:?}: wait for the event that allows it",
                id.0
            ),
            Self::PrivateDataTooLong { message, len, max } => write!(
                f,
                "{len} bytes of private data do not fit a {message} (at most {max}): send less"
            ),
            Self::TooManyPending(max) => write!(
                f,
                "{max} connections are already being set up: wait for some to finish or raise CmConfig::max_pending"
            ),
            Self::Unsupported(what) => write!(f, "unsupported: {what}"),
            Self::Wire(err) => write!(f, "a CM field is out of range: {err}"),
        }
    }
}

impl std::error::Error for CmError {}

/// What the CM received, sent and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CmStats {
    pub received: u64,
    pub sent: u64,
    /// Shorter than a MAD.
    pub truncated: u64,
    pub bad_base_version: u64,
    pub bad_class_version: u64,
    /// A field out of range (for example a REJ's ARI length).
    pub malformed: u64,
    /// Not the CM class.
    pub wrong_class: u64,
    /// A CM attribute or method this CM does not handle (LAP, APR, GET ...).
    pub unknown_attribute: u64,
    /// Naming a comm ID no communication has.
    pub unknown_comm_id: u64,
    /// A message the state does not expect.
    pub ignored: u64,
    pub duplicates_answered: u64,
    pub duplicates_ignored: u64,
    pub stale: u64,
    pub resent: u64,
    pub gave_up: u64,
    /// MRAs sent for a repeated REQ or REP the application had not answered.
    pub delayed_mra: u64,
    pub rejected_sent: u64,
    pub rejected_received: u64,
    /// REQs or SIDR_REQs refused because the pending table was full.
    pub pending_full: u64,
    pub timewait_evicted: u64,
    pub transmit_dropped: u64,
    pub events_dropped: u64,
}
