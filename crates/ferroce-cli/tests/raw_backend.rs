//! ferroce to ferroce on the raw-Ethernet backend (`--raw`), across a veth
//! pair between two network namespaces that each test creates and removes
//! (also when it fails): RoCE v1 (GID index 2) and RoCE v2 (index 3) on
//! the same devices, over IPv4 and IPv6 addresses, RC, UC and UD (`pingpong -c` checks the UD GRH),
//! RDMA WRITE, READ, atomics and SEND (`perf`), RC through injected loss,
//! a capture of a v1 run decoded clean by `ferroce dump --check` and
//! tshark, the v1/v2 rule (a v1 path to a v2 path does not connect), and
//! rping (rdma_cm, RoCE v2) between two raw devices.
//! Needs root; prints SKIPPED otherwise.

mod common;
mod raw_netns;

use std::process::{Command, Output};
use std::time::Duration;

use common::text;
use raw_netns::{A, A6, B, B6, Netns};

/// The GID indices of the devices' own address, as `devinfo -v --raw`
/// lists them: fe80:: (v1, v2), then the IPv4 address (v1, v2), then the
/// IPv6 one (v1, v2).
const V1: &str = "2";
const V2: &str = "3";
const V1_IPV6: &str = "4";
const V2_IPV6: &str = "5";

fn assert_ok(what: &str, out: &Output) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}\n{stderr}",
        out.status
    );
}

#[test]
fn pingpong_rc_uc_ud_over_roce_v1_and_v2() {
    let Some(ns) = Netns::new("pp") else { return };
    let ipv4 = [V1, V2].map(|g| (g, A, B));
    let ipv6 = [V1_IPV6, V2_IPV6].map(|g| (g, A6, B6));
    for t in ["rc", "uc", "ud"] {
        for (g, a, b) in ipv4.into_iter().chain(ipv6) {
            let common = ["pingpong", "--raw", "-g", g, "-t", t, "-n", "200", "-c"];
            let server = [&common[..], &["-L", a]].concat();
            let client = [&common[..], &["-L", b, a]].concat();
            let (s, c) = ns.pair(&server, &client, &[]);
            let what = format!("pingpong -t {t} -g {g}");
            // The client first: when it fails, the server is killed.
            assert_ok(&format!("{what} client"), &c);
            assert_ok(&format!("{what} server"), &s);
            assert!(text(&c).0.contains("200 iters"), "{what}: {}", text(&c).0);
        }
    }
}

#[test]
fn perf_write_read_atomic_send_over_roce_v1_and_v2() {
    let Some(ns) = Netns::new("perf") else { return };
    for test in ["write", "read", "atomic", "send"] {
        for g in [V1, V2] {
            let common = ["perf", test, "--raw", "-g", g, "-n", "300", "-s", "8192"];
            let server = [&common[..], &["--listen", "--quiet", "-L", A]].concat();
            let client = [&common[..], &["--quiet", "-L", B, A]].concat();
            let (s, c) = ns.pair(&server, &client, &[]);
            let what = format!("perf {test} -g {g}");
            // The client first: when it fails, the server is killed.
            assert_ok(&format!("{what} client"), &c);
            assert_ok(&format!("{what} server"), &s);
        }
    }
}

/// rdma_cm between two raw devices (RoCE v2: the CM's MADs and the
/// connection in frames ferroce builds; the first MAD to a peer whose MAC
/// is not known yet waits for the CM's resend).
#[test]
fn rping_between_two_raw_devices() {
    let Some(ns) = Netns::new("rping") else {
        return;
    };
    let server = ["rping", "-s", "-a", A, "--raw", "-C", "20"];
    let client = [
        "rping", "-c", "-a", A, "-I", B, "--raw", "-C", "20", "-V", "-v",
    ];
    let (s, c) = ns.pair(&server, &client, &[]);
    assert_ok("rping client", &c);
    assert_ok("rping server", &s);
    assert!(text(&c).0.contains("rdma-ping-19"), "{}", text(&c).0);
}

/// One frame in 40 each side sends is dropped, at random (`FERROCE_RAW_DROP_ONE_IN`):
/// the WRITEs complete all the same, by retransmission.
#[test]
fn rc_write_over_roce_v1_through_loss() {
    let Some(ns) = Netns::new("loss") else { return };
    let common = [
        "perf", "write", "--raw", "-g", V1, "-n", "400", "-s", "4096",
    ];
    let server = [&common[..], &["--listen", "--quiet", "-L", A]].concat();
    let client = [&common[..], &["--quiet", "--stats", "-L", B, A]].concat();
    let (s, c) = ns.pair(&server, &client, &[("FERROCE_RAW_DROP_ONE_IN", "40")]);
    assert_ok("client", &c);
    assert_ok("server", &s);
    let stderr = text(&c).1;
    let count = |name: &str| -> u64 {
        let at = stderr
            .find(&format!("{name}: "))
            .unwrap_or_else(|| panic!("no {name}: {stderr}"));
        let digits: String = stderr[at + name.len() + 2..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap()
    };
    assert!(count("tx_injected_drops") > 0, "{stderr}");
    assert!(count("retransmits") > 0, "{stderr}");
}

#[test]
fn a_roce_v1_capture_decodes_clean() {
    let Some(ns) = Netns::new("cap") else { return };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        common::skip("tool missing: tcpdump");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fraw2-cap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("v1.pcap");
    let pcap_s = pcap.to_str().unwrap();
    // On b, which receives a's frames (a packet socket's own frames skip
    // the capture point when the qdisc is bypassed).
    // --immediate-mode, so nothing waits in a ring block when tcpdump is
    // stopped; -B 32 MiB: with the default 2 MiB ring tcpdump counted 40-90
    // of a run's ~260 frames "dropped by kernel", and one run in five
    // came out empty.
    let mut tcpdump = Command::new("ip");
    tcpdump.args([
        "netns",
        "exec",
        &ns.b,
        "tcpdump",
        "--immediate-mode",
        "-B",
        "32768",
        "-i",
        "eth0",
        "-U",
        "-w",
        pcap_s,
    ]);
    let mut dump = common::capture_started(tcpdump, "listening on");
    // As tshark, tcpdump says so a little before it takes packets: runs
    // that started at once sometimes captured nothing at all.
    std::thread::sleep(Duration::from_millis(1500));
    let common = ["pingpong", "--raw", "-g", V1, "-n", "50", "-c"];
    let server = [&common[..], &["-L", A]].concat();
    let client = [&common[..], &["-L", B, A]].concat();
    let (s, c) = ns.pair(&server, &client, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let _ = dump.wait();
    assert_ok("client", &c);
    assert_ok("server", &s);
    let check = common::ferroce(&["dump", "--check", pcap_s]);
    let (out, err) = text(&check);
    assert!(check.status.success(), "dump --check: {out}{err}");
    assert!(
        out.contains("RoCEv1"),
        "no RoCE v1 packet in the capture ({} bytes): {out}{err}",
        std::fs::metadata(&pcap).map_or(0, |m| m.len())
    );
    // The summary goes to stderr.
    assert!(err.contains(" 0 malformed, 0 bad ICRC"), "{err}");
    let summary = common::peercheck(&pcap);
    assert!(
        summary.contains("v1"),
        "peercheck saw no RoCE v1: {summary}"
    );
    {
        let t = Command::new("tshark")
            .args(["-r", pcap_s, "-Y", "eth.type == 0x8915 && infiniband"])
            .output()
            .expect("tshark is missing: run scripts/setup-test-deps.sh");
        let roce = String::from_utf8_lossy(&t.stdout).lines().count();
        assert!(roce >= 100, "tshark sees {roce} RoCE v1 packets");
        let bad = Command::new("tshark")
            .args([
                "-r",
                pcap_s,
                "-Y",
                "infiniband && (_ws.malformed || _ws.expert.severity >= warning)",
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&bad.stdout),
            "",
            "tshark finds faults"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A RoCE v1 path to a peer whose path is RoCE v2: each side drops the
/// other's packets (`rx_wrong_roce`), so the first SEND fails after its
/// retries with "transport retry counter exceeded", as between a v1 and a
/// v2 port of real NICs.
#[test]
fn a_roce_v1_path_to_a_v2_path_does_not_connect() {
    let Some(ns) = Netns::new("mix") else { return };
    let server = ["pingpong", "--raw", "-g", V1, "-n", "5", "-L", A];
    let client = ["pingpong", "--raw", "-g", V2, "-n", "5", "-L", B, A];
    let (_, c) = ns.pair(&server, &client, &[]);
    let (_, err) = text(&c);
    assert!(!c.status.success());
    assert!(err.contains("transport retry counter exceeded"), "{err}");
}

/// Without CAP_NET_RAW, opening a raw device fails and says what is needed.
#[test]
fn without_cap_net_raw_the_error_says_so() {
    let Some(ns) = Netns::new("cap-raw") else {
        return;
    };
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.a,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
        ])
        .args(["--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .arg(env!("CARGO_BIN_EXE_ferroce"))
        .args(["pingpong", "--raw", "-L", A])
        .output()
        .expect("run setpriv");
    let (_, err) = text(&out);
    assert!(!out.status.success());
    assert!(err.contains("CAP_NET_RAW"), "{err}");
}
