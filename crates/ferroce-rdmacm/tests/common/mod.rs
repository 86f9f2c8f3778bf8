//! What the tests of `librdmacm.so.1` share: both libraries (this crate's
//! and ferroce-verbs' `libibverbs.so.1`) in a world-readable directory for
//! `LD_LIBRARY_PATH`, running a program as this user or as `nobody`, and
//! waiting for a child under a time limit. Every test binds UDP 4791 on
//! 127.0.0.1 and 127.0.0.2: they take turns ([`serial`]).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// One test at a time: they all bind UDP 4791 on the same addresses.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The directory holding `libibverbs.so.1` and `librdmacm.so.1`, the
/// cdylibs cargo built for this test run (in target/<profile>/deps).
pub(crate) fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's own path");
        let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
        let key = deps
            .to_string_lossy()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        let dir = std::env::temp_dir().join(format!("ferroce-rdmacm-lib-{key:016x}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (built, name) in [
            ("libibverbs.so", "libibverbs.so.1"),
            ("librdmacm.so", "librdmacm.so.1"),
        ] {
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
    })
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
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

fn is_root() -> bool {
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

/// This user, and `nobody` too when the tests run as root (the library
/// is for unprivileged use).
pub(crate) fn users() -> Vec<As> {
    if is_root() && Path::new("/usr/bin/setpriv").exists() {
        vec![As::Me, As::Nobody]
    } else {
        vec![As::Me]
    }
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
