//! The error every ferroce call returns.

use std::fmt;
use std::io;

use crate::{RangeError, VerbsError};

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
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verbs(e) => e.fmt(f),
            Self::Range(e) => e.fmt(f),
            Self::Io(e) => write!(f, "network: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Verbs(e) => Some(e),
            Self::Range(e) => Some(e),
            Self::Io(e) => Some(e),
        }
    }
}

impl From<VerbsError> for Error {
    fn from(e: VerbsError) -> Self {
        Self::Verbs(e)
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

pub type Result<T> = std::result::Result<T, Error>;
