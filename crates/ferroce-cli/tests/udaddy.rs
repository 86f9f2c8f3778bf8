//! `ferroce udaddy` server and client as two processes on loopback
//! (127.0.3.x), as udaddy runs: UD peers resolved through SIDR, the
//! server replying to the sender its first receive names, 32 peers at
//! once, a service nobody listens on, and udaddy's `-p`.

mod cmtools;
mod common;

use std::net::Ipv4Addr;

use cmtools::{Side, run_pair, wait_for_device};
use common::{ferroce, spawn};

const SERVER_LINES: [&str; 6] = [
    "udaddy: starting server",
    "receiving data transfers",
    "sending replies",
    "data transfers complete",
    "test complete",
    "return status 0",
];

const CLIENT_LINES: [&str; 7] = [
    "udaddy: starting client",
    "udaddy: connecting",
    "initiating data transfers",
    "receiving data transfers",
    "data transfers complete",
    "test complete",
    "return status 0",
];

#[test]
fn one_peer_prints_udaddy_lines_and_exits_0() {
    let (server, client) = run_pair(
        "udaddy",
        Ipv4Addr::new(127, 0, 3, 11),
        &["-b", "127.0.3.11"],
        &["-s", "127.0.3.11", "-b", "127.0.3.12"],
    );
    server.expect("server", 0, &SERVER_LINES);
    client.expect("client", 0, &CLIENT_LINES);
}

#[test]
fn thirty_two_peers_of_full_size_messages() {
    // 1024 bytes: the largest UD message a ferroce QP sends today (the
    // engine gives UD QPs a 1024-byte MTU, whatever the port's).
    let opts = ["-c", "32", "-C", "50", "-S", "1024", "-p", "0x111"];
    let (server, client) = run_pair(
        "udaddy",
        Ipv4Addr::new(127, 0, 3, 13),
        &[&opts[..], &["-b", "127.0.3.13"]].concat(),
        &[&opts[..], &["-s", "127.0.3.13", "-b", "127.0.3.14"]].concat(),
    );
    server.expect("server", 0, &SERVER_LINES);
    client.expect("client", 0, &CLIENT_LINES);
}

#[test]
fn a_service_nobody_listens_on_is_unreachable() {
    // A cmatose server gives 127.0.3.15 a device listening on TCP 7471
    // only: the SIDR request for UDP 7174 is answered "no listener".
    let mut server = spawn(&["cmatose", "-b", "127.0.3.15"]);
    wait_for_device(Ipv4Addr::new(127, 0, 3, 15), &mut server);
    let out = ferroce(&["udaddy", "-s", "127.0.3.15", "-b", "127.0.3.16"]);
    server.kill().expect("stop the server");
    let _ = server.wait();
    let client = Side::of(&out);
    // udaddy's lines; the status is the event's, the SIDR_REP's status as
    // the kernel reports it (1: no listener), and the exit status its low
    // byte.
    let [event, complete, status] = &client.lines[2..] else {
        panic!("{:?}\n{}", client.lines, client.stderr)
    };
    let error = event
        .strip_prefix("udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: ")
        .unwrap_or_else(|| panic!("{event}"));
    assert_eq!(complete, "test complete");
    assert_eq!(status, &format!("return status {error}"));
    let error: i32 = error.parse().unwrap();
    assert_eq!(error, 1, "SIDR status 1, no listener for the service");
    assert_eq!(client.code, Some(error & 0xff), "the status's low byte");
    assert!(client.stderr.contains("no listener"), "{}", client.stderr);
}

#[test]
fn udaddy_port_space_numbers_other_than_udp_are_refused() {
    for (args, says) in [
        (&["udaddy", "-p", "0x2", "-s", "127.0.3.1"][..], "0x111"),
        (&["udaddy", "-P", "ipoib", "-s", "127.0.3.1"][..], "-P udp"),
        (&["udaddy", "-S", "5000", "-s", "127.0.3.1"][..], "4096"),
    ] {
        let side = Side::of(&ferroce(args));
        assert_eq!(side.code, Some(2), "{args:?}: {}", side.stderr);
        assert!(side.stderr.contains(says), "{args:?}: {}", side.stderr);
    }
}
