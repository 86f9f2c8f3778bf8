//! What the engine tells [`tracing`], and at which level.
//!
//! The engine installs no subscriber and prints nothing: an application
//! (or the `ferroce` command, through `FERROCE_LOG`) chooses what to see.
//!
//! | level | events |
//! |---|---|
//! | debug | QP state changes and why (the completion status, the NAK, or `modify_qp`); retransmission timeouts and go-back-N restarts; RNR NAKs sent, RNR waits and their end; NAKs sent and received |
//! | trace | every received packet dropped (or answered as a duplicate), by cause: the [`Stats`] counter it went to |
//!
//! Events about a received packet happen inside a debug span `rx` that
//! carries the packet (source, QPN, opcode, PSN, AETH); events of a QP's
//! timers inside a span `timer` with its QPN. QPNs are written as rxe
//! and `ferroce dump` write them (`0x000011`).
//!
//! The hot path pays one level check per packet while logging is off:
//! spans and events are built, and their fields formatted, only when
//! enabled, and the counters are compared only at trace level.

use std::fmt;
use std::net::IpAddr;

use ferroce_wire::TransportPacket;
use ferroce_wire::aeth::Syndrome;
use tracing::field::Empty;
use tracing::{Level, Span, debug, debug_span, trace};

use crate::endpoint::Stats;
use crate::verbs::{QpState, WcStatus};

/// A QPN as an event field, written as rxe and `ferroce dump` write it
/// (`0x000011`), formatted only if the event is enabled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Qpn(pub(crate) u32);

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// The span of the events a received packet causes; its packet fields are
/// parsed only when the span is enabled.
pub(crate) fn rx_span(from: IpAddr, data: &[u8]) -> Span {
    let span = debug_span!("rx", %from, qpn = Empty, opcode = Empty, psn = Empty, aeth = Empty);
    if !span.is_disabled()
        && let Ok(pkt) = TransportPacket::new_checked(data)
    {
        let bth = pkt.bth();
        span.record("qpn", tracing::field::display(Qpn(bth.dest_qp())));
        span.record("opcode", format_args!("{}", bth.opcode()));
        span.record("psn", format_args!("{}", bth.psn()));
        if let Some(aeth) = pkt.aeth() {
            span.record("aeth", format_args!("{}", aeth.syndrome()));
        }
    }
    span
}

/// The span of the events QP `qpn`'s timers cause.
pub(crate) fn timer_span(qpn: u32) -> Span {
    debug_span!("timer", qpn = %Qpn(qpn))
}

/// The counters before a packet is handled, when drops are traced (`None`
/// otherwise, so that the hot path copies nothing).
pub(crate) fn drops_before(stats: &Stats) -> Option<Stats> {
    tracing::enabled!(Level::TRACE).then_some(*stats)
}

/// One trace event per drop counter that moved since `before`.
pub(crate) fn drops_since(before: Option<Stats>, after: &Stats) {
    let Some(before) = before else { return };
    for (cause, was, is) in drop_counters(&before, after) {
        if is != was {
            trace!(cause, "packet dropped");
        }
    }
}

/// The drop counters of `a` and `b`, by cause. Destructured in full, so
/// that a counter added to [`Stats`] must be placed here (or below as not a
/// drop) before this compiles.
#[allow(deprecated)] // the counters kept, always 0, for one release
fn drop_counters(a: &Stats, b: &Stats) -> [(&'static str, u64, u64); 18] {
    let Stats {
        rx_packets: _,
        tx_packets: _,
        retransmits: _,
        rnr_naks_sent: _,
        rx_malformed,
        rx_unknown_qp,
        rx_wrong_state,
        rx_wrong_source,
        rx_wrong_roce,
        rx_bad_qkey,
        rx_bad_pkey,
        rx_duplicate,
        rx_out_of_sequence,
        rx_unexpected,
        rx_duplicate_unserved,
        rx_over_depth,
        acks_dropped,
        tx_emit_errors,
        rx_deferred: _,
        rx_deferred_dropped: _,
        tx_region_busy: _,
        rx_ce: _,
        cnps_sent: _,
        cnps_dropped,
        cnps_received: _,
        rx_bad_cnp,
        rate_cuts: _,
        rx_bad_xrc_srq: _,
        rx_bad_rd: _,
        rx_mcast_unattached,
        rx_mcast_misaddressed,
        rx_mcast_delivered: _,
    } = *a;
    [
        ("malformed", rx_malformed, b.rx_malformed),
        ("unknown_qp", rx_unknown_qp, b.rx_unknown_qp),
        ("wrong_state", rx_wrong_state, b.rx_wrong_state),
        ("wrong_source", rx_wrong_source, b.rx_wrong_source),
        ("wrong_roce", rx_wrong_roce, b.rx_wrong_roce),
        ("bad_qkey", rx_bad_qkey, b.rx_bad_qkey),
        ("bad_pkey", rx_bad_pkey, b.rx_bad_pkey),
        ("duplicate", rx_duplicate, b.rx_duplicate),
        ("out_of_sequence", rx_out_of_sequence, b.rx_out_of_sequence),
        ("unexpected", rx_unexpected, b.rx_unexpected),
        (
            "duplicate_unserved",
            rx_duplicate_unserved,
            b.rx_duplicate_unserved,
        ),
        ("over_depth", rx_over_depth, b.rx_over_depth),
        ("ack_dropped", acks_dropped, b.acks_dropped),
        ("emit_error", tx_emit_errors, b.tx_emit_errors),
        ("cnp_dropped", cnps_dropped, b.cnps_dropped),
        ("bad_cnp", rx_bad_cnp, b.rx_bad_cnp),
        (
            "mcast_unattached",
            rx_mcast_unattached,
            b.rx_mcast_unattached,
        ),
        (
            "mcast_misaddressed",
            rx_mcast_misaddressed,
            b.rx_mcast_misaddressed,
        ),
    ]
}

/// Why a QP changed state.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Why {
    /// The application asked (`modify_qp`).
    Modify,
    /// A work request completed with this error status.
    Completion(WcStatus),
    /// The responder answered the packet in the enclosing `rx` span with
    /// this NAK.
    NakSent(ferroce_wire::aeth::NakCode),
}

/// A QP state change and its cause (a cold path: called, not inlined).
#[cold]
pub(crate) fn state_change(qpn: u32, from: QpState, to: QpState, why: Why) {
    if from == to {
        return;
    }
    let qpn = Qpn(qpn);
    match why {
        Why::Modify => debug!(%qpn, ?from, ?to, reason = "modify_qp", "QP state change"),
        Why::Completion(status) => debug!(%qpn, ?from, ?to, ?status, "QP state change"),
        Why::NakSent(code) => {
            debug!(%qpn, ?from, ?to, nak_sent = code.name(), "QP state change");
        }
    }
}

/// A NAK (of any kind) in a response to QP `qpn`'s requests.
#[inline]
pub(crate) fn nak_received(qpn: u32, syndrome: Syndrome) {
    if !matches!(syndrome, Syndrome::Ack { .. }) {
        debug!(qpn = %Qpn(qpn), %syndrome, "NAK received");
    }
}
