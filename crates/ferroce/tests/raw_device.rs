//! A device on the raw-Ethernet backend, through the API: its GID table
//! lists every address as RoCE v1 and v2 (v1 at even indices), a GID
//! index gives its RoCE version, a path to a peer on the link resolves
//! its MAC address, and a path to an address nobody answers for fails
//! `modify_qp` naming the peer and the interface (as rdma-core's
//! `ibv_modify_qp` fails when the kernel cannot resolve the destination
//! MAC). A RoCE v1 path on a UDP-backend device is refused.
//!
//! Each test creates two network namespaces joined by a veth pair
//! (`fraw2-TAG-PID-a`, `-b`) and reruns itself inside `b` (the device
//! must open in the namespace; the test process stays outside), then
//! removes them, also on failure. Needs root; prints SKIPPED otherwise.

#[path = "../../ferroce-verbs/tests/shared/skip.rs"]
mod skip;

use std::net::IpAddr;
use std::process::Command;

use ferroce::{
    BackendKind, ConnectOptions, Context, DeviceConfig, Error, GidType, QpEndpoint, QpInitAttr,
    QpType, RoceMode,
};

const INNER: &str = "FERROCE_RAW_DEVICE_TEST_INNER";
const A: &str = "10.79.0.1";
const B: &str = "10.79.0.2";
/// On the link, but nobody has it.
const NOBODY: &str = "10.79.0.9";

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {:?}", args.join(" "), out);
}

struct Netns([String; 2]);

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Runs test `name` of this binary again inside namespace b of a fresh
/// pair; returns false when the caller is that inner run (and should do
/// the work), true when the outer run is done.
fn outer(name: &str, tag: &str) -> bool {
    if std::env::var_os(INNER).is_some() {
        return false;
    }
    if !is_root() {
        skip::skip("not root: the raw backend needs CAP_NET_ADMIN and CAP_NET_RAW");
        return true;
    }
    let pid = std::process::id();
    let ns = Netns([
        format!("fraw2-{tag}-{pid}-a"),
        format!("fraw2-{tag}-{pid}-b"),
    ]);
    let [a, b] = &ns.0;
    // Removed with `ns` from here on, whatever fails.
    ip(&["netns", "add", a]);
    ip(&["netns", "add", b]);
    ip(&[
        "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b,
    ]);
    for (n, addr) in [(a, A), (b, B)] {
        ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
        ip(&["-n", n, "link", "set", "eth0", "up"]);
        ip(&["-n", n, "link", "set", "lo", "up"]);
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", b])
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(INNER, "1")
        .output()
        .expect("rerun the test");
    assert!(
        out.status.success(),
        "inner run failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

fn raw_device() -> Context {
    let local: IpAddr = B.parse().unwrap();
    Context::open_with(DeviceConfig {
        backend: BackendKind::Raw,
        ..DeviceConfig::new(local)
    })
    .unwrap()
}

fn connect_to(ctx: &Context, peer: &str, roce: RoceMode) -> Result<(), Error> {
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    let remote = QpEndpoint {
        gid: peer.parse().unwrap(),
        qp_type: QpType::Rc,
        qpn: 0x77,
        psn: ferroce::Psn::new(1),
        mtu: None,
    };
    let opts = ConnectOptions {
        roce,
        ..ConnectOptions::default()
    };
    qp.connect(&remote, &opts)
}

#[test]
fn gid_table_has_both_types_and_an_index_picks_the_version() {
    if outer(
        "gid_table_has_both_types_and_an_index_picks_the_version",
        "gid",
    ) {
        return;
    }
    let ctx = raw_device();
    assert_eq!(ctx.backend(), BackendKind::Raw);
    let table = ctx.gid_table().unwrap();
    // fe80:: of the MAC, then 10.79.0.2, each as v1 then v2.
    let kinds: Vec<GidType> = table.iter().map(|g| g.kind).collect();
    assert_eq!(
        kinds,
        [
            GidType::RoceV1,
            GidType::RoceV2,
            GidType::RoceV1,
            GidType::RoceV2
        ]
    );
    assert_eq!(table[0].raw[..2], [0xfe, 0x80]);
    assert_eq!(table[2].ip(), B.parse::<IpAddr>().unwrap());
    assert_eq!(ctx.gid_type(2).unwrap(), RoceMode::V1);
    assert_eq!(ctx.gid_type(3).unwrap(), RoceMode::V2);
    assert_eq!(ctx.gid_index().unwrap(), 3);
    assert_eq!(ctx.gid_index_of(RoceMode::V1).unwrap(), 2);
    let e = ctx.gid_type(0).unwrap_err().to_string();
    assert!(
        e.contains("not this device's address") && e.contains("2 (RoCE v1)"),
        "{e}"
    );
}

#[test]
fn a_path_to_a_peer_that_does_not_answer_fails_naming_it() {
    if outer(
        "a_path_to_a_peer_that_does_not_answer_fails_naming_it",
        "nobody",
    ) {
        return;
    }
    let ctx = raw_device();
    connect_to(&ctx, A, RoceMode::V1).expect("the peer on the link resolves");
    let e = connect_to(&ctx, NOBODY, RoceMode::V2)
        .unwrap_err()
        .to_string();
    assert!(e.contains(NOBODY) && e.contains("eth0"), "{e}");
}

#[test]
fn a_roce_v1_path_on_the_udp_backend_is_refused() {
    if outer("a_roce_v1_path_on_the_udp_backend_is_refused", "udp") {
        return;
    }
    let ctx = Context::open(B.parse().unwrap()).unwrap();
    assert_eq!(ctx.backend(), BackendKind::Udp);
    assert!(
        ctx.gid_table()
            .unwrap()
            .iter()
            .all(|g| g.kind == GidType::RoceV2)
    );
    let e = connect_to(&ctx, A, RoceMode::V1).unwrap_err().to_string();
    assert!(e.contains("raw backend"), "{e}");
    connect_to(&ctx, A, RoceMode::V2).unwrap();
}
