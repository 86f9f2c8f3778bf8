//! The scenario file: a TOML description of the fabric (links, switches,
//! topology) and the workload (flows), with the defaults a 100 Gb/s RoCE
//! fabric would have. Every field but `duration_us` and `topology` has a
//! default; unknown fields are refused, so that a typo is an error rather
//! than a silently ignored setting.

use serde::Deserialize;

use crate::congestion::Congestion;

/// Priorities a port has (IEEE 802.1Qbb's eight).
pub const PRIORITIES: usize = 8;

/// Limits that keep a mistyped scenario from taking the machine's memory:
/// samples of the time series, hosts (each an endpoint), link delay.
const MAX_SAMPLES: u64 = 10_000_000;
const MAX_HOSTS: usize = 16_384;
const MAX_DELAY_NS: u64 = 1_000_000_000;
/// Memory the flows' registered regions may take (4 GiB).
const MAX_REGION_BYTES: u64 = 4 << 30;
/// Messages a flow keeps posted (its send queue's depth).
const MAX_DEPTH: u32 = 4096;

/// One simulation: what to build and what to run on it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Shown in the summary.
    #[serde(default)]
    pub name: String,
    /// Seeds every random choice (RED marks, message sizes, the engines'
    /// keys): the same seed gives the same outputs, byte for byte.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// Simulated time to run, in microseconds.
    pub duration_us: f64,
    /// Interval of the time series (rates, queues, pause time), in microseconds.
    #[serde(default = "defaults::sample_us")]
    pub sample_us: f64,
    /// Path MTU of every QP, in bytes (256 .. 4096).
    #[serde(default = "defaults::mtu")]
    pub mtu: usize,
    /// The priority the RoCE traffic travels on, ACKs included, unless a
    /// flow sets its own. Hosts write it into the DSCP (8 x priority + 2:
    /// 26 for priority 3, the usual RoCE marking) and the fabric reads it
    /// back (DSCP / 8), as switches trusting DSCP map it.
    #[serde(default = "defaults::priority")]
    pub priority: u8,
    /// Whether hosts send ECN-capable packets (ECT(0)), which switches
    /// mark CE instead of leaving them alone.
    #[serde(default = "defaults::yes")]
    pub ecn: bool,
    /// The QPs' local ACK timeout code: 4.096 us x 2^code.
    #[serde(default = "defaults::ack_timeout")]
    pub ack_timeout: u8,
    /// ECN, CNPs and DCQCN in every host's engine (default: mlx5's).
    #[serde(default)]
    pub congestion: Congestion,
    #[serde(default)]
    pub link: LinkConfig,
    #[serde(default)]
    pub switch: SwitchConfig,
    pub topology: Topology,
    /// What flows that do not say otherwise do, and the flows the topology
    /// makes when `flows` is empty.
    #[serde(default)]
    pub workload: Workload,
    /// Flows by hand; when empty, each topology's natural set (see
    /// [`Topology`]).
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowConfig>,
}

/// Every link (host to switch, switch to switch) unless the topology says
/// otherwise.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    #[serde(default = "defaults::rate_gbps")]
    pub rate_gbps: f64,
    /// Propagation delay, one way.
    #[serde(default = "defaults::delay_ns")]
    pub delay_ns: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            rate_gbps: defaults::rate_gbps(),
            delay_ns: defaults::delay_ns(),
        }
    }
}

/// Every switch: a shared buffer, RED/ECN at egress, PFC at ingress.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchConfig {
    /// The buffer all ports' queues share; a packet that does not fit is
    /// dropped (and counted).
    #[serde(default = "defaults::buffer_bytes")]
    pub buffer_bytes: u64,
    /// ECN marking at egress; none when absent.
    #[serde(default)]
    pub red: Option<Red>,
    /// Priority flow control at ingress; none when absent.
    #[serde(default)]
    pub pfc: Option<Pfc>,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        Self {
            buffer_bytes: defaults::buffer_bytes(),
            red: None,
            pfc: None,
        }
    }
}

/// RED as RoCE switches configure it for DCQCN: no drops, only marks. An
/// ECN-capable packet joining an egress queue of `q` bytes (or, with
/// `at_dequeue`, leaving one with `q` bytes behind it, as the HPCC ns-3
/// switch decides) is marked CE with probability 0 up to `kmin`,
/// `pmax` x (q - kmin) / (kmax - kmin) between, and 1 from `kmax` on.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Red {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    pub pmax: f64,
    #[serde(default)]
    pub at_dequeue: bool,
}

/// PFC thresholds on the bytes that came in on one port at one priority
/// and still wait in the switch, static or dynamic (set one kind):
/// * static: above `xoff_bytes` the switch pauses the sender of that port,
///   at or below `xon_bytes` it lets it go again;
/// * dynamic, as shared-buffer switch chips (and the HPCC ns-3 model) do:
///   the limit is the free buffer x 2^-`alpha_shift`, so that it shrinks
///   as the buffer fills; the sender goes again once its bytes plus
///   `resume_offset_bytes` are back under the limit.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pfc {
    #[serde(default)]
    pub xoff_bytes: Option<u64>,
    #[serde(default)]
    pub xon_bytes: Option<u64>,
    #[serde(default)]
    pub alpha_shift: Option<u32>,
    #[serde(default = "defaults::resume_offset_bytes")]
    pub resume_offset_bytes: u64,
    /// Pause time a PAUSE frame asks for, in quanta of 512 bit times; the
    /// switch sends another before it runs out while still above XON.
    #[serde(default = "defaults::pause_quanta")]
    pub pause_quanta: u16,
}

impl Pfc {
    /// Whether `held` bytes from one ingress port and priority pause its
    /// sender, with `free` bytes of the buffer unused.
    pub fn pauses(&self, held: u64, free: u64) -> bool {
        match (self.alpha_shift, self.xoff_bytes) {
            (Some(shift), _) => held > free >> shift,
            (None, Some(xoff)) => held > xoff,
            (None, None) => false,
        }
    }

    /// Whether a paused sender may go again.
    pub fn resumes(&self, held: u64, free: u64) -> bool {
        match (self.alpha_shift, self.xon_bytes) {
            (Some(shift), _) => held == 0 || held + self.resume_offset_bytes <= free >> shift,
            (None, Some(xon)) => held <= xon,
            (None, None) => true,
        }
    }

    fn check(&self) -> Result<(), ScenarioError> {
        let fix = "[switch.pfc]: set xoff_bytes and xon_bytes (static, xon_bytes <= xoff_bytes) or alpha_shift (dynamic, 0 .. 16), not both";
        let ok = match (self.xoff_bytes, self.xon_bytes, self.alpha_shift) {
            (Some(xoff), Some(xon), None) => xon <= xoff,
            (None, None, Some(shift)) => shift <= 16,
            _ => false,
        };
        if !ok {
            return Err(ScenarioError(fix.into()));
        }
        if self.pause_quanta == 0 {
            return Err(ScenarioError(
                "[switch.pfc]: pause_quanta must be above 0".into(),
            ));
        }
        Ok(())
    }
}

/// How hosts and switches are wired.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Topology {
    /// `senders` hosts and one receiver on one switch; hosts 0 .. senders
    /// send, host `senders` receives. Flows: every sender to the receiver.
    Incast { senders: usize },
    /// `pairs` hosts on a left switch, `pairs` on a right switch, the two
    /// switches joined by one link (of `bottleneck_gbps`, default the link
    /// rate). Hosts 0 .. pairs are on the left. Flows: host i to host
    /// pairs + i.
    Dumbbell {
        pairs: usize,
        bottleneck_gbps: Option<f64>,
    },
    /// `leaves` leaf switches with `hosts_per_leaf` hosts each, every leaf
    /// linked to each of `spines` spine switches (of `uplink_gbps`, default
    /// the link rate); leaves spread flows over spines by a hash of the
    /// UDP source port (ECMP). Host h is on leaf h / hosts_per_leaf.
    /// Flows: host h to host h + hosts_per_leaf (mod hosts), across leaves.
    LeafSpine {
        leaves: usize,
        spines: usize,
        hosts_per_leaf: usize,
        uplink_gbps: Option<f64>,
    },
}

/// A message size and how often it is picked.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeWeight {
    pub bytes: u32,
    pub weight: f64,
}

/// What a flow does, for flows that do not set their own.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Message sizes, picked at random by weight for each RDMA WRITE.
    #[serde(default = "defaults::sizes")]
    pub sizes: Vec<SizeWeight>,
    /// Messages a flow keeps posted at once.
    #[serde(default = "defaults::depth")]
    pub depth: u32,
    /// Generated flow i starts at i x stagger_us.
    #[serde(default)]
    pub stagger_us: f64,
    /// Generated flows stop posting at this time (default: never).
    #[serde(default)]
    pub stop_us: Option<f64>,
    /// Generated flows end after this many bytes (default: never).
    #[serde(default)]
    pub bytes: Option<u64>,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            sizes: defaults::sizes(),
            depth: defaults::depth(),
            stagger_us: 0.0,
            stop_us: None,
            bytes: None,
        }
    }
}

/// One RC connection from `src` to `dst`, carrying RDMA WRITEs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub src: usize,
    pub dst: usize,
    #[serde(default)]
    pub start_us: f64,
    /// Stop posting messages at this time (those posted still complete).
    #[serde(default)]
    pub stop_us: Option<f64>,
    /// The flow is done after this many bytes (its completion time is
    /// reported); a long flow when absent.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Message size mix (default: the workload's).
    #[serde(default)]
    pub sizes: Option<Vec<SizeWeight>>,
    #[serde(default)]
    pub depth: Option<u32>,
    /// The flow's priority (default: the scenario's), its ACKs' too.
    #[serde(default)]
    pub priority: Option<u8>,
}

/// A scenario that cannot run, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

impl Scenario {
    /// Parses and checks a scenario file's text.
    pub fn from_toml(text: &str) -> Result<Self, ScenarioError> {
        let s: Self = toml::from_str(text).map_err(|e| {
            ScenarioError(format!(
                "the scenario is not valid TOML for ferroce-sim: {e}"
            ))
        })?;
        s.check()?;
        Ok(s)
    }

    /// Whether hosts send ECN-capable packets: `ecn`, unless the
    /// congestion mode is `off`.
    pub fn ecn_capable(&self) -> bool {
        self.ecn && self.congestion.ecn()
    }

    /// Hosts the topology has.
    pub fn hosts(&self) -> usize {
        match self.topology {
            Topology::Incast { senders } => senders + 1,
            Topology::Dumbbell { pairs, .. } => 2 * pairs,
            Topology::LeafSpine {
                leaves,
                hosts_per_leaf,
                ..
            } => leaves * hosts_per_leaf,
        }
    }

    /// The flows to run: the scenario's own, or the topology's natural set
    /// with the workload's settings.
    pub fn flows(&self) -> Vec<FlowConfig> {
        if !self.flows.is_empty() {
            return self.flows.clone();
        }
        let n = self.hosts();
        let pairs: Vec<(usize, usize)> = match self.topology {
            Topology::Incast { senders } => (0..senders).map(|i| (i, senders)).collect(),
            Topology::Dumbbell { pairs, .. } => (0..pairs).map(|i| (i, pairs + i)).collect(),
            Topology::LeafSpine { hosts_per_leaf, .. } => {
                (0..n).map(|i| (i, (i + hosts_per_leaf) % n)).collect()
            }
        };
        let w = &self.workload;
        pairs
            .into_iter()
            .enumerate()
            .map(|(i, (src, dst))| FlowConfig {
                src,
                dst,
                start_us: i as f64 * w.stagger_us,
                stop_us: w.stop_us,
                bytes: w.bytes,
                sizes: None,
                depth: None,
                priority: None,
            })
            .collect()
    }

    /// Refuses what the simulator cannot run, naming the field and the fix.
    pub fn check(&self) -> Result<(), ScenarioError> {
        let fail = |m: String| Err(ScenarioError(m));
        if !positive(self.duration_us) {
            return fail("duration_us must be above 0 (simulated microseconds to run)".into());
        }
        if !positive(self.sample_us) {
            return fail("sample_us must be above 0 (the time series' interval)".into());
        }
        if ferroce_core::verbs::Mtu::from_bytes(self.mtu).is_none() {
            return fail(format!(
                "mtu = {}: use 256, 512, 1024, 2048 or 4096",
                self.mtu
            ));
        }
        if usize::from(self.priority) >= PRIORITIES {
            return fail(format!("priority = {}: use 0 .. 7", self.priority));
        }
        let rates = [
            Some(self.link.rate_gbps),
            match self.topology {
                Topology::Dumbbell {
                    bottleneck_gbps, ..
                } => bottleneck_gbps,
                Topology::LeafSpine { uplink_gbps, .. } => uplink_gbps,
                Topology::Incast { .. } => None,
            },
        ];
        if rates.into_iter().flatten().any(|r| !positive(r)) {
            return fail("link rates must be above 0 Gb/s".into());
        }
        if let Some(r) = self.switch.red
            && (r.kmin_bytes > r.kmax_bytes || !(0.0..=1.0).contains(&r.pmax))
        {
            return fail("[switch.red]: need kmin_bytes <= kmax_bytes and 0 <= pmax <= 1".into());
        }
        if let Some(p) = self.switch.pfc {
            p.check()?;
        }
        self.congestion.check()?;
        if self.duration_us / self.sample_us > MAX_SAMPLES as f64 {
            return fail(format!(
                "duration_us / sample_us is above {MAX_SAMPLES} samples: raise sample_us"
            ));
        }
        if self.link.delay_ns > MAX_DELAY_NS {
            return fail(format!("[link] delay_ns is above {MAX_DELAY_NS} (1 s)"));
        }
        let hosts = self.hosts();
        if hosts > MAX_HOSTS {
            return fail(format!(
                "the topology has {hosts} hosts, above {MAX_HOSTS}: make it smaller"
            ));
        }
        if hosts < 2 {
            return fail(
                "the topology has fewer than 2 hosts: raise senders, pairs or hosts_per_leaf"
                    .into(),
            );
        }
        if let Topology::LeafSpine { spines: 0, .. } = self.topology {
            return fail("a leaf-spine needs at least 1 spine".into());
        }
        for (i, f) in self.flows().iter().enumerate() {
            if f.src >= hosts || f.dst >= hosts || f.src == f.dst {
                return fail(format!(
                    "flow {i}: src {} and dst {} must be different hosts below {hosts}",
                    f.src, f.dst
                ));
            }
            let sizes = f.sizes.as_ref().unwrap_or(&self.workload.sizes);
            if sizes.is_empty() || sizes.iter().any(|s| s.bytes == 0 || !positive(s.weight)) {
                return fail(format!(
                    "flow {i}: sizes need at least one entry, each with bytes > 0 and weight > 0"
                ));
            }
            if sizes
                .iter()
                .any(|s| u64::from(s.bytes) > ferroce_core::MAX_MSG_SIZE)
            {
                return fail(format!(
                    "flow {i}: a message is at most {} bytes",
                    ferroce_core::MAX_MSG_SIZE
                ));
            }
            if f.priority.is_some_and(|p| usize::from(p) >= PRIORITIES) {
                return fail(format!("flow {i}: priority must be 0 .. 7"));
            }
            if !(1..=MAX_DEPTH).contains(&f.depth.unwrap_or(self.workload.depth)) {
                return fail(format!("flow {i}: depth must be 1 .. {MAX_DEPTH}"));
            }
        }
        // Each flow registers its largest message at both ends.
        let regions: u64 = self
            .flows()
            .iter()
            .map(|f| {
                let sizes = f.sizes.as_ref().unwrap_or(&self.workload.sizes);
                2 * u64::from(sizes.iter().map(|s| s.bytes).max().unwrap_or(0))
            })
            .sum();
        if regions > MAX_REGION_BYTES {
            return fail(format!(
                "the flows' regions (2 x the largest message per flow) need {regions} bytes, above {MAX_REGION_BYTES}: use fewer flows or smaller messages"
            ));
        }
        Ok(())
    }
}

/// Above zero and finite (false for NaN).
fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

mod defaults {
    use super::SizeWeight;

    pub(super) fn seed() -> u64 {
        1
    }
    pub(super) fn sample_us() -> f64 {
        10.0
    }
    pub(super) fn mtu() -> usize {
        4096
    }
    /// Priority 3, where RoCE traffic usually travels.
    pub(super) fn priority() -> u8 {
        3
    }
    pub(super) fn yes() -> bool {
        true
    }
    /// 4.096 us x 2^10 = 4.2 ms.
    pub(super) fn ack_timeout() -> u8 {
        10
    }
    pub(super) fn rate_gbps() -> f64 {
        100.0
    }
    pub(super) fn delay_ns() -> u64 {
        1000
    }
    /// 12 MiB, a shallow-buffered data-centre switch's order of size.
    pub(super) fn buffer_bytes() -> u64 {
        12 << 20
    }
    /// As the HPCC ns-3 switch model: 3 KiB.
    pub(super) fn resume_offset_bytes() -> u64 {
        3 << 10
    }
    /// The largest a PAUSE frame can ask.
    pub(super) fn pause_quanta() -> u16 {
        0xffff
    }
    pub(super) fn sizes() -> Vec<SizeWeight> {
        vec![SizeWeight {
            bytes: 1 << 20,
            weight: 1.0,
        }]
    }
    pub(super) fn depth() -> u32 {
        4
    }
}
