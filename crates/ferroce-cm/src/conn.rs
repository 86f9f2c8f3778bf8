//! One communication: its state (the kernel's ib_cm state names) and what it
//! must remember to resend and to answer duplicates.

use core::time::Duration;

use ferroce_core::Instant;

use crate::PeerAddr;

/// The state of a communication, named as the kernel's `ib_cm_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmState {
    ReqSent,
    MraReqRcvd,
    ReqRcvd,
    MraReqSent,
    RepSent,
    MraRepRcvd,
    RepRcvd,
    MraRepSent,
    Established,
    DreqSent,
    DreqRcvd,
    TimeWait,
    SidrReqSent,
    SidrReqRcvd,
}

/// What the upper layer may read about a communication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmInfo {
    pub state: CmState,
    pub peer: PeerAddr,
    /// 0 until the peer's comm ID is known.
    pub remote_comm_id: u32,
    pub service_id: u64,
    /// 0 until known (the REP's or the accept's QPN).
    pub local_qpn: u32,
    pub remote_qpn: u32,
}

/// Which table limit a state counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    Pending,
    Connected,
    TimeWait,
}

impl CmState {
    pub(crate) const fn category(self) -> Category {
        match self {
            Self::Established | Self::DreqSent | Self::DreqRcvd => Category::Connected,
            Self::TimeWait => Category::TimeWait,
            _ => Category::Pending,
        }
    }
}

/// What the one timer of a communication does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// Resend `outstanding` or give up.
    Resend,
    /// Leave TimeWait.
    TimeWaitExit,
}

#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) state: CmState,
    pub(crate) peer: PeerAddr,
    pub(crate) remote_id: u32,
    pub(crate) remote_ca_guid: u64,
    pub(crate) local_qpn: u32,
    pub(crate) remote_qpn: u32,
    pub(crate) service_id: u64,
    /// The transaction of the REQ (or SIDR_REQ): REQ, REP, RTU, MRA, REJ.
    pub(crate) tid: u64,
    pub(crate) packet_life_time: u8,
    /// The wait for an answer to what we sent; an MRA lengthens it.
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u8,
    pub(crate) retries_left: u8,
    /// The message we resend until answered (REQ, REP, DREQ, SIDR_REQ).
    pub(crate) outstanding: Option<Vec<u8>>,
    /// Our last answer, resent when the peer repeats itself (MRA for a
    /// duplicate REQ, RTU for a duplicate REP, DREP for a duplicate DREQ).
    pub(crate) answer: Option<Vec<u8>>,
    pub(crate) timer: Option<(Instant, TimerKind)>,
    /// Keys this connection holds in the lookup tables.
    pub(crate) remote_key: Option<(u64, u32)>,
    pub(crate) qpn_key: Option<(u64, u32)>,
    /// The upper layer let go of it: no more events, only TimeWait left.
    pub(crate) destroyed: bool,
}

impl Conn {
    pub(crate) fn new(state: CmState, peer: PeerAddr, tid: u64) -> Self {
        Self {
            state,
            peer,
            remote_id: 0,
            remote_ca_guid: 0,
            local_qpn: 0,
            remote_qpn: 0,
            service_id: 0,
            tid,
            packet_life_time: 0,
            timeout: Duration::ZERO,
            max_retries: 0,
            retries_left: 0,
            outstanding: None,
            answer: None,
            timer: None,
            remote_key: None,
            qpn_key: None,
            destroyed: false,
        }
    }
}
