//! What the tests of the C library share: the library as
//! `libibverbs.so.1` in a directory for `LD_LIBRARY_PATH`, and waiting for
//! a child under a time limit.

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The directory holding `libibverbs.so.1` (this crate's cdylib).
pub(crate) fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The test runs from target/<profile>/deps, where cargo leaves the
        // cdylib it built for this test run (target/<profile>/libibverbs.so
        // is refreshed only by a build of the library itself, so it may be
        // stale or missing).
        let exe = std::env::current_exe().expect("the test's own path");
        let built = exe
            .parent()
            .map(|d| d.join("libibverbs.so"))
            .expect("target/<profile>/deps");
        assert!(
            built.exists(),
            "{} is missing: cargo builds it with this test",
            built.display()
        );
        // One directory per build tree (reruns reuse it rather than leave
        // one per run), under the temporary directory so that `nobody` can
        // reach it wherever the tree lives.
        let key = built
            .to_string_lossy()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        let dir = std::env::temp_dir().join(format!("ferroce-verbs-lib-{key:016x}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&built, dir.join("libibverbs.so.1")).unwrap();
        set_mode(&dir, 0o755);
        set_mode(&dir.join("libibverbs.so.1"), 0o755);
        dir
    })
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Waits for `child` up to `limit`, killing it past that.
pub(crate) fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still running after {limit:?}; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
