//! `ferroce dump` against the independent checker in `shared/peercheck`
//! (Scapy + a bitwise CRC, written by no one on this team), on every capture
//! in `shared/vectors` (crafted valid and invalid packets, real kernel
//! Soft-RoCE traffic) and on the capture this repository ships.
//!
//! Needs `FERROCE_SHARED` (default `../shared` beside the repository) and
//! peercheck's venv: `scripts/setup-test-deps.sh` installs it. Missing
//! pieces fail the test, with that hint; nothing is skipped.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{TempDir, ferroce, repo, shared};

fn captures() -> Vec<PathBuf> {
    let s = shared().join("vectors");
    let mut v = vec![s.join("crafted/valid.pcap"), s.join("crafted/invalid.pcap")];
    let mut rxe: Vec<PathBuf> = std::fs::read_dir(s.join("rxe"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    rxe.sort();
    assert!(
        rxe.len() >= 7,
        "expected the rxe captures in {}",
        s.display()
    );
    v.extend(rxe);
    v.push(repo().join("captures/sample.pcap"));
    v
}

#[test]
fn dump_json_matches_peercheck_on_every_capture() {
    let py = shared().join("peercheck/.venv/bin/python");
    assert!(
        py.exists(),
        "peercheck's venv is missing: run scripts/setup-test-deps.sh"
    );
    let tmp = TempDir::new("peercheck");
    for pcap in captures() {
        let out = ferroce(&["dump", "--json", pcap.to_str().unwrap()]);
        assert!(out.status.success(), "dump failed on {}", pcap.display());
        let jsonl = tmp.0.join("ours.jsonl");
        std::fs::write(&jsonl, &out.stdout).unwrap();
        let check = Command::new(&py)
            .arg(shared().join("peercheck/peercheck.py"))
            .arg("--compare")
            .arg(&pcap)
            .arg(&jsonl)
            .output()
            .expect("run peercheck");
        assert!(
            check.status.success(),
            "peercheck --compare {} failed:\n{}\n{}",
            pcap.display(),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

#[test]
fn check_passes_valid_and_flags_every_invalid_packet() {
    for pcap in captures() {
        let name = pcap.file_name().unwrap().to_string_lossy().into_owned();
        let out = ferroce(&["dump", "--check", "--quiet", pcap.to_str().unwrap()]);
        let summary = String::from_utf8_lossy(&out.stderr).into_owned();
        if name == "invalid.pcap" {
            assert_eq!(out.status.code(), Some(1), "{summary}");
            // 35 crafted invalid packets: each is malformed or has a bad ICRC.
            assert!(
                summary.contains("35 RoCE, 26 malformed, 9 bad ICRC"),
                "{summary}"
            );
        } else {
            assert!(out.status.success(), "{name}: {summary}");
            assert!(summary.contains(" 0 malformed, 0 bad ICRC"), "{summary}");
        }
    }
}

#[test]
fn every_invalid_frame_is_reported_with_a_reason() {
    let pcap = shared().join("vectors/crafted/invalid.pcap");
    let out = ferroce(&["dump", pcap.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 35);
    for l in lines {
        assert!(l.contains("MALFORMED: ") || l.contains("ICRC BAD"), "{l}");
    }
}

#[test]
fn shipped_capture_is_what_ferroce_sample_writes() {
    let tmp = TempDir::new("sample");
    let fresh = tmp.0.join("sample.pcap");
    let out = ferroce(&["sample", fresh.to_str().unwrap()]);
    assert!(out.status.success());
    let shipped = std::fs::read(repo().join("captures/sample.pcap")).unwrap();
    assert!(
        std::fs::read(&fresh).unwrap() == shipped,
        "captures/sample.pcap is stale: regenerate it with `ferroce sample captures/sample.pcap`"
    );
}
