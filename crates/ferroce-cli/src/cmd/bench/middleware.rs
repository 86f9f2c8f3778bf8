//! Middleware's speed: UCX's `ucx_perftest` (Debian's, unmodified) on
//! ferroce's `libibverbs.so.1` and `librdmacm.so.1`, each run beside the
//! same transfer by `ferroce perf`, interleaved so that both see the same
//! machine:
//!
//! * `put_bw` over `rc_verbs`, zero-copy, 64 KiB messages, against `ferroce
//!   perf write -s 65536` (goal: at least 90%);
//! * `am_lat` over `rc_verbs`, 8 bytes, against `ferroce perf send --lat -s
//!   8` (goal: at most 115%). Both report one-way latency: UCX halves its
//!   ping-pong's round trip, as perftest does.
//!
//! The libraries are found as for the C ABI rows ([`super::cabi`]);
//! `librdmacm.so` is taken from beside `libibverbs.so`. Without them or
//! without `ucx_perftest` the rows are skipped, and the table says why.

use std::path::Path;
use std::process::Command;

use super::cabi::{self, LibDir};
use super::{BenchArgs, perf};
use crate::error::Error;

/// The bandwidth test's message size and the latency test's.
pub(super) const PUT_SIZE: u64 = 65536;
pub(super) const AM_SIZE: u64 = 8;

/// The device each side's `FERROCE_DEVICES` makes first, and its port.
const UCX_DEVICE: &str = "ferroce0:1";

/// The two rows, put_bw and am_lat, each (UCX, ferroce perf, paired
/// ratio); or why they were not measured.
pub(super) type UcxFigures = Result<[cabi::Row; 2], String>;

/// Runs both measures `args.repeat` times, each UCX run right beside its
/// `ferroce perf` run.
pub(super) fn measure(args: &BenchArgs, mut next_port: impl FnMut() -> u16) -> UcxFigures {
    let tool = cabi::tool_on_path("ucx_perftest", "ucx-utils")?;
    let libs = LibDir::new(args, "ucx", true)?;
    let iters = (args.bytes / PUT_SIZE).max(1).to_string();
    let lat_iters = args.lat_iters.to_string();
    let (mut u_bw, mut f_bw, mut u_lat, mut f_lat) = (vec![], vec![], vec![], vec![]);
    for _ in 0..args.repeat.max(1) {
        eprintln!("ucx_perftest put_bw rc_verbs zcopy and ferroce perf write -s {PUT_SIZE} ...");
        let put = [
            "-t", "put_bw", "-x", "rc_verbs", "-D", "zcopy", "-s", "65536", "-n", &iters,
        ];
        u_bw.push(ucx(args, &tool, &libs, &put, next_port()).map(|f| f.bw_mb * 1_048_576.0 / 1e9));
        let ours = ["write", "-s", "65536", "-n", &iters].map(String::from);
        f_bw.push(
            perf(args, &ours, next_port())
                .map(|cols| cols.get(3).map_or(f64::NAN, |mb| mb * 1_048_576.0 / 1e9)),
        );
        eprintln!("ucx_perftest am_lat rc_verbs and ferroce perf send --lat -s {AM_SIZE} ...");
        let am = [
            "-t", "am_lat", "-x", "rc_verbs", "-s", "8", "-n", &lat_iters,
        ];
        u_lat.push(ucx(args, &tool, &libs, &am, next_port()).map(|f| f.median_us));
        let ours = ["send", "--lat", "-s", "8", "-n", &lat_iters].map(String::from);
        // #bytes #iterations t_min t_max t_typical ...
        f_lat.push(
            perf(args, &ours, next_port()).map(|cols| cols.get(4).copied().unwrap_or(f64::NAN)),
        );
    }
    Ok([cabi::row(u_bw, f_bw), cabi::row(u_lat, f_lat)])
}

/// What `ucx_perftest`'s `Final:` line says.
#[derive(Debug, PartialEq)]
struct Final {
    /// The median latency, µs (one way for the latency tests).
    median_us: f64,
    /// The overall bandwidth, MB/s (2^20 bytes).
    bw_mb: f64,
}

/// One `ucx_perftest` pair on loopback: the server on `args.server`'s
/// device, the client on `args.client`'s.
fn ucx(
    args: &BenchArgs,
    tool: &Path,
    libs: &LibDir,
    test: &[&str],
    port: u16,
) -> Result<Final, Error> {
    let text = cabi::pair(args.peers(), "ucx_perftest", &test.join(" "), port, |to| {
        let mut c = Command::new(tool);
        c.args(to.map(|a| a.to_string()))
            .args(["-p", &port.to_string()])
            .args(to.map(|_| ["-d", UCX_DEVICE]).into_iter().flatten())
            .args(to.map(|_| test).into_iter().flatten())
            .env("LD_LIBRARY_PATH", libs.path());
        c
    })?;
    final_line(&text).ok_or_else(|| format!("ucx_perftest: no Final: line in:\n{text}").into())
}

/// The `Final:` line: iterations, then latency (median, average, overall),
/// bandwidth (average, overall) and message rate (average, overall).
fn final_line(text: &str) -> Option<Final> {
    let line = text.lines().find_map(|l| l.trim().strip_prefix("Final:"))?;
    let cols: Vec<f64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (cols.len() == 8).then(|| Final {
        median_us: cols[1],
        bw_mb: cols[5],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_final_line() {
        let text = "+----+\n|  Stage  |\nFinal:                  1000      3.505    44.145    \
                    44.145        0.17       0.17       22653       22653\n";
        assert_eq!(
            final_line(text),
            Some(Final {
                median_us: 3.505,
                bw_mb: 0.17
            })
        );
        assert_eq!(final_line("Final: 10 1.0 2.0\n"), None);
        assert_eq!(final_line("no table\n"), None);
    }
}
