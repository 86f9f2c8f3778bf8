//! The error every ferroce call returns.

use std::fmt;
use std::io;

use crate::{QpType, RangeError, VerbsError};

/// What a ferroce call can fail with.
#[derive(Debug)]
pub enum Error {
    /// The verbs call was refused; the error says what is wrong.
    Verbs(VerbsError),
    /// A range outside its memory region; the error names the offset, the
    /// length and the region's size.
    Range(RangeError),
    /// The network backend failed (e.g. the address is not local, or port
    /// 4791 is taken).
    Io(io::Error),
    /// [`QueuePair::connect`](crate::QueuePair::connect) to an endpoint of
    /// another QP type, or of a type that is not connected (UD).
    QpTypeMismatch {
        /// This QP's type.
        local: QpType,
        /// The remote endpoint's type.
        remote: QpType,
    },
    /// An encoded endpoint or region could not be read.
    Decode(DecodeError),
    /// An rdma_cm call was refused ([`crate::cm`]).
    Cm(crate::cm::CmIdError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verbs(e) => e.fmt(f),
            Self::Range(e) => e.fmt(f),
            Self::Io(e) => write!(f, "network: {e}"),
            Self::QpTypeMismatch { local, remote } if local == remote => write!(
                f,
                "connect on a {local:?} QP: UD QPs are not connected; bring them \
                 to RTS with modify and address each send with a UdDest"
            ),
            Self::QpTypeMismatch { local, remote } => write!(
                f,
                "connect of a {local:?} QP to a {remote:?} QP: both sides need \
                 the same QP type"
            ),
            Self::Decode(e) => e.fmt(f),
            Self::Cm(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Verbs(e) => Some(e),
            Self::Range(e) => Some(e),
            Self::Io(e) => Some(e),
            Self::QpTypeMismatch { .. } => None,
            Self::Decode(e) => Some(e),
            Self::Cm(e) => Some(e),
        }
    }
}

impl From<VerbsError> for Error {
    fn from(e: VerbsError) -> Self {
        Self::Verbs(e)
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

impl From<RangeError> for Error {
    fn from(e: RangeError) -> Self {
        Self::Range(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// What every fallible ferroce call returns.
pub type Result<T> = std::result::Result<T, Error>;

/// Why [`QpEndpoint::from_bytes`](crate::QpEndpoint::from_bytes) or
/// [`RemoteRegion::from_bytes`](crate::RemoteRegion::from_bytes) refused
/// its input. The encodings start with a kind byte and a version byte, so
/// a peer running another version, or bytes of the other kind, are named
/// as such rather than misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Not the encoding of this kind of object (`found` is the first
    /// byte; `expected` the kind asked for).
    WrongKind {
        /// The kind asked for.
        expected: &'static str,
        /// The first byte of the input.
        found: u8,
    },
    /// Encoded by a version this build does not read.
    Version {
        /// The input's version.
        found: u8,
        /// The version this build reads.
        supported: u8,
    },
    /// Shorter or longer than the encoding of this version.
    Length {
        /// The encoding's length.
        expected: usize,
        /// The input's length.
        found: usize,
    },
    /// A field out of its range (`what` names it).
    BadValue {
        /// The field.
        what: &'static str,
        /// Its value.
        value: u64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::WrongKind { expected, found } => write!(
                f,
                "not an encoded {expected} (kind byte {found:#04x}): \
                 decode it with the type that encoded it"
            ),
            Self::Version { found, supported } => write!(
                f,
                "encoding version {found}, this build reads version {supported}: \
                 run the same ferroce version on both sides"
            ),
            Self::Length { expected, found } => write!(
                f,
                "{found} bytes, the encoding is {expected}: the input was cut \
                 short or has bytes after it"
            ),
            Self::BadValue { what, value } => write!(f, "bad {what} in the encoding: {value:#x}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The fixed head of every encoding: kind, version; then the body.
pub(crate) fn check_head(
    bytes: &[u8],
    kind: u8,
    name: &'static str,
    version: u8,
    len: usize,
) -> std::result::Result<(), DecodeError> {
    if let Some(&found) = bytes.first().filter(|&&k| k != kind) {
        return Err(DecodeError::WrongKind {
            expected: name,
            found,
        });
    }
    if let Some(&found) = bytes.get(1).filter(|&&v| v != version) {
        return Err(DecodeError::Version {
            found,
            supported: version,
        });
    }
    if bytes.len() != len {
        return Err(DecodeError::Length {
            expected: len,
            found: bytes.len(),
        });
    }
    Ok(())
}
