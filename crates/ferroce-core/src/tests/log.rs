//! The `tracing` events the engine emits, captured by a subscriber scoped
//! to the test's thread: an error names the QP, the states and the status;
//! an RNR wait and the RNR NAK behind it show at debug; losses show as
//! go-back-N restarts, each in the span of its cause; retries exhausted
//! log every timeout; a dropped packet names its cause at trace; a local
//! protection error names the request and why its list failed.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use ferroce_wire::{Opcode, Psn};
use tracing::subscriber::NoSubscriber;
use tracing::{Dispatch, Level};

use super::util::{Faults, Opts, Pair, connect, connect_with, craft, emit, rmem, send_wr, sge};
use crate::verbs::{LocalErrors, Mtu, QpType, SendOp, Sge, WcStatus};

/// Everything the subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Held while a test's subscriber is alive.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `f` with a subscriber at `level` on this thread; returns its lines.
fn capture(level: Level, f: impl FnOnce()) -> Vec<String> {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // Two things keep other tests' threads from spoiling the capture.
    // With a single dispatcher registered, tracing-core takes it for the
    // global one and computes the interest of a callsite another thread
    // meets first from that thread's default (none: "never"), cached for
    // good: a second dispatcher that lives forever prevents that (before
    // it, about one run in ten lost a debug line). And one capture at a
    // time: each new dispatcher recomputes the global level hint.
    static SECOND: OnceLock<Dispatch> = OnceLock::new();
    SECOND.get_or_init(|| Dispatch::new(NoSubscriber::default()));
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        f();
    });
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    text.lines().map(str::to_owned).collect()
}

fn lines_with<'a>(lines: &'a [String], words: &[&str]) -> Vec<&'a String> {
    lines
        .iter()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .collect()
}

#[test]
fn a_remote_access_error_logs_the_state_change_with_its_status() {
    let mut p = Pair::new(300);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let bad = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey ^ 1),
    };
    let lines = capture(Level::DEBUG, || {
        p.eps[0]
            .post_send(a.qpn, send_wr(1, bad, &sge(&a, 0, 64)))
            .unwrap();
        let wcs = p.wait_cqes(0, a.cq, 1);
        assert_eq!(wcs[0].status, WcStatus::RemAccessErr);
    });
    let qpn = |q: u32| format!("qpn={q:#08x}");
    let requester = lines_with(
        &lines,
        &[
            "QP state change",
            &qpn(a.qpn),
            "from=Rts",
            "to=Err",
            "status=RemAccessErr",
        ],
    );
    assert_eq!(requester.len(), 1, "{lines:#?}");
    // It happened on receiving the NAK, which the span names.
    assert!(
        requester[0].contains("NAK REMOTE_ACCESS_ERROR"),
        "{lines:#?}"
    );
    let responder = lines_with(
        &lines,
        &["QP state change", &qpn(b.qpn), "to=Err", "nak_sent"],
    );
    assert_eq!(responder.len(), 1, "{lines:#?}");
    assert_eq!(lines_with(&lines, &["NAK received", &qpn(a.qpn)]).len(), 1);
    // Debug, not trace: no drop lines.
    assert!(
        lines_with(&lines, &["packet dropped"]).is_empty(),
        "{lines:#?}"
    );
}

#[test]
fn an_rnr_wait_shows_at_debug_on_both_sides() {
    let mut p = Pair::new(301);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            rnr_retry: 1,
            min_rnr_timer: 1,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    let lines = capture(Level::DEBUG, || {
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 8)))
            .unwrap();
        let wcs = p.wait_cqes(0, a.cq, 1);
        assert_eq!(wcs[0].status, WcStatus::RnrRetryExcErr);
    });
    let qpn = |q: u32| format!("qpn={q:#08x}");
    assert_eq!(lines_with(&lines, &["RNR NAK sent", &qpn(b.qpn)]).len(), 2);
    assert_eq!(lines_with(&lines, &["RNR wait qpn", &qpn(a.qpn)]).len(), 1);
    let over = lines_with(&lines, &["timer{", "RNR wait over", &qpn(a.qpn)]);
    assert_eq!(over.len(), 1, "{lines:#?}");
    let change = ["QP state change", &qpn(a.qpn), "status=RnrRetryExcErr"];
    assert_eq!(lines_with(&lines, &change).len(), 1, "{lines:#?}");
}

#[test]
fn a_dropped_packet_names_its_cause_at_trace_only() {
    let mut p = Pair::new(302);
    let [a, _b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let stray = emit(
        &craft(Opcode::RC_RDMA_WRITE_ONLY, Psn::new(0), 0x00ab_cdef, 4),
        &[0; 4],
    );
    let lines = capture(Level::DEBUG, || p.deliver(1, &stray));
    assert!(lines.is_empty(), "{lines:#?}");
    let lines = capture(Level::TRACE, || p.deliver(1, &stray));
    let drop = ["packet dropped", "cause=\"unknown_qp\"", "qpn=0xabcdef"];
    assert_eq!(lines_with(&lines, &drop).len(), 1, "{lines:#?}");
    assert_eq!(p.eps[1].stats().rx_unknown_qp, 2);
    let _ = a;
}

#[test]
fn losses_show_as_go_back_n_restarts_with_their_cause() {
    let mut p = Pair::new(303);
    let [a, b] = connect(&mut p, QpType::Rc, 1 << 16, Mtu::Mtu1024);
    p.faults = Faults {
        loss: 0.1,
        ..Faults::default()
    };
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    let lines = capture(Level::DEBUG, || {
        for id in 0..8 {
            p.eps[0]
                .post_send(a.qpn, send_wr(id, write, &sge(&a, 0, 8192)))
                .unwrap();
        }
        let wcs = p.wait_cqes(0, a.cq, 8);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    });
    let retransmits = p.eps[0].stats().retransmits;
    assert!(retransmits > 0, "10% loss over 64 packets lost none");
    let restarts = lines_with(&lines, &["go-back-N", &format!("qpn={:#08x}", a.qpn)]);
    assert!(
        !restarts.is_empty() && restarts.len() as u64 <= retransmits,
        "{lines:#?}"
    );
    // Each restart says what caused it: the QP's timer, or the sequence
    // NAK in whose rx span it happened (WRITEs have no implied NAK).
    for l in &restarts {
        assert!(
            l.contains("timer{") || l.contains("aeth=NAK PSN_SEQUENCE_ERROR"),
            "{l}"
        );
    }
    let timeouts = lines_with(&lines, &["retransmission timeout"]).len();
    let naks = lines_with(&lines, &["NAK sent: PSN sequence error"]).len();
    assert!(timeouts + naks > 0, "{lines:#?}");
}

#[test]
fn retries_exhausted_log_each_timeout_and_the_state_change_in_the_timer_span() {
    let mut p = Pair::new(304);
    let [a, _b] = connect_with(
        &mut p,
        Opts {
            retry_cnt: 2,
            timeout: 1,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    p.faults = Faults {
        loss: 1.0,
        ..Faults::default()
    };
    let lines = capture(Level::DEBUG, || {
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 8)))
            .unwrap();
        let wcs = p.wait_cqes(0, a.cq, 1);
        assert_eq!(wcs[0].status, WcStatus::RetryExcErr);
    });
    let qpn = format!("qpn={:#08x}", a.qpn);
    assert_eq!(
        lines_with(&lines, &["retransmission timeout", &qpn]).len(),
        2
    );
    let change = [
        "timer{",
        "QP state change",
        &qpn,
        "to=Err",
        "status=RetryExcErr",
    ];
    assert_eq!(lines_with(&lines, &change).len(), 1, "{lines:#?}");
}

#[test]
fn a_local_protection_error_logs_its_cause() {
    let mut p = Pair::new(310);
    let [a, _] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    p.eps[0]
        .set_local_errors(a.qpn, LocalErrors::Completion)
        .unwrap();
    let sg = [Sge {
        lkey: a.mr.lkey,
        offset: 4000,
        len: 200,
    }];
    let lines = capture(Level::DEBUG, || {
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sg))
            .unwrap();
        let wcs = p.wait_cqes(0, a.cq, 1);
        assert_eq!(wcs[0].status, WcStatus::LocProtErr);
    });
    let qpn = format!("qpn={:#08x}", a.qpn);
    let fault = lines_with(
        &lines,
        &[
            "send request fails: local protection error",
            &qpn,
            "wr_id=1",
            "outside the region",
        ],
    );
    assert_eq!(fault.len(), 1, "{lines:#?}");
    let change = lines_with(
        &lines,
        &["QP state change", &qpn, "to=Err", "status=LocProtErr"],
    );
    assert_eq!(change.len(), 1, "{lines:#?}");
}
