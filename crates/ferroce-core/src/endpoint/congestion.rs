//! The endpoint's side of congestion control (see [`crate::cc`]): the
//! device's settings, CE marks in (CNPs out), CNPs in (DCQCN cuts), the
//! pacer's hold on a QP's requests, and ECN on every packet out.

use std::net::IpAddr;

use ferroce_wire::{Opcode, Psn};

use super::Endpoint;
use crate::cc::CongestionConfig;
use crate::cc::dcqcn::Dcqcn;
use crate::qp::{self, Qp};
use crate::time::Instant;
use crate::transmit::{Ecn, PacketKind, Transmit};
use crate::verbs::{QpType, VerbsError};

/// At most this many CNPs wait to be polled; past that, CE marks go
/// unanswered and are counted in [`crate::Stats::cnps_dropped`] (each QP
/// sends at most one per interval, so only a flood over many QPs gets
/// here).
pub const MAX_QUEUED_CNPS: usize = 4096;

/// One QP's congestion-control state and counters
/// ([`Endpoint::qp_congestion`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QpCongestion {
    /// DCQCN's current rate RC, Mb/s (the line rate until the first CNP).
    pub rate_mbps: f64,
    /// DCQCN's target rate RT, Mb/s.
    pub target_mbps: f64,
    /// DCQCN's alpha, the estimate of congestion, in 0.0..=1.0 (0 until
    /// the first CNP).
    pub alpha: f64,
    /// Whether the pacer holds its requests to `rate_mbps`.
    pub limited: bool,
    /// CE-marked packets it received.
    pub ce_received: u64,
    /// CNPs it sent in answer to CE marks (notification point).
    pub cnps_sent: u64,
    /// CNPs it received (reaction point).
    pub cnps_received: u64,
    /// Rate cuts its DCQCN made.
    pub rate_cuts: u64,
}

impl Endpoint {
    /// The device's congestion control (ECN, CNPs, DCQCN, line rate);
    /// [`CongestionConfig::default`] until set. A QP's DCQCN takes the
    /// settings of the time of its first CNP.
    pub fn set_congestion_control(&mut self, cfg: CongestionConfig) {
        self.cc = cfg;
    }

    /// The device's congestion control settings now.
    pub fn congestion_control(&self) -> CongestionConfig {
        self.cc
    }

    /// QP `qpn`'s rates and counters, its DCQCN timers run up to `now`.
    pub fn qp_congestion(&mut self, qpn: u32, now: Instant) -> Result<QpCongestion, VerbsError> {
        let line = self.cc.line_rate_mbps as f64;
        let q = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let mut r = QpCongestion {
            rate_mbps: line,
            target_mbps: line,
            alpha: 0.0,
            limited: false,
            ce_received: q.cc.ce_received,
            cnps_sent: q.cc.cnps_sent,
            cnps_received: q.cc.cnps_received,
            rate_cuts: 0,
        };
        if let Some(rp) = q.cc.rp.as_mut() {
            rp.advance(now);
            r.rate_mbps = rp.rate();
            r.target_mbps = rp.target();
            r.alpha = rp.alpha();
            r.limited = rp.limited();
            r.rate_cuts = rp.counts().1;
        }
        Ok(r)
    }

    /// A CNP for QP `qpn` (which exists and receives) from `from`.
    pub(super) fn on_cnp(&mut self, now: Instant, from: IpAddr, qpn: u32, pkey: u16) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if q.init.qp_type == QpType::Ud {
            self.stats.rx_bad_cnp += 1;
            return;
        }
        if !q.takes_from(from) {
            self.stats.rx_wrong_source += 1;
            return;
        }
        if !qp::pkey_matches(pkey, q.pkey()) {
            self.stats.rx_bad_pkey += 1;
            return;
        }
        self.stats.cnps_received += 1;
        q.cc.cnps_received += 1;
        let Some(cfg) = self.cc.dcqcn else {
            return; // reaction point off: counted only
        };
        let line = self.cc.line_rate_mbps;
        let rp = q.cc.rp.get_or_insert_with(|| Dcqcn::new(cfg, line));
        let cuts = rp.counts().1;
        rp.on_cnp(now);
        self.stats.rate_cuts += rp.counts().1 - cuts;
        tracing::debug!(qpn = %crate::log::Qpn(qpn), rate_mbps = rp.rate(), "CNP received");
    }

    /// A CE-marked packet for QP `qpn` passed its checks: counted, and
    /// answered with a CNP to its sender's QP unless one went less than
    /// `min_time_between_cnps` ago. UD QPs count marks and send no CNP
    /// (the sender's QP is per datagram there).
    pub(super) fn on_ce(&mut self, now: Instant, qpn: u32) {
        self.stats.rx_ce += 1;
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        q.cc.ce_received += 1;
        let np = self.cc.np;
        if !np.enabled || q.init.qp_type == QpType::Ud {
            return;
        }
        if !q.cc.np.on_ce(now, np.min_time_between_cnps) {
            return;
        }
        if self.cnps.len() >= MAX_QUEUED_CNPS {
            self.stats.cnps_dropped += 1;
            return;
        }
        let mut path = q.path();
        path.traffic_class = (np.cnp_dscp << 2) | (path.traffic_class & 0b11);
        let mut repr = qp::transport_repr(Opcode::CNP, Psn::new(0), q.cfg.dest_qpn, 0);
        repr.bth.becn = true;
        match Transmit::build(&mut self.pool, path, &repr, |_| {}) {
            Ok(mut t) => {
                t.kind = PacketKind::Response;
                q.cc.cnps_sent += 1;
                self.cnps.push_back(t);
            }
            Err(_) => self.stats.tx_emit_errors += 1,
        }
    }

    /// The next CNP to send, if any.
    pub(super) fn next_cnp(&mut self) -> Option<Transmit> {
        let t = self.cnps.pop_front()?;
        self.stats.cnps_sent += 1;
        self.stats.tx_packets += 1;
        Some(t)
    }

    /// Marks `t` ECN-capable (ECT(0)) if the device sends with ECN and
    /// its path's traffic class left the ECN bits clear.
    pub(super) fn mark_ecn(&self, t: &mut Transmit) {
        if self.cc.ecn && t.ecn == Ecn::NotEct {
            t.ecn = Ecn::Ect0;
        }
    }
}

/// When the pacer lets QP `q`'s next request go, if not now (its DCQCN
/// timers run up to `now` first).
pub(super) fn paced_until(q: &mut Qp, now: Instant) -> Option<Instant> {
    let rp = q.cc.rp.as_mut()?;
    rp.advance(now);
    if !rp.limited() {
        return None;
    }
    let rate = rp.rate();
    q.cc.pacer.wait(now, rate)
}

/// Whether DCQCN holds QP `q` below the line rate.
pub(super) fn rate_limited(q: &Qp) -> bool {
    q.cc.rp.as_ref().is_some_and(|rp| rp.limited())
}

/// QP `q` sent a request of `bytes` at `now`: DCQCN's byte counter, and
/// the pacer's next release.
pub(super) fn request_sent(q: &mut Qp, now: Instant, bytes: usize) {
    if let Some(rp) = q.cc.rp.as_mut() {
        rp.on_sent(now, bytes as u64);
        if rp.limited() {
            q.cc.pacer.sent(now, bytes as u64, rp.rate());
        }
    }
}
