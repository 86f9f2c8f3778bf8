//! The exports: `librdmacm.so.1` has every function rdma-core 44's has, in
//! the same version node (compared with Debian's
//! `/usr/lib/<triplet>/librdmacm.so.1` by `objdump -T`), and each stub's
//! target is one `libibverbs.so.1` exports under `FERROCE_RDMACM_PRIVATE`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{debian_lib, exports, lib_dir};

/// [`exports`], with an old version's parentheses dropped: librdmacm has
/// no old versions to tell apart.
fn versions(lib: &Path) -> BTreeSet<(String, String)> {
    exports(lib)
        .into_iter()
        .map(|(name, ver)| (name, ver.trim_matches(['(', ')']).to_string()))
        .collect()
}

#[test]
fn every_rdma_core_function_is_exported_in_its_node() {
    let ours = versions(&lib_dir().join("librdmacm.so.1"));
    let theirs = versions(&debian_lib("librdmacm.so.1", "librdmacm1 (rdmacm-utils)"));
    let theirs: BTreeSet<_> = theirs
        .into_iter()
        .filter(|(_, v)| v.starts_with("RDMACM_"))
        .collect();
    assert!(theirs.len() > 60, "{theirs:?}");
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "not exported as rdma-core does: {missing:?}"
    );
}

#[test]
fn every_stub_target_is_in_libibverbs() {
    let targets: BTreeSet<String> = include_str!("../symbols.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect();
    let verbs = versions(&lib_dir().join("libibverbs.so.1"));
    for t in &targets {
        assert!(
            verbs.contains(&(t.clone(), "FERROCE_RDMACM_PRIVATE".to_owned())),
            "{t} is not exported by libibverbs.so.1 under FERROCE_RDMACM_PRIVATE"
        );
    }
}
