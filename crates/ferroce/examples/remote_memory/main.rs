//! A remote-memory service in two processes: the server registers 16 MiB
//! and waits for the client's final SEND; the client WRITEs 10,000 random
//! 4 KiB blocks, READs each back and checks it, does 1,000 FETCH_ADDs on a
//! counter, then SENDs with immediate the checksum it expects; the server
//! checksums its region and compares. First the two exchange, over TCP,
//! what RDMA needs: each QP's [`ferroce::QpEndpoint`] ([`ferroce::QpEndpoint::exchange`])
//! and the server region's [`RemoteRegion`] ([`RemoteRegion::send`] and
//! [`RemoteRegion::recv`]), in the library's byte encodings; every WRITE, READ and
//! FETCH_ADD then targets a bounds-checked [`RemoteRegion::at`] slice.
//!
//! ```text
//! remote_memory server [--addr 127.0.0.1] [--tcp 18515] [--wait spin|sleep|block]
//! remote_memory client [--addr 127.0.0.2] [--server 127.0.0.1] [--tcp 18515]
//! remote_memory bench  [--repeat N] [--addr 127.0.0.2] [--server 127.0.0.1] [--tcp 18515]
//! ```
//!
//! How the server waits for the SEND: `spin` polls its CQ in a loop,
//! `sleep` polls once a millisecond, `block` sleeps in
//! [`CompletionQueue::wait`]. Its application does nothing else, so every
//! READ response, ACK and atomic reply comes from ferroce's driver thread
//! or the polls. `bench` runs a server of each kind as a child process
//! against a client in this one and prints each phase's throughput, with
//! the ratios to the spinning server (the goal: `block` at least 95% of
//! `spin` in every phase; `ferroce bench --progress-only` reads the
//! table).
//!
//! `cargo run --release -p ferroce --example remote_memory -- bench`

use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, QpInitAttr, QpType, QueuePair,
    RecvWr, RemoteRegion, SendOp, SendWr, Sge, WorkCompletion,
};

mod bench;
mod exchange;

/// The server's region; the last block holds the FETCH_ADD counter.
const REGION: u64 = 16 << 20;
const BLOCK: u64 = 4096;
/// Blocks the WRITEs land in (all but the counter's).
const BLOCKS: u64 = REGION / BLOCK - 1;
const COUNTER: u64 = REGION - BLOCK;
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
        Some("bench") => {
            let server = SocketAddr::new(opt("--server", "127.0.0.1").parse()?, tcp);
            bench::run(
                opt("--repeat", "1").parse()?,
                opt("--addr", "127.0.0.2").parse()?,
                server,
            )
        }
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
        let mut wc = [WorkCompletion::default()];
        while Instant::now() < deadline {
            let got = match self {
                Self::Block => cq.wait(1, Duration::from_secs(1))?.pop(),
                _ => (cq.poll_into(&mut wc)? == 1).then_some(wc[0]),
            };
            if let Some(wc) = got {
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
    _ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

fn open(addr: IpAddr, len: u64) -> Res<Side> {
    let ctx = Context::open(addr)?;
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(1024)?;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = pd.reg_mr(usize::try_from(len)?, access)?;
    // The first PSN is random (QpInitAttr::psn), so a stale peer is caught.
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
    attr.max_send_wr = 256;
    let qp = pd.create_qp(&attr)?;
    Ok(Side {
        _ctx: ctx,
        cq,
        mr,
        qp,
    })
}

impl Side {
    /// Trades QP endpoints with the peer over `tcp` and connects to its
    /// QP. The default options take the path MTU both ports allow (each
    /// endpoint carries its port's active MTU), so both sides agree.
    fn connect(&self, tcp: &mut TcpStream) -> Res<()> {
        let peer = self.qp.endpoint().exchange(tcp)?;
        self.qp.connect(&peer, &ConnectOptions::default())?;
        Ok(())
    }
}

fn server(addr: IpAddr, tcp: u16, wait: WaitMode) -> Res<()> {
    let side = open(addr, REGION)?;
    let listener = TcpListener::bind((addr, tcp))?;
    let (mut tcp, _) = listener.accept()?;
    side.connect(&mut tcp)?;
    // The final SEND carries only its immediate: a receive of no bytes,
    // posted before the client learns the region (so before it sends).
    side.qp.post_recv(RecvWr::new(0, &[]))?;
    side.mr.remote().send(&mut tcp)?;

    let wc = wait.next(&side.cq)?;
    wc.ok()?;
    let mut bytes = vec![0u8; REGION as usize];
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
    std::io::Write::write_all(&mut tcp, &[1])?;
    Ok(())
}

/// One phase's result.
struct Phase {
    name: &'static str,
    rate: f64,
    unit: &'static str,
}

fn client(addr: IpAddr, server: SocketAddr) -> Res<Vec<Phase>> {
    let window = WINDOW as u64;
    let side = open(addr, window * BLOCK + window * 8)?;
    let mut tcp = exchange::connect_retrying(server)?;
    side.connect(&mut tcp)?;
    let region = RemoteRegion::recv(&mut tcp)?;
    if region.len() < REGION {
        return Err(format!(
            "the server's region holds {} bytes, not {REGION}",
            region.len()
        )
        .into());
    }

    // Local slots, one per request in flight: a block each for WRITE and
    // READ, then 8 bytes each for the FETCH_ADD results.
    let block_slots: Vec<Sge> = (0..window)
        .map(|s| side.mr.sge(s * BLOCK, BLOCK as u32))
        .collect();
    let atomic_slots: Vec<Sge> = (0..window)
        .map(|s| side.mr.sge(window * BLOCK + s * 8, 8))
        .collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let blocks: Vec<u64> = (0..WRITES).map(|_| xorshift(&mut rng) % BLOCKS).collect();
    let mut mirror = vec![0u8; REGION as usize];
    let in_mirror = |block: u64| (block * BLOCK) as usize..((block + 1) * BLOCK) as usize;
    let mb = |n: usize, t: Duration| n as f64 * BLOCK as f64 / t.as_secs_f64() / 1e6;

    let t = Instant::now();
    run_window(
        &side,
        WRITES,
        &block_slots,
        |i, sg| {
            let data = block_data(i);
            mirror[in_mirror(blocks[i])].copy_from_slice(&data);
            side.mr.write(sg[0].offset, &data)?;
            let target = region.at(blocks[i] * BLOCK, BLOCK)?;
            Ok(SendWr::write(i as u64, sg, target))
        },
        |_, _| Ok(()),
    )?;
    let write = mb(WRITES, t.elapsed());

    let t = Instant::now();
    run_window(
        &side,
        WRITES,
        &block_slots,
        |i, sg| {
            Ok(SendWr::read(
                i as u64,
                sg,
                region.at(blocks[i] * BLOCK, BLOCK)?,
            ))
        },
        |i, slot| {
            let mut got = vec![0u8; BLOCK as usize];
            side.mr.read(slot.offset, &mut got)?;
            if got[..] != mirror[in_mirror(blocks[i])] {
                let block = blocks[i];
                return Err(
                    format!("READ {i} (block {block}) differs from what was written").into(),
                );
            }
            Ok(())
        },
    )?;
    let read = mb(WRITES, t.elapsed());

    let t = Instant::now();
    let counter = region.at(COUNTER, 8)?;
    let mut seen = vec![false; ATOMICS];
    run_window(
        &side,
        ATOMICS,
        &atomic_slots,
        |i, sg| Ok(SendWr::fetch_add(i as u64, sg, counter, 1)),
        |_, slot| {
            let mut old = [0u8; 8];
            side.mr.read(slot.offset, &mut old)?;
            // The target is in host order, as a local CPU's atomics see it.
            let old = u64::from_ne_bytes(old) as usize;
            if old >= ATOMICS || std::mem::replace(&mut seen[old], true) {
                return Err(format!("FETCH_ADD returned {old} twice or out of range").into());
            }
            Ok(())
        },
    )?;
    let atomic = ATOMICS as f64 / t.elapsed().as_secs_f64();
    mirror[COUNTER as usize..][..8].copy_from_slice(&(ATOMICS as u64).to_ne_bytes());

    let op = SendOp::SendWithImm(checksum(&mirror));
    side.qp.post_send(SendWr::new(0, op, &[]))?;
    WaitMode::Spin.next(&side.cq)?.ok()?;
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
/// in flight, each on its own local slot (one element of `slots`, handed
/// to `make` as the request's scatter list), and calls `done(i, slot)` as
/// each completes. Completions come in order (RC completes a QP's
/// requests in order), so slot `i % WINDOW` is free again once request
/// `i - WINDOW` has completed.
fn run_window<'a>(
    side: &Side,
    n: usize,
    slots: &'a [Sge],
    mut make: impl FnMut(usize, &'a [Sge]) -> Res<SendWr<'a>>,
    mut done: impl FnMut(usize, &Sge) -> Res<()>,
) -> Res<()> {
    let (mut posted, mut finished) = (0, 0);
    let mut wcs = [WorkCompletion::default(); WINDOW];
    let deadline = Instant::now() + TIMEOUT;
    while finished < n {
        while posted < n && posted - finished < WINDOW {
            let slot = std::slice::from_ref(&slots[posted % WINDOW]);
            side.qp.post_send(make(posted, slot)?)?;
            posted += 1;
        }
        let got = side.cq.poll_into(&mut wcs)?;
        for wc in &wcs[..got] {
            wc.ok()?;
            done(finished, &slots[finished % WINDOW])?;
            finished += 1;
        }
        if Instant::now() > deadline {
            return Err(format!("{finished} of {n} completed within {TIMEOUT:?}").into());
        }
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
