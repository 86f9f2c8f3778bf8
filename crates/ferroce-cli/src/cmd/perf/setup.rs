//! Test parameters and one side's resources (device, QPs, one region, with
//! the access the test needs and no more), connected to the peer's QPs.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, Mtu, ProtectionDomain,
    QpEndpoint, QpInitAttr, QpType, QueuePair, RecvWr, RemoteRegion, WorkCompletion,
};

use super::{AtomicType, PerfArgs, Test};
use crate::error::{Error, open_device};

/// READs and atomics outstanding per QP, each way (perftest's out_reads,
/// ferroce's maximum).
const MAX_RD_ATOMIC: u8 = 16;

/// What a test's memory region grants, as perftest's `setup_mr_flags`:
/// local write, and the one remote access the test needs (on both sides:
/// a WRITE latency test writes both ways). A WRITE server's memory cannot
/// be read, a READ server's cannot be written.
pub(super) fn access(t: Test) -> Access {
    Access::LOCAL_WRITE
        | match t {
            Test::Write => Access::REMOTE_WRITE,
            Test::Read => Access::REMOTE_READ,
            Test::Atomic => Access::REMOTE_ATOMIC,
            Test::Send => Access::NONE,
        }
}

/// What a test's QPs grant, as perftest's `ctx_modify_qp_to_init`: the
/// region's one remote access; a SEND test's QP, remote and local write.
pub(super) fn qp_access(t: Test) -> Access {
    match t {
        Test::Write => Access::REMOTE_WRITE,
        Test::Read => Access::REMOTE_READ,
        Test::Atomic => Access::REMOTE_ATOMIC,
        Test::Send => Access::REMOTE_WRITE | Access::LOCAL_WRITE,
    }
}

/// What both sides must agree on; the client sends it first.
#[derive(Debug, Clone, Copy)]
pub(super) struct Params {
    pub(super) test: Test,
    pub(super) lat: bool,
    pub(super) size: usize,
    pub(super) iters: u32,
    pub(super) qps: u32,
    pub(super) tx_depth: u32,
    pub(super) mtu: Mtu,
    /// Client side only (the server does not need it).
    pub(super) atomic: AtomicType,
    /// Receives a SEND server posts per QP before the first message (its
    /// QPs' receive queues are sized for the larger of this and `tx_depth`).
    pub(super) rx_depth: u32,
    /// The region is at least this long (this side only: perftest's
    /// layout needs room for a slot per QP and the atomic results).
    pub(super) min_region: usize,
}

impl Params {
    pub(super) fn from_args(a: &PerfArgs) -> Self {
        Self {
            test: a.test,
            lat: a.lat,
            size: a.size as usize,
            iters: a.iters,
            qps: a.qps,
            tx_depth: a.tx_depth,
            mtu: a.mtu,
            atomic: a.atomic_type,
            rx_depth: 0,
            min_region: 0,
        }
    }

    /// Bytes of the region. As in perftest, messages reuse one buffer
    /// rather than each outstanding one having its own, so that a run
    /// measures the stack and not the memory behind it (with a slot per
    /// request, 1 MiB messages at depth 128 streamed from a 128 MiB region
    /// at half the speed). Twice the larger of the message and
    /// [`CYCLE`]: a latency run puts its 8-byte mark beside the message.
    pub(super) fn region_len(&self) -> usize {
        (2 * self.size.max(CYCLE)).max(self.min_region)
    }

    /// Where the `k`th message of a QP goes in the region: as perftest,
    /// messages of at most half of [`CYCLE`] take successive places in
    /// it, larger ones all the start.
    pub(super) fn slot(&self, k: u32) -> u64 {
        if self.size * 2 <= CYCLE {
            (u64::from(k) * self.size as u64) % CYCLE as u64
        } else {
            0
        }
    }
}

/// perftest's cycle buffer (a page).
pub(super) const CYCLE: usize = 4096;

/// One side's resources.
pub(super) struct Side {
    pub(super) local: IpAddr,
    pub(super) cq: CompletionQueue,
    pub(super) mr: MemoryRegion,
    pub(super) qps: Vec<QueuePair>,
    /// QP number -> index in `qps`.
    index: HashMap<u32, usize>,
    /// The RoCE version the QPs connect with (`-g`).
    roce: ferroce::RoceMode,
    /// The RC local ACK timeout exponent (`--qp-timeout`), if not the
    /// default.
    qp_timeout: Option<u8>,
    // Dropped last: the objects above hold it open.
    ctx: Context,
}

/// Give up when nothing completes for this long.
pub(super) const STALL: Duration = Duration::from_secs(30);

/// [`STALL`] for a polling loop, with the clock read once in 1,024 polls:
/// a read on every poll was a measurable part of the 8-byte round trip
/// the latency tests report.
pub(super) struct Stall {
    start: Instant,
    polls: u32,
}

impl Stall {
    pub(super) fn new() -> Self {
        Self {
            start: Instant::now(),
            polls: 0,
        }
    }

    /// Whether [`STALL`] has passed (checked on every 1,024th call).
    pub(super) fn expired(&mut self) -> bool {
        self.polls = self.polls.wrapping_add(1);
        self.polls.is_multiple_of(1024) && self.start.elapsed() > STALL
    }
}

/// What one side tells the other: its QPs and its region.
#[derive(Debug, Clone)]
pub(super) struct Peer {
    pub(super) qps: Vec<QpEndpoint>,
    pub(super) region: RemoteRegion,
}

impl Side {
    /// The device on `local` with the backend of `backend` (`--raw`), and
    /// the resources on it, connecting with the RoCE version of its `-g`.
    pub(super) fn open_with(
        local: IpAddr,
        p: &Params,
        backend: &crate::cmd::backend::BackendArgs,
    ) -> Result<Self, Error> {
        let ctx = open_device(backend.device(local))?;
        let roce = backend.roce(&ctx)?;
        let mut side = Self::open_on(ctx, p, |pd, attr, _| pd.create_qp(attr))?;
        side.roce = roce;
        side.qp_timeout = backend.qp_timeout;
        Ok(side)
    }

    /// The resources on an open device, QP `i` made by `make_qp(pd, attr,
    /// i)` (rdma_cm creates them on its IDs).
    pub(super) fn open_on(
        ctx: Context,
        p: &Params,
        mut make_qp: impl FnMut(&ProtectionDomain, &QpInitAttr<'_>, usize) -> ferroce::Result<QueuePair>,
    ) -> Result<Self, Error> {
        let pd = ctx.alloc_pd();
        let depth = p.tx_depth.max(p.rx_depth) + 1;
        let cq = ctx.create_cq((p.qps * depth * 2).min(1 << 20))?;
        let mr = pd.reg_mr(p.region_len().max(64), access(p.test))?;
        let mut qps = Vec::new();
        for i in 0..p.qps as usize {
            let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
            attr.max_send_wr = depth;
            attr.max_recv_wr = depth;
            qps.push(make_qp(&pd, &attr, i)?);
        }
        drop(pd);
        let index = qps.iter().enumerate().map(|(i, q)| (q.qpn(), i)).collect();
        Ok(Self {
            local: ctx.local(),
            cq,
            mr,
            qps,
            index,
            roce: ferroce::RoceMode::V2,
            qp_timeout: None,
            ctx,
        })
    }

    /// The device's counters, to stderr (`perf --stats`).
    pub(super) fn print_stats(&self) {
        // One write, so that the two processes of a loopback run do not
        // interleave their lines (stderr is unbuffered).
        let text = format!(
            "{0}: {1:?}\n{0}: {2:?}\n",
            self.local,
            self.ctx.stats(),
            self.ctx.udp_stats()
        );
        let mut text = match self.ctx.raw_stats() {
            Some(raw) => format!(
                "{text}{}: {raw:?}\n{}",
                self.local,
                crate::cmd::qos::pfc_lines(self.local, &raw.pfc)
            ),
            None => text,
        };
        for qp in &self.qps {
            if let Ok(c) = self.ctx.qp_congestion(qp.qpn()) {
                text += &format!("{}: {}\n", self.local, congestion_line(qp.qpn(), &c));
            }
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    }

    /// Which of our QPs a completion belongs to.
    pub(super) fn qp_index(&self, qpn: u32) -> usize {
        self.index.get(&qpn).copied().unwrap_or(0)
    }

    /// SEND bandwidth's server side: posts `p.rx_depth` receives of
    /// `p.size` bytes on every QP, then keeps one posted for each message
    /// still to come (the `k`th at `offset(k)`) until
    /// `p.iters` have arrived on each. `ready` runs once the first are
    /// posted (tell the client); returns the time from then to the last.
    pub(super) fn receive_sends(
        &self,
        p: &Params,
        offset: impl Fn(u32) -> u64,
        ready: impl FnOnce() -> Result<(), Error>,
    ) -> Result<Duration, Error> {
        let mut posted = vec![0u32; self.qps.len()];
        let post = |i: usize, posted: &mut [u32]| {
            let sge = self.mr.sge(offset(posted[i]), p.size as u32);
            posted[i] += 1;
            self.qps[i].post_recv(RecvWr::new(i as u64, &[sge]))
        };
        for i in 0..self.qps.len() {
            for _ in 0..p.rx_depth {
                post(i, &mut posted)?;
            }
        }
        ready()?;
        let start = Instant::now();
        let total = u64::from(p.iters) * self.qps.len() as u64;
        let (mut received, mut last) = (0u64, Instant::now());
        while received < total {
            let wcs = self.poll_ok(&mut last, || {
                format!("server: received {received} of {total}")
            })?;
            for wc in wcs {
                received += 1;
                let i = self.qp_index(wc.qpn);
                if posted[i] < p.iters {
                    post(i, &mut posted)?;
                }
            }
        }
        Ok(start.elapsed())
    }

    /// Up to 64 successful completions (none if nothing is ready); fails on
    /// an error completion, or when nothing has completed for [`STALL`]
    /// since `last` (`progress` says how far the run got).
    pub(super) fn poll_ok(
        &self,
        last: &mut Instant,
        progress: impl Fn() -> String,
    ) -> Result<Vec<WorkCompletion>, Error> {
        let wcs = self.cq.poll(64)?;
        if wcs.is_empty() {
            if last.elapsed() > STALL {
                return Err(
                    format!("{}, then nothing for {} s", progress(), STALL.as_secs()).into(),
                );
            }
            return Ok(wcs);
        }
        *last = Instant::now();
        if let Some(bad) = wcs.iter().find_map(|w| w.ok().err()) {
            return Err(format!("{}: {bad}", progress()).into());
        }
        Ok(wcs)
    }

    /// Each QP to INIT (with [`qp_access`] of the test), RTR and RTS, as
    /// perftest's `ctx_modify_qp_to_init` / `ctx_connect`.
    pub(super) fn connect(&self, peer: &[QpEndpoint], p: &Params) -> Result<(), Error> {
        if peer.len() != self.qps.len() {
            return Err(Error::Mismatch(format!(
                "the peer has {} QPs, this side {}: give both the same -q",
                peer.len(),
                self.qps.len()
            )));
        }
        // On the raw backend, at most the port's active MTU (it refuses
        // larger: the frames would not fit the interface); over UDP, IP
        // fragmentation carries larger packets, as it always has.
        let mtu = match self.ctx.backend() {
            ferroce::BackendKind::Raw => p.mtu.min(self.ctx.query_port()?.active_mtu),
            ferroce::BackendKind::Udp => p.mtu,
        };
        let opts = ConnectOptions {
            mtu: Some(mtu),
            access: qp_access(p.test),
            max_rd_atomic: MAX_RD_ATOMIC,
            max_dest_rd_atomic: MAX_RD_ATOMIC,
            roce: self.roce,
            timeout: self.qp_timeout.unwrap_or(ConnectOptions::default().timeout),
            ..ConnectOptions::default()
        };
        for (qp, remote) in self.qps.iter().zip(peer) {
            qp.connect(remote, &opts)?;
        }
        Ok(())
    }
}

/// One QP's congestion control, for `--stats`.
pub(crate) fn congestion_line(qpn: u32, c: &ferroce::QpCongestion) -> String {
    format!(
        "QP {qpn:#08x} congestion: rate {:.0} Mb/s (target {:.0}, alpha {:.3}{}), \
         CE received {}, CNPs sent {}, CNPs received {}, rate cuts {}",
        c.rate_mbps,
        c.target_mbps,
        c.alpha,
        if c.limited { ", paced" } else { "" },
        c.ce_received,
        c.cnps_sent,
        c.cnps_received,
        c.rate_cuts
    )
}
