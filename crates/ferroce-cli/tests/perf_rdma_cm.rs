//! `ferroce perf --perftest -R` (perftest's rdma_cm mode) between two
//! ferroce processes on loopback (127.0.4.x): the bandwidth tests with two
//! QPs, the server printing the client's report (or, for SEND, its own
//! receive count); the latency tests with their data checks; the messages
//! of the exchange on the wire, captured with tshark (root), in the order
//! and sizes perftest 4.5's source sends them; `-R` without `--perftest`
//! refused.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{ferroce, spawn, text, tshark};

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
            "perf",
            test,
            "--perftest",
            "-R",
            "-p",
            &port,
            "-n",
            "200",
            "-s",
            "5000",
            "-q",
            "2",
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
fn every_latency_test_runs_over_rdma_cm() {
    for (i, test) in ["write", "send", "read", "atomic"].iter().enumerate() {
        let port = (18905 + i).to_string();
        let run = [
            "perf",
            test,
            "--lat",
            "--perftest",
            "-R",
            "-p",
            &port,
            "-n",
            "50",
            "-s",
            "8",
            "--quiet",
        ];
        let server = spawn(&[&run[..], &["--listen", "-L", "127.0.4.3"]].concat());
        let client = ferroce(&[&run[..], &["-L", "127.0.4.4", "127.0.4.3"]].concat());
        let server = server.wait_with_output().unwrap();
        let c = ok("client", &client);
        ok("server", &server);
        assert!(c.contains("99% percentile[usec]"), "{test}: {c}");
        // The data checks of the TCP mode hold here too.
        let (_, err) = text(&client);
        assert!(err.contains("data check: "), "{test}: {err}");
    }
}

#[test]
fn rdma_cm_mode_needs_perftest_mode() {
    let out = ferroce(&["perf", "write", "-R", "127.0.4.9"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--perftest"), "{err}");
}

#[test]
fn the_exchange_on_the_wire_is_perftests() {
    let dir = common::TempDir::new("rdma-cm-wire");
    let pcap = dir.0.join("lo.pcap");
    let mut cap = tshark("udp port 4791 and net 127.0.4.16/29", &pcap);
    let run = [
        "perf",
        "write",
        "--perftest",
        "-R",
        "-p",
        "18911",
        "-n",
        "5",
        "-s",
        "100",
        "--quiet",
    ];
    // GSO off: loopback would show a train of packets as one datagram.
    let server = common::ferroce_cmd()
        .env("FERROCE_GSO", "0")
        .args(run)
        .args(["--listen", "-L", "127.0.4.17"])
        .stdout(Stdio::null())
        .spawn()
        .map(common::Spawned::from)
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = common::ferroce_cmd()
        .env("FERROCE_GSO", "0")
        .args(run)
        .args(["-L", "127.0.4.18", "127.0.4.17"])
        .output()
        .unwrap();
    ok("client", &client);
    assert!(server.wait_with_output().unwrap().status.success());
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &cap.id().to_string()])
        .status();
    let _ = cap.wait();
    let dump = ok("dump", &ferroce(&["dump", pcap.to_str().unwrap()]));
    // Two connections to the service of TCP port 18911 (0x49df): the
    // exchange's, then the test's, each REQ, REP, RTU; DREQ and DREP each.
    // A REQ that came before the server's device opened is repeated (the
    // same MAD); one before it listened is rejected and made again.
    let mut mads: Vec<&str> = dump
        .lines()
        .filter_map(|l| l.split(" | CM ").nth(1))
        .collect();
    mads.dedup();
    let mut cm: Vec<&str> = mads
        .iter()
        .map(|m| m.split_whitespace().next().unwrap())
        .collect();
    while cm.len() >= 2 && cm[..2] == ["REQ", "REJ"] {
        cm.drain(..2);
    }
    assert_eq!(
        cm,
        [
            "REQ", "REP", "RTU", "REQ", "REP", "RTU", "DREQ", "DREP", "DREQ", "DREP"
        ],
        "{dump}"
    );
    let reqs = mads.iter().filter(|m| m.starts_with("REQ ")).count();
    let service = mads
        .iter()
        .filter(|m| m.contains("ServiceID=0x00000000010649df"));
    assert_eq!(service.count(), reqs, "{dump}");
    // The client's messages, each an RC SEND_ONLY (the server's mirror
    // them): version, cycle buffer, cache line, MTU; two zero records
    // around the test's connection; the key records twice and the sync
    // after RTR; after the traffic one record, the report (size,
    // iterations, peak, average, rate); the closing record.
    let sizes: Vec<u32> = dump
        .lines()
        .filter(|l| l.contains("RC_SEND_ONLY"))
        .filter(|l| l.split('→').next().unwrap().contains("127.0.4.18:"))
        .map(|l| {
            let len = l.split("len=").nth(1).unwrap().split_whitespace().next();
            len.unwrap().parse().unwrap()
        })
        .collect();
    let want = [16, 4, 4, 2, 56, 56, 56, 56, 56, 56, 8, 8, 8, 8, 8, 56];
    assert_eq!(sizes, want, "{dump}");
    assert!(!dump.contains("ICRC BAD"), "{dump}");
}

#[test]
fn a_server_names_a_message_of_the_wrong_size() {
    use ferroce::cm::{CmEventKind, ConnParam, EventChannel, PortSpace};
    use ferroce::{Access, QpInitAttr, QpType, SendWr};

    let run = [
        "perf",
        "write",
        "--perftest",
        "-R",
        "-p",
        "18913",
        "--quiet",
    ];
    let server = spawn(&[&run[..], &["--listen", "-L", "127.0.4.5"]].concat());
    // A client of something else: 10 bytes where perftest sends its
    // 16-byte version. It retries while the server starts (REJ 8).
    let dst = "127.0.4.5:18913".parse().unwrap();
    let start = Instant::now();
    let (ch, id, qp, _cq, mr) = loop {
        let ch = EventChannel::new().unwrap();
        let id = ch.create_id(PortSpace::Tcp).unwrap();
        let src = "127.0.4.6:0".parse().unwrap();
        id.resolve_addr(Some(src), dst, Duration::from_secs(5))
            .unwrap();
        ch.get_event_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        id.resolve_route(Duration::from_secs(5)).unwrap();
        ch.get_event_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        let ctx = id.verbs().unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(4).unwrap();
        let mr = pd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
        let qp = id
            .create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq))
            .unwrap();
        id.connect(&ConnParam::default()).unwrap();
        let e = ch
            .get_event_timeout(Duration::from_secs(10))
            .unwrap()
            .unwrap();
        match e.kind {
            CmEventKind::Established { .. } => break (ch, id, qp, cq, mr),
            _ if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => panic!("the server never accepted: {e}"),
        }
    };
    // The server exits at once, perhaps before it acknowledges it.
    qp.post_send(SendWr::send(1, &[mr.sge(0, 10)])).unwrap();
    let out = server.wait_with_output().unwrap();
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("expected a message of 16 bytes, got 10"),
        "{err}"
    );
    drop((id, ch));
}
