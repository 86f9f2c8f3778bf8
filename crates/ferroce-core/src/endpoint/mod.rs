//! The endpoint: one RDMA device's worth of objects (PDs, MRs, CQs, QPs,
//! SRQs) and the sans-IO loop that drives them.
//!
//! Contract, in quinn-proto's style:
//! * inputs: [`Endpoint::handle_datagram`] with a received transport packet
//!   (BTH through ICRC; the I/O layer has already verified the ICRC), or
//!   [`Endpoint::handle_datagram_ecn`] with its IP header's ECN field, and
//!   [`Endpoint::handle_timeout`] when [`Endpoint::poll_timeout`]'s instant
//!   has passed;
//! * outputs: [`Endpoint::poll_transmit`] until it returns `None`,
//!   [`Endpoint::poll_cq`], [`Endpoint::poll_async_event`], and the MADs
//!   received on QP1 ([`Endpoint::poll_mad`]; see `gsi`);
//! * commands: the verbs (`alloc_pd`, `reg_mr`, `create_cq`, `create_srq`,
//!   `create_qp`, `modify_qp`, `post_send`, `post_recv`, `post_srq_recv`;
//!   XRC's `open_xrcd`, `create_xrc_srq`, `create_xrc_tgt_qp`, see `xrc`),
//!   and [`Endpoint::send_mad`] from QP1. A post checks its scatter/gather
//!   list at once (the default) or lets the request fail with a completion
//!   when it executes ([`Endpoint::set_local_errors`]).
//!
//! After any input or command, call `poll_transmit` until `None`, then
//! `poll_timeout`. The endpoint never reads a clock and opens no socket;
//! its randomness (keys) comes from the seed in [`EndpointConfig`].

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use crate::cq::Cq;
use crate::mr::MrTable;
use crate::qp::Qp;
use crate::srq::Srq;
pub use crate::stats::Stats;
use crate::timers::Timers;
pub(crate) use crate::transmit::BufPool;
pub use crate::transmit::{Ecn, EmitError, PacketKind, Transmit};

mod congestion;
mod drive;
mod gsi;
mod mcast;
mod posted;
mod qp_verbs;
pub(crate) use posted::check_send;
mod rd;
mod resources;
mod windows;
mod xrc;

use crate::verbs::{AsyncEvent, Mtu, QpType};
pub use congestion::{MAX_QUEUED_CNPS, QpCongestion};
pub use drive::Grh;
pub use gsi::{GSI_QKEY, GSI_QPN, MAD_LEN, MAX_QUEUED_MADS, Mad, MadStats};
pub use mcast::{MAX_MCAST_GROUPS, MAX_MCAST_QP_ATTACH, MULTICAST_QPN, multicast_group};
pub use windows::MAX_MW;

/// Largest message (ibv_devinfo's max_msg_sz as rxe reports it).
pub const MAX_MSG_SIZE: u64 = 0x80_0000;

/// Endpoint settings.
#[derive(Debug, Clone, Copy)]
pub struct EndpointConfig {
    /// Seed of the random keys (rkeys, lkeys, first QPN offset).
    pub seed: u64,
}

/// At most this many RC packets in flight (sent, or asked for by READs,
/// and not yet acknowledged) over all QPs of an endpoint, give or take one
/// per QP (a QP stopped mid-message first sends one packet that asks for an
/// ACK) and a READ's responses: about 4 MiB at MTU 4096, half the receive
/// buffer the UDP backend asks for. With few QPs, their windows (128 PSNs
/// each) bind first.
pub const MAX_IN_FLIGHT: u64 = 1024;

/// The first QPN `create_qp` gives: QP0 and QP1 are the SMI and GSI
/// (QP1 is the endpoint's own, see `gsi`); rxe starts user QPs at 0x11.
const FIRST_USER_QPN: u32 = 0x11;

/// Packets a QP may send in a row before the next active QP's turn.
const BURST: u32 = 16;

/// One device's objects and engine. See the module docs for the contract.
#[derive(Debug)]
pub struct Endpoint {
    /// See [`Endpoint::set_port_mtu`].
    port_mtu: Mtu,
    rng: ChaCha8Rng,
    pds: HashSet<u32>,
    /// XRC domains (see `xrc`).
    xrcds: HashSet<u32>,
    /// Reliable datagram domains (see `rd`).
    rdds: HashSet<u32>,
    /// The last token of an RD request handed to an EE context.
    rd_tokens: u64,
    next_handle: u32,
    pub(crate) mrs: MrTable,
    /// What the QPs share with their posters (`qp::posts`).
    pub(crate) posts: Arc<crate::qp::posts::PostBoard>,
    pub(crate) cqs: HashMap<u32, Cq>,
    /// CQs armed or watched (see [`crate::cq`]).
    pub(crate) cq_armed: HashSet<u32>,
    pub(crate) qps: HashMap<u32, Qp>,
    pub(crate) srqs: HashMap<u32, Srq>,
    /// Asynchronous events not yet polled, oldest first.
    events: VecDeque<AsyncEvent>,
    /// QP timers, earliest first.
    timers: Timers,
    /// QPs that may have a packet to send, in round-robin order: a QP is
    /// put here by whatever may give it one (a post, a packet for it, a
    /// timer, a state change) and leaves when it has nothing to send, so
    /// finding the next packet does not visit idle QPs.
    active: VecDeque<u32>,
    /// QPs with requests to send that wait for the endpoint's packets in
    /// flight to drop below [`MAX_IN_FLIGHT`].
    capped: VecDeque<u32>,
    /// Packets in flight over all RC QPs (the sum of [`Qp::in_flight`]).
    in_flight: u64,
    /// Packets the QP at the front of `active` has sent in a row.
    burst: u32,
    pool: BufPool,
    next_qpn: u32,
    /// QP1, outside the application's QP table (see `gsi`).
    gsi: gsi::Gsi,
    pub(crate) stats: Stats,
    /// The device's congestion control settings.
    cc: crate::cc::CongestionConfig,
    /// CNPs waiting to be polled, at most [`MAX_QUEUED_CNPS`].
    cnps: VecDeque<Transmit>,
    /// Multicast groups and their attached QPs (see `mcast`).
    groups: mcast::Groups,
    /// See [`Endpoint::set_local_addr`].
    local_addr: Option<IpAddr>,
}

impl Endpoint {
    /// An endpoint with no objects: port MTU 1024, congestion control at
    /// its defaults, QPNs from 0x11, keys drawn from `config.seed`.
    pub fn new(config: EndpointConfig) -> Self {
        let mrs = MrTable::default();
        let posts = Arc::new(crate::qp::posts::PostBoard::new(Arc::clone(&mrs.lkeys)));
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            pds: HashSet::new(),
            xrcds: HashSet::new(),
            rdds: HashSet::new(),
            rd_tokens: 0,
            next_handle: 1,
            mrs,
            posts,
            cqs: HashMap::default(),
            cq_armed: HashSet::new(),
            qps: HashMap::default(),
            srqs: HashMap::default(),
            events: VecDeque::new(),
            timers: Timers::default(),
            active: VecDeque::new(),
            capped: VecDeque::new(),
            in_flight: 0,
            burst: 0,
            pool: BufPool::default(),
            next_qpn: FIRST_USER_QPN,
            gsi: gsi::Gsi::default(),
            stats: Stats::default(),
            port_mtu: Mtu::Mtu1024,
            cc: crate::cc::CongestionConfig::default(),
            cnps: VecDeque::new(),
            groups: mcast::Groups::new(),
            local_addr: None,
        }
    }

    /// The device's own address: the destination of the unicast RoCE v2
    /// packets it receives, which a UD receive's GRH area shows (as a
    /// NIC's IP header). Unset, that destination reads as unspecified
    /// (0.0.0.0 or ::).
    pub fn set_local_addr(&mut self, addr: IpAddr) {
        self.local_addr = Some(addr);
    }

    /// The port's active MTU (`ibv_port_attr::active_mtu`, 1024 until
    /// set): the largest message of a UD QP, which takes no path MTU (IBA's
    /// state table has none for UD; rxe uses the port's MTU as well). QPs
    /// created from now on take it.
    pub fn set_port_mtu(&mut self, mtu: Mtu) {
        self.port_mtu = mtu;
    }

    /// The QPN the next `create_qp` hands out (then counting up, wrapping
    /// past 0xFFFFFF to 0x11): 0x11 until set, as rxe's first. A process
    /// that opens a device anew can start elsewhere, so that a peer's CM
    /// still holding a connection of an earlier process (same node GUID,
    /// same QPN) does not take the new one for it and reject it as stale.
    /// Values below 0x11 or above 24 bits are raised to 0x11.
    pub fn start_qpns_at(&mut self, qpn: u32) {
        self.next_qpn = if (FIRST_USER_QPN..=0xff_ffff).contains(&qpn) {
            qpn
        } else {
            FIRST_USER_QPN
        };
    }

    fn ud_mtu(&self, qp: &mut Qp) {
        if qp.init.qp_type == QpType::Ud {
            qp.cfg.mtu = self.port_mtu;
        }
    }

    /// Gives back the buffer of a sent [`Transmit`], to build later packets
    /// in (optional: without it every packet gets a new buffer).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.give(buf);
    }

    /// RC packets in flight over all QPs (see [`MAX_IN_FLIGHT`]).
    pub fn packets_in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The drop and traffic counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    fn handle(&mut self) -> u32 {
        let h = self.next_handle;
        self.next_handle += 1;
        h
    }
}
