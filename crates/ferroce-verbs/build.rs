//! Links the cdylib as rdma-core's libibverbs.so.1: its soname, and the
//! symbol version nodes (IBVERBS_1.0 ... IBVERBS_PRIVATE_34) that
//! `src/ffi/export.rs` binds each exported function to.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=libibverbs.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/libibverbs.map");
}
