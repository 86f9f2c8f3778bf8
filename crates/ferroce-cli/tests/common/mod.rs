//! Helpers the integration tests share: the `ferroce` binary, the shared
//! test material, temporary directories, and starting a pair of processes.
//! Each test binary uses some of them.
#![allow(dead_code)]

#[path = "../../../ferroce-verbs/tests/shared/skip.rs"]
mod skip;
#[allow(unused_imports)] // not every test binary skips
pub(crate) use skip::*;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `../shared` beside the repository, or `FERROCE_SHARED`.
pub(crate) fn shared() -> PathBuf {
    let dir = std::env::var_os("FERROCE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(
        dir.join("vectors").is_dir(),
        "no shared vectors at {} (set FERROCE_SHARED)",
        dir.display()
    );
    dir
}

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A `ferroce` command.
pub(crate) fn ferroce_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferroce"))
}

/// Runs `ferroce ARGS` to the end.
pub(crate) fn ferroce(args: &[&str]) -> Output {
    ferroce_cmd().args(args).output().expect("run ferroce")
}

/// Starts `ferroce ARGS` with its output captured.
pub(crate) fn spawn(args: &[&str]) -> Spawned {
    ferroce_cmd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferroce")
        .into()
}

/// A started process, killed and reaped if it is dropped before it was
/// waited for: a test that panics half-way must not leave a server behind
/// holding its addresses and ports for the next run.
pub(crate) struct Spawned(Option<Child>);

impl Spawned {
    /// Waits for the process to exit and collects its output.
    pub(crate) fn wait_with_output(mut self) -> std::io::Result<Output> {
        self.0
            .take()
            .expect("not yet waited for")
            .wait_with_output()
    }
}

impl From<Child> for Spawned {
    fn from(child: Child) -> Self {
        Self(Some(child))
    }
}

impl std::ops::Deref for Spawned {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("not yet waited for")
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("not yet waited for")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // Harmless after an earlier `wait()`: std knows the child has
            // exited and sends no signal.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Standard output and standard error, for assertions.
pub(crate) fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Connects to `addr` once something listens there (up to 10 s).
pub(crate) fn connect_when_listening(addr: SocketAddr) -> TcpStream {
    let start = Instant::now();
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if start.elapsed() > Duration::from_secs(10) => {
                panic!("nothing listens on {addr}: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("ferroce-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the shared peercheck (Scapy and its own decoder, ICRC recomputed
/// for every packet) over `pcap` and fails the test unless it finds every
/// packet sound; returns its summary.
pub(crate) fn peercheck(pcap: &Path) -> String {
    let py = shared().join("peercheck/.venv/bin/python");
    assert!(
        py.exists(),
        "peercheck's venv is missing: run scripts/setup-test-deps.sh"
    );
    let check = Command::new(py)
        .arg(shared().join("peercheck/peercheck.py"))
        .arg("--summary")
        .arg(pcap)
        .output()
        .expect("run peercheck");
    let (out, err) = text(&check);
    assert!(
        check.status.success(),
        "peercheck --summary failed:\n{out}\n{err}"
    );
    out
}

/// Starts tshark on `lo` for `filter`, writing `pcap`, once it says it is
/// capturing (and 2 s more: it says so a little before the first packets
/// are taken). Needs root.
pub(crate) fn tshark(filter: &str, pcap: &Path) -> Spawned {
    let mut t = Command::new("tshark");
    t.args(["-i", "lo", "-f", filter, "-w"]).arg(pcap);
    let t = capture_started(t, "Capturing on");
    std::thread::sleep(Duration::from_secs(2));
    t
}

/// Spawns a capture program (tshark, tcpdump) and returns once its
/// standard error says `ready` (tshark: "Capturing on", tcpdump:
/// "listening on"): a fixed sleep instead lost the first packets on a cold
/// machine. Panics naming what it said if it has not within 20 s.
pub(crate) fn capture_started(mut cmd: Command, ready: &str) -> Spawned {
    let name = format!("{:?}", cmd.get_program());
    let mut t = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{name} did not start ({e}): run scripts/setup-test-deps.sh"));
    let mut err = t.stderr.take().unwrap();
    let (start, mut seen) = (Instant::now(), Vec::new());
    while !String::from_utf8_lossy(&seen).contains(ready) {
        let mut b = [0u8; 256];
        let n = std::io::Read::read(&mut err, &mut b).unwrap_or(0);
        seen.extend_from_slice(&b[..n]);
        assert!(
            n > 0 && start.elapsed() < Duration::from_secs(20),
            "{name} did not start capturing (root needed): {}",
            String::from_utf8_lossy(&seen)
        );
    }
    // Keep reading what it says: with the pipe closed, its next line to
    // standard error would kill it (SIGPIPE) in the middle of the capture.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    t.into()
}
