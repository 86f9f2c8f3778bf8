//! `ferroce bench`'s table: one row per measure, each beside its baseline
//! with the ratio and the goal. A measure that failed leaves its row empty
//! and its reason under the table.

use super::cabi::{BW_SIZE, CabiFigures, LAT_SIZE};
use super::middleware::{AM_SIZE, PUT_SIZE, UcxFigures};
use super::progress::{
    OWED_ROUNDS, Outcome, Passive, ProgressFigures, RegionScan, SCAN_ROUNDS, SCAN_WRITES,
    STABILITY_ITERS, Stability,
};
use super::veth::{TRAIN, VethRows};
use super::{
    BenchArgs, CM_PARALLEL, CmFigures, FULL_DATAGRAM, Figure, Figures, RATE_WRITE, Raw, SMALL_WRITE,
};

/// The table: one row per measure.
pub(super) struct Table;

impl Table {
    fn header() {
        Self::header_with("ferroce");
    }

    /// The header, with `ours` naming the column of what is measured.
    fn header_with(ours: &str) {
        let (names, rule) = Self::header_cells(ours);
        println!("{names}");
        println!("{rule}");
    }

    /// The header of a table whose rows end with a note
    /// ([`Self::row_note`]).
    pub(super) fn header_with_note(ours: &str) {
        let (names, rule) = Self::header_cells(ours);
        println!("{names} note |");
        println!("{rule}------|");
    }

    /// The header's line of names and its rule.
    fn header_cells(ours: &str) -> (String, String) {
        let names = format!(
            "| {:<40} | {:>14} | {:>24} | {:>7} | {:<14} |",
            "measure", ours, "baseline", "ratio", "goal"
        );
        let rule = format!(
            "|{}|{}|{}|{}|{}|",
            "-".repeat(42),
            "-".repeat(16),
            "-".repeat(26),
            "-".repeat(9),
            "-".repeat(16)
        );
        (names, rule)
    }

    fn row(name: &str, ours: &str, base: &str, ratio: f64, goal: &str) {
        println!("{}", Self::cells(name, ours, base, ratio, goal));
    }

    /// A row with a note after the goal.
    pub(super) fn row_note(name: &str, ours: &str, base: &str, ratio: f64, goal: &str, note: &str) {
        println!("{} {note} |", Self::cells(name, ours, base, ratio, goal));
    }

    fn cells(name: &str, ours: &str, base: &str, ratio: f64, goal: &str) -> String {
        let ratio = if ratio.is_finite() {
            format!("{:.0}%", ratio * 100.0)
        } else {
            String::new()
        };
        format!("| {name:<40} | {ours:>14} | {base:>24} | {ratio:>7} | {goal:<14} |")
    }
}

fn gbs(v: f64) -> String {
    format!("{v:.2} GB/s")
}

fn us(v: f64) -> String {
    format!("{v:.2} us")
}

pub(super) fn mps(v: f64) -> String {
    format!("{:.2} M/s", v / 1e6)
}

/// Prints the table and the failures; true if nothing failed.
pub(super) fn print(args: &BenchArgs, raw: &Raw, f: Figures) -> bool {
    let mut failed = Failures::default();
    let mut ok = |r: Figure| failed.take(r);
    println!(
        "ferroce bench: {} -> {}, two processes each side; median of {} runs \
         of each measure; {} MiB per bandwidth run",
        args.client,
        args.server,
        args.repeat.max(1),
        args.bytes >> 20
    );
    Table::header();
    for (name, v) in [
        ("raw UDP 4112 B datagrams, sendmmsg", raw.mmsg),
        ("raw UDP 4112 B datagrams, GSO + GRO", raw.gso),
        ("raw UDP, shaped as 64 KiB WRITEs", raw.shaped),
    ] {
        Table::row(name, "", &gbs(v), f64::NAN, "");
    }
    for (op, size, qps, r) in f.bandwidth {
        let gb = ok(r);
        let goal_row = op == "write" && size == 65536 && qps == 1;
        let size = if size == 65536 { "64 KiB" } else { "1 MiB" };
        Table::row(
            &format!("RC {} goodput, {size}, {qps} QP", op.to_uppercase()),
            &gbs(gb),
            &format!("{} (raw limit)", gbs(raw.limit)),
            gb / raw.limit,
            if goal_row { ">= 80%" } else { "" },
        );
        if goal_row {
            let base = format!("{} (raw, shaped)", gbs(raw.shaped));
            Table::row("", "", &base, gb / raw.shaped, "");
        }
    }
    let [raw_med, raw_p99] = f.raw_latency;
    for (name, med, p99) in f.latency {
        let (med, p99) = (ok(med), ok(p99));
        Table::row(
            &format!("RC {name} latency 8 B, median"),
            &us(med),
            &format!("{} (raw half RTT)", us(raw_med)),
            med / raw_med,
            "<= 150%",
        );
        Table::row(
            &format!("RC {name} latency 8 B, p99"),
            &us(p99),
            &format!("{} (raw half RTT)", us(raw_p99)),
            p99 / raw_p99,
            "",
        );
    }
    let rate = ok(f.rate) * 1e6;
    Table::row(
        "64 B WRITE message rate, 1 QP",
        &mps(rate),
        &format!("{} (raw, sendmmsg)", mps(raw.rate_mmsg)),
        rate / raw.rate_mmsg,
        ">= 1.00 M/s",
    );
    let base = format!("{} (raw, GSO+GRO)", mps(raw.rate_gso));
    Table::row("", "", &base, rate / raw.rate_gso, "");
    let scale: Vec<(u32, f64)> = f.scale.into_iter().map(|(q, r)| (q, ok(r))).collect();
    let one = scale.first().map_or(f64::NAN, |s| s.1);
    for (qps, gb) in scale {
        Table::row(
            &format!("RC WRITE goodput, 64 KiB, {qps} QPs"),
            &gbs(gb),
            &format!("{} (1 QP)", gbs(one)),
            gb / one,
            if qps == 1000 { ">= 70%" } else { "" },
        );
    }
    let mem = ok(f.memory);
    Table::row(
        "resident memory per idle RC QP",
        &format!("{mem:.0} B"),
        &format!("{} QPs at RTS", args.idle_qps),
        f64::NAN,
        "<= 4096 B",
    );
    println!(
        "ratio: ferroce / baseline (for latency: ferroce / raw, lower is better). \
         raw: {FULL_DATAGRAM}-byte (or {RATE_WRITE}-byte) datagrams between the same two \
         addresses; GSO trains of up to 64 KiB; shaped: per 16 datagrams one of \
         {} bytes alone (a WRITE's FIRST packet, with its RETH) and a train of 15; latency: a {SMALL_WRITE}-byte datagram \
         echoed, half the round trip. Bandwidth runs keep 128 messages in flight in all \
         (-t 128/QPs, at least 2 per QP).",
        FULL_DATAGRAM + 16
    );
    failed.report()
}

/// The rdma_cm setup-rate rows (a table of their own, so that `--cm-only`
/// prints just these); true if nothing failed.
pub(super) fn print_cm(args: &BenchArgs, f: CmFigures) -> bool {
    let mut failed = Failures::default();
    let mut ok = |r: Figure| failed.take(r);
    println!(
        "rdma_cm setups: {} -> {}, one process, a device and a thread each side; \
         median of {} runs of {} s",
        args.client,
        args.server,
        args.repeat.max(1),
        args.cm_secs
    );
    Table::header();
    for (parallel, ours, tcp) in f.rows {
        let (ours, tcp) = (ok(ours), ok(tcp));
        let how = if parallel == 1 {
            "one at a time".to_string()
        } else {
            format!("{parallel} in parallel")
        };
        Table::row(
            &format!("rdma_cm setups, {how}"),
            &format!("{ours:.0}/s"),
            &format!("{tcp:.0}/s (TCP)"),
            ours / tcp,
            if parallel == CM_PARALLEL {
                ">= 10000/s"
            } else {
                ""
            },
        );
    }
    println!(
        "a setup: resolve, QP, connect, accept, ESTABLISHED both sides, disconnect, \
         DISCONNECTED both sides; TCP: connect, accept, close both sides (server first)."
    );
    failed.report()
}

/// The C ABI rows (a table of their own, so that `--c-abi-only` prints
/// just these); true if nothing failed. Skipped rows are no failure: the
/// line says why.
pub(super) fn print_cabi(args: &BenchArgs, f: CabiFigures) -> bool {
    println!(
        "C ABI: perftest on ferroce's libibverbs.so.1 beside ferroce perf, {} -> {}; \
         median of {} interleaved runs",
        args.client,
        args.server,
        args.repeat.max(1)
    );
    let (bw, lat, lat_avg) = match f {
        CabiFigures::Measured(rows) => (rows.bw, rows.lat, rows.lat_avg),
        CabiFigures::Skipped(why) => {
            println!("skipped: {why}");
            return true;
        }
    };
    let mut failed = Failures::default();
    let mut ok = |r: Figure| failed.take(r);
    Table::header_with("C ABI");
    let (c, ours, ratio) = (ok(bw.0), ok(bw.1), ok(bw.2));
    Table::row(
        &format!("ib_write_bw -s {BW_SIZE}, BW average"),
        &gbs(c),
        &format!("{} (ferroce perf)", gbs(ours)),
        ratio,
        ">= 90%",
    );
    let (c, ours, ratio) = (ok(lat.0), ok(lat.1), ok(lat.2));
    Table::row(
        &format!("ib_write_lat -s {LAT_SIZE}, t_typical"),
        &us(c),
        &format!("{} (ferroce perf)", us(ours)),
        ratio,
        "<= 110%",
    );
    let (c, ours, ratio) = (ok(lat_avg.0), ok(lat_avg.1), ok(lat_avg.2));
    Table::row(
        &format!("ib_write_lat -s {LAT_SIZE}, t_avg, worst run"),
        &us(c),
        &format!("{} (ferroce perf)", us(ours)),
        ratio,
        "",
    );
    println!(
        "ratio: the median over the runs of perftest through the C ABI / `ferroce perf` \
         run right after it with the same size, iterations and depth (bandwidth: {} MiB \
         per run; latency: {} iterations, one way); for t_avg, the worst run of each and \
         the largest ratio: a median would hide a run whose round trips waited now and then.",
        args.bytes >> 20,
        args.lat_iters
    );
    failed.report()
}

/// The middleware rows (see [`super::middleware`]); true if nothing
/// failed. Skipped rows are no failure: the line says why.
pub(super) fn print_middleware(args: &BenchArgs, f: UcxFigures) -> bool {
    println!(
        "middleware: UCX's ucx_perftest on ferroce's libraries beside ferroce perf, {} -> {}; \
         median of {} interleaved runs",
        args.client,
        args.server,
        args.repeat.max(1)
    );
    let [bw, lat] = match f {
        Ok(rows) => rows,
        Err(why) => {
            println!("skipped: {why}");
            return true;
        }
    };
    let mut failed = Failures::default();
    let mut ok = |r: Figure| failed.take(r);
    Table::header_with("UCX");
    let (u, ours, ratio) = (ok(bw.0), ok(bw.1), ok(bw.2));
    Table::row(
        &format!("put_bw rc_verbs zcopy -s {PUT_SIZE}"),
        &gbs(u),
        &format!("{} (perf write)", gbs(ours)),
        ratio,
        ">= 90%",
    );
    let (u, ours, ratio) = (ok(lat.0), ok(lat.1), ok(lat.2));
    Table::row(
        &format!("am_lat rc_verbs -s {AM_SIZE}, median"),
        &us(u),
        &format!("{} (perf send --lat)", us(ours)),
        ratio,
        "<= 115%",
    );
    println!(
        "ratio: the median over the runs of ucx_perftest / `ferroce perf` run right after it \
         (bandwidth: {} MiB per run, overall; latency: {} iterations, one way, UCX's median \
         against perf's t_typical).",
        args.bytes >> 20,
        args.lat_iters
    );
    failed.report()
}

/// The raw-Ethernet backend's rows (see [`super::veth`]); true if nothing
/// failed. Skipped rows are no failure: the line says why.
pub(super) fn print_veth(args: &BenchArgs, rows: VethRows) -> bool {
    println!(
        "raw Ethernet backend: a veth pair between two namespaces (MTU 1500, RoCE MTU \
         1024), one process each side; median of {} interleaved runs",
        args.repeat.max(1)
    );
    let f = match rows {
        VethRows::Measured(f) => f,
        VethRows::Skipped(why) => {
            println!("skipped: {why}");
            return true;
        }
    };
    let mut failed = Failures::default();
    let mut ok = |r: Figure| failed.take(r);
    Table::header_with("raw backend");
    let (gso_pps, gso) = (ok(f.limit_gso.0), ok(f.limit_gso.1));
    let (one_pps, one) = (ok(f.limit_frames.0), ok(f.limit_frames.1));
    let limit_row = |name: &str, pps: f64, g: f64| {
        Table::row(name, "", &format!("{} {}", mps(pps), gbs(g)), f64::NAN, "");
    };
    limit_row(
        &format!("rings, no RoCE work, {TRAIN} per super-frame"),
        gso_pps,
        gso,
    );
    limit_row("rings, no RoCE work, frame by frame", one_pps, one);
    let built = ok(f.limit_built.1);
    Table::row(
        "rings + framing (copy, ICRC) / limit",
        &gbs(built),
        &gbs(gso),
        built / gso,
        "",
    );
    let (raw, udp) = (ok(f.write_raw), ok(f.write_udp));
    Table::row(
        "RC WRITE 64 KiB / the rings' limit",
        &gbs(raw),
        &gbs(gso),
        raw / gso,
        ">= 80%",
    );
    Table::row(
        "RC WRITE 64 KiB / UDP backend, same veth",
        &gbs(raw),
        &format!("{} (UDP)", gbs(udp)),
        raw / udp,
        ">= 150%",
    );
    let (med, p99) = (ok(f.lat_raw.0), ok(f.lat_raw.1));
    let (ping_med, ping_p99) = (ok(f.lat_ping.0), ok(f.lat_ping.1));
    Table::row(
        "WRITE 8 B latency, median / ping-pong",
        &us(med),
        &us(ping_med),
        med / ping_med,
        "<= 150%",
    );
    Table::row(
        "WRITE 8 B latency, p99 / ping-pong",
        &us(p99),
        &us(ping_p99),
        p99 / ping_p99,
        "",
    );
    println!(
        "the rings' limit: `ferroce raw-peer` flooding prebuilt RoCE frames (1024-byte \
         payloads) through the rings a raw device opens, counted without parsing or ICRC; \
         payload GB/s. Framing: the same flood with every super-frame built anew by the \
         raw device's frame builder (payload copied in, every ICRC computed), the most an \
         engine that cost nothing could reach. Latency: half round trips, {} iterations.",
        args.lat_iters
    );
    failed.report()
}

/// The rows of the engine's "never waits" goals (see
/// [`super::progress`]); true if nothing failed. A skipped measure is no
/// failure: its line says why.
pub(super) fn print_progress(args: &BenchArgs, f: ProgressFigures) -> bool {
    println!(
        "never waits: ferroce's examples region_scan, owed_ack and remote_memory, and \
         ib_write_lat on ferroce's libibverbs.so.1, each between its own 127.0.88.x addresses"
    );
    let mut failed = Failures::default();
    Table::header();
    if let Some(r) = outcome(f.region_scan, &mut failed) {
        region_scan_rows(&r);
    }
    if let Some(o) = outcome(f.owed_ack, &mut failed) {
        let (on, off) = (o.polling, o.stopping);
        Table::row(
            "owed ACK: SEND completion, p50",
            &us(off.0),
            &format!("{} (polling on)", us(on.0)),
            off.0 / on.0,
            "",
        );
        Table::row(
            "owed ACK: SEND completion, p99",
            &us(off.1),
            &format!("{} (polling on)", us(on.1)),
            off.1 / on.1,
            "",
        );
        Table::row(
            "owed ACK: p50 stops - p50 polling on",
            &us(off.0 - on.0),
            "",
            f64::NAN,
            "<= 100 us",
        );
    }
    if let Some(p) = outcome(f.passive, &mut failed) {
        passive_rows(p, &mut failed);
    }
    if let Some(s) = outcome(f.stability, &mut failed) {
        stability_rows(s, &mut failed);
    }
    println!(
        "region scan: {SCAN_WRITES} 4 KiB WRITEs per phase, median of {SCAN_ROUNDS} rounds, a \
         server thread checksumming the 16 MiB region being written (through its volatile view) \
         against a Vec of 16 MiB; a failed WRITE phase fails the row. owed ACK: {OWED_ROUNDS} SENDs, the receiver away 2 ms after \
         each completion against polling on. passive server: remote_memory's best of {} runs \
         per mode, blocking in CompletionQueue::wait against spinning. ib_write_lat: -n \
         {STABILITY_ITERS}, {} runs in a row, the worst run's t_avg against the median run's.",
        args.repeat.max(1),
        args.stability_runs.max(1)
    );
    failed.report()
}

/// The measure's figures; a skipped one prints why, a failed one is kept.
fn outcome<T>(o: Outcome<T>, failed: &mut Failures) -> Option<T> {
    match o {
        Outcome::Measured(t) => Some(t),
        Outcome::Skipped(why) => {
            println!("skipped: {why}");
            None
        }
        Outcome::Failed(e) => {
            failed.0.push(e.to_string());
            None
        }
    }
}

fn region_scan_rows(r: &RegionScan) {
    let ms = |v: f64| format!("{v:.1} ms");
    Table::row(
        "region scan: peer's WRITE phase",
        &ms(r.region_ms),
        &format!("{} (Vec scan)", ms(r.vec_ms)),
        r.region_ms / r.vec_ms,
        "<= 125%",
    );
}

fn passive_rows(p: Passive, failed: &mut Failures) {
    for ph in p.phases {
        let rate = |v: f64| format!("{v:.0} {}", ph.unit);
        Table::row(
            &format!("passive server blocking: {}", ph.name),
            &rate(ph.block),
            &format!("{} (spinning)", rate(ph.spin)),
            ph.block / ph.spin,
            ">= 95%",
        );
    }
    failed.0.extend(p.failed_runs);
}

fn stability_rows(s: Stability, failed: &mut Failures) {
    let name = |what: &str| format!("ib_write_lat, {what}");
    Table::row(
        &name("t_avg, worst run"),
        &us(s.worst_avg),
        &format!("{} (median run)", us(s.median_avg)),
        s.worst_avg / s.median_avg,
        "<= 200%",
    );
    Table::row(
        &name("t_typical, median run"),
        &us(s.median_typical),
        &format!("{} runs", s.runs),
        f64::NAN,
        "",
    );
    Table::row(
        &name("99%, median run"),
        &us(s.median_p99),
        "",
        f64::NAN,
        "",
    );
    failed.0.extend(s.failed_runs);
}

/// The figures a table could not measure: each shows as NaN in its row
/// and is listed under the table.
#[derive(Default)]
pub(super) struct Failures(Vec<String>);

impl Failures {
    /// The figure, or NaN with its error kept.
    pub(super) fn take(&mut self, r: Figure) -> f64 {
        r.unwrap_or_else(|e| {
            self.0.push(e.to_string());
            f64::NAN
        })
    }

    /// Lists the failures; true if there were none.
    pub(super) fn report(self) -> bool {
        for f in &self.0 {
            println!("failed: {f}");
        }
        self.0.is_empty()
    }
}
