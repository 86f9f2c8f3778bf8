//! The raw backend's neighbour cache follows a peer's MAC address: while
//! rping (rdma_cm, RoCE v1, until interrupted) runs between two namespaces
//! (a veth pair, created and removed by the test), the server's interface
//! takes a new MAC address and announces it (gratuitous ARP,
//! `arp_notify`). Within the cache's refresh time (5 s, and a 1 s tick)
//! the client's frames go to the new address (a capture on the server's
//! side), and both ends are still running some seconds later.
//!
//! Without the refresh the test fails: a veth delivers frames whatever
//! their destination MAC and the raw receiver does not filter them, so
//! the pings would go on all the same, but no frame would reach the new
//! address.
//!
//! Needs root; prints SKIPPED otherwise.

mod common;
mod raw_netns;

use std::process::{Child, Command};
use std::time::Duration;

use raw_netns::{A, B, Netns, ip};

const NEW_MAC: &str = "02:63:6d:00:00:2a";
/// The cache's refresh time and tick (`backend/raw/neigh_cache.rs`), and
/// slack for a loaded machine.
const REFRESH_BOUND: f64 = 5.0 + 1.0 + 2.0;

#[test]
fn a_peer_that_changes_its_mac_is_followed() {
    let Some(ns) = Netns::new("neigh") else {
        return;
    };
    if Command::new("tcpdump").arg("--version").output().is_err() {
        common::skip("tool missing: tcpdump");
        return;
    }
    let announce = ["netns", "exec", &ns.a, "sysctl", "-qw"];
    ip(&[&announce[..], &["net.ipv4.conf.eth0.arp_notify=1"]].concat());
    let dir = std::env::temp_dir().join(format!("fcm-neigh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("rdma_cm.conf");
    std::fs::write(&conf, "ferroce0/ports/1/default_roce_mode = IB/RoCE v1\n").unwrap();
    let env = [("FERROCE_CONFIG", conf.to_str().unwrap())];
    let pcap = dir.join("a.pcap");
    // Only what the test looks at: rping's frames both ways for 11 s made
    // a capture of ~800,000 frames that took minutes to read back.
    let mut dump = raw_netns::tcpdump_with(&ns.a, &pcap, &["arp", "or", "ether", "dst", NEW_MAC]);
    let server = ["rping", "-s", "-a", A, "--raw"];
    let client = ["rping", "-c", "-a", A, "-I", B, "--raw"];
    // The test stops them. Their own limit is a safety net only: on a
    // machine where other jobs add and remove namespaces, `ip link set`
    // waited for the kernel's rtnl lock long enough for a 60 s limit to
    // end both first.
    let run = |ns: &str, args: &[&str]| Netns::ferroce_for(ns, args, &env, 600).spawn().unwrap();
    let mut s = run(&ns.a, &server);
    std::thread::sleep(Duration::from_millis(300));
    let mut c = run(&ns.b, &client);
    std::thread::sleep(Duration::from_secs(2));
    ip(&["-n", &ns.a, "link", "set", "eth0", "address", NEW_MAC]);
    std::thread::sleep(Duration::from_secs_f64(REFRESH_BOUND + 1.0));
    let running = [&mut s, &mut c].map(|p| p.try_wait().unwrap().is_none());
    for p in [&mut s, &mut c, &mut dump] {
        stop(p);
    }
    let outputs = [s, c].map(|p| p.wait_with_output().unwrap());
    assert_eq!(running, [true; 2], "an end stopped: {outputs:?}");
    let lines = frames(&pcap);
    let announced = first_time(&lines, |l| {
        l.contains(&format!("{NEW_MAC} >")) && l.contains("ARP")
    });
    let to_new = |l: &str| l.contains(&format!("> {NEW_MAC}")) && l.contains("(0x8915)");
    let followed = first_time(&lines, to_new);
    let (Some(announced), Some(followed)) = (announced, followed) else {
        panic!(
            "no announcement or no RoCE v1 frame to {NEW_MAC}:\n{}",
            lines.join("\n")
        );
    };
    let after = followed - announced;
    assert!(
        (0.0..=REFRESH_BOUND).contains(&after),
        "the first frame to the new MAC came {after:.3} s after its announcement"
    );
    let count = lines.iter().filter(|l| to_new(l)).count();
    assert!(count > 100, "{count} frames to the new MAC");
    eprintln!("followed {after:.3} s after the announcement; {count} frames to the new MAC");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM to `p` (`timeout` passes it on to the program it runs).
fn stop(p: &Child) {
    let _ = Command::new("kill").arg(p.id().to_string()).status();
}

/// The capture's frames as `tcpdump -tt -e` prints them.
fn frames(pcap: &std::path::Path) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-r", pcap.to_str().unwrap(), "-tt", "-n", "-e"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The time stamp (s) of the first frame `pick` takes.
fn first_time(lines: &[String], pick: impl Fn(&str) -> bool) -> Option<f64> {
    let line = lines.iter().find(|l| pick(l))?;
    line.split_whitespace().next()?.parse().ok()
}
