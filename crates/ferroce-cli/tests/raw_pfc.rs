//! PFC and priorities on the raw backend, between two network namespaces
//! joined by a veth pair that each test creates and removes (also when it
//! fails): a receiver slowed on purpose (`FERROCE_RAW_SLOW_RX_US`, a small
//! receive ring) gets a stream of RC WRITEs with PFC on and then with PFC
//! off, and the two runs' counters are printed side by side; with PFC on
//! nothing is dropped by the ring and nothing is retransmitted, while
//! pause frames go both ways; with PFC off the ring drops and the sender
//! retransmits. A capture shows the PFC frames and the priority tags in
//! `ferroce dump`, and `--vlan`/`--pcp` put their VID and PCP on the wire.
//! Needs root; prints SKIPPED otherwise.

mod common;
mod raw_netns;

use std::process::{Command, Output};
use std::time::Duration;

use common::text;
use raw_netns::{A, B, Netns};

/// The RoCE v2 GID index of the devices' IPv4 address.
const V2: &str = "3";

/// The slow-receiver run (see README "PFC and priorities"): 8 QPs of 64
/// KiB WRITEs at MTU 1024 keep up to 1,024 packets in flight, against a
/// 512-frame ring taken 8 frames a millisecond. The 1 s ACK timeout
/// (`--qp-timeout 18`) outlasts the time that window takes to drain at
/// that pace, so a retransmission means a lost packet, not a slow one.
const STREAM: &[&str] = &[
    "perf",
    "write",
    "--raw",
    "-g",
    V2,
    "-m",
    "1024",
    "-q",
    "8",
    "-n",
    "25",
    "--quiet",
    "--stats",
    "--rx-ring",
    "512",
    // Frame by frame: the ring's backlog (and its drops) then counts
    // packets, as a NIC's buffer does; a super-frame holds up to 64.
    "--no-gso",
    "--qp-timeout",
    "18",
];
/// PFC: XOFF at 32 frames waiting, XON at 8, pauses timed (and sends
/// paced) at 100 Mbit/s.
const PFC: &[&str] = &[
    "--pfc",
    "--pfc-xoff",
    "32",
    "--pfc-xon",
    "8",
    "--pfc-link-mbps",
    "100",
];
const SLOW: (&str, &str) = ("FERROCE_RAW_SLOW_RX_US", "1000");

/// tcpdump on b's eth0 into `pcap`, once it is capturing.
fn capture(ns: &Netns, pcap: &str) -> Option<common::Spawned> {
    if Command::new("tcpdump").arg("--version").output().is_err() {
        common::skip("tool missing: tcpdump (only the capture checks are skipped)");
        return None;
    }
    Some(raw_netns::tcpdump(&ns.b, std::path::Path::new(pcap)))
}

fn stop(mut capture: common::Spawned) {
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").arg(capture.id().to_string()).status();
    let _ = capture.wait();
}

fn assert_ok(what: &str, out: &Output) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what}: {}\n{stdout}\n{stderr}",
        out.status
    );
}

/// The number after `name: ` in the first line of `text` containing
/// `line`; panics naming both if there is none.
fn counter(text: &str, line: &str, name: &str) -> u64 {
    let key = format!("{name}: ");
    text.lines()
        .filter(|l| l.contains(line))
        .find_map(|l| {
            let at = l.find(&key)? + key.len();
            let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {name} on a line with {line:?} in:\n{text}"))
}

/// `perf --stats`' PFC line for priority 3 of `who`: (pause frames
/// received, pause frames sent, µs paused); zeros if there is none.
fn pfc3(text: &str, who: &str) -> (u64, u64, u64) {
    let prefix = format!("{who}: pfc priority 3: ");
    let Some(l) = text.lines().find(|l| l.starts_with(&prefix)) else {
        return (0, 0, 0);
    };
    let nums: Vec<u64> = l[prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    // received P pause + R resume, sent P pause + R resume, paused U us
    (nums[0], nums[2], nums[4])
}

/// One run's figures.
#[derive(Debug)]
struct Run {
    ring_drops: u64,
    retransmits: u64,
    pause_sent: u64,
    pause_received: u64,
    paused_us: u64,
    mb_per_s: String,
}

fn stream(ns: &Netns, pfc: bool) -> Run {
    let extra: &[&str] = if pfc { PFC } else { &[] };
    let server = [STREAM, extra, &["--listen", "-L", A]].concat();
    let client = [STREAM, extra, &["-L", B, A]].concat();
    let (s, c) = ns.pair_from(true, &server, &client, [&[SLOW], &[]]);
    let what = if pfc { "PFC on" } else { "PFC off" };
    assert_ok(&format!("{what}: client"), &c);
    assert_ok(&format!("{what}: server"), &s);
    let (c_out, c_err) = text(&c);
    let s_err = text(&s).1;
    let (pause_received, _, paused_us) = pfc3(&c_err, B);
    let (_, pause_sent, _) = pfc3(&s_err, A);
    Run {
        ring_drops: counter(&s_err, "RawDeviceStats", "rx_ring_drops"),
        retransmits: counter(&c_err, "Stats {", "retransmits"),
        pause_sent,
        pause_received,
        paused_us,
        // perf's result line: size, iterations, peak, average, rate.
        mb_per_s: c_out
            .lines()
            .find(|l| l.trim_start().starts_with("65536"))
            .and_then(|l| l.split_whitespace().nth(3))
            .unwrap_or("?")
            .to_string(),
    }
}

#[test]
fn slow_receiver_pfc_on_loses_nothing_pfc_off_drops_and_retransmits() {
    let Some(mut ns) = Netns::new("slow") else {
        return;
    };
    ns.secs = 120; // the slow receiver's runs
    let pcap = std::env::temp_dir().join(format!("fpf-slow-{}.pcap", std::process::id()));
    let pcap_s = pcap.to_str().unwrap().to_string();
    let capture = capture(&ns, &pcap_s);
    let on = stream(&ns, true);
    if let Some(c) = capture {
        stop(c);
    }
    let off = stream(&ns, false);
    println!(
        "slow receiver ({}={} µs per 8 frames), {}",
        SLOW.0,
        SLOW.1,
        STREAM.join(" ")
    );
    println!("| | PFC on ({}) | PFC off |", PFC.join(" "));
    println!("|---|---|---|");
    println!(
        "| receive ring drops (receiver) | {} | {} |",
        on.ring_drops, off.ring_drops
    );
    println!(
        "| retransmissions (sender) | {} | {} |",
        on.retransmits, off.retransmits
    );
    println!(
        "| pause frames sent (receiver) | {} | {} |",
        on.pause_sent, off.pause_sent
    );
    println!(
        "| pause frames received (sender) | {} | {} |",
        on.pause_received, off.pause_received
    );
    println!(
        "| time paused, priority 3 (sender) | {} µs | {} µs |",
        on.paused_us, off.paused_us
    );
    println!(
        "| WRITE bandwidth, average | {} MB/s | {} MB/s |",
        on.mb_per_s, off.mb_per_s
    );

    assert_eq!(on.ring_drops, 0, "PFC on: the ring dropped: {on:?}");
    assert_eq!(
        on.retransmits, 0,
        "PFC on: the sender retransmitted: {on:?}"
    );
    assert!(
        on.pause_sent > 0 && on.pause_received > 0,
        "PFC on: no pause frames: {on:?}"
    );
    assert!(on.paused_us > 0, "PFC on: the sender never waited: {on:?}");
    assert!(
        off.ring_drops > 0,
        "PFC off: nothing dropped, so the test shows nothing: {off:?}"
    );
    assert!(off.retransmits > 0, "PFC off: no retransmission: {off:?}");
    assert_eq!(
        (off.pause_sent, off.pause_received),
        (0, 0),
        "PFC off sent pauses: {off:?}"
    );

    if pcap.exists() {
        // b received the receiver's PFC frames and its ACKs, priority-
        // tagged (VID 0, PCP 3) since PFC is on without a VLAN.
        let dump = common::ferroce(&["dump", &pcap_s]);
        let (out, err) = text(&dump);
        let _ = std::fs::remove_file(&pcap);
        assert!(dump.status.success(), "dump: {out}{err}");
        assert!(
            out.lines().any(|l| l.contains("PFC P3=65535 quanta")),
            "no XOFF in:\n{out}"
        );
        assert!(
            out.lines().any(|l| l.contains("PFC P3=0 quanta")),
            "no XON in:\n{out}"
        );
        assert!(out.contains("PCP=3"), "no priority tag in:\n{out}");
    }
}

#[test]
fn vlan_and_pcp_flags_tag_the_frames() {
    let Some(ns) = Netns::new("vlan") else { return };
    let pcap = std::env::temp_dir().join(format!("fpf-vlan-{}.pcap", std::process::id()));
    let pcap_s = pcap.to_str().unwrap().to_string();
    let Some(capture) = capture(&ns, &pcap_s) else {
        return;
    };
    let common = [
        "pingpong", "--raw", "-g", V2, "-n", "20", "--vlan", "7", "--pcp", "5",
    ];
    let server = [&common[..], &["-L", A]].concat();
    let client = [&common[..], &["-L", B, A]].concat();
    let (s, c) = ns.pair(&server, &client, &[]);
    stop(capture);
    assert_ok("client", &c);
    assert_ok("server", &s);
    let dump = common::ferroce(&["dump", "--check", &pcap_s]);
    let (out, err) = text(&dump);
    let _ = std::fs::remove_file(&pcap);
    assert!(dump.status.success(), "dump --check: {out}{err}");
    let roce: Vec<&str> = out.lines().filter(|l| l.contains("RoCEv2")).collect();
    assert!(
        roce.len() >= 20,
        "a's frames missing from the capture:\n{out}"
    );
    for l in roce {
        assert!(
            l.contains("VLAN=7 PCP=5"),
            "an untagged or mistagged frame: {l}"
        );
    }
}

#[test]
fn bad_pfc_settings_are_refused_with_the_fix() {
    let Some(ns) = Netns::new("bad") else { return };
    let args = [
        "pingpong",
        "--raw",
        "-L",
        A,
        "--pfc",
        "--pfc-xoff",
        "600",
        "--rx-ring",
        "512",
    ];
    let out = Netns::ferroce(&ns.a, &args, &[]).output().unwrap();
    let err = text(&out).1;
    assert!(!out.status.success(), "an XOFF above the ring was taken");
    assert!(err.contains("XOFF threshold (600)"), "{err}");
    assert!(err.contains("below the receive ring's 512 frames"), "{err}");
}
