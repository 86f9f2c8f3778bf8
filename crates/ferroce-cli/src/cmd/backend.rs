//! The device options the tools share: the backend (`--raw`), the GID
//! index a connection's path is set from (`-g`, as `ibv_rc_pingpong -g`),
//! whose type picks RoCE v1 or v2, and congestion control (`--cc`,
//! `--line-rate`).

use std::net::IpAddr;

use clap::{Args, ValueEnum};
use ferroce::{BackendKind, CongestionConfig, Context, DeviceConfig, RoceMode};

use crate::error::Error;

/// Which congestion control a device runs (`--cc`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum CcMode {
    /// ECN, CNPs and DCQCN with mlx5's defaults (as a RoCE NIC ships).
    #[default]
    Mlx5,
    /// ECN, CNPs and DCQCN with the DCQCN paper's settings.
    Paper,
    /// ECN and CNPs, but no rate cuts (CNPs are counted).
    NoDcqcn,
    /// Nothing: Not-ECT packets, no CNPs, no pacing (as rxe).
    Off,
}

/// `--raw`, `-g`, `--cc`, `--cc-set` and `--line-rate`.
#[derive(Debug, Args, Clone)]
pub(crate) struct BackendArgs {
    /// Open the device on the raw-Ethernet backend (AF_PACKET on the
    /// interface of -L): RoCE v1 and v2, a GID table of both types. Needs
    /// CAP_NET_RAW (root).
    #[arg(long)]
    pub(crate) raw: bool,
    /// Source GID index (see `ferroce devinfo -v`; with --raw each address
    /// has a RoCE v1 and a RoCE v2 entry): its type picks RoCE v1 or v2.
    /// Default: the device's RoCE v2 GID.
    #[arg(long = "gid-index", short = 'g', value_name = "INDEX")]
    pub(crate) gid_index: Option<usize>,
    /// RC local ACK timeout, 4.096 µs x 2^N (perftest's -u; default 14,
    /// 67 ms). A receiver slowed on purpose with PFC holding its sender
    /// may need longer.
    #[arg(long = "qp-timeout", value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=31))]
    pub(crate) qp_timeout: Option<u8>,
    /// VLAN, priorities and PFC (with --raw).
    #[command(flatten)]
    pub(crate) qos: super::qos::QosArgs,
    /// Congestion control: ECN marks, CNPs and DCQCN.
    #[arg(long, value_enum, default_value_t = CcMode::Mlx5)]
    pub(crate) cc: CcMode,
    /// The line rate DCQCN starts at and regains, in Mb/s.
    #[arg(long = "line-rate", value_name = "MBPS", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) line_rate: u64,
    /// One congestion setting over --cc's, by the name mlx5 gives its
    /// `ecn/roce_np` or `ecn/roce_rp` file, in its units (µs, Mb/s):
    /// `--cc-set rpg_ai_rate=1 --cc-set min_time_between_cnps=50`.
    #[arg(long = "cc-set", value_name = "NAME=VALUE", value_parser = parse_cc_setting)]
    pub(crate) cc_set: Vec<CcSetting>,
}

/// One `--cc-set`.
#[derive(Debug, Clone)]
pub(crate) struct CcSetting {
    name: String,
    value: u64,
}

/// `NAME=VALUE`, checked against the settings there are.
fn parse_cc_setting(s: &str) -> Result<CcSetting, String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: give NAME=VALUE, as rpg_ai_rate=5"))?;
    let value = value
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: {value:?} is not a whole number"))?;
    let setting = CcSetting {
        name: name.trim().to_string(),
        value,
    };
    CongestionConfig::default().set(&setting.name, setting.value)?;
    Ok(setting)
}

impl Default for BackendArgs {
    fn default() -> Self {
        Self {
            raw: false,
            gid_index: None,
            cc: CcMode::Mlx5,
            line_rate: CongestionConfig::default().line_rate_mbps,
            qp_timeout: None,
            qos: Default::default(),
            cc_set: Vec::new(),
        }
    }
}

impl BackendArgs {
    /// The device settings for `local` with this backend.
    pub(crate) fn device(&self, local: IpAddr) -> DeviceConfig {
        DeviceConfig {
            backend: if self.raw {
                BackendKind::Raw
            } else {
                BackendKind::Udp
            },
            congestion: self.congestion(),
            raw: self.qos.options(),
            ..DeviceConfig::new(local)
        }
    }

    /// The congestion control of `--cc` at `--line-rate`.
    pub(crate) fn congestion(&self) -> CongestionConfig {
        let mut c = match self.cc {
            CcMode::Mlx5 => CongestionConfig::default(),
            CcMode::Paper => CongestionConfig::paper(),
            CcMode::NoDcqcn => CongestionConfig {
                dcqcn: None,
                ..CongestionConfig::default()
            },
            CcMode::Off => CongestionConfig::OFF,
        };
        c.line_rate_mbps = self.line_rate;
        for s in &self.cc_set {
            // Checked when parsed.
            let _ = c.set(&s.name, s.value);
        }
        c
    }

    /// The flags that give a child process these settings.
    pub(crate) fn cc_args(&self) -> Vec<String> {
        let cc = self
            .cc
            .to_possible_value()
            .map(|v| v.get_name().to_string());
        let mut args = vec![
            "--cc".into(),
            cc.unwrap_or_default(),
            "--line-rate".into(),
            self.line_rate.to_string(),
        ];
        for s in &self.cc_set {
            args.extend(["--cc-set".into(), format!("{}={}", s.name, s.value)]);
        }
        args
    }

    /// The RoCE version of `-g` on `ctx` (v2 without it).
    pub(crate) fn roce(&self, ctx: &Context) -> Result<RoceMode, Error> {
        match self.gid_index {
            None => Ok(RoceMode::V2),
            Some(i) => ctx
                .gid_type(i)
                .map_err(|e| Error::Usage(format!("-g {i}: {e}"))),
        }
    }
}
