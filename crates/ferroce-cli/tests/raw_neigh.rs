//! The raw backend's neighbour cache follows a peer's MAC address: while a
//! latency run goes between two namespaces (a veth pair, created and
//! removed by the test), the server's interface takes a new MAC address
//! and announces it (gratuitous ARP, `arp_notify`). The client's cache
//! re-asks the kernel within its refresh time, counts the change
//! (`neigh.mac_changes` in `--stats`), and its frames go to the new
//! address (a capture on the server's side), while the run completes.
//!
//! Without the refresh the test fails: a veth delivers frames whatever
//! their destination MAC and the raw receiver does not filter them, so
//! the run would complete all the same, but no frame would reach the new
//! address and nothing would be counted.
//!
//! Needs root; prints SKIPPED otherwise.

mod common;
mod raw_netns;

use std::process::Command;
use std::time::Duration;

use common::text;
use raw_netns::{A, B, Netns, assert_ok, ip};

const NEW_MAC: &str = "02:63:6d:00:00:2a";

#[test]
fn a_peer_that_changes_its_mac_is_followed() {
    let Some(ns) = Netns::new("neigh") else {
        return;
    };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no tcpdump");
        return;
    }
    let announce = ["netns", "exec", &ns.a, "sysctl", "-qw"];
    ip(&[&announce[..], &["net.ipv4.conf.eth0.arp_notify=1"]].concat());
    let dir = std::env::temp_dir().join(format!("fcm-neigh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("a.pcap");
    let mut dump = raw_netns::tcpdump(&ns.a, &pcap);
    // Long enough (in a debug build, 15 s and more) to outlast the change
    // at 2 s plus the cache's refresh time (5 s, and a 1 s tick).
    let common = ["perf", "write", "--lat", "--raw", "-s", "8", "-n", "100000"];
    let server = [&common[..], &["--listen", "--quiet", "-L", A]].concat();
    let client = [&common[..], &["--quiet", "--stats", "-L", B, A]].concat();
    let a = ns.a.clone();
    let change = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        ip(&["-n", &a, "link", "set", "eth0", "address", NEW_MAC]);
    });
    let (s, c) = ns.pair_from(true, &server, &client, [&[], &[]]);
    change.join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(dump.id().to_string()).status();
    let _ = dump.wait();
    assert_ok("client", &c);
    assert_ok("server", &s);
    let stats = text(&c).1;
    let changes = stats
        .split("mac_changes: ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no mac_changes in --stats: {stats}"));
    assert!(changes >= 1, "the cache did not see the new MAC: {stats}");
    let to_new = Command::new("tcpdump")
        .args(["-r", pcap.to_str().unwrap(), "-n", "ether", "dst", NEW_MAC])
        .output()
        .unwrap();
    let frames = String::from_utf8_lossy(&to_new.stdout).lines().count();
    assert!(frames > 100, "{frames} frames to the new MAC: {stats}");
    let _ = std::fs::remove_dir_all(&dir);
}
