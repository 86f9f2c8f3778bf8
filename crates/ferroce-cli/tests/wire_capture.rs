//! What ferroce puts on the wire, judged by tools nobody here wrote: the
//! traffic of `ferroce perf` (WRITE, READ, SEND, atomics) and `pingpong`
//! (RC, UD) over loopback is captured with tshark, and every packet must
//! pass `peercheck --summary` (Scapy + bitwise CRC: headers decode, ICRC
//! right) and `ferroce dump --check`. This is what proves the backend
//! predicts the IP header the kernel writes (the ICRC covers it).
//!
//! GSO is turned off (`FERROCE_GSO=0`): loopback never cuts a GSO train,
//! so a capture on `lo` would show each train as one datagram. The ICRCs
//! of GSO segments are checked by ferroce-io's loopback test (the kernel
//! cuts the trains there) and by the rxe interop capture.
//!
//! Needs root (packet capture) and tshark, as CI has; fails otherwise.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

/// The `ferroce` binary, with GSO off (see the module docs).
fn ferroce_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ferroce"));
    c.env("FERROCE_GSO", "0");
    c
}

fn ferroce(args: &[&str]) {
    let out = ferroce_cmd().args(args).output().expect("run ferroce");
    assert!(
        out.status.success(),
        "ferroce {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn captured_traffic_passes_independent_checks() {
    let dir = std::env::temp_dir().join(format!("ferroce-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("lo.pcap");
    // Started as every capture test starts one (waits until it captures).
    let mut tshark = common::tshark("udp port 4791 and net 127.0.0.64/29", &pcap);
    let common = [
        "-L",
        "127.0.0.66",
        "--server-local",
        "127.0.0.65",
        "--quiet",
    ];
    for (i, test) in ["write", "read", "send", "atomic"].iter().enumerate() {
        let port = (18760 + i).to_string();
        let mut args = vec![
            "perf", test, "-n", "40", "-s", "5001", "-m", "1024", "-p", &port,
        ];
        args.extend_from_slice(&common);
        ferroce(&args);
    }
    for (i, t) in ["rc", "ud"].iter().enumerate() {
        let port = (18770 + i).to_string();
        let run = ["pingpong", "-t", t, "-n", "20", "-s", "1001", "-p", &port];
        let server = ferroce_cmd()
            .args(run)
            .args(["-L", "127.0.0.65"])
            .stdout(Stdio::null())
            .spawn()
            .map(common::Spawned::from)
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        ferroce(&[&run[..], &["-L", "127.0.0.66", "127.0.0.65"]].concat());
        assert!(server.wait_with_output().unwrap().status.success());
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY-free stop: ask tshark to finish writing (SIGINT), then wait.
    let _ = Command::new("kill")
        .args(["-INT", &tshark.id().to_string()])
        .status();
    let _ = tshark.wait();

    let out = Command::new(env!("CARGO_BIN_EXE_ferroce"))
        .args(["dump", "--check", "--quiet"])
        .arg(&pcap)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ferroce dump --check: {summary}");
    let roce: usize = summary
        .split(", ")
        .find_map(|p| p.strip_suffix(" RoCE"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(roce > 200, "too few RoCE packets captured: {summary}");

    common::peercheck(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
}
