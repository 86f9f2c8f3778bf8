//! The raw backend's priority and PFC options the tools share (`--vlan`,
//! `--pcp`, `--pcp-map`, `--pfc` and its thresholds, `--rx-ring`), turned
//! into [`ferroce::RawOptions`]. They need `--raw`; the device checks them
//! together when it opens (an XOFF threshold above the ring, say).

use clap::Args;
use ferroce::{PcpMap, PfcConfig, RawOptions};

/// Raw-backend QoS and PFC flags.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct QosArgs {
    /// Tag every frame with this VLAN (1-4094) and the PCP of its traffic
    /// class. Without it frames are untagged, or priority-tagged (VID 0)
    /// with --pfc.
    #[arg(long, value_name = "VID", requires = "raw")]
    pub(crate) vlan: Option<u16>,
    /// Put every traffic class on this 802.1Q priority (default 3, the
    /// usual lossless-RoCE priority).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(0..8),
          conflicts_with = "pcp_map", requires = "raw")]
    pub(crate) pcp: Option<u8>,
    /// Priority per IP precedence (DSCP / 8), eight values, precedence 0
    /// first: `0,1,2,3,4,5,6,7` is mlx5's default DSCP table.
    #[arg(long, value_name = "P0,..,P7", value_parser = PcpMap::parse, requires = "raw")]
    pub(crate) pcp_map: Option<PcpMap>,
    /// Priority flow control (802.1Qbb) on every priority: honour the
    /// peer's pause frames, and pause the peer when the receive ring's
    /// backlog reaches --pfc-xoff.
    #[arg(long, requires = "raw")]
    pub(crate) pfc: bool,
    /// With --pfc: the priorities PFC is on for, comma-separated (`3` or
    /// `3,4`) [default: all eight].
    #[arg(long, value_name = "P,..", value_parser = parse_priorities, requires = "pfc")]
    pub(crate) pfc_priorities: Option<u8>,
    /// With --pfc: frames waiting in the receive ring at which to send
    /// XOFF [default: 512].
    #[arg(long, value_name = "FRAMES", requires = "pfc")]
    pub(crate) pfc_xoff: Option<u32>,
    /// With --pfc: frames waiting at or below which to send XON
    /// [default: 128].
    #[arg(long, value_name = "FRAMES", requires = "pfc")]
    pub(crate) pfc_xon: Option<u32>,
    /// With --pfc: the pause time sent, in quanta of 512 bit times
    /// [default: 65535].
    #[arg(long, value_name = "QUANTA", requires = "pfc")]
    pub(crate) pfc_quanta: Option<u16>,
    /// With --pfc: the link speed pauses are timed at, in Mbit/s
    /// [default: the interface's, or 10000 if it has none].
    #[arg(long = "pfc-link-mbps", value_name = "MBPS", requires = "pfc")]
    pub(crate) pfc_link_mbps: Option<u32>,
    /// Receive ring slots, one frame (or super-frame) each [default: 512].
    #[arg(long, value_name = "FRAMES", requires = "raw")]
    pub(crate) rx_ring: Option<u32>,
    /// No segmentation offload on the raw backend: every RoCE v2 packet
    /// its own frame (for a peer that cannot take super-frames whole).
    #[arg(long = "no-gso", requires = "raw")]
    pub(crate) no_gso: bool,
}

impl QosArgs {
    /// The raw device's options these flags ask for.
    pub(crate) fn options(&self) -> RawOptions {
        let defaults = RawOptions::default();
        let pfc = self.pfc.then(|| {
            let d = PfcConfig::default();
            PfcConfig {
                xoff: self.pfc_xoff.unwrap_or(d.xoff),
                xon: self.pfc_xon.unwrap_or(d.xon),
                pause_quanta: self.pfc_quanta.unwrap_or(d.pause_quanta),
                link_mbps: self.pfc_link_mbps,
                priorities: self.pfc_priorities.unwrap_or(d.priorities),
            }
        });
        RawOptions {
            vlan: self.vlan,
            pcp: match (self.pcp, self.pcp_map) {
                (Some(p), _) => PcpMap::all(p),
                (None, Some(map)) => map,
                (None, None) => defaults.pcp,
            },
            pfc,
            rx_frames: self.rx_ring.unwrap_or(defaults.rx_frames),
            gso: !self.no_gso,
            ..defaults
        }
    }
}

/// A list of priorities (`3,4`) as PFC's class-enable mask.
fn parse_priorities(s: &str) -> Result<u8, String> {
    s.split(',')
        .try_fold(0u8, |mask, p| match p.trim().parse::<u8>() {
            Ok(p) if p < 8 => Ok(mask | 1 << p),
            _ => Err(format!("{p:?} is not a priority (0-7)")),
        })
}

/// `--stats`' PFC lines for a raw device on `local`: one per priority that
/// saw a pause frame either way (pause frames received and sent, each
/// with its XONs, and the time that priority's frames were held); nothing
/// when no PFC or PAUSE frame came or went (PFC off, or never needed).
pub(crate) fn pfc_lines(local: std::net::IpAddr, s: &ferroce::PfcStats) -> String {
    let mut out = String::new();
    for p in 0..8 {
        if s.rx_pause[p] + s.rx_resume[p] + s.tx_pause[p] + s.tx_resume[p] == 0 {
            continue;
        }
        out += &format!(
            "{local}: pfc priority {p}: received {} pause + {} resume, sent {} pause + {} resume, \
             paused {} us\n",
            s.rx_pause[p], s.rx_resume[p], s.tx_pause[p], s.tx_resume[p], s.paused_us[p]
        );
    }
    if s.rx_link_pause > 0 {
        out += &format!(
            "{local}: 802.3x PAUSE received (not honoured): {}\n",
            s.rx_link_pause
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_parse_to_a_mask() {
        assert_eq!(parse_priorities("3"), Ok(0b1000));
        assert_eq!(parse_priorities("3, 4"), Ok(0b1_1000));
        assert!(parse_priorities("8").unwrap_err().contains("\"8\""));
        assert!(parse_priorities("").is_err());
    }
}
