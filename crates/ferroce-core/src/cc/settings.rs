//! Congestion-control settings by the names mlx5 gives its `ecn/roce_np`
//! and `ecn/roce_rp` files, with their units (times in µs, rates in
//! Mb/s): what an operator sets one by one on a NIC, set one by one on a
//! [`CongestionConfig`] (`--cc-set NAME=VALUE` in the tools).

use core::time::Duration;

use super::{CongestionConfig, DcqcnConfig};

/// Every name [`CongestionConfig::set`] takes: the notification point's,
/// then the reaction point's.
pub const NAMES: [&str; 16] = [
    "min_time_between_cnps",
    "cnp_dscp",
    "cnp_802p_prio",
    "rpg_time_reset",
    "rpg_byte_reset",
    "rpg_threshold",
    "rpg_ai_rate",
    "rpg_hai_rate",
    "rpg_gd",
    "rpg_min_dec_fac",
    "rpg_min_rate",
    "rate_to_set_on_first_cnp",
    "dce_tcp_g",
    "dce_tcp_rtt",
    "initial_alpha_value",
    "rate_reduce_monitor_period",
];

impl CongestionConfig {
    /// Sets the setting mlx5 calls `name` to `value` (µs for times, Mb/s
    /// for rates). A reaction-point setting with DCQCN off is accepted and
    /// has no effect. The error names the setting and what it takes.
    pub fn set(&mut self, name: &str, value: u64) -> Result<(), String> {
        let us = Duration::from_micros(value);
        let small = |max: u64| -> Result<u32, String> {
            if value <= max {
                Ok(value as u32)
            } else {
                Err(format!("{name} is at most {max}, not {value}"))
            }
        };
        let np = &mut self.np;
        let mut rp = self.dcqcn.unwrap_or(DcqcnConfig::MLX5);
        match name {
            "min_time_between_cnps" => np.min_time_between_cnps = us,
            "cnp_dscp" => np.cnp_dscp = small(63)? as u8,
            "cnp_802p_prio" => np.cnp_802p_prio = small(7)? as u8,
            "rpg_time_reset" => rp.rpg_time_reset = us,
            "rpg_byte_reset" => rp.rpg_byte_reset = value,
            "rpg_threshold" => rp.rpg_threshold = small(31)?,
            "rpg_ai_rate" => rp.rpg_ai_rate = value,
            "rpg_hai_rate" => rp.rpg_hai_rate = value,
            "rpg_gd" => rp.rpg_gd = small(15)?,
            "rpg_min_dec_fac" => rp.rpg_min_dec_fac = small(100)?,
            "rpg_min_rate" => rp.rpg_min_rate = value,
            "rate_to_set_on_first_cnp" => rp.rate_to_set_on_first_cnp = value,
            "dce_tcp_g" => rp.dce_tcp_g = small(1023)?,
            "dce_tcp_rtt" => rp.dce_tcp_rtt = us,
            "initial_alpha_value" => rp.initial_alpha_value = small(1023)?,
            "rate_reduce_monitor_period" => rp.rate_reduce_monitor_period = us,
            _ => {
                return Err(format!(
                    "{name:?} is not a congestion setting; the settings are {}",
                    NAMES.join(", ")
                ));
            }
        }
        if let Some(d) = self.dcqcn.as_mut() {
            *d = rp;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_taken_and_changes_its_setting() {
        for name in NAMES {
            let mut c = CongestionConfig::default();
            c.set(name, 3).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_ne!(c, CongestionConfig::default(), "{name} changed nothing");
        }
    }

    #[test]
    fn units_are_mlx5s() {
        let mut c = CongestionConfig::default();
        c.set("rpg_time_reset", 1500).unwrap();
        c.set("rpg_ai_rate", 2).unwrap();
        c.set("min_time_between_cnps", 50).unwrap();
        let d = c.dcqcn.unwrap();
        assert_eq!(d.rpg_time_reset, Duration::from_micros(1500));
        assert_eq!(d.rpg_ai_rate, 2);
        assert_eq!(c.np.min_time_between_cnps, Duration::from_micros(50));
    }

    #[test]
    fn bad_names_and_values_are_refused_by_name() {
        let mut c = CongestionConfig::default();
        assert!(c.set("rpg_ai", 1).unwrap_err().contains("rpg_ai_rate"));
        assert!(c.set("cnp_dscp", 64).unwrap_err().contains("at most 63"));
        assert!(c.set("rpg_min_dec_fac", 101).is_err());
        assert_eq!(c, CongestionConfig::default());
    }

    #[test]
    fn with_dcqcn_off_a_reaction_point_setting_leaves_it_off() {
        let mut c = CongestionConfig {
            dcqcn: None,
            ..CongestionConfig::default()
        };
        c.set("rpg_ai_rate", 9).unwrap();
        assert_eq!(c.dcqcn, None);
    }
}
