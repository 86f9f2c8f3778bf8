//! `ferroce dump` reads a capture as a stream: from standard input (`-`),
//! and in memory that does not grow with the capture.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{TempDir, ferroce, ferroce_cmd, text};

/// The summary line's counts: frames, RoCE, malformed, bad ICRC.
fn summary(stderr: &str) -> Vec<u64> {
    let line = stderr.lines().last().unwrap_or_default();
    let counts = line.rsplit(": ").next().unwrap_or_default();
    counts
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect()
}

/// The resident set's high-water mark of process `pid`, in KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_large_capture_on_standard_input_is_read_in_bounded_memory() {
    let dir = TempDir::new("dump-stream");
    let sample = dir.path().join("sample.pcap");
    let out = ferroce(&["sample", sample.to_str().unwrap()]);
    assert!(out.status.success(), "{:?}", text(&out));
    let counts = summary(&text(&ferroce(&["dump", "-q", sample.to_str().unwrap()])).1);
    let (sample_frames, sample_roce) = (counts[0], counts[1]);
    assert!(sample_roce > 0);

    // The sample's packets, then a million 64-byte non-RoCE frames (an
    // Ethernet frame of another ethertype): 80 MiB of records in all.
    const FILLER: u64 = 1_000_000;
    let bytes = std::fs::read(&sample).unwrap();
    let mut record = Vec::new();
    for field in [1u32, 0, 64, 64] {
        record.extend_from_slice(&field.to_le_bytes()); // ts, ts frac, caplen, len
    }
    record.extend_from_slice(&[0xff; 12]);
    record.extend_from_slice(&[0x88, 0xb5]); // local experimental ethertype
    record.resize(16 + 64, 0x5a);

    let mut child = ferroce_cmd()
        .args(["dump", "--quiet", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes).unwrap();
    let chunk: Vec<u8> = record.repeat(4096);
    for _ in 0..FILLER / 4096 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin
        .write_all(&record.repeat((FILLER % 4096) as usize))
        .unwrap();
    // All but the pipe's last 64 KiB has been read: the high-water mark
    // now is the run's.
    let hwm = vm_hwm_kib(child.id());
    eprintln!("dump: VmHWM {hwm} KiB");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.starts_with("standard input: "), "{err}");
    assert_eq!(summary(&err), [sample_frames + FILLER, sample_roce, 0, 0]);
    // Holding the capture would take 80 MiB and more.
    assert!(hwm < 32 * 1024, "dump's resident memory reached {hwm} KiB");
}

/// The sample's last frame is PFC: `dump` prints its enabled priorities
/// with their pause times, in µs at the speed given, and counts it apart
/// from the RoCE packets; `--check` does not judge it.
#[test]
fn pfc_frames_are_printed_with_their_pause_times() {
    let dir = TempDir::new("dump-pfc");
    let sample = dir.path().join("sample.pcap");
    assert!(
        ferroce(&["sample", sample.to_str().unwrap()])
            .status
            .success()
    );
    let out = ferroce(&[
        "dump",
        "--check",
        "--link-mbps",
        "100000",
        sample.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.ends_with(
            "02:00:00:00:00:0c → 01:80:c2:00:00:01 PFC P3=65535 quanta (335.539 µs) \
             P4=0 quanta (0.000 µs)"
        ),
        "{last}"
    );
    assert!(
        stderr.contains(": 1 MAC control (PFC/PAUSE) frames"),
        "{stderr}"
    );
}

/// The sample holds every XRC opcode (0xA0-0xB7 less the reserved 0xB5),
/// and `dump --check` passes each and shows the XRC SRQ number of every
/// request (responses carry no XRCETH).
#[test]
fn xrc_packets_are_dumped_with_their_srq_number() {
    let dir = TempDir::new("dump-xrc");
    let sample = dir.path().join("sample.pcap");
    assert!(
        ferroce(&["sample", sample.to_str().unwrap()])
            .status
            .success()
    );
    let out = ferroce(&["dump", "--check", sample.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let xrc: Vec<&str> = stdout.lines().filter(|l| l.contains(" XRC_")).collect();
    let mut names: Vec<&str> = xrc
        .iter()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("XRC_")))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 23, "{names:?}");
    for l in &xrc {
        let response = l.contains("RESPONSE") || l.contains("ACKNOWLEDGE");
        assert_eq!(l.contains("XRCSRQ="), !response, "{l}");
        assert!(l.ends_with("ICRC ok"), "{l}");
    }
}
