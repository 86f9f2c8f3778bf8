//! Test helpers of the two C libraries' tests (ferroce-verbs' and, through
//! `#[path]`, ferroce-rdmacm's): taking turns on the loopback addresses,
//! finding a Debian tool, who runs it, putting a built library where
//! `nobody` can load it, waiting for a child under a time limit, and
//! recording a skipped test ([`skip`]).

mod skip;
#[allow(unused_imports)] // not every test binary skips
pub(crate) use skip::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One test at a time: they all bind UDP 4791 on the same addresses.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A Debian tool's path, or a failure naming the package to install.
pub(crate) fn tool(name: &str, package: &str) -> PathBuf {
    let path = Path::new("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{name} is missing: install Debian's {package} (scripts/setup-test-deps.sh)"
    );
    path
}

/// Whether the effective uid is 0 (from /proc).
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Who runs a program: this user, or `nobody` through setpriv.
#[derive(Clone, Copy, Debug)]
pub(crate) enum As {
    Me,
    Nobody,
}

/// This user, and `nobody` too when the tests run as root (the libraries
/// are for unprivileged use).
pub(crate) fn users() -> Vec<As> {
    if is_root() && Path::new("/usr/bin/setpriv").exists() {
        vec![As::Me, As::Nobody]
    } else {
        vec![As::Me]
    }
}

/// A directory under the system's temporary one for the libraries of the
/// build tree `deps` (one per tree: reruns reuse it rather than leave one
/// per run; there `nobody` can reach it wherever the tree lives), holding
/// each `(built, name)` of `deps` copied as `name`, all world-readable.
pub(crate) fn library_dir(prefix: &str, deps: &Path, libs: &[(&str, &str)]) -> PathBuf {
    let key = deps
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    let dir = std::env::temp_dir().join(format!("{prefix}-{key:016x}"));
    std::fs::create_dir_all(&dir).unwrap();
    for (built, name) in libs {
        // Cargo leaves in target/<profile>/deps the cdylibs it built for
        // this test run (target/<profile>/lib*.so is refreshed only by a
        // build of the library itself, so it may be stale or missing).
        let from = deps.join(built);
        assert!(
            from.exists(),
            "{} is missing: cargo builds it with this test",
            from.display()
        );
        std::fs::copy(&from, dir.join(name)).unwrap();
        set_mode(&dir.join(name), 0o755);
    }
    set_mode(&dir, 0o755);
    dir
}

/// target/<profile>/deps, where the test binary runs from.
pub(crate) fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
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

/// Waits until something listens on TCP `port` (from /proc/net/tcp and
/// tcp6, so that no probe connection takes the server's one accept).
pub(crate) fn wait_listening(port: &str, limit: Duration) {
    let hex = format!(":{:04X}", port.parse::<u16>().unwrap());
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let listening = ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
            std::fs::read_to_string(f).is_ok_and(|t| {
                t.lines().any(|l| {
                    let mut w = l.split_whitespace();
                    let local = w.nth(1).unwrap_or("");
                    local.ends_with(&hex) && w.nth(1) == Some("0A")
                })
            })
        });
        if listening {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on TCP port {port} after {limit:?}");
}

/// `(name, version)` of the functions `lib` defines, from `objdump -T`;
/// a non-default (old) version keeps its parentheses.
pub(crate) fn exports(lib: &Path) -> std::collections::BTreeSet<(String, String)> {
    let out = std::process::Command::new("objdump")
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
            let ver = w.get(w.len().checked_sub(2)?)?.to_string();
            Some((name, ver))
        })
        .collect()
}

/// rdma-core's own `name` (Debian's `package`), wherever the multiarch
/// directory is.
pub(crate) fn debian_lib(name: &str, package: &str) -> PathBuf {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ]
    .iter()
    .map(|d| Path::new(d).join(name))
    .find(|p| p.exists())
    .unwrap_or_else(|| panic!("rdma-core's {name} is missing: install Debian's {package}"))
}
