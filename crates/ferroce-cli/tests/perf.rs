//! `ferroce perf` end to end: server and client processes on loopback for
//! every test, bandwidth and latency, small counts; and with --perftest at
//! both ends (perftest's exchange and roles).

mod common;

fn perf(args: &[&str]) -> String {
    let out = common::ferroce(&[&["perf"], args, &["--quiet"]].concat());
    let (stdout, stderr) = common::text(&out);
    assert!(
        out.status.success(),
        "ferroce perf {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

#[test]
fn bandwidth_tests_report_a_table() {
    for (i, test) in ["write", "send", "read", "atomic"].iter().enumerate() {
        let port = (18700 + i).to_string();
        let text = perf(&[
            test,
            "-n",
            "200",
            "-s",
            "5000",
            "-q",
            "2",
            "-p",
            &port,
            "-L",
            "127.0.0.52",
            "--server-local",
            "127.0.0.51",
        ]);
        assert!(text.contains("BW average[MB/sec]"), "{text}");
        let row = text.lines().nth(2).unwrap_or_default();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols.get(1), Some(&"400"), "iterations: {row}");
        let avg: f64 = cols[3].parse().unwrap();
        assert!(avg > 0.0, "{row}");
    }
}

#[test]
fn latency_tests_report_percentiles() {
    for (i, test) in ["write", "send", "read", "atomic"].iter().enumerate() {
        let port = (18710 + i).to_string();
        let text = perf(&[
            test,
            "--lat",
            "-n",
            "100",
            "-s",
            "8",
            "-p",
            &port,
            "-L",
            "127.0.0.54",
            "--server-local",
            "127.0.0.53",
        ]);
        assert!(text.contains("99% percentile[usec]"), "{text}");
    }
}

#[test]
fn perftest_mode_runs_every_test_between_two_ferroce_processes() {
    let mut port = 18720;
    for lat in [false, true] {
        for test in ["write", "read", "send", "atomic"] {
            port += 1;
            let p = port.to_string();
            let mut run = vec![
                "perf",
                test,
                "--perftest",
                "-p",
                &p,
                "-s",
                "8",
                "-n",
                "5",
                "--quiet",
            ];
            if lat {
                run.push("--lat");
            }
            let server = common::spawn(&[&run[..], &["--listen", "-L", "127.0.0.110"]].concat());
            let client =
                common::ferroce(&[&run[..], &["-L", "127.0.0.111", "127.0.0.110"]].concat());
            let server = server.wait_with_output().unwrap();
            for (who, out) in [("client", &client), ("server", &server)] {
                let (stdout, stderr) = common::text(out);
                assert!(
                    out.status.success(),
                    "{test} lat={lat} {who}: {stdout}{stderr}"
                );
            }
            // ib_send_bw's server posts min(512, -n) receives, made even.
            let (stdout, _) = common::text(&server);
            let rx = stdout.lines().find(|l| l.contains("RX depth"));
            if test == "send" && !lat {
                assert_eq!(
                    rx.map(str::split_whitespace).and_then(|mut w| w.nth(3)),
                    Some("6")
                );
            } else {
                assert_eq!(rx, None, "{test} lat={lat}");
            }
        }
    }
}

#[test]
fn cc_set_takes_mlx5_names_and_refuses_others_by_name() {
    // The server process gets the settings too; a setting it refused
    // would end the run.
    let text = perf(&[
        "write",
        "-n",
        "50",
        "-p",
        "18790",
        "-L",
        "127.0.0.54",
        "--server-local",
        "127.0.0.53",
        "--cc-set",
        "rpg_ai_rate=1",
        "--cc-set",
        "min_time_between_cnps=20000",
    ]);
    assert!(text.contains("BW average[MB/sec]"), "{text}");
    for (bad, says) in [
        ("rpg_ai=1", "rpg_ai_rate"),
        ("cnp_dscp=64", "at most 63"),
        ("rpg_gd", "NAME=VALUE"),
    ] {
        let out = common::ferroce(&["perf", "write", "--cc-set", bad]);
        let (_, stderr) = common::text(&out);
        assert!(!out.status.success(), "--cc-set {bad} was taken");
        assert!(stderr.contains(says), "--cc-set {bad}: {stderr}");
    }
}
