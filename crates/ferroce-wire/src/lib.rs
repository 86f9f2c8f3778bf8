//! Zero-copy views and validated representations of RoCE and InfiniBand
//! packet headers, with the ICRC.
//!
//! Each header has a view (`Bth<T: AsRef<[u8]>>`, ...) that reads and writes
//! fields in place, and a `*Repr` value type with `parse` and `emit`. The
//! views are lossless, for logging and fuzzing; the reprs are what a
//! transport acts on. Once a view's `new_checked` (or `check_len`) has
//! returned `Ok`, none of its accessors panics; no function of this crate
//! panics on any input bytes.
//!
//! | where | what |
//! |---|---|
//! | [`roce`] | find a RoCE packet in a frame, parse it whole, emit one |
//! | [`transport`] | BTH, extension headers, payload, pad, ICRC bytes |
//! | [`opcode`] | the opcode table: which headers follow the BTH |
//! | [`icrc`] | the invariant CRC, v1 / v2-IPv4 / v2-IPv6 / native IB |
//! | [`bth`], [`reth`], [`aeth`], [`atomic_eth`], [`deth`] | the headers |
//! | [`ethernet`], [`ipv4`], [`ipv6`] (and GRH), [`udp`], [`lrh`] | framing |
//! | [`mad`] | management datagrams and the CM messages on QP1 |
//! | [`pfc`] | MAC control: 802.1Qbb PFC and 802.3x PAUSE frames |
//! | [`psn`] | 24-bit PSNs with serial-number order |
//! | [`samples`] | a fixed set of valid packets (tests, benches, demo capture) |
//!
//! Not supported: IPv6 extension headers, IPv4 options on emit, more than
//! one VLAN tag on emit.
#![forbid(unsafe_code)]

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
