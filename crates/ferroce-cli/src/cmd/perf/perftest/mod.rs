//! `ferroce perf ... --perftest`: the TCP exchange of perftest 4.5 ("Data
//! ex. method : Ethernet"), so that ferroce runs against unmodified
//! ib_write_bw, ib_send_bw, ib_read_bw, ib_atomic_bw and (with `--lat`)
//! ib_write_lat, ib_send_lat, ib_read_lat, ib_atomic_lat.
//!
//! Every step is a symmetric exchange of a fixed-size message: the client
//! writes first and then reads, the server reads first and then writes.
//! In order:
//!
//! 1. the version string, 16 bytes NUL-padded (we say `6.06`);
//! 2. if the peer's version is 5.32 or later: the cycle buffer and the cache
//!    line size, each a 4-byte big-endian integer (both sides keep the max);
//! 3. if the peer's version is 5.1 or later: the MTU as the decimal text of
//!    its verbs enum (1 = 256 .. 5 = 4096), 2 bytes (4 before 5.31); both
//!    sides use the smaller;
//! 4. key records, 108 bytes of text
//!    `LID:OUT_READS:QPN:PSN:RKEY:VADDR:G0:..:G15:SRQN:` + NUL. The latency
//!    tools except send_lat start with one extra record (QP 0's); then one
//!    per QP; then the QPs are connected; then more records as sync points:
//!    send: one, then one per QP and, once the receives are posted, one
//!    more; the others: one per QP and one more;
//! 5. the traffic;
//! 6. bandwidth write/read/atomic only: one key record, then the client's
//!    report as big-endian words (size u64, iterations u64 (u32 before
//!    5.33), BW peak, BW average, message rate as f64); the server sends
//!    its own (uninitialised in perftest) words back;
//! 7. one key record and `done` + NUL from both sides — except after
//!    ib_write_lat, which just exits, and ib_read_lat / ib_atomic_lat,
//!    whose server does this right after step 4 and so waits there for
//!    the client's end.
//!
//! perftest reads each message with a single `read()` of its exact size,
//! so every message here goes out in a single write.
//!
//! Memory: our key for QP i names `slot i` of the region (one slot is
//! max(size, cycle buffer) bytes, as perftest's); the slot after the last
//! QP's is where our own messages come from, and atomic results land
//! after that.

mod lat;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ferroce::{Mtu, Psn, RecvWr, SendOp, SendWr};

use super::setup::{Params, Peer, Side};
use super::{AtomicType, PerfArgs, Test};

const VERSION: &str = "6.06";
const VERSION_LEN: usize = 16;
const KEY_LEN: usize = 108;
/// perftest's defaults, sent in step 2.
const CYCLE_BUFFER: u32 = 4096;
const CACHE_LINE: u32 = 64;
/// What we accept as a responder (ferroce's max_dest_rd_atomic).
const OUT_READS: u32 = 16;

/// One side's key record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    lid: u32,
    out_reads: u32,
    qpn: u32,
    psn: u32,
    rkey: u32,
    vaddr: u64,
    gid: [u8; 16],
    srqn: u32,
}

impl Key {
    fn encode(&self) -> [u8; KEY_LEN] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut out = [0u8; KEY_LEN];
        let n = s.len().min(KEY_LEN - 1);
        out[..n].copy_from_slice(&s.as_bytes()[..n]);
        out
    }

    fn decode(msg: &[u8]) -> Result<Self, String> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end])
            .map_err(|_| "perftest exchange: key record is not text".to_string())?;
        let bad = || format!("perftest exchange: cannot parse key record {text:?}");
        let f: Vec<&str> = text.split(':').collect();
        if f.len() < 23 {
            return Err(bad());
        }
        let h32 = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::from_str_radix(f[6 + i], 16).map_err(|_| bad())?;
        }
        Ok(Self {
            lid: h32(f[0])?,
            out_reads: h32(f[1])?,
            qpn: h32(f[2])?,
            psn: h32(f[3])?,
            rkey: h32(f[4])?,
            vaddr: u64::from_str_radix(f[5], 16).map_err(|_| bad())?,
            gid,
            srqn: h32(f[22])?,
        })
    }
}

/// The TCP side of the exchange.
struct Wire {
    s: TcpStream,
    client: bool,
}

impl Wire {
    fn send(&mut self, m: &[u8]) -> Result<(), String> {
        self.s
            .write_all(m)
            .map_err(|e| format!("perftest exchange: {e}"))
    }

    fn recv(&mut self, n: usize) -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).map_err(|e| {
            format!("perftest exchange: reading {n} bytes: {e} (do both sides run the same test?)")
        })?;
        Ok(b)
    }

    /// One symmetric exchange: the client writes first.
    fn xchg(&mut self, mine: &[u8]) -> Result<Vec<u8>, String> {
        if self.client {
            self.send(mine)?;
            self.recv(mine.len())
        } else {
            let r = self.recv(mine.len())?;
            self.send(mine)?;
            Ok(r)
        }
    }

    fn hand_shake(&mut self, mine: &Key) -> Result<Key, String> {
        Key::decode(&self.xchg(&mine.encode())?)
    }
}

/// What steps 1-3 agreed on.
struct Agreed {
    rem_version: f64,
    cycle_buffer: u32,
    cache_line: u32,
    mtu: Mtu,
}

fn mtu_enum(m: Mtu) -> u32 {
    m as u32
}

fn mtu_from_enum(v: u32) -> Option<Mtu> {
    Some(match v {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        5 => Mtu::Mtu4096,
        _ => return None,
    })
}

/// atof() of the leading number in a NUL-padded version string.
fn parse_version(b: &[u8]) -> f64 {
    let s: String = b
        .iter()
        .take_while(|&&c| c.is_ascii_digit() || c == b'.')
        .map(|&c| c as char)
        .collect();
    s.parse().unwrap_or(0.0)
}

fn agree(w: &mut Wire, mtu: Mtu) -> Result<Agreed, String> {
    let mut v = [0u8; VERSION_LEN];
    v[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    let rv = w.xchg(&v)?;
    let rem_version = parse_version(&rv);
    let (mut cycle_buffer, mut cache_line) = (CYCLE_BUFFER, CACHE_LINE);
    if rem_version >= 5.32 {
        let be = |c: Vec<u8>| u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        cycle_buffer = cycle_buffer.max(be(w.xchg(&CYCLE_BUFFER.to_be_bytes())?));
        // perftest spaces small messages (and atomics) by the cache line.
        cache_line = cache_line.max(be(w.xchg(&CACHE_LINE.to_be_bytes())?));
    }
    let mut mtu = mtu;
    if rem_version >= 5.1 {
        let len = if rem_version >= 5.31 { 2 } else { 4 };
        let mut m = vec![0u8; len];
        let t = mtu_enum(mtu).to_string();
        m[..t.len()].copy_from_slice(t.as_bytes());
        let r = w.xchg(&m)?;
        let text: String = r
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .map(|&c| c as char)
            .collect();
        if let Some(rm) = text.parse().ok().and_then(mtu_from_enum)
            && rm.bytes() < mtu.bytes()
        {
            mtu = rm;
        }
    }
    Ok(Agreed {
        rem_version,
        cycle_buffer,
        cache_line,
        mtu,
    })
}

fn gid_of(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn my_keys(side: &Side, lay: &Layout) -> Vec<Key> {
    side.qps
        .iter()
        .enumerate()
        .map(|(i, (qp, psn))| Key {
            lid: 0,
            out_reads: OUT_READS,
            qpn: qp.qpn(),
            psn: psn.value(),
            rkey: side.mr.rkey(),
            vaddr: side.mr.addr() + lay.target(i),
            gid: gid_of(side.local),
            srqn: 0,
        })
        .collect()
}

/// Where things are in our region (see the module comment).
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Bytes per slot: max(size, cycle buffer), rounded up to 64.
    slot: u64,
    qps: u64,
    /// Distance between perftest's consecutive small messages and atomics
    /// (perftest's INC: the size rounded up to the cache line).
    inc: u64,
    /// How many of those fit in a cycle buffer before perftest wraps.
    per_cycle: u64,
}

impl Layout {
    fn new(p: &Params, a: &Agreed) -> Self {
        let cl = u64::from(a.cache_line.max(8));
        let inc = (p.size as u64).div_ceil(cl) * cl;
        let cycle = u64::from(a.cycle_buffer);
        Self {
            slot: (p.size as u64).max(cycle).div_ceil(64) * 64,
            qps: u64::from(p.qps),
            inc,
            per_cycle: (cycle / inc).max(1),
        }
    }

    /// Offset of QP `i`'s slot, the one its key names.
    fn target(&self, i: usize) -> u64 {
        i as u64 * self.slot
    }

    /// Offset our messages are sent (and READ into) from.
    fn source(&self) -> u64 {
        self.qps * self.slot
    }

    /// Offset of the 8-byte result of atomic number `k` (< `n`) of QP `i`.
    fn result(&self, i: usize, k: u64, n: u64) -> u64 {
        (self.qps + 1) * self.slot + (i as u64 * n + k) * 8
    }

    /// Region bytes for `results` atomic results per QP.
    fn len(&self, results: u64) -> u64 {
        (self.qps + 1) * self.slot + self.qps * results * 8 + 64
    }
}

/// The client's results, as perftest exchanges them.
#[derive(Debug, Default, Clone, Copy)]
struct Report {
    size: u64,
    iters: u64,
    bw_peak: f64,
    bw_avg: f64,
    msg_rate: f64,
}

fn xchg_reports(w: &mut Wire, mine: &Report, rem_version: f64) -> Result<Report, String> {
    let u64w = |w: &mut Wire, v: u64| -> Result<u64, String> {
        let r = w.xchg(&v.to_be_bytes())?;
        Ok(u64::from_be_bytes(r[..8].try_into().unwrap()))
    };
    let size = u64w(w, mine.size)?;
    let iters = if rem_version >= 5.33 {
        u64w(w, mine.iters)?
    } else {
        let r = w.xchg(&(mine.iters as u32).to_be_bytes())?;
        u64::from(u32::from_be_bytes(r[..4].try_into().unwrap()))
    };
    let bw_peak = f64::from_bits(u64w(w, mine.bw_peak.to_bits())?);
    let bw_avg = f64::from_bits(u64w(w, mine.bw_avg.to_bits())?);
    let msg_rate = f64::from_bits(u64w(w, mine.msg_rate.to_bits())?);
    Ok(Report {
        size,
        iters,
        bw_peak,
        bw_avg,
        msg_rate,
    })
}

fn print_report(r: &Report) {
    super::bw::print_table(r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate);
}

/// Closes as perftest does: a key record, then `done`.
fn close(w: &mut Wire, key: &Key) -> Result<(), String> {
    w.hand_shake(key)?;
    w.send(b"done\0")?;
    // The peer sends its own `done` and closes; neither side waits on it.
    let _ = w.s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut b = [0u8; 5];
    let _ = w.s.read_exact(&mut b);
    Ok(())
}

pub(super) fn run(args: &PerfArgs) -> Result<bool, String> {
    let (stream, local) = if args.listen {
        let local = args.local.unwrap_or_else(|| "127.0.0.1".parse().unwrap());
        // As perftest: on every address. The exchange may come over IPv4
        // while RoCE runs over IPv6 (perftest 4.5's client cannot reach an
        // IPv6 server address); `::` takes both on Linux.
        let l = TcpListener::bind((Ipv6Addr::UNSPECIFIED, args.port))
            .or_else(|_| TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, args.port)))
            .map_err(|e| format!("listening on TCP port {}: {e}", args.port))?;
        (l.accept().map_err(|e| e.to_string())?.0, local)
    } else {
        let server = args
            .server
            .as_deref()
            .ok_or("--perftest needs a server address or --listen")?;
        let local = args.local.unwrap_or_else(|| "127.0.0.2".parse().unwrap());
        (super::connect_retry(server, args.port)?, local)
    };
    let _ = stream.set_nodelay(true);
    let mut w = Wire {
        s: stream,
        client: !args.listen,
    };
    let mut p = Params::from_args(args);
    let agreed = agree(&mut w, p.mtu)?;
    p.mtu = agreed.mtu;

    // perftest addresses the peer's buffer within max(size, cycle buffer)
    // of the address in its key; our region must hold a slot per QP, our
    // own messages and the atomic results.
    let lay = Layout::new(&p, &agreed);
    let mut open = p;
    open.min_region = lay.len(u64::from(p.tx_depth)) as usize;
    let side = Side::open(local, &open)?;
    let mine = my_keys(&side, &lay);

    if p.lat && p.test != Test::Send {
        w.hand_shake(&mine[0])?;
    }
    let mut rem = Vec::with_capacity(mine.len());
    for k in &mine {
        rem.push(w.hand_shake(k)?);
    }
    let peer = Peer {
        addr: {
            let g = Ipv6Addr::from(rem[0].gid);
            g.to_ipv4_mapped().map_or(IpAddr::V6(g), IpAddr::V4)
        },
        rkey: rem[0].rkey,
        va: rem[0].vaddr,
        qps: rem.iter().map(|k| (k.qpn, Psn::new(k.psn))).collect(),
    };
    side.connect(&peer, &p)?;
    if p.test == Test::Send {
        w.hand_shake(&mine[0])?;
    }
    for k in &mine {
        w.hand_shake(k)?;
    }
    if !args.quiet {
        eprintln!(
            " perftest peer: version {:.2}, MTU {}, {} QP(s), remote QPN 0x{:06x} at {}",
            agreed.rem_version,
            p.mtu.bytes(),
            rem.len(),
            rem[0].qpn,
            peer.addr
        );
    }
    let ctx = Ctx {
        side: &side,
        rem: &rem,
        p: &p,
        lay,
        key: mine[0],
        server: args.listen,
    };
    if p.lat {
        return lat::run(&mut w, &ctx);
    }

    if p.test == Test::Send && args.listen {
        return serve_send(&mut w, &side, &p, &mine[0]);
    }
    // send: the server has posted its receives; write/read/atomic: the
    // extra sync after RTR.
    w.hand_shake(&mine[0])?;
    if args.listen {
        // write/read/atomic: the client does it all; wait for its end.
        w.hand_shake(&mine[0])?;
        let r = xchg_reports(&mut w, &Report::default(), agreed.rem_version)?;
        print_report(&r);
        close(&mut w, &mine[0])?;
        if p.test == Test::Atomic {
            check_atomic_targets(&ctx, r.iters / u64::from(p.qps))?;
        }
        return Ok(true);
    }
    let r = traffic(&ctx)?;
    print_report(&r);
    if p.test != Test::Send {
        w.hand_shake(&mine[0])?;
        xchg_reports(&mut w, &r, agreed.rem_version)?;
    }
    close(&mut w, &mine[0])?;
    Ok(true)
}

/// What the traffic of one run needs.
struct Ctx<'a> {
    side: &'a Side,
    /// The peer's key records, one per QP.
    rem: &'a [Key],
    p: &'a Params,
    lay: Layout,
    /// Our first key record (the sync points send it).
    key: Key,
    server: bool,
}

impl Ctx<'_> {
    /// At most this many READs or atomics outstanding per QP: the peer's
    /// out_reads.
    fn out_reads(&self) -> u32 {
        self.rem
            .iter()
            .map(|k| k.out_reads.max(1))
            .min()
            .unwrap_or(1)
    }
}

/// ib_send_bw's server side: keep receives posted until every message has
/// arrived, then close.
fn serve_send(w: &mut Wire, side: &Side, p: &Params, key: &Key) -> Result<bool, String> {
    let e = |e: ferroce::Error| e.to_string();
    let depth = p.tx_depth.min(p.iters).max(1);
    let mut posted = vec![0u32; side.qps.len()];
    for (i, (qp, _)) in side.qps.iter().enumerate() {
        for _ in 0..depth {
            qp.post_recv(RecvWr {
                wr_id: i as u64,
                sg: vec![side.mr.sge(0, p.size as u32)],
            })
            .map_err(e)?;
            posted[i] += 1;
        }
    }
    w.hand_shake(key)?;
    let total = u64::from(p.iters) * side.qps.len() as u64;
    let (mut got, mut last) = (0u64, Instant::now());
    let start = Instant::now();
    while got < total {
        let wcs = side.poll_ok(&mut last, || format!("server: received {got} of {total}"))?;
        for wc in wcs {
            got += 1;
            let i = side.qp_index(wc.qpn);
            if posted[i] < p.iters {
                side.qps[i]
                    .0
                    .post_recv(RecvWr {
                        wr_id: i as u64,
                        sg: vec![side.mr.sge(0, p.size as u32)],
                    })
                    .map_err(e)?;
                posted[i] += 1;
            }
        }
    }
    print_report(&rate(p.size, total, start.elapsed()));
    close(w, key)?;
    Ok(true)
}

fn rate(size: usize, n: u64, t: Duration) -> Report {
    let secs = t.as_secs_f64().max(1e-9);
    let bw = n as f64 * size as f64 / secs / 1_048_576.0;
    Report {
        size: size as u64,
        iters: n,
        bw_peak: bw,
        bw_avg: bw,
        msg_rate: n as f64 / secs / 1e6,
    }
}

/// The client's traffic: `iters` operations per QP, up to `tx_depth`
/// outstanding (for READ and atomics, no more than the peer's out_reads),
/// at the addresses perftest uses: the start of both buffers for messages
/// over half a cycle buffer, otherwise stepping by `inc` through one cycle
/// buffer. Atomic results are checked as they arrive (see [`AtomicCheck`]).
fn traffic(c: &Ctx<'_>) -> Result<Report, String> {
    let (side, p, lay) = (c.side, c.p, c.lay);
    let e = |e: ferroce::Error| e.to_string();
    let n = side.qps.len();
    let mut cap = p.tx_depth;
    if matches!(p.test, Test::Read | Test::Atomic) {
        cap = cap.min(c.out_reads());
    }
    if p.test == Test::Atomic {
        // One result slot per outstanding atomic, and never two in flight
        // on one address (the check relies on it).
        cap = cap.min(lay.per_cycle as u32);
    }
    let cap = cap.max(1);
    let step = p.test == Test::Atomic || lay.per_cycle >= 2 && p.size as u64 <= lay.slot / 2;
    let mut atomics = AtomicCheck::new(p.atomic, n, lay.per_cycle);
    let (mut posted, mut inflight) = (vec![0u64; n], vec![0u32; n]);
    let iters = u64::from(p.iters);
    let total = iters * n as u64;
    let mut done = 0u64;
    let start = Instant::now();
    let mut last = start;
    while done < total {
        for i in 0..n {
            while inflight[i] < cap && posted[i] < iters {
                let k = posted[i];
                let slot = if step { k % lay.per_cycle } else { 0 };
                let remote = c.rem[i].vaddr + slot * lay.inc;
                let rkey = c.rem[i].rkey;
                let (op, local) = match p.test {
                    Test::Write => (
                        SendOp::Write {
                            remote_addr: remote,
                            rkey,
                        },
                        side.mr.sge(lay.source(), p.size as u32),
                    ),
                    Test::Read => (
                        SendOp::Read {
                            remote_addr: remote,
                            rkey,
                        },
                        side.mr.sge(lay.source(), p.size as u32),
                    ),
                    Test::Atomic => (
                        atomics.op(i, slot as usize, remote, rkey),
                        side.mr
                            .sge(lay.result(i, k % u64::from(cap), u64::from(cap)), 8),
                    ),
                    Test::Send => (SendOp::Send, side.mr.sge(lay.source(), p.size as u32)),
                };
                side.qps[i]
                    .0
                    .post_send(SendWr::new(k, op, vec![local]))
                    .map_err(e)?;
                posted[i] += 1;
                inflight[i] += 1;
            }
        }
        let wcs = side.poll_ok(&mut last, || format!("{done} of {total} completed"))?;
        for wc in wcs {
            let i = side.qp_index(wc.qpn);
            inflight[i] -= 1;
            done += 1;
            if p.test == Test::Atomic {
                let k = wc.wr_id;
                let mut b = [0u8; 8];
                side.mr
                    .read(
                        lay.result(i, k % u64::from(cap), u64::from(cap)) as usize,
                        &mut b,
                    )
                    .map_err(e)?;
                atomics.got(i, (k % lay.per_cycle) as usize, u64::from_ne_bytes(b))?;
            }
        }
    }
    let elapsed = start.elapsed();
    if p.test == Test::Atomic {
        eprintln!(" data check: {}", atomics.summary());
    }
    // As perftest: iterations over all QPs.
    Ok(rate(p.size, total, elapsed))
}

/// Checks the values our atomics return, per QP and per target address.
///
/// The first atomic on an address learns its value (perftest fills its
/// buffer with random bytes): fetch-and-add adds 1, compare-and-swap
/// compares 0 and swaps 0, as perftest's own. After that the value is
/// known: each fetch-and-add must return the previous one plus 1, and
/// compare-and-swap compares with it and swaps in that plus 1, so each
/// must return exactly the value expected (a swap that did not happen, or
/// happened twice, shows up on the next one).
struct AtomicCheck {
    t: AtomicType,
    /// Per QP and address: the value the target holds now, once known.
    known: Vec<Vec<Option<u64>>>,
    checked: u64,
}

impl AtomicCheck {
    fn new(t: AtomicType, qps: usize, addrs: u64) -> Self {
        Self {
            t,
            known: vec![vec![None; addrs as usize]; qps],
            checked: 0,
        }
    }

    fn op(&self, qp: usize, a: usize, remote_addr: u64, rkey: u32) -> SendOp {
        match (self.t, self.known[qp][a]) {
            (AtomicType::CmpAndSwap, Some(v)) => SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare: v,
                swap: v.wrapping_add(1),
            },
            (t, _) => super::bw::atomic_op(t, remote_addr, rkey),
        }
    }

    /// Atomic on QP `qp`, address `a`, returned `orig`.
    fn got(&mut self, qp: usize, a: usize, orig: u64) -> Result<(), String> {
        let cell = &mut self.known[qp][a];
        if let Some(v) = *cell {
            if orig != v {
                return Err(format!(
                    "data check: an atomic on QP {qp}, address {a}, returned 0x{orig:x}, \
                     expected 0x{v:x}"
                ));
            }
            self.checked += 1;
            *cell = Some(v.wrapping_add(1));
        } else {
            // The first one: fetch-and-add moved it on, compare 0 / swap 0
            // left it alone (or swapped 0 for 0).
            *cell = Some(match self.t {
                AtomicType::FetchAndAdd => orig.wrapping_add(1),
                AtomicType::CmpAndSwap => orig,
            });
        }
        Ok(())
    }

    fn summary(&self) -> String {
        let first: usize = self.known.iter().flatten().filter(|v| v.is_some()).count();
        format!(
            "{} atomic results as expected ({} first ones per address only read)",
            self.checked, first
        )
    }
}

/// ib_atomic_bw's server side, after the run: every target address holds
/// what the client's atomics left there. Our region starts zeroed; perftest
/// adds 1 (fetch-and-add) or compares 0 and swaps 0 (compare-and-swap:
/// nothing changes); ferroce's own client, after a first 0 / 0, swaps in
/// the value plus 1. `per_qp` is the client's iteration count per QP.
fn check_atomic_targets(c: &Ctx<'_>, per_qp: u64) -> Result<(), String> {
    let lay = c.lay;
    let expect = |a: u64| per_qp / lay.per_cycle + u64::from(a < per_qp % lay.per_cycle);
    // ferroce's first compare-and-swap on an address compares 0, swaps 0.
    let swaps = |a: u64| expect(a).saturating_sub(1);
    let (mut adds_ok, mut swaps_ok, mut zero) = (true, true, true);
    for i in 0..c.side.qps.len() {
        for a in 0..lay.per_cycle {
            let mut b = [0u8; 8];
            c.side
                .mr
                .read((lay.target(i) + a * lay.inc) as usize, &mut b)
                .map_err(|e| e.to_string())?;
            let v = u64::from_ne_bytes(b);
            adds_ok &= v == expect(a);
            swaps_ok &= v == swaps(a);
            zero &= v == 0;
        }
    }
    let n = c.side.qps.len() as u64 * lay.per_cycle;
    let ok = match c.p.atomic {
        AtomicType::FetchAndAdd => adds_ok,
        AtomicType::CmpAndSwap => zero || swaps_ok,
    };
    if !ok {
        return Err(format!(
            "data check: the {n} atomic targets do not hold what {} atomics per QP leave",
            per_qp
        ));
    }
    eprintln!(" data check: {n} atomic targets hold what {per_qp} atomics per QP leave");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_record_matches_perftest() {
        // The record ib_write_bw sent in the rig (README §5).
        let wire = "0000:0001:000018:3cc0c2:0000091e:0000560fcf52f000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:";
        let mut m = [0u8; KEY_LEN];
        m[..wire.len()].copy_from_slice(wire.as_bytes());
        let k = Key::decode(&m).unwrap();
        assert_eq!(k.qpn, 0x18);
        assert_eq!(k.psn, 0x3cc0c2);
        assert_eq!(k.rkey, 0x91e);
        assert_eq!(k.vaddr, 0x560f_cf52_f000);
        assert_eq!(k.gid[10..], [0xff, 0xff, 0xc6, 0x12, 0x00, 0x0c]);
        assert_eq!(k.encode(), m);
        assert_eq!(wire.len() + 1, KEY_LEN);
    }

    #[test]
    fn atomic_check_follows_each_address() {
        let mut c = AtomicCheck::new(AtomicType::FetchAndAdd, 1, 2);
        // perftest's buffer is random: the first result is only read.
        c.got(0, 0, 0xdead_beef).unwrap();
        c.got(0, 1, 7).unwrap();
        c.got(0, 0, 0xdead_bef0).unwrap();
        assert!(c.got(0, 1, 7).is_err(), "an add that did not happen");

        let mut c = AtomicCheck::new(AtomicType::CmpAndSwap, 1, 1);
        // First compare 0 / swap 0, then compare the known value, swap +1.
        assert!(matches!(
            c.op(0, 0, 64, 1),
            SendOp::CompareSwap {
                compare: 0,
                swap: 0,
                ..
            }
        ));
        c.got(0, 0, 41).unwrap();
        assert!(matches!(
            c.op(0, 0, 64, 1),
            SendOp::CompareSwap {
                compare: 41,
                swap: 42,
                ..
            }
        ));
        c.got(0, 0, 41).unwrap();
        assert!(c.got(0, 0, 41).is_err(), "a swap that did not happen");
    }

    #[test]
    fn layout_keeps_slots_apart() {
        let a = Agreed {
            rem_version: 6.06,
            cycle_buffer: 4096,
            cache_line: 64,
            mtu: Mtu::Mtu1024,
        };
        let mut p = Params {
            test: Test::Atomic,
            lat: false,
            size: 8,
            iters: 100,
            qps: 2,
            tx_depth: 16,
            mtu: Mtu::Mtu1024,
            atomic: AtomicType::FetchAndAdd,
            min_region: 0,
        };
        let l = Layout::new(&p, &a);
        assert_eq!((l.inc, l.per_cycle, l.slot), (64, 64, 4096));
        assert_eq!(l.target(1), 4096);
        assert_eq!(l.source(), 8192);
        assert_eq!(l.result(1, 15, 16), 3 * 4096 + 31 * 8);
        assert!(l.len(16) >= l.result(1, 15, 16) + 8);
        // Messages over a cycle buffer: one per slot, no stepping.
        p.size = 10_000;
        let l = Layout::new(&p, &a);
        assert_eq!((l.slot, l.per_cycle), (10_048, 1));
    }

    #[test]
    fn version_parse() {
        assert_eq!(parse_version(b"6.06\0\0\0\0"), 6.06);
        assert_eq!(parse_version(b"5.5\0"), 5.5);
    }
}
