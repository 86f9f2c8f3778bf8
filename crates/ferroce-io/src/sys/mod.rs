//! The only `unsafe` of ferroce-io: socket options the standard library and
//! socket2 do not offer, and the batched `sendmmsg`/`recvmmsg` calls.
#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
