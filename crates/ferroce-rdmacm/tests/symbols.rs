//! The exports: `librdmacm.so.1` has every function rdma-core 44's has, in
//! the same version node (compared with Debian's
//! `/usr/lib/<triplet>/librdmacm.so.1` by `objdump -T`), and each stub's
//! target is one `libibverbs.so.1` exports under `FERROCE_RDMACM_PRIVATE`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::lib_dir;

/// `(name, version)` of the functions `lib` defines, from `objdump -T`.
fn exports(lib: &Path) -> BTreeSet<(String, String)> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("running objdump: {e}; install Debian's binutils"));
    assert!(out.status.success(), "objdump -T {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" DF ") && !l.contains("*UND*"))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let name = w.last()?.to_string();
            let ver = w
                .get(w.len().checked_sub(2)?)?
                .trim_matches(['(', ')'])
                .to_string();
            Some((name, ver))
        })
        .collect()
}

/// Debian's librdmacm.so.1, wherever the multiarch directory is.
fn debian_librdmacm() -> std::path::PathBuf {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ]
    .iter()
    .map(|d| Path::new(d).join("librdmacm.so.1"))
    .find(|p| p.exists())
    .expect("rdma-core's librdmacm.so.1 is missing: install Debian's librdmacm1 (rdmacm-utils)")
}

#[test]
fn every_rdma_core_function_is_exported_in_its_node() {
    let ours = exports(&lib_dir().join("librdmacm.so.1"));
    let theirs = exports(&debian_librdmacm());
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
    let verbs = exports(&lib_dir().join("libibverbs.so.1"));
    for t in &targets {
        assert!(
            verbs.contains(&(t.clone(), "FERROCE_RDMACM_PRIVATE".to_owned())),
            "{t} is not exported by libibverbs.so.1 under FERROCE_RDMACM_PRIVATE"
        );
    }
}
