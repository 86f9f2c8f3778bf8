//! The only `unsafe` of ferroce-io: socket options the standard library and
//! socket2 do not offer, and the batched `sendmmsg`/`recvmmsg` calls with
//! the control messages they carry (a send's `UDP_SEGMENT` and `IP_TOS` /
//! `IPV6_TCLASS`, a receive's `UDP_GRO`), written into and read from
//! buffers this module owns, within the lengths the headers give.
#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
