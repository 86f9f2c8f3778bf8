//! `librdmacm.so.1` over ferroce's connection manager (`ferroce::cm`):
//! rdma-core 44's `<rdma/rdma_cma.h>` ABI. The entry points are in
//! `src/ffi/rdmacm*.rs`, exported from `libibverbs.so.1` under private
//! names (`ferroce_rdma_create_id@@FERROCE_RDMACM_PRIVATE`, ...) that the
//! `ferroce-rdmacm` crate's `librdmacm.so.1` forwards its public names to:
//! one library holds the process's one ferroce runtime, so the IDs use
//! the same devices, PDs, CQs and QPs as the application's `ibv_*` calls.
//!
//! This module holds the safe part: the layouts ([`abi`]), the objects
//! handed to C (`objects`), and the conversions between C and ferroce
//! (`convert`).

pub mod abi;
pub(crate) mod convert;
#[cfg(test)]
mod layout_tests;
pub(crate) mod objects;
