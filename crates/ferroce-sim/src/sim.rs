//! The discrete-event loop: one heap of events ordered by (time, sequence
//! number), so that events at the same picosecond run in the order they
//! were scheduled and a run depends on nothing but the scenario and its
//! seed. Switches and hosts decide; this module schedules what follows.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use crate::host::{self, Flow, Host};
use crate::port::{PAUSE_FRAME_BYTES, Packet, Port, Ps};
use crate::scenario::{PRIORITIES, Scenario, ScenarioError};
use crate::series::Series;
use crate::switch::{Arrival, PauseKind, Switch, mix};
use crate::topology::{NodeId, Wiring};

/// Salts that give RED's coin and the workload's sizes their own random
/// streams from the one seed, so that marking does not shift the sizes.
const RED_STREAM: u64 = 1 << 62;
const WORKLOAD_STREAM: u64 = 1 << 63;

/// Values the time series may hold (8 bytes each): 2.4 GB.
const MAX_SERIES_VALUES: f64 = 3e8;

enum Event {
    /// A packet's last bit reached `port` of `to`.
    Arrive {
        to: NodeId,
        port: u16,
        pkt: Packet,
    },
    /// `port` of `node` finished serializing.
    TxDone {
        node: NodeId,
        port: u16,
    },
    /// A PFC frame reached `port` of `to`.
    Pause {
        to: NodeId,
        port: u16,
        prio: u8,
        quanta: u16,
    },
    /// The pause of `prio` at `port` of `node` may run out now.
    PauseEnd {
        node: NodeId,
        port: u16,
        prio: u8,
    },
    /// A switch still above XOFF re-sends its PAUSE before it runs out.
    PfcRefresh {
        switch: u32,
        port: u16,
        prio: u8,
        episode: u32,
    },
    /// A host's engine timer.
    HostWake {
        host: u32,
    },
    FlowStart {
        flow: usize,
    },
    FlowStop {
        flow: usize,
    },
    Sample,
}

struct Scheduled {
    at: Ps,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed: the heap's top is the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Events run, for the speed figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    pub events: u64,
    /// Packet arrivals and transmit completions (the per-hop work).
    pub packet_events: u64,
    /// Packets dropped at hosts for an address no host has.
    pub misrouted: u64,
}

pub struct Sim {
    pub now: Ps,
    pub end: Ps,
    seq: u64,
    heap: BinaryHeap<Scheduled>,
    pub hosts: Vec<Host>,
    pub switches: Vec<Switch>,
    pub flows: Vec<Flow>,
    pub scenario: Scenario,
    /// RED's coin.
    red_rng: ChaCha8Rng,
    /// Message sizes.
    work_rng: ChaCha8Rng,
    pub counts: Counts,
    pub series: Series,
    sample_every: Ps,
}

/// Microseconds to picoseconds (negative and NaN to 0, as `as` saturates).
fn us(t: f64) -> Ps {
    (t * 1e6).round() as Ps
}

/// The `idx`-th port of `node`, facing its peer's port on the same link.
pub(crate) fn port_of(w: &Wiring, node: NodeId, idx: usize) -> Port {
    let (link, peer) = w.ports[w.index(node)][idx];
    let l = w.links[link];
    let back = w.ports[w.index(peer)]
        .iter()
        .position(|&(k, _)| k == link)
        .unwrap_or(0);
    Port::new(peer, back as u16, l.rate_gbps, l.delay_ns)
}

impl Sim {
    pub fn new(scenario: Scenario) -> Result<Self, ScenarioError> {
        scenario.check()?;
        let w = Wiring::build(&scenario);
        // Checked before the hosts' memory is taken.
        let series = Series::new(&w, scenario.flows().len());
        let values = scenario.duration_us / scenario.sample_us * series.width() as f64;
        if values > MAX_SERIES_VALUES {
            return Err(ScenarioError(format!(
                "the time series would hold {values:.0} values (samples x series), above {MAX_SERIES_VALUES:.0}: raise sample_us"
            )));
        }
        let host_ports = (0..w.hosts)
            .map(|h| port_of(&w, NodeId::Host(h as u32), 0))
            .collect();
        let (hosts, flows) = host::build(&scenario, host_ports)
            .map_err(|e| ScenarioError(format!("the engine refused the scenario's QPs: {e:?}")))?;
        let switches = (0..w.switches)
            .map(|s| {
                let id = NodeId::Switch(s as u32);
                let ports = (0..w.ports[w.index(id)].len())
                    .map(|i| port_of(&w, id, i))
                    .collect();
                // Each switch its own ECMP salt, so tiers do not pick alike.
                let salt = mix(scenario.seed ^ s as u64);
                Switch::new(ports, w.routes[s].clone(), salt, scenario.switch)
            })
            .collect();
        let mut sim = Self {
            now: 0,
            end: us(scenario.duration_us),
            seq: 0,
            heap: BinaryHeap::new(),
            hosts,
            switches,
            flows,
            red_rng: ChaCha8Rng::seed_from_u64(mix(scenario.seed ^ RED_STREAM)),
            work_rng: ChaCha8Rng::seed_from_u64(mix(scenario.seed ^ WORKLOAD_STREAM)),
            sample_every: us(scenario.sample_us).max(1),
            scenario,
            counts: Counts::default(),
            series,
        };
        sim.schedule_workload();
        sim.schedule(sim.sample_every, Event::Sample);
        Ok(sim)
    }

    /// Every flow's start and stop.
    fn schedule_workload(&mut self) {
        let times: Vec<(Ps, Option<Ps>)> = self
            .flows
            .iter()
            .map(|f| (us(f.cfg.start_us), f.cfg.stop_us.map(us)))
            .collect();
        for (flow, (start, stop)) in times.into_iter().enumerate() {
            self.schedule(start, Event::FlowStart { flow });
            if let Some(stop) = stop {
                self.schedule(stop, Event::FlowStop { flow });
            }
        }
    }

    fn schedule(&mut self, at: Ps, event: Event) {
        self.seq += 1;
        self.heap.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    /// Runs every event up to the scenario's end.
    pub fn run(&mut self) {
        while let Some(top) = self.heap.peek() {
            if top.at > self.end {
                break;
            }
            let Some(Scheduled { at, event, .. }) = self.heap.pop() else {
                break;
            };
            self.now = at;
            self.counts.events += 1;
            self.dispatch(event);
        }
        self.now = self.end;
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Arrive { to, port, pkt } => {
                self.counts.packet_events += 1;
                match to {
                    NodeId::Host(h) => self.host_receive(h as usize, pkt),
                    NodeId::Switch(s) => self.switch_receive(s as usize, port, pkt),
                }
            }
            Event::TxDone { node, port } => {
                self.counts.packet_events += 1;
                self.port_mut(node, port).busy = false;
                self.try_send(node, port);
            }
            Event::Pause {
                to,
                port,
                prio,
                quanta,
            } => {
                let now = self.now;
                match self.port_mut(to, port).on_pause(now, prio, quanta) {
                    Some(until) => self.schedule(
                        until,
                        Event::PauseEnd {
                            node: to,
                            port,
                            prio,
                        },
                    ),
                    None => self.try_send(to, port),
                }
            }
            Event::PauseEnd { node, port, prio } => {
                let now = self.now;
                if self.port_mut(node, port).pause_ends(now, prio) {
                    self.try_send(node, port);
                }
            }
            Event::PfcRefresh {
                switch,
                port,
                prio,
                episode,
            } => {
                let sw = &self.switches[switch as usize];
                let (p, q) = (usize::from(port), usize::from(prio));
                if sw.xoff[p][q] && sw.xoff_episode[p][q] == episode {
                    self.send_pause(switch as usize, port, prio, PauseKind::Refresh);
                }
            }
            Event::HostWake { host } => self.host_wake(host as usize),
            Event::FlowStart { flow } => {
                let f = &mut self.flows[flow];
                f.active = true;
                let src = f.cfg.src;
                f.refill(&mut self.hosts[src].ep, self.now, &mut self.work_rng);
                self.try_send(NodeId::Host(src as u32), 0);
            }
            Event::FlowStop { flow } => self.flows[flow].active = false,
            Event::Sample => {
                self.series
                    .sample(self.now, &mut self.hosts, &self.switches, &self.flows);
                let next = self.now + self.sample_every;
                self.schedule(next, Event::Sample);
            }
        }
    }

    fn port_mut(&mut self, node: NodeId, port: u16) -> &mut Port {
        match node {
            NodeId::Host(h) => &mut self.hosts[h as usize].port,
            NodeId::Switch(s) => &mut self.switches[s as usize].ports[usize::from(port)],
        }
    }

    /// Puts `pkt` on the wire at `port` of `node`, which is free.
    fn transmit(&mut self, node: NodeId, port: u16, pkt: Packet) {
        let now = self.now;
        let p = self.port_mut(node, port);
        let done = now + p.serialize(pkt.wire_len());
        let arrive = done + p.delay;
        let (to, to_port) = (p.peer, p.peer_port);
        p.busy = true;
        p.tx_packets += 1;
        self.schedule(done, Event::TxDone { node, port });
        self.schedule(
            arrive,
            Event::Arrive {
                to,
                port: to_port,
                pkt,
            },
        );
    }

    /// Starts the next packet at a free port, if it has one it may send.
    fn try_send(&mut self, node: NodeId, port: u16) {
        match node {
            NodeId::Host(h) => self.host_send(h as usize),
            NodeId::Switch(s) => {
                let sw = &mut self.switches[s as usize];
                if sw.ports[usize::from(port)].busy {
                    return;
                }
                let Some((pkt, resume)) = sw.next(usize::from(port), &mut self.red_rng) else {
                    return;
                };
                if let Some((in_port, prio)) = resume {
                    self.send_pause(s as usize, in_port, prio, PauseKind::Xon);
                }
                self.transmit(node, port, pkt);
            }
        }
    }

    /// A PFC frame from switch `s` out of `port` for `prio`: XOFF (the
    /// configured pause time, refreshed at half of it while still above
    /// XON) or XON (zero quanta). PFC frames go ahead of queued data, at
    /// the propagation delay plus their own serialization.
    fn send_pause(&mut self, s: usize, port: u16, prio: u8, kind: PauseKind) {
        let Some(pfc) = self.scenario.switch.pfc else {
            return;
        };
        let sw = &mut self.switches[s];
        let xoff = kind != PauseKind::Xon;
        let count = match kind {
            PauseKind::Xoff => &mut sw.sent.xoff,
            PauseKind::Refresh => &mut sw.sent.refresh,
            PauseKind::Xon => &mut sw.sent.xon,
        };
        *count += 1;
        let p = &sw.ports[usize::from(port)];
        let at = self.now + p.serialize(PAUSE_FRAME_BYTES) + p.delay;
        let (to, to_port) = (p.peer, p.peer_port);
        let quanta = if xoff { pfc.pause_quanta } else { 0 };
        let refresh = self.now + (p.pause_length(pfc.pause_quanta) / 2).max(1);
        let episode = sw.xoff_episode[usize::from(port)][usize::from(prio)];
        self.schedule(
            at,
            Event::Pause {
                to,
                port: to_port,
                prio,
                quanta,
            },
        );
        if xoff {
            self.schedule(
                refresh,
                Event::PfcRefresh {
                    switch: s as u32,
                    port,
                    prio,
                    episode,
                },
            );
        }
    }

    fn switch_receive(&mut self, s: usize, in_port: u16, pkt: Packet) {
        let prio = pkt.prio;
        match self.switches[s].arrive(in_port, pkt, &mut self.red_rng) {
            Arrival::Dropped => {}
            Arrival::Queued { egress, pause } => {
                if pause {
                    self.send_pause(s, in_port, prio, PauseKind::Xoff);
                }
                self.try_send(NodeId::Switch(s as u32), egress);
            }
        }
    }

    /// The NIC pulls the engine's next packet if its port is free, then
    /// files the engine's next timer (any input may have moved it).
    fn host_send(&mut self, h: usize) {
        self.host_pull(h);
        self.rearm(h);
    }

    /// The NIC's next packet: one held for a priority that has resumed
    /// (highest priority first), else the engine's next. A packet whose
    /// priority is paused is held, and the NIC pulls again; while every
    /// priority the host's flows use is paused, it pulls nothing, so the
    /// engine's timers see the pause, except for CNPs, which travel on
    /// their own priority: after a CE-marked arrival it pulls until the
    /// engine's head is not a CNP (the engine hands CNPs out first), so
    /// that a CNP never waits behind the data it throttles and at most one
    /// data packet is held per such look.
    fn host_pull(&mut self, h: usize) {
        let hosts = self.hosts.len();
        let host = &mut self.hosts[h];
        if host.port.busy {
            return;
        }
        let port = &host.port;
        if let Some(q) = host.held.iter_mut().rev().enumerate().find_map(|(i, q)| {
            let prio = (PRIORITIES - 1 - i) as u8;
            (!q.is_empty() && !port.paused(prio)).then_some(q)
        }) && let Some(pkt) = q.pop_front()
        {
            self.transmit(NodeId::Host(h as u32), 0, pkt);
            return;
        }
        let pkt = loop {
            let data_paused = (0..PRIORITIES as u8)
                .filter(|p| host.priorities & (1 << p) != 0)
                .all(|p| host.port.paused(p));
            let cnp_may_go =
                host.cnp_pending && host.cnp_priority.is_some_and(|p| !host.port.paused(p));
            if data_paused && !cnp_may_go {
                return;
            }
            let Some(t) = host.ep.poll_transmit(host::engine_time(self.now)) else {
                return;
            };
            let Some(dst) = host::host_of(t.path.remote, hosts) else {
                // Not a host of this fabric: gone, as a NIC's unroutable packet.
                self.counts.misrouted += 1;
                continue;
            };
            let pkt = Packet {
                src: h as u32,
                dst: dst as u32,
                udp_src_port: t.path.udp_src_port,
                ecn: t.ecn,
                prio: host::priority_of(t.tos()),
                in_port: 0,
                data: t.data,
            };
            if data_paused && !pkt.is_cnp() {
                // No CNP at the engine's head: none waits.
                host.cnp_pending = false;
            }
            if !host.port.paused(pkt.prio) {
                break pkt;
            }
            host.held[usize::from(pkt.prio)].push_back(pkt);
        };
        self.transmit(NodeId::Host(h as u32), 0, pkt);
    }

    fn host_receive(&mut self, h: usize, pkt: Packet) {
        let now = self.now;
        self.series
            .count_arrival(h, &pkt, &self.hosts[h], &mut self.flows);
        if pkt.ecn == ferroce_core::Ecn::Ce {
            self.hosts[h].cnp_pending = true;
        }
        let from = host::host_addr(pkt.src as usize);
        host::deliver(&mut self.hosts[h].ep, now, from, pkt.ecn, &pkt.data);
        // The buffer goes back to the engine that built it, as a NIC
        // driver hands back a sent packet's buffer.
        self.hosts[pkt.src as usize].ep.recycle(pkt.data);
        let host = &mut self.hosts[h];
        host.completions(&mut self.flows, now, &mut self.work_rng);
        self.host_send(h);
    }

    fn host_wake(&mut self, h: usize) {
        let now = self.now;
        let host = &mut self.hosts[h];
        if host.wake != Some(now) {
            return; // superseded
        }
        host.wake = None;
        host.ep.handle_timeout(host::engine_time(now));
        host.completions(&mut self.flows, now, &mut self.work_rng);
        self.host_send(h);
    }

    /// Files the host's next engine timer. A wake already filed for an
    /// earlier time stays (it finds nothing due, and files the next):
    /// filing anew on every ACK that moves the timer later would fill the
    /// heap with stale wakes.
    fn rearm(&mut self, h: usize) {
        let now = self.now;
        let host = &mut self.hosts[h];
        let Some(t) = host.ep.poll_timeout() else {
            return;
        };
        let at = (t.as_nanos() * 1000).max(now);
        if host.wake.is_some_and(|w| w <= at) {
            return;
        }
        host.wake = Some(at);
        self.schedule(at, Event::HostWake { host: h as u32 });
    }
}
