//! The unmodified Debian `rping` on ferroce's `librdmacm.so.1` over RoCE
//! v1 on the raw-Ethernet backend: `FERROCE_BACKEND=raw` opens the
//! library's devices on the raw backend, and a settings file
//! (`FERROCE_CONFIG`) sets the port's `default_roce_mode` to `IB/RoCE v1`.
//! Server and client run in two network namespaces joined by a veth pair
//! (`fcmc-PID-a`/`-b`, created and removed by the test); a capture on the
//! client's side finds the server's MADs and packets as RoCE v1 only. A
//! value of `FERROCE_BACKEND` that names no backend fails naming it.
//!
//! Needs root; prints SKIPPED otherwise.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{As, finish, finish_or_kill, is_root, text, tool};

const A: &str = "10.80.0.1";
const B: &str = "10.80.0.2";

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {:?}", args.join(" "), out);
}

/// Namespaces joined by a veth pair (`eth0`, A and B); removed on drop.
struct Netns([String; 2]);

impl Netns {
    fn new() -> Self {
        let pid = std::process::id();
        let ns = Self([format!("fcmc-{pid}-a"), format!("fcmc-{pid}-b")]);
        let [a, b] = &ns.0;
        ip(&["netns", "add", a]);
        ip(&["netns", "add", b]);
        ip(&[
            "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b,
        ]);
        for (n, addr) in [(a, A), (b, B)] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            ip(&["-n", n, "link", "set", "eth0", "up"]);
        }
        ns
    }

    /// `prog args` in namespace `ns`, on ferroce's libraries with a
    /// raw-backend device on `addr`, with `env` set.
    fn run(ns: &str, addr: &str, prog: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, prog])
            .args(args)
            .env("LD_LIBRARY_PATH", common::lib_dir())
            .env("FERROCE_DEVICES", addr)
            .env("FERROCE_BACKEND", "raw")
            .env_remove("FERROCE_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

#[test]
fn debian_rping_runs_over_roce_v1_on_the_raw_backend() {
    if !is_root() {
        common::skip("not root: the raw backend needs CAP_NET_ADMIN and CAP_NET_RAW");
        return;
    }
    let rping = tool("rping", "rdmacm-utils");
    let rping = rping.to_str().unwrap();
    let ns = Netns::new();
    let dir = std::env::temp_dir().join(format!("fcmc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("rdma_cm.conf");
    std::fs::write(&conf, "ferroce0/ports/1/default_roce_mode = IB/RoCE v1\n").unwrap();
    let env = [("FERROCE_CONFIG", conf.to_str().unwrap())];
    let pcap = dir.join("b.pcap");
    let mut dump = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0[1],
            "tcpdump",
            "--immediate-mode",
            "-U",
            "-B",
            "32768",
        ])
        .args(["-i", "eth0", "-w"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tcpdump");
    std::thread::sleep(Duration::from_secs(2));
    let server_args = ["-s", "-a", A, "-C", "10", "-V"];
    let server = Netns::run(&ns.0[0], A, rping, &server_args, &env)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client_args = ["-c", "-a", A, "-C", "10", "-V", "-v"];
    let client = Netns::run(&ns.0[1], B, rping, &client_args, &env)
        .spawn()
        .unwrap();
    let c = finish(client, Duration::from_secs(60), "rping client");
    let limit = Duration::from_secs(if c.status.success() { 30 } else { 2 });
    let s = finish_or_kill(server, limit);
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let _ = dump.wait();
    assert!(
        c.status.success() && s.status.success(),
        "client {}:\n{}\nserver {}:\n{}",
        c.status,
        text(&c),
        s.status,
        text(&s)
    );
    assert!(text(&c).contains("rdma-ping-9"), "{}", text(&c));
    let frames = Command::new("tcpdump")
        .args(["-r", pcap.to_str().unwrap(), "-n", "-e"])
        .output()
        .unwrap();
    let frames = String::from_utf8_lossy(&frames.stdout);
    let v1 = frames
        .lines()
        .filter(|l| l.contains("ethertype Unknown (0x8915)"))
        .count();
    let v2 = frames.lines().filter(|l| l.contains(".4791:")).count();
    assert!(
        v1 >= 20 && v2 == 0,
        "{v1} RoCE v1 and {v2} RoCE v2 frames:\n{frames}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_backend_nobody_knows_is_refused_naming_the_variable() {
    let rping = tool("rping", "rdmacm-utils");
    let out = common::command(
        As::Me,
        "127.0.0.1",
        &rping,
        &["-c", "-a", "127.0.0.1", "-C", "1"],
    )
    .env("FERROCE_BACKEND", "rxe")
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("FERROCE_BACKEND=\"rxe\" names no backend"),
        "{err}"
    );
}
