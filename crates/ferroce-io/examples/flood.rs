//! A garbage flood for measuring what rejecting hostile datagrams costs:
//! random bytes of random (or fixed) length sent as fast as `sendmmsg`
//! goes, for a bounded time, to a loopback address only.
//!
//! ```sh
//! cargo run --release -p ferroce-io --example flood -- 127.0.0.1:4791 --seconds 30
//! ```
//!
//! Options: `--seconds S` (default 30, at most 600), `--from ADDR` (the
//! source address, default 127.0.0.3), `--min-len N` / `--max-len N`
//! (default 1 and 4200, the backend's largest datagram), `--fixed N` (every
//! datagram N bytes). Prints the datagrams sent and the rate at the end.
//! Run it inside a network namespace (`scripts/flood.sh` does): on a
//! shared loopback it would also hit other programs' ports.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ferroce_io::{UdpBackend, UdpConfig};

/// Distinct datagrams prepared before sending (their lengths all differ
/// when the range allows, so a per-length cache on the receiver sees a
/// new length almost every time).
const POOL: usize = 4096;
/// Datagrams per `sendmmsg`.
const BATCH: usize = 64;
/// The flood's own source port (it receives nothing).
const SRC_PORT: u16 = 0xC0DE;

struct Args {
    to: SocketAddr,
    from: IpAddr,
    seconds: u64,
    lens: (usize, usize),
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut to = None;
    let mut args = Args {
        to: SocketAddr::from(([127, 0, 0, 1], 4791)),
        from: IpAddr::from([127, 0, 0, 3]),
        seconds: 30,
        lens: (1, 4200),
    };
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let num = |s: String| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
        match a.as_str() {
            "--seconds" => args.seconds = num(value("--seconds")?)?.min(600),
            "--from" => {
                let v = value("--from")?;
                args.from = v.parse().map_err(|e| format!("--from {v}: {e}"))?;
            }
            "--min-len" => args.lens.0 = num(value("--min-len")?)? as usize,
            "--max-len" => args.lens.1 = num(value("--max-len")?)? as usize,
            "--fixed" => {
                let n = num(value("--fixed")?)? as usize;
                args.lens = (n, n);
            }
            _ if to.is_none() && !a.starts_with('-') => {
                to = Some(a.parse().map_err(|e| format!("target {a}: {e}"))?);
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    args.to = to.ok_or("usage: flood ADDR:PORT [--seconds S] [--from ADDR] [--min-len N] [--max-len N] [--fixed N]")?;
    if !args.to.ip().is_loopback() || !args.from.is_loopback() {
        return Err(format!(
            "{} -> {}: the flood only runs between loopback addresses; run it inside a network namespace",
            args.from, args.to
        ));
    }
    if args.lens.0 == 0 || args.lens.0 > args.lens.1 || args.lens.1 > 65_000 {
        return Err(format!(
            "lengths {}..={}: need 1 <= min <= max <= 65000",
            args.lens.0, args.lens.1
        ));
    }
    Ok(args)
}

/// xorshift64*: enough randomness for garbage, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn garbage(lens: (usize, usize)) -> Vec<Vec<u8>> {
    let mut rng = Rng(std::process::id() as u64 | 1 << 40);
    let span = (lens.1 - lens.0 + 1) as u64;
    (0..POOL)
        .map(|_| {
            let len = lens.0 + (rng.next() % span) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        })
        .collect()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("flood: {e}");
            return ExitCode::from(2);
        }
    };
    let mut cfg = UdpConfig::new(args.from);
    cfg.port = 0; // the receive socket is unused; any free port
    cfg.gro = false;
    let mut backend = match UdpBackend::bind(cfg) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("flood: binding {}: {e}", args.from);
            return ExitCode::FAILURE;
        }
    };
    let pool = garbage(args.lens);
    let end = Instant::now() + Duration::from_secs(args.seconds);
    let start = Instant::now();
    let (mut sent, mut at) = (0u64, 0usize);
    while Instant::now() < end {
        let batch: Vec<&[u8]> = (0..BATCH).map(|i| &pool[(at + i) % POOL][..]).collect();
        at = (at + BATCH + 1) % POOL;
        // A full send buffer or an ICMP error queued on the socket: keep going.
        sent += backend.send_raw(args.to, SRC_PORT, &batch).unwrap_or(0) as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "flood: {sent} datagrams to {} in {secs:.1} s: {:.0} per second",
        args.to,
        sent as f64 / secs
    );
    ExitCode::SUCCESS
}
