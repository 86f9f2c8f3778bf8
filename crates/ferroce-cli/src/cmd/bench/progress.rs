//! The engine's "never waits" goals, each a ratio against a baseline
//! measured in the same run:
//!
//! * region scan: a server thread checksums its whole 16 MiB region
//!   (through `MemoryRegion::volatile`) in a loop while a peer WRITEs into
//!   it; the peer's WRITE phase against the same phase while the thread
//!   scans a plain `Vec` (goal: at most 1.25x, and no failed phase);
//! * owed ACK: a receiver that stops polling right after a SEND's
//!   completion; the sender's SEND completion time against the same with
//!   the receiver polling on (goal: the p50s at most 100 µs apart);
//! * a passive server: each phase's throughput with the server blocking in
//!   `CompletionQueue::wait` against one that spins (goal: at least 95%);
//! * latency stability: unmodified `ib_write_lat -n 1000` on ferroce's
//!   `libibverbs.so.1`, `--stability-runs` runs in a row; the worst run's
//!   t_avg against the median run's (goal: at most 2x).
//!
//! The first three run ferroce's own examples (`region_scan`, `owed_ack`,
//! `remote_memory bench`) as child processes and read what they print: the
//! example stays the one implementation of each measure, runnable alone
//! with the same phases, and the bench adds only the row. (An example
//! cannot call into this crate, and a second runner here would drift from
//! it.) They are found in `examples/` beside the `ferroce` binary, where
//! `cargo build --release -p ferroce --examples` puts them; without them
//! the rows are skipped, and the table says how to build them. The perftest
//! row finds its library and tool as the C ABI rows do ([`super::cabi`]).
//!
//! Each measure has loopback addresses of its own (127.0.88.x), used by no
//! other row or test, and every child is killed past the C ABI rows' time
//! limit.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::cabi::{self, LibDir};
use super::{BenchArgs, Peers, median_p99};
use crate::error::Error;

/// The region scan's client (the writer) and server (the scanner).
const SCAN_PEERS: Peers = peers(1, 2);
/// The owed ACK's sender (client) and receiver (server).
const OWED_PEERS: Peers = peers(3, 4);
const PASSIVE_PEERS: Peers = peers(6, 5);
const STABILITY_PEERS: Peers = peers(8, 7);

/// 4 KiB WRITEs per region-scan phase, and rounds (each a phase of either
/// scan).
pub(super) const SCAN_WRITES: u32 = 3000;
pub(super) const SCAN_ROUNDS: u32 = 5;
/// SENDs per owed-ACK phase.
pub(super) const OWED_ROUNDS: u32 = 200;
/// Round trips per `ib_write_lat` run.
pub(super) const STABILITY_ITERS: u32 = 1000;

const fn peers(client: u8, server: u8) -> Peers {
    Peers {
        server: IpAddr::V4(Ipv4Addr::new(127, 0, 88, server)),
        client: IpAddr::V4(Ipv4Addr::new(127, 0, 88, client)),
    }
}

/// One measure: its figures, or why it was not run (no failure), or why
/// it failed.
pub(super) enum Outcome<T> {
    Measured(T),
    Skipped(String),
    Failed(Error),
}

impl<T> Outcome<T> {
    fn of(r: Result<Result<T, Error>, String>) -> Self {
        match r {
            Ok(Ok(t)) => Self::Measured(t),
            Ok(Err(e)) => Self::Failed(e),
            Err(why) => Self::Skipped(why),
        }
    }
}

/// The median WRITE phase of each kind, ms.
pub(super) struct RegionScan {
    pub(super) vec_ms: f64,
    pub(super) region_ms: f64,
}

/// The sender's SEND completion times, µs: (p50, p99) with the receiver
/// polling on, and with it stopping.
pub(super) struct OwedAck {
    pub(super) polling: (f64, f64),
    pub(super) stopping: (f64, f64),
}

/// One phase of the passive server's client: its name, unit, and the best
/// run's throughput with a spinning and with a blocking server.
pub(super) struct PassivePhase {
    pub(super) name: String,
    pub(super) unit: String,
    pub(super) spin: f64,
    pub(super) block: f64,
}

/// The passive server's phases, and the runs that failed (not counted).
pub(super) struct Passive {
    pub(super) phases: Vec<PassivePhase>,
    pub(super) failed_runs: Vec<String>,
}

/// `ib_write_lat`'s runs, µs: the median and the worst t_avg, the median
/// t_typical and 99th percentile; and the runs that failed.
pub(super) struct Stability {
    pub(super) runs: usize,
    pub(super) median_avg: f64,
    pub(super) worst_avg: f64,
    pub(super) median_typical: f64,
    pub(super) median_p99: f64,
    pub(super) failed_runs: Vec<String>,
}

pub(super) struct ProgressFigures {
    pub(super) region_scan: Outcome<RegionScan>,
    pub(super) owed_ack: Outcome<OwedAck>,
    pub(super) passive: Outcome<Passive>,
    pub(super) stability: Outcome<Stability>,
}

/// Every measure once (the passive server's runs `args.repeat` times each).
pub(super) fn measure(args: &BenchArgs, mut next_port: impl FnMut() -> u16) -> ProgressFigures {
    eprintln!("region scan (examples/region_scan) ...");
    let region_scan = Outcome::of(example("region_scan").map(|exe| region_scan(&exe)));
    eprintln!("owed ACK (examples/owed_ack) ...");
    let owed_ack = Outcome::of(example("owed_ack").map(|exe| owed_ack(&exe)));
    eprintln!("passive server (examples/remote_memory bench) ...");
    let port = next_port();
    let passive = Outcome::of(example("remote_memory").map(|exe| passive(&exe, args.repeat, port)));
    eprintln!("ib_write_lat stability, {} runs ...", args.stability_runs);
    let stability = Outcome::of(
        stability_setup(args)
            .map(|(libs, tool)| stability(&libs, &tool, args.stability_runs, &mut next_port)),
    );
    ProgressFigures {
        region_scan,
        owed_ack,
        passive,
        stability,
    }
}

/// The example `name` beside this binary, or how to build it.
fn example(name: &str) -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find this binary's directory: {e}"))?;
    let path = exe.with_file_name("examples").join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: build it with `cargo build --release -p ferroce --example {name}` \
             (it lands in examples/ beside the ferroce binary)",
            path.display()
        ))
    }
}

/// Runs `exe` with `args` to its end (killed past the time limit); its
/// standard output and error, and whether it succeeded.
fn run(exe: &Path, args: &[String]) -> Result<(String, String, bool), Error> {
    let child = Command::new(exe)
        .args(args)
        .env_remove("FERROCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let name = exe.file_name().unwrap_or_default().to_string_lossy();
    let out = cabi::finish(child, &name)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok((text(&out.stdout), text(&out.stderr), out.status.success()))
}

fn addrs(p: Peers) -> [String; 2] {
    [p.client.to_string(), p.server.to_string()]
}

fn region_scan(exe: &Path) -> Result<RegionScan, Error> {
    let [client, server] = addrs(SCAN_PEERS);
    let a = [
        SCAN_WRITES.to_string(),
        SCAN_ROUNDS.to_string(),
        client,
        server,
    ];
    let (out, err, _) = run(exe, &a)?;
    let Some((vec_ms, region_ms, failed)) = scan_summary(&out) else {
        return Err(format!("region_scan: no summary line in its output:\n{out}{err}").into());
    };
    if failed > 0 {
        let phases: Vec<&str> = out.lines().filter(|l| l.contains("FAILED")).collect();
        return Err(format!(
            "region scan: {failed} WRITE phase(s) failed:\n{}",
            phases.join("\n")
        )
        .into());
    }
    Ok(RegionScan { vec_ms, region_ms })
}

/// region_scan's last line: "WRITE phase, median of N rounds: X ms
/// scanning a Vec, Y ms scanning the region: Z x; failed phases: F".
fn scan_summary(text: &str) -> Option<(f64, f64, u32)> {
    let line = text.lines().rev().find(|l| l.starts_with("WRITE phase"))?;
    let (_, figures) = line.split_once(':')?;
    let number_before = |marker: &str| -> Option<f64> {
        let (before, _) = figures.split_once(marker)?;
        before.split_whitespace().last()?.parse().ok()
    };
    let vec_ms = number_before(" ms scanning a Vec")?;
    let region_ms = number_before(" ms scanning the region")?;
    let failed = line.rsplit_once("failed phases:")?.1.trim().parse().ok()?;
    Some((vec_ms, region_ms, failed))
}

fn owed_ack(exe: &Path) -> Result<OwedAck, Error> {
    let [sender, receiver] = addrs(OWED_PEERS);
    let (out, err, ok) = run(exe, &[OWED_ROUNDS.to_string(), sender, receiver])?;
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| Some((figure_after(l, "p50")?, figure_after(l, "p99")?)))
    };
    match (ok, line("receiver goes on polling"), line("receiver stops")) {
        (true, Some(polling), Some(stopping)) => Ok(OwedAck { polling, stopping }),
        _ => Err(format!("owed_ack failed or printed no figures:\n{out}{err}").into()),
    }
}

/// The number right after the word `label` in `line`.
fn figure_after(line: &str, label: &str) -> Option<f64> {
    let mut words = line.split_whitespace();
    words.find(|w| *w == label)?;
    words.next()?.parse().ok()
}

fn passive(exe: &Path, repeat: u32, tcp: u16) -> Result<Passive, Error> {
    let (client, server) = (PASSIVE_PEERS.client, PASSIVE_PEERS.server);
    let a = [
        "bench".to_string(),
        "--repeat".into(),
        repeat.max(1).to_string(),
        "--addr".into(),
        client.to_string(),
        "--server".into(),
        server.to_string(),
        "--tcp".into(),
        tcp.to_string(),
    ];
    let (out, err, ok) = run(exe, &a)?;
    let phases = passive_table(&out);
    if !ok || phases.is_empty() {
        return Err(format!("remote_memory bench failed:\n{out}{err}").into());
    }
    let failed_runs = err
        .lines()
        .filter(|l| l.starts_with("a run with the"))
        .map(String::from)
        .collect();
    Ok(Passive {
        phases,
        failed_runs,
    })
}

/// remote_memory's table rows: phase, then spin, sleep and block, each a
/// number and its unit, then the ratios.
fn passive_table(text: &str) -> Vec<PassivePhase> {
    text.lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let name = *words.first()?;
            if !["WRITE", "READ", "FETCH_ADD"].contains(&name) {
                return None;
            }
            let number = |i: usize| words.get(i)?.parse::<f64>().ok();
            Some(PassivePhase {
                name: name.to_string(),
                unit: words.get(2)?.to_string(),
                spin: number(1)?,
                block: number(5)?,
            })
        })
        .collect()
}

/// ferroce's library linked as `libibverbs.so.1`, and `ib_write_lat`.
fn stability_setup(args: &BenchArgs) -> Result<(LibDir, PathBuf), String> {
    let tool = cabi::tool_on_path("ib_write_lat", "perftest")?;
    Ok((LibDir::new(args, "progress", false)?, tool))
}

/// `runs` `ib_write_lat -n 1000` pairs in a row; a failed run is listed
/// and left out, and the measure fails if none succeeded.
fn stability(
    libs: &LibDir,
    tool: &Path,
    runs: u32,
    mut next_port: impl FnMut() -> u16,
) -> Result<Stability, Error> {
    let extra = ["-n".to_string(), STABILITY_ITERS.to_string()];
    let (mut typical, mut avg, mut p99, mut failed_runs) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs.max(1) {
        // #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
        match cabi::perftest(STABILITY_PEERS, libs, tool, &extra, next_port()) {
            Ok(cols) if cols.len() >= 8 => {
                typical.push(cols[4]);
                avg.push(cols[5]);
                p99.push(cols[7]);
            }
            Ok(cols) => failed_runs.push(format!("ib_write_lat: a short data row {cols:?}")),
            Err(e) => failed_runs.push(e.to_string()),
        }
    }
    if avg.is_empty() {
        return Err(format!("every ib_write_lat run failed: {}", failed_runs.join("; ")).into());
    }
    let worst_avg = avg.iter().copied().fold(f64::NAN, f64::max);
    Ok(Stability {
        runs: avg.len(),
        median_avg: median_p99(&mut avg).0,
        worst_avg,
        median_typical: median_p99(&mut typical).0,
        median_p99: median_p99(&mut p99).0,
        failed_runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_region_scans_summary() {
        let text = "round 1\n  scanning a Vec<u8> 3000 writes in 200.0 ms\n\
                    WRITE phase, median of 5 rounds: 212.5 ms scanning a Vec, 230.1 ms \
                    scanning the region: 1.08x; failed phases: 0\n";
        assert_eq!(scan_summary(text), Some((212.5, 230.1, 0)));
        let failed = text.replace("phases: 0", "phases: 2");
        assert_eq!(scan_summary(&failed).map(|s| s.2), Some(2));
        assert_eq!(scan_summary("round 1\n"), None);
    }

    #[test]
    fn reads_owed_acks_lines() {
        let line = "receiver stops polling for 2 ms        200 SENDs  p50    61.0 us  p99   \
                    95.2 us  max   130.0 us";
        assert_eq!(figure_after(line, "p50"), Some(61.0));
        assert_eq!(figure_after(line, "p99"), Some(95.2));
        assert_eq!(figure_after(line, "p90"), None);
    }

    #[test]
    fn reads_the_passive_servers_table() {
        let text = "phase                spin   sleep (1 ms)   block (wait) sleep/spin block/spin  goal\n\
                    WRITE           1015 MB/s       971 MB/s       993 MB/s        96%        98%  \
                    block >= 95% of spin: met\n\
                    FETCH_ADD     565000 op/s    583000 op/s    577000 op/s       103%       102%  \
                    block >= 95% of spin: met\n";
        let rows = passive_table(text);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].spin, rows[0].block), (1015.0, 993.0));
        assert_eq!(
            (rows[1].name.as_str(), rows[1].unit.as_str()),
            ("FETCH_ADD", "op/s")
        );
        assert!(passive_table("no table\n").is_empty());
    }

    #[test]
    fn each_measure_has_addresses_of_its_own() {
        let all = [SCAN_PEERS, OWED_PEERS, PASSIVE_PEERS, STABILITY_PEERS];
        let mut addrs: Vec<IpAddr> = all.iter().flat_map(|p| [p.server, p.client]).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 2 * all.len());
    }
}
