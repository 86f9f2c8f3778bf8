//! The wiring a scenario's topology makes: which node each link joins, at
//! what rate and delay, and for every switch the equal-cost next hops
//! towards each host (shortest paths by hop count, found breadth first).

use std::collections::VecDeque;

use crate::scenario::{Scenario, Topology};

/// A host or a switch, by index among its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeId {
    Host(u32),
    Switch(u32),
}

/// A full-duplex link between two nodes.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    pub a: NodeId,
    pub b: NodeId,
    pub rate_gbps: f64,
    pub delay_ns: u64,
}

/// The fabric's graph and routes.
#[derive(Debug, Clone)]
pub struct Wiring {
    pub hosts: usize,
    pub switches: usize,
    pub links: Vec<Link>,
    /// Per node (hosts first, then switches), its (link, peer) in port order.
    pub ports: Vec<Vec<(usize, NodeId)>>,
    /// `routes[switch][host]`: the ports of `switch` on a shortest path to `host`.
    pub routes: Vec<Vec<Vec<u16>>>,
}

impl Wiring {
    pub fn build(s: &Scenario) -> Self {
        let rate = s.link.rate_gbps;
        let delay = s.link.delay_ns;
        let link = |a, b, rate_gbps| Link {
            a,
            b,
            rate_gbps,
            delay_ns: delay,
        };
        let host = |h: usize| NodeId::Host(h as u32);
        let switch = |i: usize| NodeId::Switch(i as u32);
        let (hosts, switches, links) = match s.topology {
            Topology::Incast { senders } => {
                let links = (0..=senders)
                    .map(|h| link(host(h), switch(0), rate))
                    .collect();
                (senders + 1, 1, links)
            }
            Topology::Dumbbell {
                pairs,
                bottleneck_gbps,
            } => {
                let mut links: Vec<Link> = (0..2 * pairs)
                    .map(|h| link(host(h), switch(h / pairs), rate))
                    .collect();
                links.push(link(switch(0), switch(1), bottleneck_gbps.unwrap_or(rate)));
                (2 * pairs, 2, links)
            }
            Topology::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                uplink_gbps,
            } => {
                let n = leaves * hosts_per_leaf;
                let mut links: Vec<Link> = (0..n)
                    .map(|h| link(host(h), switch(h / hosts_per_leaf), rate))
                    .collect();
                for l in 0..leaves {
                    for sp in 0..spines {
                        links.push(link(
                            switch(l),
                            switch(leaves + sp),
                            uplink_gbps.unwrap_or(rate),
                        ));
                    }
                }
                (n, leaves + spines, links)
            }
        };
        let mut w = Self {
            hosts,
            switches,
            links,
            ports: vec![Vec::new(); hosts + switches],
            routes: Vec::new(),
        };
        for (i, l) in w.links.iter().enumerate() {
            let (a, b) = (w.index(l.a), w.index(l.b));
            w.ports[a].push((i, l.b));
            w.ports[b].push((i, l.a));
        }
        let dists: Vec<Vec<u32>> = (0..hosts).map(|h| w.distances(h)).collect();
        w.routes = (0..switches)
            .map(|sw| dists.iter().map(|d| w.next_hops(sw, d)).collect())
            .collect();
        w
    }

    /// A node's place in `ports`.
    pub fn index(&self, n: NodeId) -> usize {
        match n {
            NodeId::Host(h) => h as usize,
            NodeId::Switch(s) => self.hosts + s as usize,
        }
    }

    /// Hops from every node to `host`, breadth first (hosts do not forward).
    fn distances(&self, host: usize) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.ports.len()];
        dist[host] = 0;
        let mut todo = VecDeque::from([host]);
        while let Some(n) = todo.pop_front() {
            if n != host && n < self.hosts {
                continue;
            }
            for &(_, peer) in &self.ports[n] {
                let p = self.index(peer);
                if dist[p] == u32::MAX {
                    dist[p] = dist[n] + 1;
                    todo.push_back(p);
                }
            }
        }
        dist
    }

    /// The ports of `switch` one hop closer by `dist` (one host's distances).
    fn next_hops(&self, switch: usize, dist: &[u32]) -> Vec<u16> {
        let me = self.hosts + switch;
        self.ports[me]
            .iter()
            .enumerate()
            .filter(|(_, (_, peer))| dist[self.index(*peer)].saturating_add(1) == dist[me])
            .map(|(port, _)| port as u16)
            .collect()
    }
}
