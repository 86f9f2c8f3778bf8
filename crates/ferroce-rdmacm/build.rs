//! Links the cdylib as rdma-core's `librdmacm.so.1`, from `symbols.txt`:
//!
//! * `exports.s` (in OUT_DIR, assembled into the library by `src/lib.rs`):
//!   per public name, a one-instruction stub that jumps to its function in
//!   `libibverbs.so.1`, bound with `.symver` to its rdma-core version node
//!   (`librdmacm.map` defines the nodes);
//! * the soname `librdmacm.so.1`;
//! * a `DT_NEEDED` on `libibverbs.so.1`, so that the library loads alone
//!   and its stubs' targets are found. The linker wants a file for that
//!   and for the targets' symbol version, and the real `libibverbs.so` is
//!   a cdylib of another crate, which cargo cannot order before this one
//!   (a build-dependency is never a cdylib). So this script makes a stand-in
//!   in OUT_DIR with `cc` (the linker rustc already uses): soname
//!   `libibverbs.so.1`, the same names under `FERROCE_RDMACM_PRIVATE`, each
//!   a bare `ret`; it is linked against and never loaded. Each reference
//!   then carries the version, so a loader that finds rdma-core's own
//!   libibverbs.so.1 first says `version FERROCE_RDMACM_PRIVATE not found`
//!   instead of jumping anywhere.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

/// `(public name, version node, target)` of each line of symbols.txt.
fn symbols(text: &str) -> Vec<(&str, &str, &str)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert!(
                w.len() == 3,
                "symbols.txt: `{l}` is not `name VERSION target`"
            );
            (w[0], w[1], w[2])
        })
        .collect()
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets it");
    println!("cargo:rerun-if-changed=symbols.txt");
    println!("cargo:rerun-if-changed=librdmacm.map");
    let text = std::fs::read_to_string(dir.join("symbols.txt")).expect("symbols.txt");
    let syms = symbols(&text);

    let jump = match arch.as_str() {
        "x86_64" => "jmp",
        "aarch64" => "b",
        other => panic!("librdmacm stubs are written for x86_64 and aarch64, not {other}"),
    };
    let plt = if arch == "x86_64" { "@PLT" } else { "" };
    let mut exports = String::new();
    for (name, ver, target) in &syms {
        let stub = format!("{name}_ferroce");
        writeln!(exports, ".pushsection .text.{name},\"ax\",@progbits").unwrap();
        writeln!(exports, ".globl {stub}\n.type {stub},@function\n{stub}:").unwrap();
        writeln!(
            exports,
            "{jump} {target}{plt}\n.size {stub}, .-{stub}\n.popsection"
        )
        .unwrap();
        writeln!(exports, ".symver {stub}, {name}@@{ver}").unwrap();
    }
    std::fs::write(out.join("exports.s"), exports).unwrap();

    // The stand-in libibverbs.so.1 (see the module docs).
    let mut targets: Vec<&str> = syms.iter().map(|s| s.2).collect();
    targets.sort_unstable();
    targets.dedup();
    let mut stub = String::from(".text\n");
    for t in &targets {
        writeln!(stub, ".globl {t}\n.type {t},@function\n{t}:\nret").unwrap();
    }
    let stub_dir = out.join("stand-in");
    std::fs::create_dir_all(&stub_dir).unwrap();
    std::fs::write(out.join("stand-in.s"), stub).unwrap();
    std::fs::write(
        out.join("stand-in.map"),
        "FERROCE_RDMACM_PRIVATE { global: *; };\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-nostdlib", "-o"])
        .arg(stub_dir.join("libibverbs.so.1"))
        .arg(out.join("stand-in.s"))
        .arg("-Wl,-soname,libibverbs.so.1")
        .arg(format!(
            "-Wl,--version-script={}",
            out.join("stand-in.map").display()
        ))
        .status()
        .unwrap_or_else(|e| panic!("running {cc} for the libibverbs.so.1 stand-in: {e}"));
    assert!(
        status.success(),
        "{cc} failed to make the libibverbs.so.1 stand-in"
    );

    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librdmacm.so.1");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        dir.join("librdmacm.map").display()
    );
    println!("cargo:rustc-cdylib-link-arg=-L{}", stub_dir.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-cdylib-link-arg=-l:libibverbs.so.1");
}
