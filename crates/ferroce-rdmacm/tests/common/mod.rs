//! What the tests of `librdmacm.so.1` share: both libraries (this crate's
//! and ferroce-verbs' `libibverbs.so.1`) in a world-readable directory for
//! `LD_LIBRARY_PATH`, running a program as this user or as `nobody`, and
//! waiting for a child under a time limit. Every test binds UDP 4791 on
//! 127.0.0.1 and 127.0.0.2: they take turns (`serial`, from ferroce-verbs' `tests/shared`).

#![allow(dead_code)]

#[path = "../../../ferroce-verbs/tests/shared/mod.rs"]
mod shared;
pub(crate) use shared::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The directory holding `libibverbs.so.1` and `librdmacm.so.1`, the
/// cdylibs cargo built for this test run (in target/<profile>/deps).
pub(crate) fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        library_dir(
            "ferroce-rdmacm-lib",
            &deps_dir(),
            &[
                ("libibverbs.so", "libibverbs.so.1"),
                ("librdmacm.so", "librdmacm.so.1"),
            ],
        )
    })
}

/// `prog args` with the libraries and `FERROCE_DEVICES=devices`. As
/// `nobody`, HOME stays the caller's, as setpriv and `sudo -u` leave it:
/// root's `~/.config/ferroce/rdma_cm.conf` (the RoCE settings file) is then
/// not `nobody`'s to read, and the library must go on without it (it
/// failed every `rdma_resolve_addr` with EINVAL until it did).
pub(crate) fn command(who: As, devices: &str, prog: &Path, args: &[&str]) -> Command {
    let mut c = match who {
        As::Me => Command::new(prog),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(prog);
            c
        }
    };
    c.args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FERROCE_DEVICES", devices)
        .env_remove("FERROCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits until a process of this network namespace has UDP 4791 bound
/// on `ip` (/proc/net/udp): a ferroce device is open there.
pub(crate) fn wait_device(ip: [u8; 4], limit: Duration) {
    let want = format!("{:02X}{:02X}{:02X}{:02X}:12B7", ip[3], ip[2], ip[1], ip[0]);
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let bound = std::fs::read_to_string("/proc/net/udp").is_ok_and(|t| {
            t.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&want))
        });
        if bound {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no ferroce device on {ip:?} after {limit:?}");
}

/// Stdout and stderr of a finished program, for messages.
pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Waits for `child` up to `limit`, then kills it; its output either way.
pub(crate) fn finish_or_kill(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// Kills process `pid` when dropped unless disarmed: a server whose client
/// failed (a panic) is not left running.
pub(crate) struct Reap(pub(crate) Option<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `tests/c/NAME.c` built against the real headers and this build's
/// libraries, as `EXE` beside them.
pub(crate) fn build_c(name: &str, exe: &str) -> PathBuf {
    let src = format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let exe = lib_dir().join(exe);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(lib_dir().join("librdmacm.so.1"))
        .arg(lib_dir().join("libibverbs.so.1"))
        .arg("-lpthread")
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}; install gcc (scripts/setup-test-deps.sh)"));
    assert!(
        built.status.success(),
        "{cc} failed on {name}.c (is librdmacm-dev installed? scripts/setup-test-deps.sh):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    exe
}
