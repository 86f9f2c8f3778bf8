//! `ferroce sample OUT.pcap`: write ferroce's built-in sample packets (every
//! opcode, v1 and v2, IPv4 and IPv6, a CM REQ) as a pcap, for trying `dump`,
//! Wireshark or another decoder on known-good packets; last, one 802.1Qbb
//! PFC frame ([`pfc_sample`]), the flow control lossless RoCE runs on.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use ferroce_wire::pfc::{self, MacControlRepr};

use crate::capture;
use crate::error::Error;

/// Arguments of `ferroce sample`.
#[derive(Debug, Args)]
pub(crate) struct SampleArgs {
    /// Where to write the pcap.
    out: PathBuf,
}

/// The first sample's timestamp (2026-01-01T00:00:00Z); the rest follow 1 ms apart.
const START: Duration = Duration::from_secs(1_767_225_600);

pub(crate) fn run(args: &SampleArgs) -> Result<bool, Error> {
    let mut frames: Vec<Vec<u8>> = ferroce_wire::samples::all()
        .iter()
        .map(|s| s.to_bytes())
        .collect();
    frames.push(pfc::frame(PFC_SOURCE, &pfc_sample()));
    let timed: Vec<(Duration, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (START + Duration::from_millis(i as u64), &f[..]))
        .collect();
    capture::write_pcap(&args.out, capture::LinkType::Ethernet, &timed)?;
    eprintln!("wrote {} packets to {}", frames.len(), args.out.display());
    Ok(true)
}

/// The PFC sample's source MAC (locally administered, as the RoCE samples').
pub(crate) const PFC_SOURCE: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0c];

/// The sample PFC frame: priority 3 (RoCE's usual lossless class) paused
/// for the longest time, priority 4 resumed (time 0), the rest not enabled.
pub(crate) fn pfc_sample() -> MacControlRepr {
    MacControlRepr::Pfc {
        enabled: 0b0001_1000,
        quanta: [0, 0, 0, 0xffff, 0, 0, 0, 0],
    }
}
