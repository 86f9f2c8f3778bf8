//! `ferroce perf --perftest -R` (perftest's rdma_cm mode) between two
//! ferroce processes on loopback (127.0.4.x): the bandwidth tests with two
//! QPs, the server printing the client's report (or, for SEND, its own
//! receive count), and `-R` refused where perftest has no such mode here.

mod common;

use std::process::Output;

use common::{ferroce, spawn, text};

fn ok(who: &str, out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{who}: {stdout}{stderr}");
    stdout
}

/// The report row: (iterations, average MB/s).
fn row(stdout: &str) -> (u64, f64) {
    let line = stdout
        .lines()
        .skip_while(|l| !l.contains("BW average[MB/sec]"))
        .nth(1)
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    (cols[1].parse().unwrap(), cols[3].parse().unwrap())
}

#[test]
fn every_bandwidth_test_runs_over_rdma_cm() {
    for (i, test) in ["write", "send", "read", "atomic"].iter().enumerate() {
        let port = (18901 + i).to_string();
        let run = [
            "perf", test, "--perftest", "-R", "-p", &port, "-n", "200", "-s", "5000", "-q", "2",
            "--quiet",
        ];
        let server = spawn(&[&run[..], &["--listen", "-L", "127.0.4.1"]].concat());
        let client = ferroce(&[&run[..], &["-L", "127.0.4.2", "127.0.4.1"]].concat());
        let server = server.wait_with_output().unwrap();
        let (c, s) = (ok("client", &client), ok("server", &server));
        let (iters, avg) = row(&c);
        assert_eq!(iters, 400, "{test}: iterations over both QPs: {c}");
        assert!(avg > 0.0, "{test}: {c}");
        if *test == "send" {
            // The server measures its own receives.
            assert_eq!(row(&s).0, 400, "{test}: {s}");
            assert!(s.contains("RX depth        : 200"), "{s}");
        } else {
            // The server prints the report the client sent it.
            assert_eq!(row(&s), (iters, avg), "{test}: {s}");
        }
    }
}

#[test]
fn rdma_cm_mode_needs_perftest_mode_and_bandwidth() {
    for args in [
        &["perf", "write", "-R", "127.0.4.9"][..],
        &["perf", "write", "--perftest", "-R", "--lat", "127.0.4.9"][..],
    ] {
        let out = ferroce(args);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--rdma-cm"), "{args:?}: {err}");
    }
}
