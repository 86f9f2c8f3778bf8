//! The writing side of [`super`]: [`write_pcap`] stores frames as a little-endian,
//! nanosecond classic pcap.

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

use super::{CaptureError, CaptureErrorKind, LinkType, WRITE_SNAPLEN, link_number};

/// Writes `frames` (timestamp since the Unix epoch, bytes starting with the `link` header)
/// as a classic pcap at `path`, replacing any file there.
pub(crate) fn write_pcap(
    path: &Path,
    link: LinkType,
    frames: &[(Duration, &[u8])],
) -> Result<(), CaptureError> {
    let err = |kind| CaptureError {
        path: path.to_path_buf(),
        kind,
    };
    // Check everything before creating the file, so that a refused frame leaves no file.
    for (index, (timestamp, data)) in frames.iter().enumerate() {
        let detail = if timestamp.as_secs() > u64::from(u32::MAX) {
            format!("timestamp {timestamp:?} is past the pcap limit (2106-02-07)")
        } else if data.len() > WRITE_SNAPLEN as usize {
            format!(
                "{} bytes is more than the snapshot length {WRITE_SNAPLEN}",
                data.len()
            )
        } else {
            continue;
        };
        return Err(err(CaptureErrorKind::Unwritable { index, detail }));
    }
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen: WRITE_SNAPLEN,
        datalink: DataLink::from(link_number(link)),
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
    };
    let io_err = |e: PcapError| match e {
        PcapError::IoError(e) => err(CaptureErrorKind::Io(e)),
        other => err(CaptureErrorKind::Io(io::Error::other(other))),
    };
    let file = File::create(path).map_err(|e| err(CaptureErrorKind::Io(e)))?;
    let mut writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(io_err)?;
    for (timestamp, data) in frames {
        // Cannot fail: the length was checked against WRITE_SNAPLEN above.
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        writer
            .write_packet(&PcapPacket::new(*timestamp, len, data))
            .map_err(io_err)?;
    }
    writer
        .into_writer()
        .into_inner()
        .map(drop) // flushed; the file is closed here
        .map_err(|e| err(CaptureErrorKind::Io(e.into_error())))
}
