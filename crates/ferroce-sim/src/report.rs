//! What a run found: per-flow figures, the fabric's totals, the time
//! series, a summary table and the CSV files. Nothing here depends on the
//! wall clock, so that one seed gives the same bytes every time.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::series::Series;
use crate::sim::{Counts, Sim};
pub use crate::switch::PauseCounts;

/// One flow's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowReport {
    pub src: usize,
    pub dst: usize,
    pub start_us: f64,
    /// Its requests' bytes on the wire (with framing) over its active time.
    pub wire_gbps: f64,
    /// Bytes of completed messages over its active time.
    pub goodput_gbps: f64,
    pub bytes_done: u64,
    pub messages: u64,
    /// Post-to-completion time of its messages, 50th and 99th percentile.
    pub msg_p50_us: f64,
    pub msg_p99_us: f64,
    /// Flow completion time, for flows with a byte count that finished.
    pub fct_us: Option<f64>,
    pub ce: u64,
    /// CNPs that reached its sender.
    pub cnps: u64,
    /// Its sender's DCQCN rate at the last sample, Gb/s.
    pub dcqcn_gbps: f64,
    pub errors: u64,
}

/// A run's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub name: String,
    pub seed: u64,
    pub duration_us: f64,
    pub flows: Vec<FlowReport>,
    /// Jain's fairness index over the flows' wire rates.
    pub jain: f64,
    /// The 99th percentile of the samples of the deepest egress queue.
    pub queue_p99_bytes: u64,
    pub queue_p99_port: String,
    /// Time ports spent paused by PFC, summed over ports.
    pub pause_us: f64,
    pub pause_frames: u64,
    /// The same by kind: XOFF, refresh, XON.
    pub pause_sent: PauseCounts,
    pub drops: u64,
    pub ce_marks: u64,
    /// CNPs the receivers' engines sent, the switches forwarded (each
    /// switch on the path counts one) and the senders' engines took.
    pub cnps_sent: u64,
    pub cnps_fabric: u64,
    pub cnps_received: u64,
    /// Rate cuts DCQCN made, over all senders.
    pub rate_cuts: u64,
    pub retransmits: u64,
    pub events: u64,
    pub packet_events: u64,
    /// Packets each port sent, labelled as the pause series are.
    pub port_packets: Vec<(String, u64)>,
    pub series: Series,
}

/// The `p`-th percentile (0..=100) of `v`, nearest rank; 0 when empty.
pub fn percentile<T: Copy + Ord + Default>(v: &[T], p: f64) -> T {
    let mut s = v.to_vec();
    s.sort_unstable();
    if s.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0 * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// Jain's fairness index: (sum x)^2 / (n sum x^2); 1 when all are equal.
pub fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq == 0.0 {
        1.0
    } else {
        sum * sum / (x.len() as f64 * sq)
    }
}

impl Report {
    pub fn from_sim(sim: &Sim) -> Self {
        let end = sim.end;
        let flows: Vec<FlowReport> = sim
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let start = (f.cfg.start_us * 1e6) as u64;
                let stop = f.cfg.stop_us.map(|s| (s * 1e6) as u64);
                let until = f.finished_at.or(stop).unwrap_or(end).min(end);
                let active_ps = until.saturating_sub(start).max(1) as f64;
                let to_us = |ps: u64| ps as f64 / 1e6;
                FlowReport {
                    src: f.cfg.src,
                    dst: f.cfg.dst,
                    start_us: f.cfg.start_us,
                    wire_gbps: f.wire_rx as f64 * 8.0 / active_ps * 1000.0,
                    goodput_gbps: f.done_bytes as f64 * 8.0 / active_ps * 1000.0,
                    bytes_done: f.done_bytes,
                    messages: f.messages,
                    msg_p50_us: to_us(percentile(&f.latencies, 50.0)),
                    msg_p99_us: to_us(percentile(&f.latencies, 99.0)),
                    fct_us: f.finished_at.map(|t| to_us(t.saturating_sub(start))),
                    ce: f.ce,
                    cnps: f.cnps,
                    dcqcn_gbps: sim.series.dcqcn_rate_gbps[i].last().copied().unwrap_or(0.0),
                    errors: f.errors,
                }
            })
            .collect();
        let rates: Vec<f64> = flows.iter().map(|f| f.wire_gbps).collect();
        let s = &sim.series;
        let (queue_p99_bytes, queue_p99_port) = s
            .queue_bytes
            .iter()
            .zip(&s.queue_labels)
            .map(|(q, l)| (percentile(q, 99.0), l.clone()))
            .max_by_key(|(p, _)| *p)
            .unwrap_or_default();
        let ports = sim
            .hosts
            .iter()
            .map(|h| &h.port)
            .chain(sim.switches.iter().flat_map(|s| s.ports.iter()));
        let pause_ps: u64 = ports.clone().map(|p| p.paused_time(end)).sum();
        let port_packets = s
            .pause_labels
            .iter()
            .cloned()
            .zip(ports.map(|p| p.tx_packets))
            .collect();
        let Counts {
            events,
            packet_events,
            ..
        } = sim.counts;
        Self {
            name: sim.scenario.name.clone(),
            seed: sim.scenario.seed,
            duration_us: sim.scenario.duration_us,
            jain: jain(&rates),
            flows,
            queue_p99_bytes,
            queue_p99_port,
            pause_us: pause_ps as f64 / 1e6,
            pause_frames: sim.switches.iter().map(|s| s.sent.total()).sum(),
            pause_sent: sim
                .switches
                .iter()
                .fold(PauseCounts::default(), |a, s| PauseCounts {
                    xoff: a.xoff + s.sent.xoff,
                    refresh: a.refresh + s.sent.refresh,
                    xon: a.xon + s.sent.xon,
                }),
            drops: sim.switches.iter().map(|s| s.drops).sum(),
            ce_marks: sim.switches.iter().map(|s| s.marks).sum(),
            cnps_sent: sim.hosts.iter().map(|h| h.ep.stats().cnps_sent).sum(),
            cnps_fabric: sim.switches.iter().map(|s| s.cnps).sum(),
            cnps_received: sim.hosts.iter().map(|h| h.ep.stats().cnps_received).sum(),
            rate_cuts: sim.hosts.iter().map(|h| h.ep.stats().rate_cuts).sum(),
            retransmits: sim.hosts.iter().map(|h| h.ep.stats().retransmits).sum(),
            events,
            packet_events,
            port_packets,
            series: sim.series.clone(),
        }
    }

    /// The summary table, as text.
    pub fn summary(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario {:?}, seed {}, {} us simulated",
            self.name, self.seed, self.duration_us
        );
        let _ = writeln!(
            o,
            "{:>4} {:>4} {:>4} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>10} {:>7} {:>5} {:>9} {:>4}",
            "flow",
            "src",
            "dst",
            "start_us",
            "wire_Gbps",
            "good_Gbps",
            "msgs",
            "msg_p50us",
            "msg_p99us",
            "fct_us",
            "ce",
            "cnps",
            "dcqcnGbps",
            "err"
        );
        for (i, f) in self.flows.iter().enumerate() {
            let fct = f.fct_us.map_or("-".into(), |t| format!("{t:.1}"));
            let _ = writeln!(
                o,
                "{i:>4} {:>4} {:>4} {:>9.1} {:>9.2} {:>9.2} {:>8} {:>9.1} {:>9.1} {fct:>10} {:>7} {:>5} {:>9.2} {:>4}",
                f.src,
                f.dst,
                f.start_us,
                f.wire_gbps,
                f.goodput_gbps,
                f.messages,
                f.msg_p50_us,
                f.msg_p99_us,
                f.ce,
                f.cnps,
                f.dcqcn_gbps,
                f.errors
            );
        }
        let total: f64 = self.flows.iter().map(|f| f.wire_gbps).sum();
        let _ = writeln!(o, "total wire rate        {total:.2} Gb/s");
        let _ = writeln!(o, "Jain's fairness index  {:.4}", self.jain);
        let _ = writeln!(
            o,
            "p99 queue              {} bytes at {}",
            self.queue_p99_bytes, self.queue_p99_port
        );
        let _ = writeln!(
            o,
            "PFC pause              {:.1} us over all ports, {} PAUSE frames sent ({} XOFF, {} refresh, {} XON)",
            self.pause_us,
            self.pause_frames,
            self.pause_sent.xoff,
            self.pause_sent.refresh,
            self.pause_sent.xon
        );
        let _ = writeln!(o, "drops                  {} (buffer full)", self.drops);
        let _ = writeln!(o, "CE marks               {}", self.ce_marks);
        let _ = writeln!(
            o,
            "CNPs                   {} sent by receivers, {} switch crossings, {} taken by senders; {} DCQCN rate cuts",
            self.cnps_sent, self.cnps_fabric, self.cnps_received, self.rate_cuts
        );
        let _ = writeln!(o, "retransmitted packets  {}", self.retransmits);
        let _ = writeln!(
            o,
            "events                 {} ({} packet events)",
            self.events, self.packet_events
        );
        o
    }

    /// The per-flow figures of the summary, one row per flow.
    pub fn flows_csv(&self) -> String {
        let mut o = String::from(
            "flow,src,dst,start_us,wire_gbps,goodput_gbps,bytes_done,messages,msg_p50_us,msg_p99_us,fct_us,ce,cnps,dcqcn_gbps,errors\n",
        );
        for (i, f) in self.flows.iter().enumerate() {
            let fct = f.fct_us.map_or(String::new(), |t| format!("{t:.3}"));
            let _ = writeln!(
                o,
                "{i},{},{},{},{:.3},{:.3},{},{},{:.3},{:.3},{fct},{},{},{:.3},{}",
                f.src,
                f.dst,
                f.start_us,
                f.wire_gbps,
                f.goodput_gbps,
                f.bytes_done,
                f.messages,
                f.msg_p50_us,
                f.msg_p99_us,
                f.ce,
                f.cnps,
                f.dcqcn_gbps,
                f.errors
            );
        }
        o
    }

    /// Writes summary.txt, flows.csv and the time series as CSV: rates.csv,
    /// queues.csv, pause.csv, cnp.csv, dcqcn.csv (long format: one row per sample and
    /// series; queues and ports that never queued or paused are left out).
    pub fn write_csv(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("summary.txt"), self.summary())?;
        std::fs::write(dir.join("flows.csv"), self.flows_csv())?;
        let s = &self.series;
        let mut rates = String::from("time_us,flow,gbps\n");
        let mut cnp = String::from("time_us,flow,ce,cnps_sent,cnps\n");
        let mut dcqcn = String::from("time_us,flow,rate_gbps,target_gbps,alpha\n");
        for (i, t) in s.times_us.iter().enumerate() {
            for f in 0..s.flow_gbps.len() {
                let _ = writeln!(rates, "{t},{f},{:.3}", s.flow_gbps[f][i]);
                let _ = writeln!(
                    cnp,
                    "{t},{f},{},{},{}",
                    s.flow_ce[f][i], s.flow_cnps_sent[f][i], s.flow_cnps[f][i]
                );
                let _ = writeln!(
                    dcqcn,
                    "{t},{f},{:.3},{:.3},{:.4}",
                    s.dcqcn_rate_gbps[f][i], s.dcqcn_target_gbps[f][i], s.dcqcn_alpha[f][i]
                );
            }
        }
        let mut queues = String::from("time_us,port,bytes\n");
        let busy_q: Vec<usize> = (0..s.queue_bytes.len())
            .filter(|&q| s.queue_bytes[q].iter().any(|&b| b > 0))
            .collect();
        let mut pause = String::from("time_us,port,paused_us\n");
        let busy_p: Vec<usize> = (0..s.pause_us.len())
            .filter(|&p| s.pause_us[p].iter().any(|&b| b > 0.0))
            .collect();
        for (i, t) in s.times_us.iter().enumerate() {
            for &q in &busy_q {
                let _ = writeln!(queues, "{t},{},{}", s.queue_labels[q], s.queue_bytes[q][i]);
            }
            for &p in &busy_p {
                let _ = writeln!(pause, "{t},{},{:.3}", s.pause_labels[p], s.pause_us[p][i]);
            }
        }
        std::fs::write(dir.join("rates.csv"), rates)?;
        std::fs::write(dir.join("cnp.csv"), cnp)?;
        std::fs::write(dir.join("dcqcn.csv"), dcqcn)?;
        std::fs::write(dir.join("queues.csv"), queues)?;
        std::fs::write(dir.join("pause.csv"), pause)?;
        Ok(())
    }
}
