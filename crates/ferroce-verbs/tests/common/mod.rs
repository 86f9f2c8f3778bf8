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
