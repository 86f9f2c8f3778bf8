//! The per-packet table: for each WRITE size, its phases (each timed alone
//! in one process), their sum beside what `ferroce perf write` reaches per
//! packet, and what is left unaccounted.

use super::{
    BATCH, MICRO_PACKETS, MICRO_RUNS, Micro, PARSES, PacketFigures, SizeFigures, datagram,
};
use crate::cmd::bench::BenchArgs;
use crate::cmd::bench::report::{Failures, Table, mps};

/// The engine goal (ns per 1 KiB packet, both ends) and the message-rate
/// goal (64-byte WRITEs per second on one QP).
const ENGINE_GOAL: &str = "<= 120 ns";
const RATE_GOAL: f64 = 3e6;

fn ns(v: f64) -> String {
    format!("{v:.0} ns")
}

fn size_name(len: u32) -> String {
    if len >= 1024 && len.is_multiple_of(1024) {
        format!("{} KiB", len / 1024)
    } else {
        format!("{len} B")
    }
}

/// Prints the table; true if nothing failed.
pub(in crate::cmd::bench) fn print_packet(args: &BenchArgs, f: PacketFigures) -> bool {
    println!(
        "per-packet cost: RC WRITE, one packet per message; phases in one process (a warm-up \
         run, then the median of {MICRO_RUNS} runs of {MICRO_PACKETS} packets); raw UDP and \
         ferroce perf between {} and {}, median of {} runs",
        args.client,
        args.server,
        args.repeat.max(1)
    );
    let mut failed = Failures::default();
    Table::header_with_note("ns/packet");
    for s in f.sizes {
        size_rows(s, &mut failed);
    }
    println!(
        "sum: backend parse + QP work (both sides) + emit (headers) + copy + ICRC + system \
         calls (GSO + GRO). The endpoint's parse is inside the responder's QP work; the copy \
         is inside emit's figure with the copy, not in its headers'. QP work: {BATCH} WRITEs a round, the responder's ACKs coalescing \
         within a round. System calls: a batch of 64 datagrams sent, then received, between \
         two of the backend's sockets in this process; raw: `ferroce udp-peer` in another \
         process, 1 / its datagram rate. total: 1 / `ferroce perf write`'s message rate, two \
         processes with a driver thread each, so phases of the two sides overlap on two cores."
    );
    failed.report()
}

fn size_rows(s: SizeFigures, failed: &mut Failures) {
    let name = size_name(s.len);
    let row = |what: &str, ours: f64, base: &str, ratio: f64, goal: &str, note: &str| {
        Table::row_note(
            &format!("{name}: {what}"),
            &ns(ours),
            base,
            ratio,
            goal,
            note,
        );
    };
    let total = failed.take(s.total);
    let (raw_mmsg, raw_gso) = (failed.take(s.raw_mmsg), failed.take(s.raw_gso));
    let m = match s.micro {
        Ok(m) => m,
        Err(e) => {
            failed.take(Err(e));
            Micro::unmeasured()
        }
    };
    row(
        "parse, backend check",
        m.parse.backend,
        "",
        f64::NAN,
        "",
        &format!(
            "parsed {PARSES} times: backend check, endpoint's multicast test \
             (BTH only), endpoint; the QP code reuses the endpoint's"
        ),
    );
    let inside = "2 of them, inside QP work (responder), not summed";
    row(
        "parse, in the endpoint",
        m.parse.endpoint,
        "",
        f64::NAN,
        "",
        inside,
    );
    let resp = "handle_datagram (checks, placement) + ACK poll_transmit";
    row("QP work, responder", m.responder, "", f64::NAN, "", resp);
    let req = "post_send, ACK handle_datagram, poll_cq, recycle";
    row("QP work, requester", m.requester, "", f64::NAN, "", req);
    let with_copy = format!("{} (with the copy)", ns(m.emit));
    let emit = "poll_transmit of a 0-byte WRITE ONLY: the same headers";
    row(
        "emit (headers)",
        m.emit_headers,
        &with_copy,
        f64::NAN,
        "",
        emit,
    );
    let engine = m.requester + m.responder + m.emit;
    let whole = format!("{} (untimed rounds)", ns(m.engine_whole));
    let goal = if s.len == 1024 { ENGINE_GOAL } else { "" };
    let both = "QP work + emit with the copy, timed apart";
    row(
        "engine, both ends",
        engine,
        &whole,
        engine / m.engine_whole,
        goal,
        both,
    );
    let (copy, memcpy) = m.copy;
    let memcpy_base = format!("{} (memcpy)", ns(memcpy));
    let copy_note = "Region::read, the requester's gather";
    row(
        "copy out of the region",
        copy,
        &memcpy_base,
        copy / memcpy,
        "",
        copy_note,
    );
    let [seal, check, crc] = m.icrc;
    let crc_base = format!("{} (crc32fast)", ns(crc));
    let bytes = datagram(s.len);
    let seal_note = format!("the send's, over pseudo-headers + {bytes} B");
    row(
        "ICRC seal (send)",
        seal,
        &crc_base,
        seal / crc,
        "",
        &seal_note,
    );
    let check_note = "the receive's, solving for the IPv4 Identification";
    row(
        "ICRC check (receive)",
        check,
        &crc_base,
        check / crc,
        "",
        check_note,
    );
    let icrc = seal + check;
    let raw = |v| format!("{} (raw, 2 processes)", ns(v));
    let gso_note = "one process, trains of up to 64 (the backend's default)";
    let gso = m.calls_gso;
    row(
        "system calls, GSO + GRO",
        gso,
        &raw(raw_gso),
        gso / raw_gso,
        "",
        gso_note,
    );
    let mmsg = m.calls_mmsg;
    let mmsg_note = "one process, 64 per call; not summed";
    row(
        "system calls, sendmmsg/recvmmsg",
        mmsg,
        &raw(raw_mmsg),
        mmsg / raw_mmsg,
        "",
        mmsg_note,
    );
    let sum = m.parse.backend + m.requester + m.responder + m.emit_headers + copy + icrc + gso;
    let perf = format!("{} (perf write)", ns(total));
    row(
        "sum of the phases",
        sum,
        &perf,
        sum / total,
        "",
        "share of the total accounted for",
    );
    let left = "locks, wake-ups, scheduling, ACKs' system calls";
    row(
        "unaccounted: total - sum",
        total - sum,
        "",
        f64::NAN,
        "",
        left,
    );
    let goal = if s.len == 64 {
        format!(">= {}", mps(RATE_GOAL))
    } else {
        String::new()
    };
    Table::row_note(
        &format!("{name}: ferroce perf write, 1 QP"),
        &mps(1e9 / total),
        &ns(total),
        f64::NAN,
        &goal,
        "its message rate, and per packet",
    );
}

impl Micro {
    /// A size whose phases could not be measured: every figure NaN.
    fn unmeasured() -> Self {
        let nan = f64::NAN;
        Self {
            parse: super::Parse {
                backend: nan,
                endpoint: nan,
            },
            requester: nan,
            responder: nan,
            emit: nan,
            emit_headers: nan,
            engine_whole: nan,
            copy: (nan, nan),
            icrc: [nan; 3],
            calls_mmsg: nan,
            calls_gso: nan,
        }
    }
}
