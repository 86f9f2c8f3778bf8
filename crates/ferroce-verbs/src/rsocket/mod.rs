//! rsockets (librdmacm's `rsocket`, `rsend`, `rrecv`, ... `riowrite`):
//! byte streams over an RC QP with rdma-core 44's own protocol, so that
//! ferroce and librdmacm's rsockets talk to each other. This module is the
//! protocol in plain Rust: the wire encodings ([`wire`]) and one stream's
//! flow control ([`stream`]). The C entry points in `src/ffi/rsocket*.rs`
//! own the buffers, the rdma_cm ID and the QP, and follow the plans made
//! here.

pub mod stream;
pub mod wire;
