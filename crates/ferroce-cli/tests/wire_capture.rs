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
    let tshark = common::tshark("udp port 4791 and net 127.0.0.64/29", &pcap);
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
    let (roce, summary) = stop_and_check(tshark, &pcap);
    assert!(roce > 200, "too few RoCE packets captured: {summary}");

    common::peercheck(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reliable datagram as the engine sends it (RDETH and DETH on requests,
/// RDETH on ACKs and READ responses), through the driver over loopback
/// between two devices of this process: every packet passes peercheck
/// (Scapy's decode and the ICRC) and `ferroce dump --check`. tshark 4.0
/// cannot judge RD (it dissects RD opcodes as Mellanox DC; see tshark.rs).
#[test]
fn rd_traffic_passes_independent_checks() {
    use ferroce::{
        Access, ConnectOptions, Context, DeviceConfig, Mtu, QpInitAttr, QpType, RdDest, RecvWr,
        SendWr, WcStatus,
    };
    let dir = std::env::temp_dir().join(format!("ferroce-rd-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("lo.pcap");
    let tshark = common::tshark("udp port 4791 and net 127.0.0.144/30", &pcap);
    let host = |addr: &str| {
        // GSO off: loopback never cuts a train (see the module docs).
        let mut cfg = DeviceConfig::new(addr.parse().unwrap());
        cfg.gso = false;
        let ctx = Context::open_with(cfg).unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(256).unwrap();
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let mr = pd.reg_mr(1 << 16, access).unwrap();
        let rdd = ctx.alloc_rdd();
        let eec = rdd.create_eec(None).unwrap();
        let qp = pd
            .create_rd_qp(&QpInitAttr::new(QpType::Rd, &cq, &cq), &rdd)
            .unwrap();
        qp.ready(0x4242, access).unwrap();
        (ctx, cq, mr, eec, qp)
    };
    let (_ca, acq, amr, aeec, aqp) = host("127.0.0.145");
    let (_cb, bcq, bmr, beec, bqp) = host("127.0.0.146");
    // MTU 1024, so that the 2,500-byte SENDs and 3,000-byte WRITE and READ
    // take FIRST, MIDDLE and LAST packets (loopback's active MTU, the
    // default, would carry each in one).
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu1024),
        ..ConnectOptions::default()
    };
    aeec.connect(&beec.endpoint(), &opts).unwrap();
    beec.connect(&aeec.endpoint(), &opts).unwrap();
    let to = RdDest {
        eec: aeec.eecn(),
        qpn: bqp.qpn(),
        qkey: 0x4242,
    };
    for n in 0..10u64 {
        bqp.post_recv(RecvWr::new(n, &[bmr.sge(n * 4096, 4096)]))
            .unwrap();
        let sg = [amr.sge(0, 2500)];
        aqp.post_send(SendWr::send(n, &sg).via(to)).unwrap();
    }
    let remote = bmr.remote();
    let sg = [amr.sge(0, 3000)];
    aqp.post_send(SendWr::write(20, &sg, remote.at(45_000, 3000).unwrap()).via(to))
        .unwrap();
    aqp.post_send(SendWr::read(21, &sg, remote.at(45_000, 3000).unwrap()).via(to))
        .unwrap();
    let wait = |cq: &ferroce::CompletionQueue, n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut got = Vec::new();
        while got.len() < n && std::time::Instant::now() < deadline {
            got.extend(cq.poll(n - got.len()).unwrap());
        }
        got
    };
    let sent = wait(&acq, 12);
    assert!(
        sent.len() == 12 && sent.iter().all(|c| c.status == WcStatus::Success),
        "{sent:?}"
    );
    assert_eq!(wait(&bcq, 10).len(), 10);
    let (roce, summary) = stop_and_check(tshark, &pcap);
    // 10 SENDs of 3 packets, a WRITE of 3, a READ and its 3 responses,
    // and the ACKs.
    assert!(roce >= 40, "too few RoCE packets captured: {summary}");
    let dump = Command::new(env!("CARGO_BIN_EXE_ferroce"))
        .arg("dump")
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    for op in [
        "RD_SEND_FIRST",
        "RD_ACKNOWLEDGE",
        "RD_RDMA_WRITE_FIRST",
        "RD_RDMA_READ_RESPONSE_FIRST",
    ] {
        assert!(text.contains(op), "no {op} in the capture:\n{text}");
    }
    common::peercheck(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lets the last packets reach the capture, stops tshark (SIGINT, so it
/// finishes writing), then runs `ferroce dump --check` on `pcap`, which
/// must pass; returns the RoCE packets it counted and its summary line.
fn stop_and_check(mut tshark: common::Spawned, pcap: &std::path::Path) -> (usize, String) {
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-INT", &tshark.id().to_string()])
        .status();
    let _ = tshark.wait();
    let out = Command::new(env!("CARGO_BIN_EXE_ferroce"))
        .args(["dump", "--check", "--quiet"])
        .arg(pcap)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ferroce dump --check: {summary}");
    let roce = summary
        .split(", ")
        .find_map(|p| p.strip_suffix(" RoCE"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    (roce, summary)
}
