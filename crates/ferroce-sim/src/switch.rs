//! A shared-buffer output-queued switch, store and forward: per-port
//! egress queues (one per priority, strict priority between them) drawing
//! on one buffer; RED/ECN marking when a packet joins an egress queue;
//! PFC accounting per ingress port and priority; ECMP by a hash of the
//! flow's addresses and UDP source port, salted per switch so that tiers
//! do not all pick alike. The switch decides; the simulator schedules.

use std::collections::VecDeque;

use ferroce_core::Ecn;
use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;

use crate::port::{Packet, Port};
use crate::scenario::{PRIORITIES, Red, SwitchConfig};

/// What became of an arriving packet.
pub enum Arrival {
    /// The buffer was full: the packet is gone (counted in `drops`).
    Dropped,
    /// Queued at `egress`; `pause` is set when its ingress port and
    /// priority just crossed XOFF, so the sender there must be paused.
    Queued { egress: u16, pause: bool },
}

/// Why a switch sends a PAUSE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PauseKind {
    /// Bytes held crossed XOFF.
    Xoff,
    /// Still above XON when the last PAUSE is half spent.
    Refresh,
    /// Bytes held fell to XON: zero quanta.
    Xon,
}

/// PAUSE frames a switch sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PauseCounts {
    pub xoff: u64,
    pub refresh: u64,
    pub xon: u64,
}

impl PauseCounts {
    pub fn total(&self) -> u64 {
        self.xoff + self.refresh + self.xon
    }
}

#[derive(Debug, Default)]
struct Egress {
    queues: [VecDeque<Packet>; PRIORITIES],
    /// Bytes queued per priority (what RED looks at) and in all.
    queued: [u64; PRIORITIES],
    bytes: u64,
}

#[derive(Debug)]
pub struct Switch {
    pub ports: Vec<Port>,
    egress: Vec<Egress>,
    /// Bytes held per ingress port and priority (PFC's books).
    ingress: Vec<[u64; PRIORITIES]>,
    /// Whether the sender on each ingress port and priority is paused by us.
    pub xoff: Vec<[bool; PRIORITIES]>,
    /// Counts the XOFF episodes of each ingress port and priority, so that
    /// only the current episode's refresh timer re-sends PAUSE.
    pub xoff_episode: Vec<[u32; PRIORITIES]>,
    /// `routes[host]`: the ports on a shortest path to `host`.
    routes: Vec<Vec<u16>>,
    salt: u64,
    config: SwitchConfig,
    used: u64,
    pub drops: u64,
    pub marks: u64,
    /// CNPs that came through (each switch on a CNP's path counts it).
    pub cnps: u64,
    /// PAUSE frames sent, by kind.
    pub sent: PauseCounts,
}

impl Switch {
    pub fn new(ports: Vec<Port>, routes: Vec<Vec<u16>>, salt: u64, config: SwitchConfig) -> Self {
        let n = ports.len();
        Self {
            ports,
            egress: (0..n).map(|_| Egress::default()).collect(),
            ingress: vec![[0; PRIORITIES]; n],
            xoff: vec![[false; PRIORITIES]; n],
            xoff_episode: vec![[0; PRIORITIES]; n],
            routes,
            salt,
            config,
            used: 0,
            drops: 0,
            marks: 0,
            cnps: 0,
            sent: PauseCounts::default(),
        }
    }

    /// Bytes queued at egress port `port`.
    pub fn queue_bytes(&self, port: usize) -> u64 {
        self.egress[port].bytes
    }

    /// The egress port ECMP picks for `p` among the shortest paths.
    pub fn route(&self, p: &Packet) -> u16 {
        let hops = &self.routes[p.dst as usize];
        let key = (u64::from(p.src) << 32 | u64::from(p.dst)) ^ u64::from(p.udp_src_port) << 48;
        hops[(mix(key ^ self.salt) % hops.len() as u64) as usize]
    }

    /// Takes packet `p` in on `in_port`.
    pub fn arrive(&mut self, in_port: u16, mut p: Packet, rng: &mut ChaCha8Rng) -> Arrival {
        let len = p.wire_len();
        if self.used + len > self.config.buffer_bytes {
            self.drops += 1;
            return Arrival::Dropped;
        }
        self.cnps += u64::from(p.is_cnp());
        let egress = self.route(&p);
        let e = &mut self.egress[usize::from(egress)];
        let prio = usize::from(p.prio);
        if let Some(red) = self.config.red
            && !red.at_dequeue
        {
            self.marks += u64::from(mark(&red, &mut p, e.queued[prio], rng));
        }
        p.in_port = in_port;
        e.bytes += len;
        e.queued[prio] += len;
        e.queues[prio].push_back(p);
        self.used += len;
        let held = &mut self.ingress[usize::from(in_port)][prio];
        *held += len;
        let xoff = &mut self.xoff[usize::from(in_port)][prio];
        let free = self.config.buffer_bytes.saturating_sub(self.used);
        let pause = match self.config.pfc {
            Some(pfc) if !*xoff && pfc.pauses(*held, free) => {
                *xoff = true;
                let episode = &mut self.xoff_episode[usize::from(in_port)][prio];
                *episode = episode.wrapping_add(1);
                true
            }
            _ => false,
        };
        Arrival::Queued { egress, pause }
    }

    /// The next packet egress `port` may send now (highest priority not
    /// paused), and the (ingress port, priority) whose sender may resume
    /// because of it (its bytes fell to XON).
    pub fn next(
        &mut self,
        port: usize,
        rng: &mut ChaCha8Rng,
    ) -> Option<(Packet, Option<(u16, u8)>)> {
        let paused = |prio: usize| self.ports[port].paused(prio as u8);
        let e = &mut self.egress[port];
        let prio = (0..PRIORITIES)
            .rev()
            .find(|&q| !e.queues[q].is_empty() && !paused(q))?;
        let mut p = e.queues[prio].pop_front()?;
        let len = p.wire_len();
        e.bytes -= len;
        e.queued[prio] -= len;
        if let Some(red) = self.config.red
            && red.at_dequeue
        {
            self.marks += u64::from(mark(&red, &mut p, e.queued[prio], rng));
        }
        self.used -= len;
        let held = &mut self.ingress[usize::from(p.in_port)][prio];
        *held -= len;
        let xoff = &mut self.xoff[usize::from(p.in_port)][prio];
        let free = self.config.buffer_bytes.saturating_sub(self.used);
        let resume = match self.config.pfc {
            Some(pfc) if *xoff && pfc.resumes(*held, free) => {
                *xoff = false;
                Some((p.in_port, prio as u8))
            }
            _ => None,
        };
        Some((p, resume))
    }
}

/// Marks `p` CE if it is ECN-capable and RED says so; true if it did.
fn mark(red: &Red, p: &mut Packet, queued: u64, rng: &mut ChaCha8Rng) -> bool {
    let marked = matches!(p.ecn, Ecn::Ect0 | Ecn::Ect1) && red_marks(red, queued, rng);
    if marked {
        p.ecn = Ecn::Ce;
    }
    marked
}

/// RED's decision for a packet at a queue of `queued` bytes.
pub(crate) fn red_marks(red: &Red, queued: u64, rng: &mut ChaCha8Rng) -> bool {
    if queued <= red.kmin_bytes {
        return false;
    }
    if queued >= red.kmax_bytes {
        return true;
    }
    let p = red.pmax * (queued - red.kmin_bytes) as f64 / (red.kmax_bytes - red.kmin_bytes) as f64;
    unit(rng) < p
}

/// A uniform number in [0, 1).
pub(crate) fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// SplitMix64's finalizer: a cheap hash that spreads every input bit.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
