//! Hosts: one ferroce-core [`Endpoint`] each behind one NIC port, and the
//! flows between them, each an RC QP pair carrying RDMA WRITEs that the
//! workload keeps posted. The NIC pulls a packet from the engine whenever
//! its port is free and not paused, as a NIC's scheduler pulls from its
//! QPs, so the engine's own pacing, window and timers decide what leaves.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::verbs::{
    Access, Mtu, Path, QpAttr, QpState, QpType, RemoteSlice, RoceMode, SendOp, SendWr, Sge,
    VerbsError, WorkCompletion,
};
use ferroce_core::{CongestionConfig, Ecn, Endpoint, EndpointConfig, Instant, QpInit};
use ferroce_wire::Psn;
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;

use crate::port::{Port, Ps};
use crate::scenario::{FlowConfig, PRIORITIES, Scenario, SizeWeight};
use crate::switch::{mix, unit};

/// The first address hosts get (10.0.0.1 is host 0).
const FIRST_ADDR: u32 = 0x0a00_0001;

/// The DSCP a priority is written as, and read back from (DSCP / 8): 26
/// (AF31, the usual RoCE marking) for priority 3.
pub(crate) fn dscp_of(priority: u8) -> u8 {
    priority * 8 + 2
}

/// The priority of a packet sent with IP TOS byte `tos`.
pub(crate) fn priority_of(tos: u8) -> u8 {
    (tos >> 2) / 8
}

/// The priority the engine's CNPs travel on (their DSCP read back as the
/// fabric reads every packet's), if it sends CNPs.
pub(crate) fn cnp_priority(ep: &Endpoint) -> Option<u8> {
    let np = ep.congestion_control().np;
    np.enabled.then(|| priority_of(np.cnp_dscp << 2))
}

/// Completions taken from a CQ per call.
const WC_BATCH: usize = 64;

pub(crate) fn host_addr(h: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(FIRST_ADDR + h as u32))
}

/// The host an address belongs to, if any.
pub(crate) fn host_of(addr: IpAddr, hosts: usize) -> Option<usize> {
    let IpAddr::V4(a) = addr else { return None };
    let h = u32::from(a).checked_sub(FIRST_ADDR)? as usize;
    (h < hosts).then_some(h)
}

/// Engine time for simulated time (picoseconds to nanoseconds).
pub(crate) fn engine_time(now: Ps) -> Instant {
    Instant::from_nanos(now / 1000)
}

pub struct Host {
    pub ep: Endpoint,
    pub port: Port,
    pub cq: u32,
    /// The `HostWake` event in the heap, if one is.
    pub wake: Option<Ps>,
    /// This host's QPs: QPN to flow.
    pub qp_flow: FxHashMap<u32, usize>,
    /// Bit p set: a flow of this host's travels on priority p.
    pub priorities: u8,
    /// The priority of the CNPs this host's engine sends, if it sends any.
    pub cnp_priority: Option<u8>,
    /// A CE-marked packet arrived since the NIC last found no CNP at the
    /// head of the engine's queue: the engine may hold a CNP (it hands
    /// CNPs out before anything else).
    pub cnp_pending: bool,
    /// Packets taken from the engine for a priority that was paused then,
    /// waiting for it to resume (the NIC's per-priority queues).
    pub held: [VecDeque<crate::port::Packet>; PRIORITIES],
    wcs: Vec<WorkCompletion>,
}

/// A flow's books.
pub struct Flow {
    pub cfg: FlowConfig,
    sizes: Vec<SizeWeight>,
    depth: u32,
    pub src_qpn: u32,
    pub dst_qpn: u32,
    lkey: u32,
    remote: (u64, u32),
    /// Messages posted and not completed: when, and how long.
    posted: VecDeque<(Ps, u32)>,
    pub posted_bytes: u64,
    pub done_bytes: u64,
    pub messages: u64,
    /// Bytes on the wire (with framing) of its requests delivered at `dst`.
    pub wire_rx: u64,
    pub active: bool,
    pub finished_at: Option<Ps>,
    /// Post-to-completion time of each message.
    pub latencies: Vec<Ps>,
    /// Completions in error (the QP then stops).
    pub errors: u64,
    /// CE-marked packets of this flow that reached either end.
    pub ce: u64,
    /// CNPs that reached the sender.
    pub cnps: u64,
}

/// Creates every host and every flow's QP pair, connected and ready.
pub(crate) fn build(s: &Scenario, ports: Vec<Port>) -> Result<(Vec<Host>, Vec<Flow>), VerbsError> {
    let flows_cfg = s.flows();
    // One CQ per host, deep enough for every flow's completions.
    let depth_total: u32 = flows_cfg
        .iter()
        .map(|f| f.depth.unwrap_or(s.workload.depth))
        .fold(0, u32::saturating_add);
    let mut hosts: Vec<Host> = ports
        .into_iter()
        .enumerate()
        .map(|(h, port)| {
            let mut ep = Endpoint::new(EndpointConfig {
                seed: mix(s.seed ^ (h as u64) << 20),
            });
            // The engine marks ECT(0) itself unless told not to; its line
            // rate is its own link's.
            let cc = s.congestion.config(port.rate_gbps());
            ep.set_congestion_control(CongestionConfig {
                ecn: s.ecn_capable(),
                ..cc
            });
            let cq = ep.create_cq(depth_total.saturating_add(64).max(1024))?;
            Ok(Host {
                ep,
                port,
                cq,
                wake: None,
                qp_flow: FxHashMap::default(),
                priorities: 0,
                cnp_priority: None,
                cnp_pending: false,
                held: Default::default(),
                wcs: vec![WorkCompletion::default(); WC_BATCH],
            })
        })
        .collect::<Result<_, VerbsError>>()?;
    let mut flows = Vec::with_capacity(flows_cfg.len());
    for (i, cfg) in flows_cfg.into_iter().enumerate() {
        let sizes = cfg
            .sizes
            .clone()
            .unwrap_or_else(|| s.workload.sizes.clone());
        let depth = cfg.depth.unwrap_or(s.workload.depth);
        let max = sizes.iter().map(|w| w.bytes).max().unwrap_or(1) as usize;
        let (src, dst) = (cfg.src, cfg.dst);
        let a = open_qp(&mut hosts[src], depth, max)?;
        let b = open_qp(&mut hosts[dst], depth, max)?;
        let port = 0xc000
            | (mix(u64::from(a.0) << 32 | u64::from(b.0) ^ (i as u64) << 56) as u16 & 0x3fff);
        let priority = cfg.priority.unwrap_or(s.priority);
        for (h, me, peer, peer_addr) in [(src, a, b, dst), (dst, b, a, src)] {
            let to = (peer.0, host_addr(peer_addr), port);
            connect(s, &mut hosts[h].ep, me.0, to, dscp_of(priority))?;
            hosts[h].qp_flow.insert(me.0, i);
            hosts[h].priorities |= 1 << priority;
        }
        // The receiver sends CNPs on their own priority: its NIC still
        // pulls them while the data's priority is paused.
        hosts[dst].cnp_priority = cnp_priority(&hosts[dst].ep);
        flows.push(Flow {
            cfg,
            sizes,
            depth,
            src_qpn: a.0,
            dst_qpn: b.0,
            lkey: a.1.lkey,
            remote: (b.1.addr, b.1.rkey),
            posted: VecDeque::new(),
            posted_bytes: 0,
            done_bytes: 0,
            messages: 0,
            wire_rx: 0,
            active: false,
            finished_at: None,
            latencies: Vec::new(),
            errors: 0,
            ce: 0,
            cnps: 0,
        });
    }
    Ok((hosts, flows))
}

/// A QP and a region of `len` bytes on `host`.
fn open_qp(
    host: &mut Host,
    depth: u32,
    len: usize,
) -> Result<(u32, ferroce_core::MrInfo), VerbsError> {
    let ep = &mut host.ep;
    let pd = ep.alloc_pd();
    let qpn = ep.create_qp(QpInit {
        pd,
        qp_type: QpType::Rc,
        send_cq: host.cq,
        recv_cq: host.cq,
        max_send_wr: depth.max(1),
        max_recv_wr: 1,
        // Every WRITE completes with a CQE: the flow posts more on each.
        sq_sig_all: true,
        srq: None,
    })?;
    let mr = ep.reg_mr(pd, len, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    Ok((qpn, mr))
}

/// Takes QP `qpn` from Reset to RTS, connected to (QPN, address, UDP
/// source port) `to`, its packets marked with `dscp`.
fn connect(
    s: &Scenario,
    ep: &mut Endpoint,
    qpn: u32,
    (peer_qpn, peer, udp_src_port): (u32, IpAddr, u16),
    dscp: u8,
) -> Result<(), VerbsError> {
    let ect = if s.ecn_capable() {
        Ecn::Ect0.bits()
    } else {
        Ecn::NotEct.bits()
    };
    let path = Path {
        remote: peer,
        udp_src_port,
        traffic_class: dscp << 2 | ect,
        hop_limit: 64,
        roce: RoceMode::V2,
    };
    let mtu = Mtu::from_bytes(s.mtu).unwrap_or(Mtu::Mtu4096);
    let init = QpAttr {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(1),
        access: Some(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
        ..QpAttr::default()
    };
    let rtr = QpAttr {
        state: Some(QpState::Rtr),
        path: Some(path),
        path_mtu: Some(mtu),
        dest_qpn: Some(peer_qpn),
        rq_psn: Some(Psn::new(0)),
        max_dest_rd_atomic: Some(1),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    let rts = QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(Psn::new(0)),
        timeout: Some(s.ack_timeout),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(1),
        ..QpAttr::default()
    };
    for attr in [init, rtr, rts] {
        ep.modify_qp(qpn, &attr)?;
    }
    Ok(())
}

impl Flow {
    /// Posts messages until `depth` are outstanding or the flow has posted
    /// its bytes; nothing once stopped.
    pub fn refill(&mut self, ep: &mut Endpoint, now: Ps, rng: &mut ChaCha8Rng) {
        while self.active && self.posted.len() < self.depth as usize {
            let left = self
                .cfg
                .bytes
                .map_or(u64::MAX, |b| b.saturating_sub(self.posted_bytes));
            if left == 0 {
                return;
            }
            let len = u64::from(pick(&self.sizes, rng)).min(left) as u32;
            let sg = [Sge {
                lkey: self.lkey,
                offset: 0,
                len,
            }];
            let remote = RemoteSlice::new(self.remote.0, self.remote.1, u64::from(len));
            let wr = SendWr::new(
                self.messages + self.posted.len() as u64,
                SendOp::Write { remote },
                &sg,
            );
            if ep.post_send(self.src_qpn, wr).is_err() {
                // The QP went to error (retries exhausted): the flow is over.
                self.errors += 1;
                self.active = false;
                return;
            }
            self.posted.push_back((now, len));
            self.posted_bytes += u64::from(len);
        }
    }

    /// A completion of this flow's QP at `now` (RC completes in order).
    fn complete(&mut self, wc: &WorkCompletion, now: Ps) {
        let Some((at, len)) = self.posted.pop_front() else {
            return;
        };
        if wc.ok().is_err() {
            self.errors += 1;
            self.active = false;
            return;
        }
        self.done_bytes += u64::from(len);
        self.messages += 1;
        self.latencies.push(now - at);
        if self.cfg.bytes.is_some_and(|b| self.done_bytes >= b) {
            self.finished_at = Some(now);
            self.active = false;
        }
    }
}

/// A message size from the mix, by weight.
fn pick(sizes: &[SizeWeight], rng: &mut ChaCha8Rng) -> u32 {
    let total: f64 = sizes.iter().map(|s| s.weight).sum();
    let mut x = unit(rng) * total;
    for s in sizes {
        if x < s.weight {
            return s.bytes;
        }
        x -= s.weight;
    }
    sizes.last().map_or(1, |s| s.bytes)
}

impl Host {
    /// Takes this host's completions and posts more work for their flows.
    pub fn completions(&mut self, flows: &mut [Flow], now: Ps, rng: &mut ChaCha8Rng) {
        loop {
            let n = self.ep.poll_cq_into(self.cq, &mut self.wcs).unwrap_or(0);
            for wc in &self.wcs[..n] {
                if let Some(&f) = self.qp_flow.get(&wc.qpn) {
                    flows[f].complete(wc, now);
                    flows[f].refill(&mut self.ep, now, rng);
                }
            }
            if n < self.wcs.len() {
                return;
            }
        }
    }
}

/// Every packet reaches an engine here, with the ECN codepoint the fabric
/// left on it, at simulated time `now` (picoseconds): a CE mark makes the
/// engine send a CNP, as on the wire.
pub fn deliver(ep: &mut Endpoint, now: Ps, from: IpAddr, ecn: Ecn, data: &[u8]) {
    ep.handle_datagram_ecn(engine_time(now), from, ecn, data);
}
