//! Two network namespaces joined by a veth pair (`eth0` in each), for the
//! raw backend's tests: created with `ip`, removed on drop (also when the
//! test fails). Needs root; [`Pair::new`] returns `None`, after printing
//! why, when not root.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

pub(crate) const A4: Ipv4Addr = Ipv4Addr::new(10, 19, 0, 1);
pub(crate) const B4: Ipv4Addr = Ipv4Addr::new(10, 19, 0, 2);
pub(crate) const A6: Ipv6Addr = Ipv6Addr::new(0xfd19, 0, 0, 0, 0, 0, 0, 1);
pub(crate) const B6: Ipv6Addr = Ipv6Addr::new(0xfd19, 0, 0, 0, 0, 0, 0, 2);
pub(crate) const IFACE: &str = "eth0";

pub(crate) struct Pair {
    pub(crate) a: String,
    pub(crate) b: String,
}

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

/// Runs `ip ARGS`; panics with its output if it fails.
pub(crate) fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pair {
    /// Namespaces `fraw19-TAG-PID-a` and `-b`, eth0 up in each with
    /// 10.19.0.1/24 + fd19::1/64 (a) and 10.19.0.2/24 + fd19::2/64 (b).
    pub(crate) fn new(tag: &str) -> Option<Self> {
        if !is_root() {
            super::skip::skip("not root: the raw backend needs CAP_NET_ADMIN and CAP_NET_RAW");
            return None;
        }
        let pid = std::process::id();
        let pair = Self {
            a: format!("fraw19-{tag}-{pid}-a"),
            b: format!("fraw19-{tag}-{pid}-b"),
        };
        // From here on, Drop removes whatever was made.
        ip(&["netns", "add", &pair.a]);
        ip(&["netns", "add", &pair.b]);
        // No duplicate address detection, so that the link-local addresses
        // can be bound as soon as the link is up.
        for ns in [&pair.a, &pair.b] {
            let dad = "net.ipv6.conf.default.accept_dad=0";
            let ok = Command::new("ip")
                .args(["netns", "exec", ns, "sysctl", "-qw", dad])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "sysctl -w {dad} in {ns} failed");
        }
        ip(&[
            "-n", &pair.a, "link", "add", IFACE, "type", "veth", "peer", "name", IFACE, "netns",
            &pair.b,
        ]);
        for (ns, v4, v6) in [(&pair.a, A4, A6), (&pair.b, B4, B6)] {
            ip(&["-n", ns, "addr", "add", &format!("{v4}/24"), "dev", IFACE]);
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                IFACE,
                "nodad",
            ]);
            ip(&["-n", ns, "link", "set", IFACE, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        Some(pair)
    }

    /// Runs `f` on a thread inside namespace `ns`; sockets it opens stay
    /// in that namespace when returned.
    pub(crate) fn run_in<R: Send>(ns: &str, f: impl FnOnce() -> R + Send) -> R {
        let path = format!("/run/netns/{ns}");
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).expect("open the namespace");
                // This thread only: its sockets stay in the namespace.
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&file),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .expect("setns");
                f()
            })
            .join()
            .expect("namespace thread")
        })
    }

    /// `ip netns exec NS CMD...`, its standard output.
    pub(crate) fn exec(ns: &str, cmd: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(cmd)
            .output()
            .expect("run ip netns exec");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth, and so the pair.
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
