//! `ferroce perf` end to end: server and client processes on loopback for
//! every test, bandwidth and latency, small counts.

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
