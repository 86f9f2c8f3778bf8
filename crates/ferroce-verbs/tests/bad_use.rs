//! Misuse from C (`tests/c/bad_use.c`): NULL and out-of-range arguments,
//! posting to a QP in the wrong state, destroying objects still in use,
//! verbs ferroce does not have. The C program is built against rdma-core's
//! real header and linked with this crate's library; it checks that each
//! call returns rdma-core's errno (or NULL / -1 with errno), that the
//! caller's buffer is registered in place, and that no thread of ferroce's
//! outlives the last `ibv_close_device`.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{finish, lib_dir};

#[test]
fn misuse_gets_errnos_not_crashes() {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/bad_use.c");
    let exe = lib_dir().join("bad_use");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(src)
        .arg(lib_dir().join("libibverbs.so.1"))
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}; install gcc (scripts/setup-test-deps.sh)"));
    assert!(
        built.status.success(),
        "{cc} failed (is libibverbs-dev installed? scripts/setup-test-deps.sh):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FERROCE_DEVICES", "127.0.0.1")
        .env_remove("FERROCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(30), "bad_use");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !text.contains("FAIL"),
        "bad_use ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("ok   close_device"), "{text}");
}
