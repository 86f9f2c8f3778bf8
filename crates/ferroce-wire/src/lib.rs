#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod field;
mod view;

pub mod aeth;
pub mod atomic_eth;
pub mod bth;
pub mod deth;
pub mod ethernet;
pub mod icrc;
pub mod ipv4;
pub mod ipv6;
pub mod lrh;
pub mod mad;
pub mod opcode;
pub mod pfc;
pub mod psn;
pub mod reth;
pub mod roce;
pub mod samples;
pub mod transport;
pub mod udp;

pub use error::{Error, Header, Result};
pub use opcode::{ExtHeader, ExtSet, Opcode, OpcodeInfo, Transport};
pub use psn::Psn;
pub use roce::{LinkType, Located, Network, RoceFrame, RoceRepr, RoceVersion, locate};
pub use transport::{TransportPacket, TransportRepr};
