//! `ferroce sample OUT.pcap`: write ferroce's built-in sample packets (every
//! opcode, v1 and v2, IPv4 and IPv6, a CM REQ) as a pcap, for trying `dump`,
//! Wireshark or another decoder on known-good packets.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

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
    let frames: Vec<Vec<u8>> = ferroce_wire::samples::all()
        .iter()
        .map(|s| s.to_bytes())
        .collect();
    let timed: Vec<(Duration, &[u8])> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (START + Duration::from_millis(i as u64), &f[..]))
        .collect();
    capture::write_pcap(&args.out, capture::LinkType::Ethernet, &timed)?;
    eprintln!("wrote {} packets to {}", frames.len(), args.out.display());
    Ok(true)
}
