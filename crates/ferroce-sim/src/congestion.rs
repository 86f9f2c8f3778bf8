//! The scenario's `[congestion]` table: what every host's engine does
//! about congestion, as a RoCE NIC's settings say it. `mode` picks a preset
//! (mlx5's defaults, the DCQCN paper's, CNPs without DCQCN, or everything
//! off); any field of mlx5's `ecn/roce_np` and `ecn/roce_rp` settings named
//! as the engine names it ([`DcqcnConfig`], [`NpConfig`]) overrides the
//! preset, times in microseconds and rates in Mb/s as mlx5's files give
//! them. The line rate is each host's own link rate, not a setting.

use core::time::Duration;

use ferroce_core::{CongestionConfig, DcqcnConfig, NpConfig};
use serde::Deserialize;

use crate::scenario::ScenarioError;

/// The preset a scenario starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// As a RoCE NIC out of the box: ECN, CNPs, DCQCN with mlx5's values.
    #[default]
    Mlx5,
    /// ECN, CNPs and DCQCN with the values of section 5 of the paper.
    Paper,
    /// ECN and CNPs, but senders ignore CNPs (the rate is never cut).
    NoDcqcn,
    /// Not-ECT packets, no CNPs, no pacing: PFC alone.
    Off,
}

impl Mode {
    /// The mode a scenario file names `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "mlx5" => Some(Self::Mlx5),
            "paper" => Some(Self::Paper),
            "no-dcqcn" => Some(Self::NoDcqcn),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

/// The `[congestion]` table.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Congestion {
    #[serde(default)]
    pub mode: Mode,
    // The notification point (mlx5's ecn/roce_np).
    pub min_time_between_cnps: Option<u64>,
    pub cnp_dscp: Option<u8>,
    // The reaction point (mlx5's ecn/roce_rp).
    pub rpg_time_reset: Option<u64>,
    pub rpg_byte_reset: Option<u64>,
    pub rpg_threshold: Option<u32>,
    pub rpg_ai_rate: Option<u64>,
    pub rpg_hai_rate: Option<u64>,
    pub rpg_gd: Option<u32>,
    pub rpg_min_dec_fac: Option<u32>,
    pub rpg_min_rate: Option<u64>,
    pub rate_to_set_on_first_cnp: Option<u64>,
    pub dce_tcp_g: Option<u32>,
    pub dce_tcp_rtt: Option<u64>,
    pub initial_alpha_value: Option<u32>,
    pub rate_reduce_monitor_period: Option<u64>,
}

/// Sets `*field` to `v` if `v` is given.
fn set<T>(field: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *field = v;
    }
}

fn us(v: Option<u64>) -> Option<Duration> {
    v.map(Duration::from_micros)
}

impl Congestion {
    /// Whether packets leave ECN-capable.
    pub fn ecn(&self) -> bool {
        self.mode != Mode::Off
    }

    /// The engine's settings for a host whose link runs at `rate_gbps`.
    pub fn config(&self, rate_gbps: f64) -> CongestionConfig {
        let mut c = match self.mode {
            Mode::Mlx5 => CongestionConfig::default(),
            Mode::Paper => CongestionConfig::paper(),
            Mode::NoDcqcn => CongestionConfig {
                dcqcn: None,
                ..CongestionConfig::default()
            },
            Mode::Off => CongestionConfig::OFF,
        };
        c.line_rate_mbps = (rate_gbps * 1000.0).round().max(1.0) as u64;
        self.override_np(&mut c.np);
        if let Some(d) = c.dcqcn.as_mut() {
            self.override_rp(d);
        }
        c
    }

    fn override_np(&self, np: &mut NpConfig) {
        set(
            &mut np.min_time_between_cnps,
            us(self.min_time_between_cnps),
        );
        set(&mut np.cnp_dscp, self.cnp_dscp);
    }

    fn override_rp(&self, d: &mut DcqcnConfig) {
        set(&mut d.rpg_time_reset, us(self.rpg_time_reset));
        set(&mut d.rpg_byte_reset, self.rpg_byte_reset);
        set(&mut d.rpg_threshold, self.rpg_threshold);
        set(&mut d.rpg_ai_rate, self.rpg_ai_rate);
        set(&mut d.rpg_hai_rate, self.rpg_hai_rate);
        set(&mut d.rpg_gd, self.rpg_gd);
        set(&mut d.rpg_min_dec_fac, self.rpg_min_dec_fac);
        set(&mut d.rpg_min_rate, self.rpg_min_rate);
        set(
            &mut d.rate_to_set_on_first_cnp,
            self.rate_to_set_on_first_cnp,
        );
        set(&mut d.dce_tcp_g, self.dce_tcp_g);
        set(&mut d.dce_tcp_rtt, us(self.dce_tcp_rtt));
        set(&mut d.initial_alpha_value, self.initial_alpha_value);
        set(
            &mut d.rate_reduce_monitor_period,
            us(self.rate_reduce_monitor_period),
        );
    }

    /// Refuses values outside what mlx5 accepts, naming the field.
    pub fn check(&self) -> Result<(), ScenarioError> {
        let fail = |m: &str| Err(ScenarioError(format!("[congestion]: {m}")));
        if self.cnp_dscp.is_some_and(|d| d > 63) {
            return fail("cnp_dscp must be 0 .. 63");
        }
        if self.dce_tcp_g.is_some_and(|g| g > 1024)
            || self.initial_alpha_value.is_some_and(|a| a > 1024)
        {
            return fail("dce_tcp_g and initial_alpha_value are in 1024ths: 0 .. 1024");
        }
        if self
            .rpg_min_dec_fac
            .is_some_and(|f| !(1..=100).contains(&f))
        {
            return fail("rpg_min_dec_fac is a percentage: 1 .. 100");
        }
        if self.rpg_gd.is_some_and(|g| g > 31) {
            return fail("rpg_gd is a shift: 0 .. 31");
        }
        if self.rpg_time_reset == Some(0) || self.dce_tcp_rtt == Some(0) {
            return fail("rpg_time_reset and dce_tcp_rtt must be above 0 us");
        }
        if self.rpg_min_rate == Some(0) {
            return fail("rpg_min_rate must be above 0 Mb/s");
        }
        Ok(())
    }
}
