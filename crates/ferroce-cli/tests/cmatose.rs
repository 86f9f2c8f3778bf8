//! `ferroce cmatose` server and client as two processes on loopback
//! (127.0.3.x), as ucmatose runs: the protocol's lines in ucmatose's order,
//! 32 connections at once, a wildcard server, a port nobody listens on, and
//! the options ferroce refuses.

mod cmtools;
mod common;

use std::net::Ipv4Addr;

use cmtools::{Side, run_pair, wait_for_device};
use common::{ferroce, spawn};

const SERVER_LINES: [&str; 9] = [
    "cmatose: starting server",
    "initiating data transfers",
    "completing sends",
    "receiving data transfers",
    "data transfers complete",
    "cmatose: disconnecting",
    "disconnected",
    "test complete",
    "return status 0",
];

const CLIENT_LINES: [&str; 7] = [
    "cmatose: starting client",
    "cmatose: connecting",
    "receiving data transfers",
    "sending replies",
    "data transfers complete",
    "test complete",
    "return status 0",
];

#[test]
fn one_connection_prints_ucmatose_lines_and_exits_0() {
    let (server, client) = run_pair(
        "cmatose",
        Ipv4Addr::new(127, 0, 3, 1),
        &["-b", "127.0.3.1"],
        &["-s", "127.0.3.1", "-b", "127.0.3.2"],
    );
    server.expect("server", 0, &SERVER_LINES);
    client.expect("client", 0, &CLIENT_LINES);
}

#[test]
fn thirty_two_connections_with_multi_packet_messages() {
    // 3000 bytes at the loopback MTU (4096): one packet; 5000: two.
    let opts = ["-c", "32", "-C", "20", "-S", "5000", "-p", "7500"];
    let (server, client) = run_pair(
        "cmatose",
        Ipv4Addr::new(127, 0, 3, 3),
        &[&opts[..], &["-b", "127.0.3.3"]].concat(),
        &[&opts[..], &["-s", "127.0.3.3", "-b", "127.0.3.4"]].concat(),
    );
    server.expect("server", 0, &SERVER_LINES);
    client.expect("client", 0, &CLIENT_LINES);
}

#[test]
fn no_messages_still_connects_and_disconnects() {
    let (server, client) = run_pair(
        "cmatose",
        Ipv4Addr::new(127, 0, 3, 9),
        &["-b", "127.0.3.9", "-c", "2", "-C", "0"],
        &["-s", "127.0.3.9", "-b", "127.0.3.10", "-c", "2", "-C", "0"],
    );
    let server_lines = [
        "cmatose: starting server",
        "cmatose: disconnecting",
        "disconnected",
        "test complete",
        "return status 0",
    ];
    server.expect("server", 0, &server_lines);
    let client_lines = [
        "cmatose: starting client",
        "cmatose: connecting",
        "test complete",
        "return status 0",
    ];
    client.expect("client", 0, &client_lines);
}

#[test]
fn a_wildcard_server_serves_the_interfaces_addresses() {
    // Without -b the server opens a device on every interface address;
    // 127.0.0.1 (lo) is one of them.
    let (server, client) = run_pair(
        "cmatose",
        Ipv4Addr::LOCALHOST,
        &["-p", "7600"],
        &["-s", "127.0.0.1", "-b", "127.0.3.8", "-p", "7600"],
    );
    server.expect("server", 0, &SERVER_LINES);
    client.expect("client", 0, &CLIENT_LINES);
}

#[test]
fn a_port_nobody_listens_on_is_rejected_with_status_8() {
    let mut server = spawn(&["cmatose", "-b", "127.0.3.5"]);
    wait_for_device(Ipv4Addr::new(127, 0, 3, 5), &mut server);
    let out = ferroce(&[
        "cmatose",
        "-s",
        "127.0.3.5",
        "-b",
        "127.0.3.6",
        "-p",
        "7999",
    ]);
    server.kill().expect("stop the server");
    let _ = server.wait();
    let client = Side::of(&out);
    // ucmatose's lines, and its exit status: the REJ reason.
    client.expect(
        "client",
        8,
        &[
            "cmatose: starting client",
            "cmatose: connecting",
            "cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8",
            "test complete",
            "return status 8",
        ],
    );
    assert!(
        client
            .stderr
            .contains("rejected by 127.0.3.5: no listener on port 7999 (REJ reason 8)"),
        "{}",
        client.stderr
    );
}

#[test]
fn options_ferroce_cannot_honour_are_refused_with_the_way_out() {
    for (args, says) in [
        (&["cmatose", "-m", "-s", "127.0.3.1"][..], "rdma_migrate_id"),
        (&["cmatose", "-P", "ib", "-s", "127.0.3.1"][..], "-P tcp"),
        (&["cmatose", "-f", "gid", "-s", "127.0.3.1"][..], "-f ip"),
        (
            &["cmatose", "-t", "300", "-s", "127.0.3.1"][..],
            "0 ..= 255",
        ),
    ] {
        let out = ferroce(args);
        let side = Side::of(&out);
        assert_eq!(side.code, Some(2), "{args:?}: {}", side.stderr);
        assert!(side.stderr.contains(says), "{args:?}: {}", side.stderr);
    }
}
