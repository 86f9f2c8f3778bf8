//! Zero-copy views and validated representations of RoCE / InfiniBand headers.
#![forbid(unsafe_code)]

mod error;
mod field;
pub mod opcode;
pub mod psn;

pub use error::{Error, Header, Result};
pub use opcode::{ExtHeader, ExtSet, Opcode, OpcodeInfo, Transport};
pub use psn::Psn;
