//! The bytes behind a memory region: a [`Backing`] is either a boxed slice
//! the region owns, or memory the application owns and lent with
//! [`Backing::from_raw`] (what `ibv_reg_mr` does with a pointer, and what a
//! C ABI over ferroce needs).
//!
//! A backing is memory as a NIC's DMA sees it: the engine copies packets
//! into it and out of it while the application reads and writes it, with
//! no lock between them. Ordering is the application's business, as in
//! ibverbs (it learns that a peer's WRITE landed from a completion or a
//! message, not from the bytes). So the bytes are never lent as
//! `&[u8]`/`&mut [u8]` while shared; every access is a volatile copy or an
//! 8-byte atomic, through vm-memory's [`VolatileSlice`].
//!
//! This crate is the only place in ferroce's engine and API that handles
//! the raw pointer. The workspace forbids `unsafe`; this crate denies it
//! and allows it in the one module below, whose contract is:
//!
//! * A backing's `len` bytes are valid for reads and writes for the
//!   backing's whole life: an owned backing is a leaked `Box<[u8]>`, freed
//!   once on drop (or given back by [`Backing::into_box`]); for
//!   [`Backing::from_raw`], which is `unsafe`, its caller promises it
//!   (until the backing is dropped or [`Backing::into_raw`] returns the
//!   pointer). That is the Rust statement of `ibv_reg_mr`'s rule that the
//!   memory stays mapped while registered.
//! * The bytes are accessed only through volatile copies
//!   ([`Backing::read`], [`Backing::write`], the [`VolatileSlice`] of
//!   [`Backing::volatile`]) and atomics on aligned 8-byte words
//!   ([`Backing::fetch_add`], [`Backing::compare_swap`], ...), never as
//!   `&[u8]`/`&mut [u8]` while shared. The application that lent raw memory
//!   accesses it the same way, or from outside Rust (C code), as it would
//!   memory a device writes.
//! * With that, `&Backing` is all any access needs, and the type is `Send`
//!   and `Sync`: concurrent accesses race only as a device's DMA races
//!   with the CPUs, never with a Rust reference.

#![deny(unsafe_code)]

mod raw;

pub use raw::{Backing, Fault};
/// The volatile view of a backing's bytes (vm-memory's), and the trait
/// whose methods it reads and writes with.
pub use vm_memory::{Bytes, VolatileMemory, VolatileSlice};
