//! The device options the tools share: the backend (`--raw`) and the GID
//! index a connection's path is set from (`-g`, as `ibv_rc_pingpong -g`),
//! whose type picks RoCE v1 or v2.

use std::net::IpAddr;

use clap::Args;
use ferroce::{BackendKind, Context, DeviceConfig, RoceMode};

use crate::error::Error;

/// `--raw` and `-g`.
#[derive(Debug, Args, Clone, Copy, Default)]
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
            raw: self.qos.options(),
            ..DeviceConfig::new(local)
        }
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
