//! Two network namespaces joined by a veth pair (`eth0` in each, [`A`] and
//! [`A6`], [`B`] and [`B6`] on it) for the raw backend's tests, created by
//! a test and removed when it ends (also when it fails). Names carry
//! `fraw`, the test's tag and the process ID, so that concurrent runs
//! never meet; the addresses live inside them. Tests of one binary take
//! turns (each runs two busy-polling processes on what may be a 2-core
//! machine: seven tests at once starved some past their RC retries).
//! Not every test file uses every helper.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::common::{self, text};

pub(crate) const A: &str = "10.79.0.1";
pub(crate) const B: &str = "10.79.0.2";
pub(crate) const A6: &str = "fd79::1";
pub(crate) const B6: &str = "fd79::2";

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

pub(crate) fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces `fraw-TAG-PID-a` and `-b`; removed on drop.
pub(crate) struct Netns {
    pub(crate) a: String,
    pub(crate) b: String,
    /// How long a `ferroce` run of [`Netns::pair`] may take (60 s).
    pub(crate) secs: u32,
    _serial: std::sync::MutexGuard<'static, ()>,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Netns {
    /// The pair, or `None` (after printing SKIPPED) without root.
    pub(crate) fn new(tag: &str) -> Option<Self> {
        if !is_root() {
            crate::common::skip("not root: the raw backend needs CAP_NET_ADMIN and CAP_NET_RAW");
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let pid = std::process::id();
        let ns = Self {
            a: format!("fraw-{tag}-{pid}-a"),
            b: format!("fraw-{tag}-{pid}-b"),
            secs: 60,
            _serial: serial,
        };
        ip(&["netns", "add", &ns.a]);
        ip(&["netns", "add", &ns.b]);
        ip(&[
            "-n", &ns.a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns",
            &ns.b,
        ]);
        for (n, addr, addr6) in [(&ns.a, A, A6), (&ns.b, B, B6)] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            // No duplicate address detection: usable at once.
            let v6 = format!("{addr6}/64");
            ip(&["-n", n, "addr", "add", &v6, "dev", "eth0", "nodad"]);
            ip(&["-n", n, "link", "set", "eth0", "up"]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        Some(ns)
    }

    /// `ferroce ARGS` in namespace `ns`, with `env` set, its output piped,
    /// stopped after 60 s.
    pub(crate) fn ferroce(ns: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        Self::ferroce_for(ns, args, env, 60)
    }

    /// [`Self::ferroce`], stopped after `secs` seconds.
    pub(crate) fn ferroce_for(ns: &str, args: &[&str], env: &[(&str, &str)], secs: u32) -> Command {
        let mut c = Command::new("ip");
        let secs = secs.to_string();
        c.args([
            "netns",
            "exec",
            ns,
            "timeout",
            &secs,
            env!("CARGO_BIN_EXE_ferroce"),
        ])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    }

    /// Runs `server` in a and `client` in b, both with `env`; returns both
    /// outputs.
    pub(crate) fn pair(
        &self,
        server: &[&str],
        client: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Output) {
        self.pair_from(true, server, client, [env, env])
    }

    /// Runs `server` in a (`server_in_a`) or b, then `client` in the other,
    /// with `env[0]` and `env[1]`; returns both outputs.
    pub(crate) fn pair_from(
        &self,
        server_in_a: bool,
        server: &[&str],
        client: &[&str],
        env: [&[(&str, &str)]; 2],
    ) -> (Output, Output) {
        let (sn, cn) = if server_in_a {
            (&self.a, &self.b)
        } else {
            (&self.b, &self.a)
        };
        let s: Child = Self::ferroce_for(sn, server, env[0], self.secs)
            .spawn()
            .expect("start the server");
        std::thread::sleep(Duration::from_millis(300));
        let c = Self::ferroce_for(cn, client, env[1], self.secs)
            .output()
            .expect("run the client");
        if !c.status.success() {
            // The server may wait for a peer that is gone.
            let _ = Command::new("kill").arg(s.id().to_string()).status();
        }
        (s.wait_with_output().expect("server output"), c)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// tcpdump on `eth0` of `ns` into `pcap`, once it captures:
/// `--immediate-mode` and a 32 MiB ring (with the default 2 MiB one it
/// dropped 40-90 of a run's ~260 frames, and one run in five came out
/// empty), and 1.5 s after it says it listens (it says so a little before
/// it takes packets).
pub(crate) fn tcpdump(ns: &str, pcap: &Path) -> common::Spawned {
    tcpdump_with(ns, pcap, &[])
}

/// [`tcpdump`] with a capture filter (tcpdump's expression, as words).
pub(crate) fn tcpdump_with(ns: &str, pcap: &Path, filter: &[&str]) -> common::Spawned {
    let mut t = Command::new("ip");
    t.args([
        "netns",
        "exec",
        ns,
        "tcpdump",
        "--immediate-mode",
        "-B",
        "32768",
    ])
    .args(["-i", "eth0", "-U", "-w"])
    .arg(pcap)
    .args(filter);
    let child = common::capture_started(t, "listening on");
    std::thread::sleep(Duration::from_millis(1500));
    child
}

pub(crate) fn assert_ok(what: &str, out: &Output) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}\n{stderr}",
        out.status
    );
}
