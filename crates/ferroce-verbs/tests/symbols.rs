//! The exports: `libibverbs.so.1` has every function rdma-core 44's has,
//! in the same version node and of the same kind (default `@@`, or an
//! old version kept for old binaries, which `objdump -T` shows in
//! parentheses), compared with Debian's `/usr/lib/<triplet>/libibverbs.so.1`;
//! and a program linked against rdma-core's loads on ferroce's (libfabric
//! binds `ibv_reg_dmabuf_mr@IBVERBS_1.12` at load time).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::{debian_lib, exports, lib_dir};

#[test]
fn every_rdma_core_function_is_exported_in_its_node() {
    let ours = exports(&lib_dir().join("libibverbs.so.1"));
    let theirs: BTreeSet<_> = exports(&debian_lib(
        "libibverbs.so.1",
        "libibverbs1 (ibverbs-utils)",
    ))
    .into_iter()
    .filter(|(_, v)| v.contains("IBVERBS_"))
    .collect();
    // rdma-core 44: 145 default versions, 34 old ones.
    assert!(theirs.len() > 170, "{theirs:?}");
    assert!(theirs.contains(&("ibv_get_device_list".into(), "(IBVERBS_1.0)".into())));
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "not exported as rdma-core 44 does: {missing:?}"
    );
}

#[test]
fn a_default_version_is_not_shadowed_by_an_old_one() {
    let ours = exports(&lib_dir().join("libibverbs.so.1"));
    for name in ["ibv_get_device_list", "ibv_reg_mr", "ibv_create_qp"] {
        assert!(
            ours.contains(&(name.into(), "IBVERBS_1.1".into())),
            "{name}"
        );
        assert!(
            ours.contains(&(name.into(), "(IBVERBS_1.0)".into())),
            "{name}"
        );
    }
}

/// `fi_info` (libfabric 1.17) resolves every versioned libibverbs symbol
/// it imports when it loads; a missing one ends it with "symbol lookup
/// error" before it prints anything.
#[test]
fn libfabric_loads() {
    let fi_info = Path::new("/usr/bin/fi_info");
    if !fi_info.exists() {
        common::skip("tool missing: fi_info / fi_pingpong (Debian's libfabric-bin)");
        return;
    }
    let _turn = common::serial();
    let child = Command::new(fi_info)
        .args(["-p", "verbs", "-l"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FERROCE_DEVICES", "127.0.0.1")
        .env_remove("FERROCE_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::finish(child, std::time::Duration::from_secs(30), "fi_info");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("symbol lookup error"),
        "fi_info did not load: {stderr}"
    );
    assert!(out.status.success(), "fi_info failed: {stderr}");
}
