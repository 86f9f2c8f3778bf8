//! A remote-memory service in two processes: the server registers 16 MiB
//! and waits for the client's final SEND; the client WRITEs 10,000 random
//! 4 KiB blocks, READs each back and checks it, does 1,000 FETCH_ADDs on a
//! counter, then SENDs with immediate the checksum it expects; the server
//! checksums its region and compares. The QP endpoints and the region's
//! address and key are exchanged over TCP first.
//!
//! ```text
//! remote_memory server [--addr 127.0.0.1] [--tcp 18515] [--wait spin|sleep|block]
//! remote_memory client [--addr 127.0.0.2] [--server 127.0.0.1] [--tcp 18515]
//! remote_memory bench  [--repeat N]
//! ```
//!
//! How the server waits for the SEND: `spin` polls its CQ in a loop,
//! `sleep` polls once a millisecond, `block` sleeps in
//! [`CompletionQueue::wait`]. Its application does nothing else, so every
//! READ response, ACK and atomic reply comes from ferroce's driver thread
//! or the polls. `bench` runs a server of each kind as a child process
//! against a client in this one and prints each phase's throughput, with
//! the ratios to the spinning server (the goal: `block` at least 90% of
//! `spin` in every phase).
//!
//! `cargo run --release -p ferroce --example remote_memory -- bench`

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, Context, MemoryRegion, Mtu, Psn, QpInitAttr, QpType, QueuePair,
    RecvWr, SendOp, SendWr, WcStatus, WorkCompletion, connect_qp,
};

mod bench;
mod exchange;
use exchange::{Endpoint, Region};

/// The server's region; the last block holds the FETCH_ADD counter.
const REGION: usize = 16 << 20;
const BLOCK: usize = 4096;
/// Blocks the WRITEs land in (all but the counter's).
const BLOCKS: usize = REGION / BLOCK - 1;
const COUNTER: usize = REGION - BLOCK;
const WRITES: usize = 10_000;
const ATOMICS: usize = 1_000;
/// Work requests in flight at once.
const WINDOW: usize = 32;
const TIMEOUT: Duration = Duration::from_secs(30);

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default.to_string(), |v| v.clone())
    };
    let tcp: u16 = opt("--tcp", "18515").parse()?;
    match args.first().map(String::as_str) {
        Some("server") => {
            let wait = WaitMode::parse(&opt("--wait", "block"))?;
            server(opt("--addr", "127.0.0.1").parse()?, tcp, wait)
        }
        Some("client") => {
            let server = SocketAddr::new(opt("--server", "127.0.0.1").parse()?, tcp);
            let phases = client(opt("--addr", "127.0.0.2").parse()?, server)?;
            for p in phases {
                println!("{:<10} {:>10.1} {}", p.name, p.rate, p.unit);
            }
            Ok(())
        }
        Some("bench") => bench::run(opt("--repeat", "1").parse()?, tcp),
        _ => Err("usage: remote_memory server|client|bench [options] (see the file's docs)".into()),
    }
}

/// How the server's application waits for the client's SEND.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitMode {
    Spin,
    Sleep,
    Block,
}

impl WaitMode {
    const ALL: [Self; 3] = [Self::Spin, Self::Sleep, Self::Block];

    fn parse(s: &str) -> Res<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("--wait {s}: expected spin, sleep or block").into())
    }

    fn name(self) -> &'static str {
        match self {
            Self::Spin => "spin",
            Self::Sleep => "sleep",
            Self::Block => "block",
        }
    }

    /// The next completion on `cq`, waiting this way.
    fn next(self, cq: &CompletionQueue) -> Res<WorkCompletion> {
        let deadline = Instant::now() + TIMEOUT * 4;
        while Instant::now() < deadline {
            let got = match self {
                Self::Block => cq.wait(1, Duration::from_secs(1))?,
                _ => cq.poll(1)?,
            };
            if let Some(wc) = got.into_iter().next() {
                return Ok(wc);
            }
            if self == Self::Sleep {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Err("no completion within the time limit".into())
    }
}

/// A device, its CQ, a region and an RC QP, not yet connected.
struct Side {
    ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
    psn: Psn,
}

fn open(addr: IpAddr, len: usize) -> Res<Side> {
    let ctx = Context::open(addr)?;
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(1024)?;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = pd.reg_mr(len, access)?;
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
    attr.max_send_wr = 256;
    let qp = pd.create_qp(&attr)?;
    // Any 24-bit start will do; vary it so that a stale peer is caught.
    let psn = Psn::new(std::process::id() & 0xff_ffff);
    Ok(Side {
        ctx,
        cq,
        mr,
        qp,
        psn,
    })
}

impl Side {
    fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.ctx.local(),
            qpn: self.qp.qpn(),
            psn: self.psn.value(),
        }
    }

    fn connect(&self, peer: &Endpoint) -> Res<()> {
        let (ours, theirs) = (self.psn, Psn::new(peer.psn));
        connect_qp(
            &self.qp,
            QpType::Rc,
            peer.addr,
            peer.qpn,
            ours,
            theirs,
            Mtu::Mtu4096,
        )?;
        Ok(())
    }
}

fn server(addr: IpAddr, tcp: u16, wait: WaitMode) -> Res<()> {
    let side = open(addr, REGION)?;
    let listener = TcpListener::bind((addr, tcp))?;
    let (mut tcp, _) = listener.accept()?;
    let peer = Endpoint::from_bytes(&read_exact::<{ Endpoint::LEN }>(&mut tcp)?)?;
    side.connect(&peer)?;
    side.qp.post_recv(RecvWr {
        wr_id: 0,
        sg: vec![side.mr.sge(0, 0)],
    })?;
    let region = Region {
        addr: side.mr.addr(),
        rkey: side.mr.rkey(),
        len: REGION as u64,
    };
    tcp.write_all(&side.endpoint().to_bytes())?;
    tcp.write_all(&region.to_bytes())?;

    let wc = wait.next(&side.cq)?;
    if wc.status != WcStatus::Success {
        return Err(format!("the final SEND completed with {:?}", wc.status).into());
    }
    let mut bytes = vec![0u8; REGION];
    side.mr.read(0, &mut bytes)?;
    let sum = checksum(&bytes);
    let expected = wc.imm.ok_or("the final SEND carried no immediate")?;
    println!(
        "server ({}): region checksum {sum:08x}, client expects {expected:08x}",
        wait.name()
    );
    if sum != expected {
        return Err("the region is not what the client wrote".into());
    }
    // Answer on TCP once the checksum is known, so the client's ACK of the
    // SEND is sent before it closes.
    tcp.write_all(&[1])?;
    Ok(())
}

/// One phase's result.
struct Phase {
    name: &'static str,
    rate: f64,
    unit: &'static str,
}

fn client(addr: IpAddr, server: SocketAddr) -> Res<Vec<Phase>> {
    let side = open(addr, WINDOW * BLOCK + WINDOW * 8)?;
    let mut tcp = connect_retrying(server)?;
    tcp.write_all(&side.endpoint().to_bytes())?;
    let peer = Endpoint::from_bytes(&read_exact::<{ Endpoint::LEN }>(&mut tcp)?)?;
    let region = Region::from_bytes(&read_exact::<{ Region::LEN }>(&mut tcp)?)?;
    side.connect(&peer)?;

    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let blocks: Vec<usize> = (0..WRITES)
        .map(|_| xorshift(&mut rng) as usize % BLOCKS)
        .collect();
    let mut mirror = vec![0u8; REGION];
    let mb = |n: usize, t: Duration| (n * BLOCK) as f64 / t.as_secs_f64() / 1e6;

    let t = Instant::now();
    run_window(
        &side,
        WRITES,
        |i, slot| {
            let data = block_data(i);
            mirror[blocks[i] * BLOCK..][..BLOCK].copy_from_slice(&data);
            side.mr.write(slot * BLOCK, &data)?;
            let remote_addr = region.addr + (blocks[i] * BLOCK) as u64;
            let op = SendOp::Write {
                remote_addr,
                rkey: region.rkey,
            };
            Ok(SendWr::new(
                i as u64,
                op,
                vec![side.mr.sge((slot * BLOCK) as u64, BLOCK as u32)],
            ))
        },
        |_, _| Ok(()),
    )?;
    let write = mb(WRITES, t.elapsed());

    let t = Instant::now();
    run_window(
        &side,
        WRITES,
        |i, slot| {
            let remote_addr = region.addr + (blocks[i] * BLOCK) as u64;
            let op = SendOp::Read {
                remote_addr,
                rkey: region.rkey,
            };
            Ok(SendWr::new(
                i as u64,
                op,
                vec![side.mr.sge((slot * BLOCK) as u64, BLOCK as u32)],
            ))
        },
        |i, slot| {
            let mut got = vec![0u8; BLOCK];
            side.mr.read(slot * BLOCK, &mut got)?;
            if got[..] != mirror[blocks[i] * BLOCK..][..BLOCK] {
                return Err(format!(
                    "READ {i} (block {}) differs from what was written",
                    blocks[i]
                )
                .into());
            }
            Ok(())
        },
    )?;
    let read = mb(WRITES, t.elapsed());

    let t = Instant::now();
    let mut seen = vec![false; ATOMICS];
    let base = WINDOW * BLOCK;
    run_window(
        &side,
        ATOMICS,
        |i, slot| {
            let op = SendOp::FetchAdd {
                remote_addr: region.addr + COUNTER as u64,
                rkey: region.rkey,
                add: 1,
            };
            Ok(SendWr::new(
                i as u64,
                op,
                vec![side.mr.sge((base + slot * 8) as u64, 8)],
            ))
        },
        |_, slot| {
            let mut old = [0u8; 8];
            side.mr.read(base + slot * 8, &mut old)?;
            // The target is in host order, as a local CPU's atomics see it.
            let old = u64::from_ne_bytes(old) as usize;
            if old >= ATOMICS || std::mem::replace(&mut seen[old], true) {
                return Err(format!("FETCH_ADD returned {old} twice or out of range").into());
            }
            Ok(())
        },
    )?;
    let atomic = ATOMICS as f64 / t.elapsed().as_secs_f64();
    mirror[COUNTER..][..8].copy_from_slice(&(ATOMICS as u64).to_ne_bytes());

    let op = SendOp::SendWithImm(checksum(&mirror));
    side.qp.post_send(SendWr::new(0, op, Vec::new()))?;
    expect_success(&side.cq)?;
    let mut ok = [0u8];
    tcp.read_exact(&mut ok)
        .map_err(|e| format!("the server failed its check: {e}"))?;
    Ok(vec![
        Phase {
            name: "WRITE",
            rate: write,
            unit: "MB/s",
        },
        Phase {
            name: "READ",
            rate: read,
            unit: "MB/s",
        },
        Phase {
            name: "FETCH_ADD",
            rate: atomic,
            unit: "ops/s",
        },
    ])
}

/// Posts `n` work requests made by `make(i, slot)`, at most [`WINDOW`]
/// in flight, and calls `done(i, slot)` as each completes (in order: RC
/// completes a QP's requests in order, so slot `i % WINDOW` is free again
/// when request `i - WINDOW` has completed).
fn run_window(
    side: &Side,
    n: usize,
    mut make: impl FnMut(usize, usize) -> Res<SendWr>,
    mut done: impl FnMut(usize, usize) -> Res<()>,
) -> Res<()> {
    let (mut posted, mut finished) = (0, 0);
    let deadline = Instant::now() + TIMEOUT;
    while finished < n {
        while posted < n && posted - finished < WINDOW {
            side.qp.post_send(make(posted, posted % WINDOW)?)?;
            posted += 1;
        }
        for wc in side.cq.poll(WINDOW)? {
            if wc.status != WcStatus::Success {
                return Err(format!("work request {} failed: {:?}", wc.wr_id, wc.status).into());
            }
            done(finished, finished % WINDOW)?;
            finished += 1;
        }
        if Instant::now() > deadline {
            return Err(format!("{finished} of {n} completed within {TIMEOUT:?}").into());
        }
    }
    Ok(())
}

fn expect_success(cq: &CompletionQueue) -> Res<()> {
    let wc = WaitMode::Spin.next(cq)?;
    if wc.status != WcStatus::Success {
        return Err(format!("the final SEND failed: {:?}", wc.status).into());
    }
    Ok(())
}

/// Block `i`'s contents: distinct per write, so a READ of a stale or
/// misplaced block is caught.
fn block_data(i: usize) -> Vec<u8> {
    let mut s = (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    (0..BLOCK / 8)
        .flat_map(|_| xorshift(&mut s).to_le_bytes())
        .collect()
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// FNV-1a over the region, folded to 32 bits for the immediate.
fn checksum(bytes: &[u8]) -> u32 {
    let h = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h ^ (h >> 32)) as u32
}

fn read_exact<const N: usize>(tcp: &mut TcpStream) -> Res<[u8; N]> {
    let mut buf = [0u8; N];
    tcp.read_exact(&mut buf)?;
    Ok(buf)
}

/// Connects to the server, which may still be starting.
fn connect_retrying(server: SocketAddr) -> Res<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(server) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("cannot reach the server at {server}: {e}").into());
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
