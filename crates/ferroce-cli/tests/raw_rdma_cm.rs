//! rdma_cm over RoCE v1 on the raw-Ethernet backend, across a veth pair
//! between two network namespaces that each test creates and removes (also
//! when it fails), with the port's `default_roce_mode` set to `IB/RoCE v1`
//! in a settings file (`FERROCE_CONFIG`):
//! * rping, cmatose, rdma-server/rdma-client and `perf --perftest -R`
//!   (RC) and udaddy (UD, SIDR) connect and run, each namespace in turn
//!   the server (rping also between IPv6 addresses); a client without its
//!   local address opens its raw device on its route to the server;
//! * a capture on both ends holds the CM's MADs (REQ, REP, RTU, DREQ,
//!   DREP, SIDR_REQ, SIDR_REP) and the connections' packets as RoCE v1
//!   only, clean in `ferroce dump --check` and tshark;
//! * the passive side answers in the request's version: a server whose own
//!   mode is RoCE v2 accepts a RoCE v1 client over RoCE v1 (rping), and
//!   answers a v1 SIDR request and v1 datagrams in v1 (udaddy);
//! * RoCE v1 on a device of the UDP backend is refused at once, naming
//!   `--raw`.
//!
//! Needs root; prints SKIPPED otherwise.

mod common;
mod raw_netns;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::text;
use raw_netns::{A, A6, B, B6, Netns, assert_ok};

/// A settings file in a directory of its own, removed on drop.
struct Settings {
    dir: PathBuf,
}

impl Settings {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fcm-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// A file setting port 1's mode to `mode` (as configfs spells it).
    fn mode(&self, name: &str, mode: &str) -> String {
        let path = self.dir.join(name);
        let line = format!("ferroce0/ports/1/default_roce_mode = {mode}\n");
        std::fs::write(&path, line).unwrap();
        path.to_str().unwrap().to_owned()
    }
}

impl Drop for Settings {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const V1: &str = "IB/RoCE v1";

fn rping_pair(ns: &Netns, server_in_a: bool, env: [&[(&str, &str)]; 2]) {
    let (srv, cli) = if server_in_a { (A, B) } else { (B, A) };
    rping_between(ns, server_in_a, (srv, cli), env);
}

/// rping from `addrs.1` to `addrs.0`, the server in a (`server_in_a`) or b.
fn rping_between(
    ns: &Netns,
    server_in_a: bool,
    (srv, cli): (&str, &str),
    env: [&[(&str, &str)]; 2],
) {
    let server = ["rping", "-s", "-a", srv, "--raw", "-C", "20"];
    let client = [
        "rping", "-c", "-a", srv, "-I", cli, "--raw", "-C", "20", "-V", "-v",
    ];
    let (s, c) = ns.pair_from(server_in_a, &server, &client, env);
    let what = format!("rping, server on {srv}");
    assert_ok(&format!("{what}: client"), &c);
    assert_ok(&format!("{what}: server"), &s);
    assert!(
        text(&c).0.contains("rdma-ping-19"),
        "{what}: {}",
        text(&c).0
    );
}

#[test]
fn rping_over_roce_v1_both_ways() {
    let Some(ns) = Netns::new("rping") else {
        return;
    };
    let s = Settings::new("rping");
    let v1 = s.mode("v1.conf", V1);
    let env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v1)];
    rping_pair(&ns, true, [env, env]);
    rping_pair(&ns, false, [env, env]);
    // IPv6 addresses: their own GIDs in the GRH.
    rping_between(&ns, true, (A6, B6), [env, env]);
}

/// `tool` (udaddy or cmatose) between the namespaces, the server in a
/// (`server_in_a`) or b; the client gives its address with -b only when
/// `client_bind` (otherwise its route to the server picks it).
fn cmtest_pair(
    ns: &Netns,
    tool: &str,
    server_in_a: bool,
    client_bind: bool,
    env: [&[(&str, &str)]; 2],
) {
    let (srv, cli) = if server_in_a { (A, B) } else { (B, A) };
    let server = [tool, "-b", srv, "--raw", "-c", "2", "-C", "20"];
    let mut client = vec![tool, "-s", srv, "--raw", "-c", "2", "-C", "20"];
    if client_bind {
        client.extend(["-b", cli]);
    }
    let (s, c) = ns.pair_from(server_in_a, &server, &client, env);
    let what = format!("{tool}, server on {srv}");
    assert_ok(&format!("{what}: client"), &c);
    assert_ok(&format!("{what}: server"), &s);
    assert!(
        text(&c).0.contains("data transfers complete"),
        "{what}: {}",
        text(&c).0
    );
}

#[test]
fn udaddy_over_roce_v1_both_ways() {
    let Some(ns) = Netns::new("ud") else { return };
    let s = Settings::new("ud");
    let v1 = s.mode("v1.conf", V1);
    let env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v1)];
    cmtest_pair(&ns, "udaddy", true, true, [env, env]);
    cmtest_pair(&ns, "udaddy", false, false, [env, env]);
}

#[test]
fn cmatose_and_rdma_examples_over_roce_v1() {
    let Some(ns) = Netns::new("cmt") else { return };
    let s = Settings::new("cmt");
    let v1 = s.mode("v1.conf", V1);
    let env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v1)];
    cmtest_pair(&ns, "cmatose", true, false, [env, env]);
    cmtest_pair(&ns, "cmatose", false, true, [env, env]);
    let server = ["rdma-server", "-s", A, "--raw"];
    let client = ["rdma-client", "-s", A, "--raw"];
    let (s, c) = ns.pair_from(true, &server, &client, [env, env]);
    assert_ok("rdma-client", &c);
    assert_ok("rdma-server", &s);
    assert!(text(&c).0.contains("rdma_client: end 0"), "{}", text(&c).0);
}

#[test]
fn a_raw_server_without_its_address_is_told_to_give_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferroce"))
        .args(["udaddy", "--raw"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("add -b ADDRESS"), "{err}");
}

/// The other way round: a server whose mode is RoCE v1 takes a RoCE v2
/// client's request (the raw backend receives both versions, and the
/// passive side follows the request).
#[test]
fn a_roce_v2_client_reaches_a_roce_v1_server() {
    let Some(ns) = Netns::new("v2v1") else { return };
    let s = Settings::new("v2v1");
    let (v1, v2) = (s.mode("v1.conf", V1), s.mode("v2.conf", "RoCE v2"));
    let server_env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v1)];
    let client_env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v2)];
    rping_pair(&ns, true, [server_env, client_env]);
}

#[test]
fn perf_rdma_cm_over_roce_v1_both_ways() {
    let Some(ns) = Netns::new("perf") else { return };
    let s = Settings::new("perf");
    let v1 = s.mode("v1.conf", V1);
    let env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v1)];
    for (server_in_a, test) in [(true, "write"), (false, "send")] {
        let (srv, cli) = if server_in_a { (A, B) } else { (B, A) };
        let common = [
            "perf",
            test,
            "--perftest",
            "-R",
            "--raw",
            "-n",
            "200",
            "-s",
            "4096",
        ];
        let server = [&common[..], &["--listen", "--quiet", "-L", srv]].concat();
        let client = [&common[..], &["--quiet", "-L", cli, srv]].concat();
        let (s, c) = ns.pair_from(server_in_a, &server, &client, [env, env]);
        let what = format!("perf {test} -R, server on {srv}");
        assert_ok(&format!("{what}: client"), &c);
        assert_ok(&format!("{what}: server"), &s);
        assert!(text(&c).0.contains("BW average"), "{what}: {}", text(&c).0);
    }
}

/// The kernel's rule: the passive side takes the GID type of the request,
/// whatever its own port's mode. The servers' settings say RoCE v2, the
/// clients' RoCE v1: rping and udaddy run, and every frame either side
/// sends (the servers' REP, DREP, SIDR_REP and replies included) is RoCE
/// v1.
#[test]
fn a_roce_v1_request_is_answered_in_roce_v1_and_captured_clean() {
    let Some(ns) = Netns::new("cap") else { return };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        common::skip("tool missing: tcpdump");
        return;
    }
    let s = Settings::new("cap");
    let (v1, v2) = (s.mode("v1.conf", V1), s.mode("v2.conf", "RoCE v2"));
    // Each end captures what the other sends (a packet socket's own frames
    // skip the capture point when the qdisc is bypassed).
    let pcaps = [s.dir.join("a.pcap"), s.dir.join("b.pcap")];
    let dumps = [&ns.a, &ns.b].map(|n| raw_netns::tcpdump(n, &pcaps[usize::from(n == &ns.b)]));
    let server_env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v2)];
    let client_env: &[(&str, &str)] = &[("FERROCE_CONFIG", &v1)];
    rping_pair(&ns, true, [server_env, client_env]);
    cmtest_pair(&ns, "udaddy", true, true, [server_env, client_env]);
    std::thread::sleep(Duration::from_millis(500));
    for mut d in dumps {
        let _ = Command::new("kill").arg(d.id().to_string()).status();
        let _ = d.wait();
    }
    // a's capture holds the client's frames, b's the server's.
    let client_frames = check_capture(&pcaps[0]);
    let server_frames = check_capture(&pcaps[1]);
    for mad in ["CM REQ", "CM RTU", "CM DREQ"] {
        assert!(
            client_frames.contains(mad),
            "client: no {mad}: {client_frames}"
        );
    }
    for mad in ["CM REP", "CM DREP"] {
        assert!(
            server_frames.contains(mad),
            "server: no {mad}: {server_frames}"
        );
    }
    for frames in [&client_frames, &server_frames] {
        assert!(
            has_line(frames, &["RoCEv1 ", " UD_SEND_ONLY_WITH_IMMEDIATE "]),
            "{frames}"
        );
    }
    // SIDR_REQ (0x17) from the client, SIDR_REP (0x18) from the server,
    // each received twice (a capture also holds its own side's frames:
    // with segmentation offload the frames pass the qdisc layer).
    for (pcap, want) in pcaps.iter().zip(["0x0017", "0x0018"]) {
        if let Some(ids) = sidr_attributes(pcap) {
            let seen = ids.iter().filter(|id| *id == want).count();
            assert_eq!(seen, 2, "{}: {ids:?}", pcap.display());
        }
    }
}

/// The attribute IDs of the SIDR MADs in `pcap`, as tshark reads them
/// (`None` without tshark).
fn sidr_attributes(pcap: &Path) -> Option<Vec<String>> {
    let filter = "eth.type == 0x8915 && (infiniband.mad.attributeid == 0x17 || \
                  infiniband.mad.attributeid == 0x18)";
    let Ok(t) = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", filter])
        .args(["-T", "fields", "-e", "infiniband.mad.attributeid"])
        .output()
    else {
        return None;
    };
    let ids = String::from_utf8_lossy(&t.stdout);
    Some(ids.lines().map(str::to_owned).collect())
}

/// Whether a line of `ferroce dump`'s output holds every one of `parts`
/// (the ECN codepoint, when set, stands between version and opcode).
fn has_line(dump: &str, parts: &[&str]) -> bool {
    dump.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}

/// `ferroce dump --check` and tshark on `pcap`: clean, RoCE v1 only, with
/// the connection's packets; returns dump's lines.
fn check_capture(pcap: &Path) -> String {
    let p = pcap.to_str().unwrap();
    let check = common::ferroce(&["dump", "--check", p]);
    let (out, err) = text(&check);
    assert!(check.status.success(), "dump --check {p}: {out}{err}");
    assert!(err.contains(" 0 malformed, 0 bad ICRC"), "{p}: {err}");
    assert!(has_line(&out, &["RoCEv1 ", " RC_SEND_ONLY "]), "{p}: {out}");
    assert!(!out.contains("RoCEv2"), "{p}: a RoCE v2 frame: {out}");
    if let Ok(t) = Command::new("tshark")
        .args(["-r", p, "-Y", "eth.type == 0x8915 && infiniband.mad"])
        .output()
    {
        let mads = String::from_utf8_lossy(&t.stdout).lines().count();
        assert!(mads >= 2, "{p}: tshark sees {mads} RoCE v1 MADs");
        let bad = Command::new("tshark")
            .args([
                "-r",
                p,
                "-Y",
                "infiniband && (_ws.malformed || _ws.expert.severity >= warning)",
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&bad.stdout), "", "{p}: tshark");
    }
    out
}

/// RoCE v1 for rdma_cm on a device of the UDP backend: refused when the
/// client resolves its address, naming the raw backend and the setting.
#[test]
fn roce_v1_on_the_udp_backend_is_refused_naming_the_fix() {
    let Some(ns) = Netns::new("udp") else { return };
    let s = Settings::new("udp");
    let v1 = s.mode("v1.conf", V1);
    let client = ["rping", "-c", "-a", A, "-I", B, "-C", "1"];
    let out = Netns::ferroce(&ns.b, &client, &[("FERROCE_CONFIG", &v1)])
        .output()
        .unwrap();
    let (_, err) = text(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("default_roce_mode is RoCE v1") && err.contains("`--raw`"),
        "{err}"
    );
}
