//! `ferroce rdma-server` and `ferroce rdma-client` (librdmacm's examples)
//! against each other, in two processes on loopback (127.0.3.x): the
//! output and exit status of a good run, a listener on every address, and
//! a client refused for want of a listener.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{ferroce, spawn, text};

/// Starts a server and waits for its `start` line.
fn server(args: &[&str]) -> Child {
    let mut full = vec!["rdma-server"];
    full.extend_from_slice(args);
    let mut child = spawn(&full);
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "rdma_server: start\n");
    child
}

/// Runs the client until the server has started listening (a client
/// before it is refused with REJ reason 8), for up to 10 s.
fn client(args: &[&str]) -> Output {
    let mut full = vec!["rdma-client"];
    full.extend_from_slice(args);
    let start = Instant::now();
    loop {
        let out = ferroce(&full);
        let (_, err) = text(&out);
        if out.status.success()
            || !err.contains("REJ reason 8")
            || start.elapsed() > Duration::from_secs(10)
        {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

#[test]
fn client_and_server_exchange_their_messages() {
    let s = server(&["-s", "127.0.3.1", "-p", "7481"]);
    let c = client(&["-s", "127.0.3.1", "-p", "7481", "-L", "127.0.3.2"]);
    let (out, err) = text(&c);
    assert!(c.status.success(), "client: {out}{err}");
    assert_eq!(out, "rdma_client: start\nrdma_client: end 0\n");
    let s = finish(s);
    let (out, err) = text(&s);
    assert!(s.status.success(), "server: {out}{err}");
    assert_eq!(out, "rdma_server: end 0\n", "after the start line");
}

#[test]
fn a_server_on_every_address_serves_through_its_device() {
    let s = server(&["-p", "7482", "-L", "127.0.3.3"]);
    let c = client(&["-s", "127.0.3.3", "-p", "7482", "-L", "127.0.3.4"]);
    let (out, err) = text(&c);
    assert!(c.status.success(), "client: {out}{err}");
    let s = finish(s);
    assert!(s.status.success(), "server: {:?}", text(&s));
}

#[test]
fn a_client_without_a_listener_fails_and_says_why() {
    // The server's device answers REJ 8 for another port; then the right
    // client ends the server.
    let s = server(&["-s", "127.0.3.5", "-p", "7483"]);
    let start = Instant::now();
    let refused = loop {
        let out = ferroce(&[
            "rdma-client",
            "-s",
            "127.0.3.5",
            "-p",
            "7484",
            "-L",
            "127.0.3.6",
        ]);
        let (_, err) = text(&out);
        if err.contains("REJ reason 8") || start.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (out, err) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{out}{err}");
    assert_eq!(out, "rdma_client: start\nrdma_client: end -1\n");
    assert!(err.contains("no listener on port 7484"), "{err}");
    assert!(err.contains("start rdma_server first"), "{err}");
    let c = client(&["-s", "127.0.3.5", "-p", "7483", "-L", "127.0.3.6"]);
    assert!(c.status.success(), "{:?}", text(&c));
    assert!(finish(s).status.success());
}
