//! [`CaptureError`]: what went wrong with which capture file, its message, and the
//! mapping of `pcap-file`'s parse errors onto it.

use std::fmt;
use std::io;
use std::path::PathBuf;

use pcap_file::PcapError;

/// A capture file could not be read or written.
#[derive(Debug)]
pub(crate) struct CaptureError {
    /// The file concerned.
    pub(crate) path: PathBuf,
    /// What is wrong with it.
    pub(crate) kind: CaptureErrorKind,
}

/// What went wrong, without the file name.
#[derive(Debug)]
pub(crate) enum CaptureErrorKind {
    /// Opening, reading or writing the file failed.
    Io(io::Error),
    /// The file starts with neither a pcap nor a pcapng magic number (`head`: its first
    /// bytes, at most 4).
    NotACapture { head: Vec<u8> },
    /// `what`, starting at byte `offset`, runs past the end of the file.
    Truncated { what: String, offset: u64 },
    /// `what`, starting at byte `offset`, is inconsistent (`detail` says how).
    Malformed {
        what: String,
        offset: u64,
        detail: String,
    },
    /// A packet record uses a link type this module does not read.
    UnsupportedLinkType(u32),
    /// A pcapng packet block refers to an interface the section has not described.
    UnknownInterface { interface_id: u32, offset: u64 },
    /// [`write_pcap`](super::write_pcap): frame `index` (0-based) cannot be stored in a classic pcap.
    Unwritable { index: usize, detail: String },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        match &self.kind {
            CaptureErrorKind::Io(e) => write!(f, "{e}"),
            CaptureErrorKind::NotACapture { head } if head.is_empty() => {
                f.write_str("not a pcap or pcapng file (the file is empty)")
            }
            CaptureErrorKind::NotACapture { head } => {
                f.write_str("not a pcap or pcapng file (it starts with")?;
                for b in head {
                    write!(f, " {b:02x}")?;
                }
                f.write_str(")")
            }
            CaptureErrorKind::Truncated { what, offset } => {
                write!(
                    f,
                    "truncated: {what} at byte {offset} runs past the end of the file"
                )
            }
            CaptureErrorKind::Malformed {
                what,
                offset,
                detail,
            } => write!(f, "malformed {what} at byte {offset}: {detail}"),
            CaptureErrorKind::UnsupportedLinkType(n) => write!(
                f,
                "unsupported link type {n} (readable: 1 Ethernet, 113 Linux SLL, \
                 276 Linux SLL2, 101/228/229 raw IP)"
            ),
            CaptureErrorKind::UnknownInterface {
                interface_id,
                offset,
            } => write!(
                f,
                "malformed pcapng: the packet block at byte {offset} names interface \
                 {interface_id}, which no Interface Description Block of its section defines"
            ),
            CaptureErrorKind::Unwritable { index, detail } => {
                write!(f, "cannot write frame {index} (0-based): {detail}")
            }
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CaptureErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Maps a `pcap-file` parse error on `what`, which starts at byte `offset`.
pub(super) fn pcap_file_error(e: PcapError, what: String, offset: u64) -> CaptureErrorKind {
    match e {
        PcapError::IncompleteBuffer => CaptureErrorKind::Truncated { what, offset },
        PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            CaptureErrorKind::Truncated { what, offset }
        }
        PcapError::IoError(e) => CaptureErrorKind::Io(e),
        PcapError::InvalidInterfaceId(interface_id) => CaptureErrorKind::UnknownInterface {
            interface_id,
            offset,
        },
        other => CaptureErrorKind::Malformed {
            what,
            offset,
            detail: other.to_string(),
        },
    }
}
