//! `ferroce pingpong` server and client as two processes on loopback, for
//! RC, UC and UD, with data checking, as ibv_*_pingpong runs.

use std::process::{Command, Stdio};
use std::time::Duration;

fn run_pair(transport: &str, server_ip: &str, client_ip: &str, tcp_port: u16, extra: &[&str]) {
    let bin = env!("CARGO_BIN_EXE_ferroce");
    let port = tcp_port.to_string();
    let mut common = vec!["pingpong", "-t", transport, "-p", &port, "-n", "200", "-c"];
    common.extend_from_slice(extra);
    let server = Command::new(bin)
        .args(&common)
        .args(["-L", server_ip])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    // The server listens before the client connects; retry the client a few times.
    let mut client_out = None;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let out = Command::new(bin)
            .args(&common)
            .args(["-L", client_ip, server_ip])
            .output()
            .expect("run client");
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && err.contains("Connection refused") {
            continue;
        }
        client_out = Some(out);
        break;
    }
    let client = client_out.expect("client never connected");
    let server = server.wait_with_output().expect("server");
    for (who, out) in [("client", &client), ("server", &server)] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{transport} {who} failed: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("200 iters in"), "{transport} {who}: {text}");
        assert!(
            text.contains("remote address:  LID 0x0000, QPN 0x"),
            "{text}"
        );
    }
}

#[test]
fn rc_pingpong_multi_packet_with_pad() {
    // 4097 bytes at MTU 1024: five packets, the last with pad bytes.
    run_pair("rc", "127.0.0.41", "127.0.0.42", 18641, &["-s", "4097"]);
}

#[test]
fn uc_pingpong() {
    run_pair("uc", "127.0.0.43", "127.0.0.44", 18643, &[]);
}

#[test]
fn ud_pingpong() {
    run_pair("ud", "127.0.0.45", "127.0.0.46", 18645, &["-s", "1000"]);
}
