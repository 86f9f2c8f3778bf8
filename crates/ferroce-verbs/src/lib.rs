//! `libibverbs.so.1` over ferroce (placeholder, filled in below).

pub mod abi;
#[cfg(test)]
mod layout_tests;
