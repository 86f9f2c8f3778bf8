//! The bytes behind a memory region: a [`Backing`] is either a boxed slice
//! the region owns, or memory the application owns and lent with
//! [`Backing::from_raw`] (what `ibv_reg_mr` does with a pointer, and what a
//! C ABI over ferroce needs).
//!
//! This crate is the only place in ferroce's engine and API that turns a
//! raw pointer into a slice. The workspace forbids `unsafe`; this crate
//! denies it and allows it in the one module below, whose contract is:
//!
//! * [`Backing::from_raw`] is `unsafe`: its caller promises that the `len`
//!   bytes at `ptr` are valid for reads and writes, and that nothing else
//!   reads or writes them, for as long as the `Backing` lives (until it is
//!   dropped or [`Backing::into_raw`] gives the pointer back). That is the
//!   Rust statement of `ibv_reg_mr`'s rule that the memory stays mapped and
//!   that the application does not touch it while the adapter may.
//! * With that promise, a `Backing` is an owner of its bytes like a
//!   `Box<[u8]>`: `&self` lends `&[u8]`, `&mut self` lends `&mut [u8]`, so
//!   the borrow checker (and the lock the engine puts around a region) rules
//!   out data races, and the type is `Send` and `Sync` as a `Box<[u8]>` is.

#![deny(unsafe_code)]

mod raw;

pub use raw::Backing;
