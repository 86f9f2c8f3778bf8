//! The only `unsafe` of ferroce-io: socket options the standard library and
//! socket2 do not offer (set, and read back: the path MTU of a connected
//! socket), `getifaddrs`, eventfd and `ppoll`, and the batched
//! `sendmmsg`/`recvmmsg` calls. Each function copies what the kernel wrote
//! into owned Rust values before it returns: no pointer into a C structure
//! is used after the call that filled it.
#![allow(unsafe_code)]

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
