//! A simulated network of CMs on a virtual clock: a seeded link that loses,
//! duplicates and reorders MADs, and a scripted application on each node.

use core::time::Duration;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::Instant;
use ferroce_wire::Psn;
use ferroce_wire::mad::MadHeader;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::{Cm, CmConfig, CmEvent, CmId, ConnectParams, PeerAddr, RepParams, reason};

/// What a node's application does with a REQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OnReq {
    Accept,
    Reject(Vec<u8>),
    Ignore,
}

pub(crate) struct Node {
    pub(crate) cm: Cm,
    pub(crate) addr: PeerAddr,
    pub(crate) on_req: OnReq,
    pub(crate) auto_rtu: bool,
    pub(crate) auto_drep: bool,
    pub(crate) next_qpn: u32,
    pub(crate) log: Vec<CmEvent>,
}

/// The link's misbehaviour, in parts per thousand.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Link {
    pub(crate) loss: u32,
    pub(crate) duplicate: u32,
    /// Extra delay up to this many µs, which reorders.
    pub(crate) jitter_us: u64,
}

pub(crate) struct Net {
    pub(crate) now: Instant,
    pub(crate) nodes: Vec<Node>,
    pub(crate) link: Link,
    rng: ChaCha8Rng,
    /// (delivery time, sequence) -> (node index, sender, bytes).
    in_flight: BTreeMap<(Instant, u64), (usize, PeerAddr, Vec<u8>)>,
    seq: u64,
    /// Attribute IDs whose next MAD is lost, once each.
    pub(crate) drop_once: Vec<u16>,
    pub(crate) delivered: u64,
    /// Every MAD put on the link: (sender index, bytes).
    pub(crate) trace: Vec<(usize, Vec<u8>)>,
}

pub(crate) const SERVICE: u64 = 0x0000_0000_0106_1c06;
const BASE_DELAY: Duration = Duration::from_micros(50);

impl Net {
    pub(crate) fn new(nodes: usize, seed: u64, link: Link) -> Self {
        let nodes = (0..nodes)
            .map(|i| {
                let ip = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 10 + i as u8));
                let config = CmConfig {
                    seed: seed ^ ((i as u64 + 1) * 0x9e37_79b9),
                    local_ca_guid: 0x5054_00ff_fe52_0000 + i as u64,
                    ..CmConfig::default()
                };
                Node {
                    cm: Cm::new(config),
                    addr: PeerAddr::gsi(ip),
                    on_req: OnReq::Accept,
                    auto_rtu: true,
                    auto_drep: true,
                    next_qpn: 0x11,
                    log: Vec::new(),
                }
            })
            .collect();
        Self {
            now: Instant::from_nanos(1_000_000_000),
            nodes,
            link,
            rng: ChaCha8Rng::seed_from_u64(seed),
            in_flight: BTreeMap::new(),
            seq: 0,
            drop_once: Vec::new(),
            delivered: 0,
            trace: Vec::new(),
        }
    }

    pub(crate) fn params(&mut self, from: usize, to: usize, service_id: u64) -> ConnectParams {
        let qpn = self.nodes[from].next_qpn;
        self.nodes[from].next_qpn += 1;
        let psn = Psn::new(self.rng.next_u32() & 0xff_ffff);
        ConnectParams::new(self.nodes[to].addr, service_id, qpn, psn)
    }

    pub(crate) fn connect(&mut self, from: usize, to: usize) -> CmId {
        let params = self.params(from, to, SERVICE);
        let now = self.now;
        self.nodes[from].cm.connect(now, &params).expect("connect")
    }

    fn index_of(&self, ip: IpAddr) -> Option<usize> {
        self.nodes.iter().position(|n| n.addr.ip == ip)
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        per_mille > 0 && self.rng.next_u32() % 1000 < per_mille
    }

    /// Moves every queued MAD onto the link, applying loss, duplication and
    /// jitter.
    fn collect_transmits(&mut self) {
        for i in 0..self.nodes.len() {
            let from = self.nodes[i].addr;
            while let Some((to, bytes)) = self.nodes[i].cm.poll_transmit() {
                let Some(dest) = self.index_of(to.ip) else {
                    continue;
                };
                if let Ok(h) = MadHeader::parse(&bytes)
                    && let Some(pos) = self.drop_once.iter().position(|&a| a == h.attribute_id)
                {
                    self.drop_once.remove(pos);
                    continue;
                }
                self.trace.push((i, bytes.clone()));
                if self.chance(self.link.loss) {
                    continue;
                }
                let copies = if self.chance(self.link.duplicate) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let jitter = match self.link.jitter_us {
                        0 => 0,
                        j => self.rng.next_u64() % j,
                    };
                    let at = self.now.after(BASE_DELAY + Duration::from_micros(jitter));
                    self.seq += 1;
                    self.in_flight
                        .insert((at, self.seq), (dest, from, bytes.clone()));
                }
            }
        }
    }

    /// Runs the application policy on the events each node produced.
    fn run_apps(&mut self) {
        let now = self.now;
        for node in &mut self.nodes {
            while let Some(event) = node.cm.poll_event() {
                match &event {
                    CmEvent::ReqReceived { id, .. } => match node.on_req.clone() {
                        OnReq::Accept => {
                            let params = RepParams {
                                qpn: node.next_qpn,
                                starting_psn: Psn::new(0x1234),
                                responder_resources: 1,
                                initiator_depth: 1,
                                rnr_retry_count: 7,
                                ..RepParams::default()
                            };
                            node.next_qpn += 1;
                            node.cm.accept(now, *id, &params).expect("accept");
                        }
                        OnReq::Reject(private) => node
                            .cm
                            .reject(now, *id, reason::CONSUMER_DEFINED, &private)
                            .expect("reject"),
                        OnReq::Ignore => {}
                    },
                    CmEvent::RepReceived { id, .. } if node.auto_rtu => {
                        node.cm.rtu(*id, &[]).expect("rtu");
                    }
                    CmEvent::DisconnectRequest { id, .. } if node.auto_drep => {
                        node.cm.disconnect(now, *id, &[]).expect("drep");
                    }
                    _ => {}
                }
                node.log.push(event);
            }
        }
    }

    /// One step: apps, transmits, then the earliest delivery or timer.
    /// Returns false when nothing is left to happen.
    pub(crate) fn step(&mut self) -> bool {
        self.run_apps();
        self.collect_transmits();
        let next_mad = self.in_flight.keys().next().map(|&(at, _)| at);
        let next_timer = self.nodes.iter().filter_map(|n| n.cm.poll_timeout()).min();
        let Some(at) = [next_mad, next_timer].into_iter().flatten().min() else {
            return false;
        };
        self.now = self.now.max(at);
        if next_mad == Some(at) {
            let (key, (dest, from, bytes)) = self.in_flight.pop_first().expect("a MAD");
            debug_assert_eq!(key.0, at);
            self.delivered += 1;
            let now = self.now;
            self.nodes[dest].cm.handle_mad(now, from, &bytes);
        } else {
            let now = self.now;
            for node in &mut self.nodes {
                node.cm.handle_timeout(now);
            }
        }
        self.run_apps();
        true
    }

    /// Steps until `done` holds; panics after `limit` of virtual time.
    pub(crate) fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Self) -> bool) {
        let end = self.now.after(limit);
        while !done(self) {
            assert!(self.now <= end, "condition not met within {limit:?}");
            if !self.step() {
                self.run_apps();
                assert!(
                    done(self),
                    "the network went quiet before the condition held"
                );
                return;
            }
        }
    }

    /// Steps until nothing is in flight and no timer is armed.
    pub(crate) fn run_quiet(&mut self, limit: Duration) {
        let end = self.now.after(limit);
        while self.step() {
            assert!(self.now <= end, "still busy after {limit:?}");
        }
        self.run_apps();
    }

    pub(crate) fn count(&self, node: usize, pred: impl Fn(&CmEvent) -> bool) -> usize {
        self.nodes[node].log.iter().filter(|e| pred(e)).count()
    }

    /// The passive side's ID for the active side's connection `id`.
    pub(crate) fn passive_id(&self, node: usize, active: CmId) -> Option<CmId> {
        self.nodes[node].log.iter().find_map(|e| match e {
            CmEvent::ReqReceived { id, req, .. } if req.local_comm_id == active.0 => Some(*id),
            _ => None,
        })
    }

    /// Hands `bytes` to node `to` as if `from` had sent it.
    pub(crate) fn inject(&mut self, from: usize, to: usize, bytes: &[u8]) {
        let (now, addr) = (self.now, self.nodes[from].addr);
        self.nodes[to].cm.handle_mad(now, addr, bytes);
        self.run_apps();
    }

    /// Whether `node` has logged Established for `id`.
    pub(crate) fn established(&self, node: usize, id: CmId) -> bool {
        self.nodes[node]
            .log
            .iter()
            .any(|e| matches!(e, CmEvent::Established { id: i } if *i == id))
    }
}
