//! Test parameters, per-side resources (context, QPs, one region) and the
//! TCP exchange that connects them.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, Context, MemoryRegion, Mtu, Psn, QpInitAttr, QpType, QueuePair,
    RecvWr, WcStatus, WorkCompletion, connect_qp,
};
use serde_json::{Value, json};

use super::{AtomicType, PerfArgs, Test};

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
    /// The region is at least this long (this side only: perftest's
    /// layout needs room for a slot per QP and the atomic results).
    pub(super) min_region: usize,
}

impl Params {
    pub(super) fn from_args(a: &PerfArgs) -> Self {
        Self {
            test: a.test,
            lat: a.lat,
            size: a.size,
            iters: a.iters,
            qps: a.qps,
            tx_depth: a.tx_depth.max(1),
            mtu: mtu_of(a.mtu),
            atomic: a.atomic_type,
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

/// The largest IB MTU not above `bytes` (256 at least).
/// perftest's cycle buffer (a page).
pub(super) const CYCLE: usize = 4096;

fn mtu_of(bytes: usize) -> Mtu {
    [Mtu::Mtu4096, Mtu::Mtu2048, Mtu::Mtu1024, Mtu::Mtu512]
        .into_iter()
        .find(|m| m.bytes() <= bytes)
        .unwrap_or(Mtu::Mtu256)
}

fn send_line(s: &mut TcpStream, v: &Value) -> Result<(), String> {
    let mut line = v.to_string();
    line.push('\n');
    s.write_all(line.as_bytes())
        .map_err(|e| format!("exchange: {e}"))
}

/// Reads one line byte by byte: a buffered reader could swallow the start
/// of the next message, which belongs to a later call.
fn read_line(s: &mut TcpStream) -> Result<Value, String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Err("exchange: the peer closed the connection".into()),
            Ok(_) if b[0] == b'\n' => break,
            Ok(_) if line.len() < 1 << 20 => line.push(b[0]),
            Ok(_) => return Err("exchange: message too long".into()),
            Err(e) => return Err(format!("exchange: {e}")),
        }
    }
    serde_json::from_slice(&line).map_err(|e| format!("exchange: bad message: {e}"))
}

pub(super) fn write_params(s: &mut TcpStream, p: &Params) -> Result<(), String> {
    send_line(
        s,
        &json!({"test": super::test_name(p.test), "lat": p.lat, "size": p.size, "iters": p.iters,
                "qps": p.qps, "tx_depth": p.tx_depth, "mtu": p.mtu.bytes()}),
    )
}

pub(super) fn read_params(s: &mut TcpStream) -> Result<Params, String> {
    let v = read_line(s)?;
    let num = |k: &str| {
        v[k].as_u64()
            .ok_or_else(|| format!("exchange: no {k} in {v}"))
    };
    let test = match v["test"].as_str() {
        Some("send") => Test::Send,
        Some("write") => Test::Write,
        Some("read") => Test::Read,
        Some("atomic") => Test::Atomic,
        _ => return Err(format!("exchange: bad test in {v}")),
    };
    Ok(Params {
        test,
        lat: v["lat"].as_bool().unwrap_or(false),
        size: num("size")? as usize,
        iters: num("iters")? as u32,
        qps: (num("qps")? as u32).clamp(1, 1024),
        tx_depth: (num("tx_depth")? as u32).clamp(1, 1024),
        mtu: mtu_of(num("mtu")? as usize),
        atomic: AtomicType::FetchAndAdd,
        min_region: 0,
    })
}

/// One side's resources.
pub(super) struct Side {
    pub(super) local: IpAddr,
    pub(super) cq: CompletionQueue,
    pub(super) mr: MemoryRegion,
    pub(super) qps: Vec<(QueuePair, Psn)>,
    /// QP number -> index in `qps`.
    index: HashMap<u32, usize>,
    // Dropped last: the objects above hold it open.
    ctx: Context,
}

/// Give up when nothing completes for this long.
pub(super) const STALL: Duration = Duration::from_secs(30);

/// What one side tells the other.
#[derive(Debug, Clone)]
pub(super) struct Peer {
    pub(super) addr: IpAddr,
    pub(super) rkey: u32,
    pub(super) va: u64,
    pub(super) qps: Vec<(u32, Psn)>,
}

impl Side {
    pub(super) fn open(local: IpAddr, p: &Params) -> Result<Self, String> {
        let e = |e: ferroce::Error| e.to_string();
        let ctx = Context::open(local).map_err(|e| format!("opening a device on {local}: {e}"))?;
        let pd = ctx.alloc_pd();
        let depth = (p.qps * (p.tx_depth + 1) * 2).min(1 << 20);
        let cq = ctx.create_cq(depth).map_err(e)?;
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let mr = pd.reg_mr(p.region_len().max(64), access).map_err(e)?;
        let mut qps = Vec::new();
        for i in 0..p.qps {
            let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
            attr.max_send_wr = p.tx_depth + 1;
            attr.max_recv_wr = p.tx_depth + 1;
            let qp = pd.create_qp(&attr).map_err(e)?;
            let psn = Psn::new(0x10_0000 * (i + 1) + qp.qpn());
            qps.push((qp, psn));
        }
        drop(pd);
        let index = qps
            .iter()
            .enumerate()
            .map(|(i, (q, _))| (q.qpn(), i))
            .collect();
        Ok(Self {
            local,
            cq,
            mr,
            qps,
            index,
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
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    }

    /// Which of our QPs a completion belongs to.
    pub(super) fn qp_index(&self, qpn: u32) -> usize {
        self.index.get(&qpn).copied().unwrap_or(0)
    }

    /// SEND bandwidth's server side: keeps up to `depth` receives of
    /// `p.size` bytes posted on every QP (the `k`th at `offset(k)`) until
    /// `p.iters` have arrived on each. `ready` runs once the first are
    /// posted (tell the client); returns the time from then to the last.
    pub(super) fn receive_sends(
        &self,
        p: &Params,
        depth: u32,
        offset: impl Fn(u32) -> u64,
        ready: impl FnOnce() -> Result<(), String>,
    ) -> Result<Duration, String> {
        let e = |e: ferroce::Error| e.to_string();
        let mut posted = vec![0u32; self.qps.len()];
        let post = |i: usize, posted: &mut [u32]| {
            let wr = RecvWr {
                wr_id: i as u64,
                sg: vec![self.mr.sge(offset(posted[i]), p.size as u32)],
            };
            posted[i] += 1;
            self.qps[i].0.post_recv(wr).map_err(e)
        };
        for i in 0..self.qps.len() {
            for _ in 0..depth.min(p.iters) {
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
    ) -> Result<Vec<WorkCompletion>, String> {
        let wcs = self.cq.poll(64).map_err(|e| e.to_string())?;
        if wcs.is_empty() {
            if last.elapsed() > STALL {
                return Err(format!(
                    "{}, then nothing for {} s",
                    progress(),
                    STALL.as_secs()
                ));
            }
            return Ok(wcs);
        }
        *last = Instant::now();
        if let Some(bad) = wcs.iter().find(|w| w.status != WcStatus::Success) {
            return Err(format!(
                "{}: a work request failed with {:?}",
                progress(),
                bad.status
            ));
        }
        Ok(wcs)
    }

    fn describe(&self) -> Value {
        let gid = match self.local {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        json!({
            "gid": gid.to_string(),
            "rkey": self.mr.rkey(),
            "va": self.mr.addr(),
            "qps": self.qps.iter().map(|(q, p)| json!([q.qpn(), p.value()])).collect::<Vec<_>>(),
        })
    }

    pub(super) fn connect(&self, peer: &Peer, p: &Params) -> Result<(), String> {
        if peer.qps.len() != self.qps.len() {
            return Err(format!(
                "peer has {} QPs, we have {}",
                peer.qps.len(),
                self.qps.len()
            ));
        }
        for ((qp, psn), (rqpn, rpsn)) in self.qps.iter().zip(&peer.qps) {
            connect_qp(qp, QpType::Rc, peer.addr, *rqpn, *psn, *rpsn, p.mtu)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

fn parse_peer(v: &Value) -> Result<Peer, String> {
    let bad = || format!("exchange: bad peer description {v}");
    let gid: std::net::Ipv6Addr = v["gid"]
        .as_str()
        .ok_or_else(bad)?
        .parse()
        .map_err(|_| bad())?;
    let addr = gid.to_ipv4_mapped().map_or(IpAddr::V6(gid), IpAddr::V4);
    let qps = v["qps"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|q| Some((q[0].as_u64()? as u32, Psn::new(q[1].as_u64()? as u32))))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    Ok(Peer {
        addr,
        rkey: v["rkey"].as_u64().ok_or_else(bad)? as u32,
        va: v["va"].as_u64().ok_or_else(bad)?,
        qps,
    })
}

pub(super) fn exchange_client(s: &mut TcpStream, side: &Side) -> Result<Peer, String> {
    send_line(s, &side.describe())?;
    parse_peer(&read_line(s)?)
}

pub(super) fn exchange_server(s: &mut TcpStream, side: &Side) -> Result<Peer, String> {
    let peer = parse_peer(&read_line(s)?)?;
    send_line(s, &side.describe())?;
    Ok(peer)
}

/// Waits for the other side's one-word signal (`done`, `ready`).
pub(super) fn wait_word(s: &mut TcpStream) -> Result<String, String> {
    let v = read_line(s)?;
    Ok(v.as_str().unwrap_or_default().to_string())
}

pub(super) fn send_word(s: &mut TcpStream, w: &str) -> Result<(), String> {
    send_line(s, &json!(w))
}
