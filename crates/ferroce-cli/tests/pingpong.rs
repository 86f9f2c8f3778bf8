//! `ferroce pingpong` server and client as two processes on loopback, for
//! RC, UC and UD, with data checking, as ibv_*_pingpong runs.

mod common;

use common::{ferroce, spawn, text};

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
    let port = tcp_port.to_string();
    let mut common = vec!["pingpong", "-t", transport, "-p", &port, "-n", "200", "-c"];
    common.extend_from_slice(extra);
    let server = spawn(&[&common[..], &["-L", server_ip], server_extra].concat());
    // The client retries the connection while the server starts, as the
    // README's two-process block relies on.
    let client = ferroce(&[&common[..], client_extra, &["-L", client_ip, server_ip]].concat());
    let server = server.wait_with_output().expect("server");
    for (who, out) in [("client", &client), ("server", &server)] {
        let (stdout, stderr) = text(out);
        assert!(
            out.status.success(),
            "{transport} {who} failed: {stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("200 iters in"),
            "{transport} {who}: {stdout}"
        );
        assert!(
            stdout.contains("remote address: LID 0x0000, QPN 0x"),
            "{stdout}"
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
