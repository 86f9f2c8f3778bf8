//! What the tests of the C library share: the library as
//! `libibverbs.so.1` in a directory for `LD_LIBRARY_PATH`, and the helpers
//! of `tests/shared` (also used by ferroce-rdmacm's tests).

#![allow(dead_code)] // each test binary uses a part of this module

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "../shared/mod.rs"]
mod shared;
pub(crate) use shared::*;

/// The directory holding `libibverbs.so.1` (this crate's cdylib).
pub(crate) fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        library_dir(
            "ferroce-verbs-lib",
            &deps_dir(),
            &[("libibverbs.so", "libibverbs.so.1")],
        )
    })
}

/// The directory holding both libraries, `libibverbs.so.1` and
/// `librdmacm.so.1` (cargo builds ferroce-rdmacm's cdylib for this crate's
/// tests, a dev-dependency), for middleware that loads both.
pub(crate) fn both_libs_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        library_dir(
            "ferroce-verbs-both-libs",
            &deps_dir(),
            &[
                ("libibverbs.so", "libibverbs.so.1"),
                ("librdmacm.so", "librdmacm.so.1"),
            ],
        )
    })
}

/// Kills a child on drop unless it was collected: a server whose client
/// failed is not left running.
pub(crate) struct Reap(pub(crate) Option<std::process::Child>);

impl Reap {
    pub(crate) fn new(child: std::process::Child) -> Self {
        Self(Some(child))
    }
}

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
