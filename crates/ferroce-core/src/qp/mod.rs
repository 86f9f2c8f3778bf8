//! Queue pairs: their attributes and queues, and the three engines that
//! drive them, split as the kernel's rxe splits them:
//!
//! | file | role |
//! |---|---|
//! | [`requester`] | turns send work requests into request packets |
//! | [`responder`] | checks and executes incoming RC requests (SEND, WRITE) |
//! | [`replies`] | executes READs and atomics; queues (bounded) and emits ACKs, NAKs, READ responses, atomic ACKs |
//! | [`resources`] | the responder's record of the READs and atomics it served, for duplicates |
//! | [`unreliable`] | the UC and UD receive side |
//! | [`completer`] | processes ACKs and responses, retransmits, completes work requests |
//! | [`state`] | which `modify_qp` calls are legal |

pub(crate) mod completer;
pub(crate) mod local_ops;
pub(crate) mod posts;
pub(crate) mod rd;
pub(crate) mod replies;
pub(crate) mod requester;
pub(crate) mod resources;
pub(crate) mod responder;
pub(crate) mod state;
pub(crate) mod unreliable;

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

use ferroce_wire::Psn;

use crate::time::Instant;
use crate::verbs::{
    Access, LocalErrors, Mtu, Path, QpState, QpType, QueuedRecv, QueuedSend, SendOp, WcOpcode,
    WcStatus,
};

/// What `create_qp` takes (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    /// The protection domain's handle (`ibv_qp_init_attr::pd`).
    pub pd: u32,
    /// The transport service (`qp_type`); XRC targets and RD QPs have
    /// calls of their own.
    pub qp_type: QpType,
    /// The CQ send completions go to (`send_cq`).
    pub send_cq: u32,
    /// The CQ receive completions go to (`recv_cq`); may be `send_cq`.
    pub recv_cq: u32,
    /// Send queue depth in work requests (`cap.max_send_wr`, 1 to 32768).
    pub max_send_wr: u32,
    /// Receive queue depth in work requests (`cap.max_recv_wr`, 1 to
    /// 32768; unused with an SRQ).
    pub max_recv_wr: u32,
    /// Every send work request completes with a CQE, signaled or not.
    pub sq_sig_all: bool,
    /// The shared receive queue this QP takes its receive WQEs from, if any
    /// (`ibv_qp_init_attr::srq`); `max_recv_wr` is then ignored and
    /// `post_recv` refused.
    pub srq: Option<u32>,
}

/// The attributes a QP has been given by `modify_qp`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QpConfig {
    pub(crate) path: Option<Path>,
    pub(crate) mtu: Mtu,
    pub(crate) dest_qpn: u32,
    pub(crate) qkey: u32,
    pub(crate) access: Access,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
}

/// A send work request on the send queue, with its progress.
#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub(crate) wr: QueuedSend,
    /// Message length in bytes.
    pub(crate) len: u64,
    /// PSN of its first packet, once started.
    pub(crate) first_psn: Psn,
    /// Packets (for a READ: response packets) the message spans.
    pub(crate) npkts: u32,
    pub(crate) started: bool,
    /// Acknowledged (or failed): ready to complete in order.
    pub(crate) done: bool,
    pub(crate) status: WcStatus,
    /// READ: bytes of response received so far.
    pub(crate) read_received: u64,
    /// On an EE context: the RD QP that posted it, and its hand-off token.
    pub(crate) origin: Option<(u32, u64)>,
}

impl SendWqe {
    /// A request as it enters the send queue, not started.
    pub(crate) fn queued(wr: QueuedSend, len: u64, first_psn: Psn) -> Self {
        Self {
            wr,
            len,
            first_psn,
            npkts: 0,
            started: false,
            done: false,
            status: WcStatus::Success,
            read_received: 0,
            origin: None,
        }
    }

    pub(crate) fn last_psn(&self) -> Psn {
        self.first_psn + self.npkts.saturating_sub(1)
    }

    pub(crate) fn is_read_or_atomic(&self) -> bool {
        matches!(
            self.wr.op,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
        )
    }

    pub(crate) fn wc_opcode(&self) -> WcOpcode {
        match self.wr.op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => WcOpcode::Send,
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
            SendOp::AtomicWrite { .. } => WcOpcode::AtomicWrite,
            SendOp::Flush { .. } => WcOpcode::Flush,
            SendOp::BindMw { .. } => WcOpcode::BindMw,
            SendOp::LocalInv(_) => WcOpcode::LocalInv,
        }
    }

    /// Whether the request takes one of the initiator's READ/atomic slots
    /// (`max_rd_atomic`) and waits for a fence: READs, atomics and, as in
    /// rxe, ATOMIC WRITE; and FLUSH, which also takes a responder resource
    /// (rxe does not count it, and its peer's resources can overrun).
    /// Unlike a READ or atomic, these return no data, so a later ACK
    /// completes them as one completes a WRITE (as in rxe).
    pub(crate) fn uses_rd_atomic(&self) -> bool {
        self.is_read_or_atomic()
            || matches!(
                self.wr.op,
                SendOp::AtomicWrite { .. } | SendOp::Flush { .. }
            )
    }

    /// Whether the peer answers the request with an empty READ RESPONSE
    /// (ATOMIC WRITE, FLUSH).
    pub(crate) fn answered_empty(&self) -> bool {
        matches!(
            self.wr.op,
            SendOp::AtomicWrite { .. } | SendOp::Flush { .. }
        )
    }
}

/// Requester progress: where in the send queue the next packet comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Requester {
    pub(crate) next_psn: Psn,
    /// Index in `sq` of the WQE being (or next to be) sent.
    pub(crate) wqe: usize,
    /// Bytes of that WQE already sent.
    pub(crate) offset: u64,
    /// Packets sent since the last one that asked for an ACK.
    pub(crate) since_ack_req: u32,
}

/// Completer state: retries and timers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completer {
    pub(crate) retry_left: u8,
    pub(crate) rnr_left: u8,
    /// When the oldest unacknowledged packet is retransmitted.
    pub(crate) retransmit_at: Option<Instant>,
    /// Set while waiting out an RNR NAK.
    pub(crate) rnr_until: Option<Instant>,
    /// The last PSN acknowledged, if any.
    pub(crate) acked: Option<Psn>,
    /// The PSN a READ was last asked to resume from after a gap in its
    /// responses: the rest of that response stream is still arriving with
    /// the same gap, and must not ask again (each request would have the
    /// responder send the whole rest of the READ once more).
    pub(crate) read_resumed_at: Option<Psn>,
}

/// Responder state.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// Next PSN expected.
    pub(crate) epsn: Psn,
    pub(crate) msn: u32,
    /// The receive WQE a multi-packet SEND is filling, and bytes so far.
    pub(crate) recv: Option<(QueuedRecv, u64)>,
    /// Where a multi-packet WRITE lands: region lkey, offset, bytes left.
    pub(crate) write: Option<(u32, usize, usize)>,
    /// The DMA length of that WRITE (its RETH's): a WRITE with immediate
    /// reports it as the receive completion's byte_len, as rxe does.
    pub(crate) write_len: u32,
    /// A sequence NAK was sent and the expected PSN has not arrived yet.
    pub(crate) nak_sent: bool,
    /// Responses to send, in PSN order (an ACK must not overtake the READ
    /// responses before it, or the requester reads it as a lost response).
    pub(crate) out: VecDeque<Response>,
    /// The READ and atomic requests served, to answer their duplicates
    /// (and only theirs).
    pub(crate) resources: resources::Resources,
}

/// One response owed to the requester.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Response {
    Ack {
        psn: Psn,
        syndrome: ferroce_wire::aeth::Syndrome,
        msn: u32,
    },
    Read(ReadJob),
    Atomic {
        psn: Psn,
        orig: u64,
        msn: u32,
    },
    /// The answer to an ATOMIC WRITE or FLUSH: an RDMA READ RESPONSE ONLY
    /// with no payload (as rxe answers them).
    Empty {
        psn: Psn,
        msn: u32,
    },
}

/// A READ being answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadJob {
    /// The PSN of its first response packet.
    pub(crate) psn: Psn,
    /// The PSN of the request it answers (its record in `resources`):
    /// a replay differs from `psn` when it resumes in the middle.
    pub(crate) record: Psn,
    pub(crate) lkey: u32,
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) sent: usize,
    pub(crate) msn: u32,
}

/// Where a packet goes when a QP has no path yet (never sent: QPs without a
/// path are not in RTS).
pub(crate) const NO_PATH: Path = Path {
    remote: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    udp_src_port: 0xc000,
    traffic_class: 0,
    hop_limit: 64,
    roce: crate::verbs::RoceMode::V2,
};

/// The port's P_Key table has one entry, index 0, as rxe's: the default
/// partition, full member. Every QP is in it and sends it.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// The membership bit of a P_Key: set for a full member, clear for a
/// limited one.
const PKEY_FULL_MEMBER: u16 = 0x8000;

/// Whether a packet's P_Key `theirs` admits it to a QP whose partition key
/// is `ours` (IBA chapter 10, partitioning): the same partition (the low 15 bits) and at
/// least one of the two a full member. Two limited members may not talk.
pub(crate) fn pkey_matches(theirs: u16, ours: u16) -> bool {
    let partition = !PKEY_FULL_MEMBER;
    theirs & partition == ours & partition && (theirs | ours) & PKEY_FULL_MEMBER != 0
}

/// A transport with just a BTH (default P_Key, no flags; AckReq clear) for
/// `payload_len` bytes; the engines add the extension headers they need.
pub(crate) fn transport_repr(
    opcode: ferroce_wire::Opcode,
    psn: Psn,
    dest_qp: u32,
    payload_len: usize,
) -> ferroce_wire::TransportRepr {
    ferroce_wire::TransportRepr::new(
        ferroce_wire::bth::BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        },
        payload_len,
    )
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) init: QpInit,
    pub(crate) state: QpState,
    pub(crate) cfg: QpConfig,
    pub(crate) sq: posts::WorkQueue<SendWqe>,
    pub(crate) rq: posts::WorkQueue<QueuedRecv>,
    /// What the QP shares with its posters (kept through Reset).
    pub(crate) posts: std::sync::Arc<posts::QpPosts>,
    pub(crate) req: Requester,
    pub(crate) comp: Completer,
    pub(crate) resp: Responder,
    /// The error state it is in has been reported (or needs no report: the
    /// user put it there); cleared by the way out through Reset.
    pub(crate) error_reported: bool,
    /// In the endpoint's queue of QPs that may have something to send.
    pub(crate) scheduled: bool,
    /// What this QP last added to the endpoint's count of packets in flight.
    pub(crate) counted_in_flight: u32,
    /// The deadline of this QP's earliest entry in the endpoint's timer
    /// heap, if it has one there.
    pub(crate) timer_filed: Option<Instant>,
    /// How a bad scatter/gather list in its posts is reported (kept
    /// through Reset: it is the QP's, not its connection's).
    pub(crate) local_errors: LocalErrors,
    /// Congestion control: its notification and reaction points, pacer.
    pub(crate) cc: QpCc,
    /// An XRC target's domain (kept through Reset). Its `init.pd`,
    /// `init.srq` and `init.recv_cq` are those of the XRC SRQ the request
    /// being taken names (see `responder::bind_xrc_srq`).
    pub(crate) xrcd: Option<u32>,
    /// RD: an RD QP's or an EE context's part (kept through Reset; see
    /// [`rd`]).
    pub(crate) rd: Option<rd::RdRole>,
    /// Its own multicast sends are not delivered back to it
    /// (`IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`; kept through Reset).
    pub(crate) block_self_mcast: bool,
}

/// A QP's share of congestion control (see [`crate::cc`]).
#[derive(Debug, Default)]
pub(crate) struct QpCc {
    pub(crate) np: crate::cc::np::Np,
    /// DCQCN, from the QP's first CNP on.
    pub(crate) rp: Option<crate::cc::dcqcn::Dcqcn>,
    pub(crate) pacer: crate::cc::pacer::Pacer,
    /// The pacer holds its requests until then (filed as a timer).
    pub(crate) release_at: Option<Instant>,
    pub(crate) ce_received: u64,
    pub(crate) cnps_sent: u64,
    pub(crate) cnps_received: u64,
}

impl Qp {
    /// Tells the QP's posters what they check against (`posts`).
    pub(crate) fn publish(&self) {
        self.posts
            .publish(self.state, self.cfg.mtu, self.local_errors);
    }

    /// RC: PSNs sent (or, for READs, asked for) and not yet acknowledged.
    pub(crate) fn in_flight(&self) -> u32 {
        match (self.init.qp_type, self.comp.acked) {
            (QpType::Rc | QpType::XrcIni, Some(acked)) => {
                self.req.next_psn.distance(acked + 1).max(0) as u32
            }
            _ => 0,
        }
    }

    /// A QP in Reset whose posters share `posts`.
    pub(crate) fn new(qpn: u32, init: QpInit, posts: std::sync::Arc<posts::QpPosts>) -> Self {
        Self {
            qpn,
            init,
            state: QpState::Reset,
            cfg: QpConfig {
                path: None,
                mtu: Mtu::Mtu1024,
                dest_qpn: 0,
                qkey: 0,
                access: Access::NONE,
                timeout: 14,
                retry_cnt: 7,
                rnr_retry: 7,
                min_rnr_timer: 12,
                max_rd_atomic: 1,
                max_dest_rd_atomic: 1,
            },
            sq: posts::WorkQueue::new(std::sync::Arc::clone(&posts.send_used)),
            rq: posts::WorkQueue::new(std::sync::Arc::clone(&posts.recv_used)),
            posts,
            req: Requester {
                next_psn: Psn::new(0),
                wqe: 0,
                offset: 0,
                since_ack_req: 0,
            },
            comp: Completer {
                retry_left: 7,
                rnr_left: 7,
                retransmit_at: None,
                rnr_until: None,
                acked: None,
                read_resumed_at: None,
            },
            resp: Responder::default(),
            error_reported: false,
            scheduled: false,
            counted_in_flight: 0,
            timer_filed: None,
            local_errors: LocalErrors::Immediate,
            block_self_mcast: false,
            cc: QpCc::default(),
            xrcd: None,
            rd: None,
        }
    }

    /// The EE context part, if this is an EEC.
    pub(crate) fn eec(&self) -> Option<&rd::Eec> {
        self.rd.as_ref().and_then(rd::RdRole::eec)
    }

    /// The PD and QP number a remote access through this QP is checked as:
    /// an EEC's are those of the RD QP the incoming message is for.
    pub(crate) fn access_as(&self) -> (u32, u32) {
        match self.eec().and_then(|e| e.bound).and_then(|b| b.dest) {
            Some(d) => (d.pd, d.qpn),
            None => (self.init.pd, self.qpn),
        }
    }

    /// The transport its packets are of.
    pub(crate) fn transport(&self) -> ferroce_wire::Transport {
        use ferroce_wire::Transport;
        match self.init.qp_type {
            // An EE context is of RC's kind, and sends and takes RD's.
            QpType::Rc if self.eec().is_some() => Transport::Rd,
            QpType::Rc => Transport::Rc,
            QpType::Uc => Transport::Uc,
            QpType::Ud => Transport::Ud,
            QpType::XrcIni | QpType::XrcTgt => Transport::Xrc,
            QpType::Rd => Transport::Rd,
        }
    }

    /// The earliest of its timers (retransmission, end of an RNR wait,
    /// the pacer's release).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        [
            self.comp.retransmit_at,
            self.comp.rnr_until,
            self.cc.release_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Where its packets go (a QP without a path yet sends nothing).
    pub(crate) fn path(&self) -> Path {
        self.cfg.path.unwrap_or(NO_PATH)
    }

    /// Whether its state takes packets from the wire (RTR and after, short
    /// of error).
    pub(crate) fn receiving(&self) -> bool {
        matches!(
            self.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    }

    /// Whether `from` may send to it: anyone for UD, else its peer (or
    /// anyone while it has no path yet).
    pub(crate) fn takes_from(&self, from: IpAddr) -> bool {
        self.init.qp_type == QpType::Ud || self.cfg.path.is_none_or(|p| p.remote == from)
    }

    /// Whether it takes packets of RoCE version `roce`: a connected QP
    /// those of its path's only (IBA A16/A17: a RoCE v1 and a RoCE v2 port
    /// do not talk); a UD QP any (each datagram's sender picks).
    pub(crate) fn takes_version(&self, roce: crate::verbs::RoceMode) -> bool {
        self.init.qp_type == QpType::Ud || self.cfg.path.is_none_or(|p| p.roce == roce)
    }

    /// The partition key of its P_Key index (the table's only entry).
    pub(crate) fn pkey(&self) -> u16 {
        DEFAULT_PKEY
    }

    /// Packets a message of `len` bytes takes at this QP's MTU.
    pub(crate) fn packets_for(&self, len: u64) -> u32 {
        let mtu = self.cfg.mtu.bytes() as u64;
        len.div_ceil(mtu).max(1) as u32
    }

    /// Whether a signaled completion is due for this WQE.
    pub(crate) fn signals(&self, wqe: &SendWqe) -> bool {
        self.init.sq_sig_all || wqe.wr.signaled || wqe.status != WcStatus::Success
    }
}

#[cfg(test)]
mod pkey_tests {
    use super::pkey_matches;

    #[test]
    fn pkeys_match_within_a_partition_with_one_full_member() {
        assert!(pkey_matches(0xffff, 0xffff));
        assert!(pkey_matches(0x7fff, 0xffff), "limited to full");
        assert!(pkey_matches(0xffff, 0x7fff), "full to limited");
        assert!(!pkey_matches(0x7fff, 0x7fff), "two limited members");
        assert!(!pkey_matches(0x1234, 0xffff), "another partition");
        assert!(!pkey_matches(0x9234, 0xffff), "another partition, full");
        assert!(pkey_matches(0x9234, 0x1234));
    }
}
