//! The time series a run records at every sample interval: each flow's
//! rate (its requests' bytes on the wire, framing included, as they reach
//! the receiver, so that a full link reads as its line rate), each switch
//! egress queue's depth, each port's cumulative PFC pause time, and each
//! flow's CE marks and CNPs so far, and each flow's DCQCN state at its
//! sender (current rate, target rate, alpha) as the engine reports it.

use ferroce_wire::{Opcode, TransportPacket};

use crate::host::{Flow, Host, engine_time};
use crate::port::{Packet, Ps};
use crate::switch::Switch;
use crate::topology::{NodeId, Wiring};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub times_us: Vec<f64>,
    /// `[flow][sample]`, Gb/s over the interval before the sample.
    pub flow_gbps: Vec<Vec<f64>>,
    pub flow_ce: Vec<Vec<u64>>,
    pub flow_cnps: Vec<Vec<u64>>,
    /// CNPs the flow's receiver sent so far (its notification point).
    pub flow_cnps_sent: Vec<Vec<u64>>,
    /// DCQCN at each flow's sender: RC and RT in Gb/s, alpha (0 .. 1).
    pub dcqcn_rate_gbps: Vec<Vec<f64>>,
    pub dcqcn_target_gbps: Vec<Vec<f64>>,
    pub dcqcn_alpha: Vec<Vec<f64>>,
    /// Switch egress ports, as `sw<switch>><peer>`, and their bytes queued.
    pub queue_labels: Vec<String>,
    pub queue_bytes: Vec<Vec<u64>>,
    /// Every port (hosts' and switches'), and its time paused so far, us.
    pub pause_labels: Vec<String>,
    pub pause_us: Vec<Vec<f64>>,
    last_rx: Vec<u64>,
    last_at: Ps,
}

fn node_label(n: NodeId) -> String {
    match n {
        NodeId::Host(h) => format!("h{h}"),
        NodeId::Switch(s) => format!("sw{s}"),
    }
}

impl Series {
    pub fn new(w: &Wiring, flows: usize) -> Self {
        let mut queue_labels = Vec::new();
        let mut pause_labels: Vec<String> = (0..w.hosts).map(|h| format!("h{h}")).collect();
        for sw in 0..w.switches {
            let me = NodeId::Switch(sw as u32);
            for &(_, peer) in &w.ports[w.index(me)] {
                let label = format!("sw{sw}>{}", node_label(peer));
                queue_labels.push(label.clone());
                pause_labels.push(label);
            }
        }
        Self {
            flow_gbps: vec![Vec::new(); flows],
            flow_ce: vec![Vec::new(); flows],
            flow_cnps: vec![Vec::new(); flows],
            flow_cnps_sent: vec![Vec::new(); flows],
            dcqcn_rate_gbps: vec![Vec::new(); flows],
            dcqcn_target_gbps: vec![Vec::new(); flows],
            dcqcn_alpha: vec![Vec::new(); flows],
            queue_bytes: vec![Vec::new(); queue_labels.len()],
            pause_us: vec![Vec::new(); pause_labels.len()],
            queue_labels,
            pause_labels,
            last_rx: vec![0; flows],
            ..Self::default()
        }
    }

    /// Values one sample adds.
    pub fn width(&self) -> usize {
        7 * self.flow_gbps.len() + self.queue_bytes.len() + self.pause_us.len()
    }

    /// Books a packet reaching host `h`: its flow's rate, CE and CNPs.
    pub fn count_arrival(&mut self, h: usize, p: &Packet, host: &Host, flows: &mut [Flow]) {
        let Ok(t) = TransportPacket::new_checked(&p.data[..]) else {
            return;
        };
        let bth = t.bth();
        let Some(&f) = host.qp_flow.get(&bth.dest_qp()) else {
            return;
        };
        let flow = &mut flows[f];
        if p.ecn == ferroce_core::Ecn::Ce {
            flow.ce += 1;
        }
        if bth.opcode() == Opcode::CNP {
            flow.cnps += 1;
        } else if h == flow.cfg.dst && !t.info().response {
            flow.wire_rx += p.wire_len();
        }
    }

    pub fn sample(&mut self, now: Ps, hosts: &mut [Host], switches: &[Switch], flows: &[Flow]) {
        let interval = now.saturating_sub(self.last_at).max(1);
        self.last_at = now;
        self.times_us.push(now as f64 / 1e6);
        for (i, f) in flows.iter().enumerate() {
            // bits per picosecond are Tb/s.
            let gbps = (f.wire_rx - self.last_rx[i]) as f64 * 8.0 / interval as f64 * 1000.0;
            self.last_rx[i] = f.wire_rx;
            self.flow_gbps[i].push(gbps);
            self.flow_ce[i].push(f.ce);
            self.flow_cnps[i].push(f.cnps);
            let ep = &mut hosts[f.cfg.src].ep;
            // A QP gone (it cannot be: flows never destroy theirs) reads 0.
            let cc = ep.qp_congestion(f.src_qpn, engine_time(now)).ok();
            let (rate, target, alpha) =
                cc.map_or((0.0, 0.0, 0.0), |c| (c.rate_mbps, c.target_mbps, c.alpha));
            self.dcqcn_rate_gbps[i].push(rate / 1000.0);
            self.dcqcn_target_gbps[i].push(target / 1000.0);
            self.dcqcn_alpha[i].push(alpha);
            let np = hosts[f.cfg.dst]
                .ep
                .qp_congestion(f.dst_qpn, engine_time(now));
            self.flow_cnps_sent[i].push(np.map_or(0, |c| c.cnps_sent));
        }
        let queues = switches
            .iter()
            .flat_map(|s| (0..s.ports.len()).map(|p| s.queue_bytes(p)));
        for (q, bytes) in self.queue_bytes.iter_mut().zip(queues) {
            q.push(bytes);
        }
        let ports = hosts
            .iter()
            .map(|h| &h.port)
            .chain(switches.iter().flat_map(|s| s.ports.iter()));
        for (q, port) in self.pause_us.iter_mut().zip(ports) {
            q.push(port.paused_time(now) as f64 / 1e6);
        }
    }
}
