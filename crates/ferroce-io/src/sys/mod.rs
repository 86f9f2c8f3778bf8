//! The only `unsafe` of ferroce-io: socket options the standard library,
//! socket2 and rustix do not offer (set, and read back: the path MTU of a
//! connected socket), `getifaddrs` (which rustix lacks), and the batched
//! `sendmmsg`/`recvmmsg` calls with the control messages they carry (a
//! send's `UDP_SEGMENT` and `IP_TOS` / `IPV6_TCLASS`, a receive's
//! `UDP_GRO`), written into and read from buffers this module owns, within
//! the lengths the headers give. Each function copies what the kernel wrote
//! into owned Rust values before it returns: no pointer into a C structure
//! is used after the call that filled it. The raw backend's packet sockets
//! and their shared memory rings are in [`packet`], under its own contract.
#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
mod ifaddrs;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod wake;
#[cfg(target_os = "linux")]
pub(crate) use ifaddrs::*;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
#[cfg(target_os = "linux")]
pub(crate) use wake::*;
#[cfg(target_os = "linux")]
pub(crate) mod packet;
