//! Reliable datagram (IBA 9.7, RD) inside the QP machinery.
//!
//! RD splits what RC keeps in one QP: the *RD QP* holds the queues (sends
//! that each name an EE context, destination QP and Q_Key; receives) and
//! the Q_Key, while the *EE context* (EEC) is the reliable connection to
//! one EEC of a peer, with the PSNs, ACKs, retransmission and responder
//! resources. ferroce builds each EEC from RC's machinery: an EEC is a QP
//! of RC's kind, with no queues of its own, that this module's role marks:
//!
//! * Sending: an RD QP hands its oldest request to the EEC it names once
//!   that EEC is idle (`endpoint::rd`); the EEC sends it as RC sends a
//!   request, in RD's opcodes with an RDETH (the peer's EEC) and a DETH
//!   (Q_Key, the RD QP), and completes it on the RD QP's CQ under the RD
//!   QP's number. An EEC carries one message at a time, as IBA's RD does,
//!   and an RD QP has one message on an EEC at a time, so its completions
//!   come in the order it posted.
//! * Receiving: a request reaches the EEC its RDETH names; before the EEC
//!   takes it, it is bound to the destination RD QP of its BTH (that QP's
//!   receive queue, CQ, PD, access and Q_Key), which must be an RD QP of
//!   the EEC's domain, ready to receive, with the DETH's Q_Key; otherwise
//!   the EEC answers NAK invalid RD request.

use std::collections::VecDeque;

use crate::verbs::WcStatus;

/// What RD makes of a QP.
#[derive(Debug)]
pub(crate) enum RdRole {
    /// An RD QP.
    Qp(RdQp),
    /// An EE context.
    Eec(Eec),
}

/// An RD QP's share of RD.
#[derive(Debug)]
pub(crate) struct RdQp {
    /// Its reliable datagram domain.
    pub(crate) rdd: u32,
    /// The receive queue made for it (an SRQ only it posts to), unless it
    /// was created with an SRQ of the application's.
    pub(crate) own_srq: Option<u32>,
    /// The request at the head of its send queue, on an EEC.
    pub(crate) handed: Option<Handed>,
}

/// A request an RD QP handed to an EEC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handed {
    pub(crate) eec: u32,
    pub(crate) token: u64,
}

/// An EE context's share of RD.
#[derive(Debug, Default)]
pub(crate) struct Eec {
    /// Its reliable datagram domain.
    pub(crate) rdd: u32,
    /// The RD QP whose request it carries.
    pub(crate) serving: Option<u32>,
    /// RD QPs waiting for it to be free, oldest first.
    pub(crate) waiting: VecDeque<u32>,
    /// The last request it completed, and how.
    pub(crate) last: Option<(u64, WcStatus)>,
    /// The incoming message being taken, and whose.
    pub(crate) bound: Option<Bound>,
}

/// Whom an EEC's incoming message is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    /// The destination RD QP, if the request named a valid one.
    pub(crate) dest: Option<BoundQp>,
    /// The requesting RD QP (the DETH's source QP): responses go to it.
    pub(crate) src_qp: u32,
}

/// The destination RD QP as the EEC uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BoundQp {
    pub(crate) qpn: u32,
    pub(crate) pd: u32,
}

impl RdRole {
    /// What is left of it after the QP or EEC is reset: its domain and
    /// receive queue; nothing in flight.
    pub(crate) fn reset(self) -> Self {
        match self {
            Self::Qp(q) => Self::Qp(RdQp { handed: None, ..q }),
            Self::Eec(e) => Self::Eec(Eec {
                rdd: e.rdd,
                waiting: e.waiting,
                ..Eec::default()
            }),
        }
    }

    pub(crate) fn eec(&self) -> Option<&Eec> {
        match self {
            Self::Eec(e) => Some(e),
            Self::Qp(_) => None,
        }
    }

    pub(crate) fn eec_mut(&mut self) -> Option<&mut Eec> {
        match self {
            Self::Eec(e) => Some(e),
            Self::Qp(_) => None,
        }
    }

    pub(crate) fn qp(&self) -> Option<&RdQp> {
        match self {
            Self::Qp(q) => Some(q),
            Self::Eec(_) => None,
        }
    }

    pub(crate) fn qp_mut(&mut self) -> Option<&mut RdQp> {
        match self {
            Self::Qp(q) => Some(q),
            Self::Eec(_) => None,
        }
    }
}
