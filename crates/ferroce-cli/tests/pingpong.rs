//! `ferroce pingpong` server and client as two processes on loopback, for
//! RC, UC and UD, with data checking, as ibv_*_pingpong runs.

use std::process::{Command, Stdio};
use std::time::Duration;

fn run_pair(transport: &str, server_ip: &str, client_ip: &str, tcp_port: u16, extra: &[&str]) {
    run_pair_with(transport, server_ip, client_ip, tcp_port, extra, &[], &[]);
}

fn run_pair_with(
    transport: &str,
    server_ip: &str,
    client_ip: &str,
    tcp_port: u16,
    extra: &[&str],
    server_extra: &[&str],
    client_extra: &[&str],
) {
    let bin = env!("CARGO_BIN_EXE_ferroce");
    let port = tcp_port.to_string();
    let mut common = vec!["pingpong", "-t", transport, "-p", &port, "-n", "200", "-c"];
    common.extend_from_slice(extra);
    let mut server = Command::new(bin)
        .args(&common)
        .args(["-L", server_ip])
        .args(server_extra)
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
            .args(client_extra)
            .args(["-L", client_ip, server_ip])
            .output()
            .expect("run client");
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && err.contains("Connection refused") {
            continue;
        }
        if !out.status.success() {
            // The server would wait for a client forever: stop it.
            let _ = server.kill();
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
            text.contains("remote address: LID 0x0000, QPN 0x"),
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

#[test]
fn rc_and_ud_pingpong_over_ipv6() {
    // Both on ::1, so each device gets its own RoCE port.
    for (t, port) in [("rc", 18651), ("ud", 18652)] {
        let (sp, cp) = if t == "rc" {
            ("47991", "47992")
        } else {
            ("47993", "47994")
        };
        run_pair_with(
            t,
            "::1",
            "::1",
            port,
            &["-s", "1000"],
            &["--roce-port", sp, "--peer-roce-port", cp],
            &["--roce-port", cp, "--peer-roce-port", sp],
        );
    }
}
