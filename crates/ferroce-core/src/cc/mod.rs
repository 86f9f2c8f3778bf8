//! Congestion control, as RoCE NICs do it: ECN marks on the way out, the
//! notification point (the `np` module: a CE-marked packet makes the receiving QP
//! send a CNP to the sender's QP, at most one per interval) and the reaction
//! point ([`dcqcn`]: DCQCN, Zhu et al., SIGCOMM 2015, cutting and regaining
//! each QP's rate), which a per-QP pacer (the `pacer` module) enforces.
//!
//! The settings are the device's ([`CongestionConfig`], given with
//! [`crate::Endpoint::set_congestion_control`]); their names, units and
//! defaults are those the Linux mlx5 driver exposes (its `ecn/roce_np` and
//! `ecn/roce_rp` settings), so that a RoCE operator finds what they know.

pub mod dcqcn;
pub(crate) mod np;
pub(crate) mod pacer;
mod settings;

use core::time::Duration;

pub use dcqcn::DcqcnConfig;
pub use settings::NAMES as SETTING_NAMES;

/// The traffic class CNPs leave with by default: DSCP 48 (CS6), mlx5's
/// `cnp_dscp` default.
pub const CNP_DSCP: u8 = 48;

/// The 802.1p priority of CNPs by default: mlx5's `cnp_802p_prio`.
pub const CNP_802P_PRIO: u8 = 6;

/// A device's congestion-control settings. The default is what a RoCE NIC
/// (mlx5) does out of the box: ECN-capable packets, CNPs at most every
/// 4 µs per QP, DCQCN on, 100 Gb/s line rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CongestionConfig {
    /// Packets leave ECN-capable (ECT(0)) unless their path's traffic class
    /// already carries ECN bits, which are then kept as given.
    pub ecn: bool,
    /// The notification point: answer CE-marked packets with CNPs.
    pub np: NpConfig,
    /// The reaction point: DCQCN, or `None` (CNPs are counted, the rate is
    /// never cut).
    pub dcqcn: Option<DcqcnConfig>,
    /// The rate a QP starts at and never exceeds, in Mb/s (the NIC's line
    /// rate). At it, the pacer holds nothing back.
    pub line_rate_mbps: u64,
}

impl Default for CongestionConfig {
    fn default() -> Self {
        Self {
            ecn: true,
            np: NpConfig::MLX5,
            dcqcn: Some(DcqcnConfig::MLX5),
            line_rate_mbps: 100_000,
        }
    }
}

impl CongestionConfig {
    /// Everything off: Not-ECT packets, no CNPs, no pacing (rxe's
    /// behaviour).
    pub const OFF: Self = Self {
        ecn: false,
        np: NpConfig {
            enabled: false,
            ..NpConfig::MLX5
        },
        dcqcn: None,
        line_rate_mbps: 100_000,
    };

    /// The DCQCN paper's settings (section 5 of Zhu et al.): CNPs at most
    /// every 50 µs, and [`DcqcnConfig::PAPER`].
    pub fn paper() -> Self {
        Self {
            np: NpConfig {
                min_time_between_cnps: Duration::from_micros(50),
                ..NpConfig::MLX5
            },
            dcqcn: Some(DcqcnConfig::PAPER),
            ..Self::default()
        }
    }
}

/// The notification point's settings (mlx5's `ecn/roce_np`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NpConfig {
    /// Send CNPs at all (mlx5's per-priority `enable`).
    pub enabled: bool,
    /// At most one CNP per QP per this interval (`min_time_between_cnps`,
    /// in µs in mlx5; 4 µs by default).
    pub min_time_between_cnps: Duration,
    /// The DSCP of CNPs (`cnp_dscp`, 48).
    pub cnp_dscp: u8,
    /// The 802.1p priority of CNPs (`cnp_802p_prio`, 6): for a backend
    /// that tags its frames; the UDP backend cannot set it per packet.
    pub cnp_802p_prio: u8,
}

impl NpConfig {
    /// mlx5's defaults.
    pub const MLX5: Self = Self {
        enabled: true,
        min_time_between_cnps: Duration::from_micros(4),
        cnp_dscp: CNP_DSCP,
        cnp_802p_prio: CNP_802P_PRIO,
    };
}

impl Default for NpConfig {
    fn default() -> Self {
        Self::MLX5
    }
}
