//! Segmentation offload on the raw backend, on the wire: RC WRITEs of
//! 64 KiB between two raw devices across a veth pair between two
//! namespaces the test makes (`fgs-*`) and removes. The sender's device is
//! made unable to take super-frames whole (`gso_max_size 1500`), so the
//! kernel cuts them into frames before they reach the veth; a capture on
//! the receiving side then holds the kernel's frames, and `ferroce dump
//! --check` checks every one's ICRC (the IPv4 Identification and lengths
//! the kernel gave each segment are the ones its ICRC was computed for).
//! Needs root and tcpdump; prints SKIPPED otherwise.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::text;

const A: &str = "10.76.0.1";
const B: &str = "10.76.0.2";

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces `fgs-TAG-PID-a` and `-b` joined by a veth pair (`eth0`, A
/// and B); removed on drop.
struct Netns {
    a: String,
    b: String,
    /// One test at a time: each runs two busy-polling processes.
    _serial: std::sync::MutexGuard<'static, ()>,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Netns {
    fn new(tag: &str) -> Option<Self> {
        if !is_root() {
            common::skip("not root: the raw backend needs CAP_NET_ADMIN and CAP_NET_RAW");
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let pid = std::process::id();
        let ns = Self {
            a: format!("fgs-{tag}-{pid}-a"),
            b: format!("fgs-{tag}-{pid}-b"),
            _serial: serial,
        };
        ip(&["netns", "add", &ns.a]);
        ip(&["netns", "add", &ns.b]);
        ip(&[
            "-n", &ns.a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns",
            &ns.b,
        ]);
        for (n, addr) in [(&ns.a, A), (&ns.b, B)] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            ip(&["-n", n, "link", "set", "eth0", "up"]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        Some(ns)
    }

    fn ferroce(ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "timeout", "60"])
            .arg(env!("CARGO_BIN_EXE_ferroce"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// 64 KiB RC WRITEs over RoCE v2 from b to a; both outputs (client's
    /// first), each side's counters on its standard error.
    fn write(&self, iters: &str) -> (Output, Output) {
        let common = [
            "perf", "write", "--raw", "-m", "1024", "-n", iters, "--quiet", "--stats",
        ];
        let server = [&common[..], &["--listen", "-L", A]].concat();
        let client = [&common[..], &["-L", B, A]].concat();
        let s: Child = Self::ferroce(&self.a, &server).spawn().expect("server");
        std::thread::sleep(Duration::from_millis(300));
        let c = Self::ferroce(&self.b, &client).output().expect("client");
        if !c.status.success() {
            let _ = Command::new("kill").arg(s.id().to_string()).status();
        }
        (c, s.wait_with_output().expect("server output"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// The number after `key` in a `--stats` line.
fn counter(text: &str, key: &str) -> u64 {
    text.split(key)
        .nth(1)
        .and_then(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .find(|w| !w.is_empty())
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

fn assert_ok(what: &str, out: &Output) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}\n{stderr}",
        out.status
    );
}

/// Over the veth as it is, super-frames cross whole and the receiver cuts
/// them.
#[test]
fn writes_go_as_super_frames_and_the_receiver_cuts_them() {
    let Some(ns) = Netns::new("whole") else {
        return;
    };
    let (c, s) = ns.write("200");
    assert_ok("client", &c);
    assert_ok("server", &s);
    let (client, server) = (text(&c).1, text(&s).1);
    assert!(counter(&client, "tx_gso_frames: ") >= 200, "{client}");
    assert!(
        counter(&server, "rx_gso_segments: ") >= 200 * 60,
        "{server}"
    );
    assert_eq!(counter(&server, "rx_bad_icrc: "), 0, "{server}");
}

#[test]
fn the_kernels_segments_carry_right_icrcs_on_the_wire() {
    let Some(ns) = Netns::new("wire") else {
        return;
    };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        common::skip("tool missing: tcpdump");
        return;
    }
    ip(&["-n", &ns.b, "link", "set", "eth0", "gso_max_size", "1500"]);
    let dir = std::env::temp_dir().join(format!("fgs-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("segments.pcap");
    let pcap_s = pcap.to_str().unwrap();
    let mut tcpdump = Command::new("ip");
    tcpdump.args(["netns", "exec", &ns.a, "tcpdump", "--immediate-mode"]);
    tcpdump.args([
        "-B",
        "65536",
        "-i",
        "eth0",
        "-U",
        "-w",
        pcap_s,
        "udp port 4791",
    ]);
    let mut dump = common::capture_started(tcpdump, "listening on");
    std::thread::sleep(Duration::from_millis(1500));
    let (c, s) = ns.write("20");
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let _ = dump.wait();
    assert_ok("client", &c);
    assert_ok("server", &s);
    let (client, server) = (text(&c).1, text(&s).1);
    // Trains left as super-frames and arrived as the kernel's frames.
    assert!(counter(&client, "tx_gso_frames: ") >= 20, "{client}");
    assert_eq!(counter(&server, "rx_gso_frames: "), 0, "{server}");
    let check = common::ferroce(&["dump", "--check", pcap_s]);
    let (out, err) = text(&check);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(check.status.success(), "dump --check: {out}{err}");
    let writes = out.lines().filter(|l| l.contains("RC_RDMA_WRITE")).count();
    // 20 messages of 64 packets; tcpdump may miss a few under load.
    assert!(writes >= 1000, "{writes} WRITE packets captured: {err}");
    assert!(err.contains(" 0 malformed, 0 bad ICRC"), "{err}");
}
