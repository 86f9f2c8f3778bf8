//! DCQCN's reaction point (Zhu et al., "Congestion Control for Large-Scale
//! RDMA Deployments", SIGCOMM 2015), one per QP, on the caller's clock.
//!
//! State: the current rate RC, the target rate RT, alpha (the estimate of
//! how congested the path is), and the two rate-increase counters T
//! (timer events) and BC (byte-counter events). Rates are in Mb/s.
//!
//! * **CNP** (at most one cut per `rate_reduce_monitor_period`):
//!   RT = RC, RC = max(RC · (1 − alpha · 1024 / 2^rpg_gd),
//!   RC · rpg_min_dec_fac / 100, rpg_min_rate); T, BC, the byte count and
//!   the increase timer start again. The first CNP of a flow sets alpha to
//!   `initial_alpha_value` / 1024 first. With the default `rpg_gd` of 11
//!   the factor is the paper's 1 − alpha/2.
//! * **Alpha timer**, every `dce_tcp_rtt`: alpha = g·alpha + (1 − g) if a
//!   CNP arrived in the period, else g·alpha, with g = `dce_tcp_g` / 1024
//!   (the paper's 1 − g; mlx5 updates alpha at the period's end, the paper
//!   at the CNP: the period is short enough that the two agree).
//! * **Rate increase**, on each expiry of the timer (`rpg_time_reset`,
//!   then T += 1) or the byte counter (`rpg_byte_reset` bytes sent, then
//!   BC += 1), with F = `rpg_threshold`:
//!   - fast recovery while max(T, BC) ≤ F: RC = (RT + RC) / 2;
//!   - hyper increase once min(T, BC) > F: RT += i · `rpg_hai_rate` with
//!     i = min(T, BC) − F, then RC = (RT + RC) / 2;
//!   - additive increase otherwise: RT += `rpg_ai_rate`, then
//!     RC = (RT + RC) / 2.
//!
//!   RT and RC never exceed the line rate; once RC is within 1 Mb/s of it
//!   (mlx5's rate granularity) the flow is back at line rate and stops
//!   being rate limited until its next CNP.
//!
//! The timers are not separate wake-ups: [`Dcqcn::advance`] runs every
//! expiry up to `now` in order (the engine calls it whenever it looks at
//! the rate), which gives the same rates as a timer firing at each
//! expiry, without waking an idle QP.

use core::time::Duration;

use crate::time::Instant;

/// The reaction point's settings, named as mlx5's `ecn/roce_rp` files name
/// them (rates in Mb/s, times in µs there).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnConfig {
    /// The rate-increase timer's period.
    pub rpg_time_reset: Duration,
    /// Bytes sent between byte-counter events; 0 turns the counter off.
    pub rpg_byte_reset: u64,
    /// F: the events of fast recovery before additive increase.
    pub rpg_threshold: u32,
    /// R_AI, Mb/s.
    pub rpg_ai_rate: u64,
    /// R_HAI, Mb/s.
    pub rpg_hai_rate: u64,
    /// log2 of the divisor of alpha (in 1024ths) in a cut: 11 cuts by
    /// alpha/2.
    pub rpg_gd: u32,
    /// A cut leaves at least this percentage of the rate.
    pub rpg_min_dec_fac: u32,
    /// The lowest rate, Mb/s.
    pub rpg_min_rate: u64,
    /// Mb/s to set RC and RT to on a flow's first CNP; 0 cuts as any CNP.
    pub rate_to_set_on_first_cnp: u64,
    /// g, in 1024ths: the weight alpha keeps at each update.
    pub dce_tcp_g: u32,
    /// The alpha timer's period.
    pub dce_tcp_rtt: Duration,
    /// Alpha, in 1024ths, at a flow's first CNP.
    pub initial_alpha_value: u32,
    /// At most one cut per this period; CNPs inside it still raise alpha.
    pub rate_reduce_monitor_period: Duration,
}

impl DcqcnConfig {
    /// mlx5's defaults (ConnectX-4 and later); the README says which were
    /// checked against NVIDIA's parameter page.
    pub const MLX5: Self = Self {
        rpg_time_reset: Duration::from_micros(300),
        rpg_byte_reset: 32_767,
        rpg_threshold: 1,
        rpg_ai_rate: 5,
        rpg_hai_rate: 50,
        rpg_gd: 11,
        rpg_min_dec_fac: 50,
        rpg_min_rate: 1,
        rate_to_set_on_first_cnp: 0,
        dce_tcp_g: 1019,
        dce_tcp_rtt: Duration::from_micros(1),
        initial_alpha_value: 1023,
        rate_reduce_monitor_period: Duration::from_micros(4),
    };

    /// The paper's settings: timer 55 µs, byte counter 10 MB, F = 5,
    /// R_AI = 40 Mb/s, g = 1/256, alpha updated every 55 µs, a cut on
    /// every CNP (the notification point already spaces them 50 µs apart,
    /// see [`super::CongestionConfig::paper`]). R_HAI is not among the
    /// values the paper lists; it keeps mlx5's ratio, 10 R_AI.
    pub const PAPER: Self = Self {
        rpg_time_reset: Duration::from_micros(55),
        rpg_byte_reset: 10 * 1024 * 1024,
        rpg_threshold: 5,
        rpg_ai_rate: 40,
        rpg_hai_rate: 400,
        rpg_gd: 11,
        rpg_min_dec_fac: 50,
        rpg_min_rate: 1,
        rate_to_set_on_first_cnp: 0,
        dce_tcp_g: 1020,
        dce_tcp_rtt: Duration::from_micros(55),
        initial_alpha_value: 1024,
        rate_reduce_monitor_period: Duration::ZERO,
    };
}

/// One QP's reaction point. See the module docs.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    cfg: DcqcnConfig,
    line: f64,
    rc: f64,
    rt: f64,
    alpha: f64,
    /// Rate limited: a CNP came and RC has not regained the line rate.
    limited: bool,
    cnp_in_period: bool,
    alpha_due: Instant,
    increase_due: Instant,
    last_cut: Option<Instant>,
    timer_events: u32,
    byte_events: u32,
    bytes: u64,
    cnps: u64,
    cuts: u64,
}

impl Dcqcn {
    /// A flow at `line_rate_mbps`, not rate limited.
    pub fn new(cfg: DcqcnConfig, line_rate_mbps: u64) -> Self {
        let line = line_rate_mbps.max(1) as f64;
        Self {
            cfg,
            line,
            rc: line,
            rt: line,
            alpha: 0.0,
            limited: false,
            cnp_in_period: false,
            alpha_due: Instant::ZERO,
            increase_due: Instant::ZERO,
            last_cut: None,
            timer_events: 0,
            byte_events: 0,
            bytes: 0,
            cnps: 0,
            cuts: 0,
        }
    }

    /// RC, Mb/s.
    pub fn rate(&self) -> f64 {
        self.rc
    }

    /// RT, Mb/s.
    pub fn target(&self) -> f64 {
        self.rt
    }

    /// Alpha, the estimate of congestion, in 0.0..=1.0.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Whether RC is below the line rate (the pacer has work).
    pub fn limited(&self) -> bool {
        self.limited
    }

    /// CNPs taken, and the cuts they made.
    pub fn counts(&self) -> (u64, u64) {
        (self.cnps, self.cuts)
    }

    /// A CNP arrived at `now`.
    pub fn on_cnp(&mut self, now: Instant) {
        self.advance(now);
        self.cnps += 1;
        self.cnp_in_period = true;
        let first = !self.limited;
        if first {
            self.limited = true;
            self.alpha = f64::from(self.cfg.initial_alpha_value.min(1024)) / 1024.0;
            self.alpha_due = now.after(self.cfg.dce_tcp_rtt);
            self.last_cut = None;
        }
        let may_cut = self
            .last_cut
            .is_none_or(|t| now.since(t) >= self.cfg.rate_reduce_monitor_period);
        if !may_cut {
            return;
        }
        self.cuts += 1;
        self.last_cut = Some(now);
        let min = self.cfg.rpg_min_rate.max(1) as f64;
        if first && self.cfg.rate_to_set_on_first_cnp != 0 {
            self.rc = (self.cfg.rate_to_set_on_first_cnp as f64).clamp(min, self.line);
            self.rt = self.rc;
        } else {
            let shift = 2f64.powi(self.cfg.rpg_gd.min(62) as i32);
            let factor = (1.0 - self.alpha * 1024.0 / shift)
                .max(f64::from(self.cfg.rpg_min_dec_fac.min(100)) / 100.0);
            self.rt = self.rc;
            self.rc = (self.rc * factor).max(min).min(self.line);
        }
        self.timer_events = 0;
        self.byte_events = 0;
        self.bytes = 0;
        self.increase_due = now.after(self.cfg.rpg_time_reset);
    }

    /// `bytes` were sent at `now`: the byte counter's share of the rate
    /// increase.
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        let reset = self.cfg.rpg_byte_reset;
        if !self.limited || reset == 0 {
            return;
        }
        self.bytes += bytes;
        while self.limited && self.bytes >= reset {
            self.bytes -= reset;
            self.byte_events += 1;
            self.increase();
        }
    }

    /// Runs every timer expiry up to `now`, in order.
    pub fn advance(&mut self, now: Instant) {
        if !self.limited {
            return;
        }
        self.advance_alpha(now);
        let period = self.cfg.rpg_time_reset;
        if period.is_zero() {
            return;
        }
        while self.limited && self.increase_due <= now {
            self.timer_events += 1;
            self.increase();
            self.increase_due = self.increase_due.after(period);
        }
    }

    /// The alpha updates due by `now`: the first with the period's CNP
    /// flag, the rest (no CNP in them) at once as g^n.
    fn advance_alpha(&mut self, now: Instant) {
        let period = self.cfg.dce_tcp_rtt.as_nanos() as u64;
        if period == 0 || self.alpha_due > now {
            return;
        }
        let n = (now.as_nanos() - self.alpha_due.as_nanos()) / period + 1;
        let g = f64::from(self.cfg.dce_tcp_g.min(1024)) / 1024.0;
        self.alpha = if self.cnp_in_period {
            g * self.alpha + (1.0 - g)
        } else {
            g * self.alpha
        };
        self.cnp_in_period = false;
        let rest = i32::try_from(n - 1).unwrap_or(i32::MAX);
        self.alpha *= g.powi(rest);
        self.alpha_due = Instant::from_nanos(self.alpha_due.as_nanos() + n * period);
    }

    /// One rate-increase event (T or BC already counted).
    fn increase(&mut self) {
        let f = self.cfg.rpg_threshold;
        let (most, least) = (
            self.timer_events.max(self.byte_events),
            self.timer_events.min(self.byte_events),
        );
        if least > f {
            let i = f64::from(least - f);
            self.rt += i * self.cfg.rpg_hai_rate as f64;
        } else if most > f {
            self.rt += self.cfg.rpg_ai_rate as f64;
        }
        self.rt = self.rt.min(self.line);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line);
        if self.line - self.rc < 1.0 {
            self.rc = self.line;
            self.rt = self.line;
            self.limited = false;
        }
    }
}

#[cfg(test)]
#[path = "dcqcn_tests.rs"]
mod tests;
