//! Network backends for ferroce. Today: RoCE v2 over the kernel's UDP
//! sockets ([`udp`]), IPv4 and IPv6, with batched system calls and the ICRC
//! filled in on send and checked on receive (as far as a UDP socket shows
//! the headers; [`icrc`] says exactly what is verified).
//! Both backends join IP multicast groups for UD multicast
//! ([`UdpBackend::join`], [`raw::RawBackend::join`]). Beside it, the
//! raw-Ethernet I/O layer ([`raw`]: whole frames through packet rings, for
//! RoCE v1 and v2 with every header in hand; not yet used by the driver).
//!
//! No protocol logic lives here, and it does not depend on ferroce-core:
//! it moves transport bytes (BTH through ICRC) between the wire and its
//! caller. All `unsafe` is in the `sys` module.
//!
//! Logging goes to `tracing` and is printed only if the application
//! installs a subscriber: the socket setup and a refused UDP GSO at debug
//! level, each datagram dropped (truncated, too short, bad ICRC: the
//! [`UdpStats`] causes) at trace.
#![deny(unsafe_code)]

pub mod icrc;
pub mod netif;
pub mod raw;
pub mod route;
mod sys;
pub mod udp;
pub mod wait;

pub use udp::{OutDatagram, Receiver, UdpBackend, UdpConfig, UdpStats};
pub use wait::{EventFd, Sleeper};
