//! `ferroce rdma-server` and `ferroce rdma-client` (librdmacm's examples)
//! against each other, in two processes on loopback (127.0.3.x): the
//! output and exit status of a good run, a listener on every address, a
//! client refused for want of a listener; and on the wire (tshark, root)
//! the service ID, one 16-byte SEND each way (the client's first), and a
//! DREP for every DREQ (both sides disconnect at once, as the examples).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Output;
use std::time::{Duration, Instant};

use common::{Spawned, ferroce, text, tshark};

/// `ferroce ARGS` with GSO off: loopback never cuts a GSO train, so a
/// capture would show a train of packets as one datagram (the examples'
/// messages are small; nothing else changes).
fn cmd(args: &[&str]) -> std::process::Command {
    let mut c = common::ferroce_cmd();
    c.env("FERROCE_GSO", "0").args(args);
    c
}

/// Starts a server and waits for its `start` line.
fn server(args: &[&str]) -> Spawned {
    let mut child = cmd(&[&["rdma-server"], args].concat())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(Spawned::from)
        .expect("start ferroce");
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
    let full = [&["rdma-client"], args].concat();
    let start = Instant::now();
    loop {
        let out = cmd(&full).output().expect("run ferroce");
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

fn finish(child: Spawned) -> Output {
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

#[test]
fn on_the_wire_16_bytes_go_each_way_and_every_dreq_is_answered() {
    let dir = common::TempDir::new("rdma-example-wire");
    let pcap = dir.0.join("lo.pcap");
    let mut cap = tshark("udp port 4791 and net 127.0.3.16/29", &pcap);
    let s = server(&["-s", "127.0.3.17", "-p", "7485"]);
    let c = client(&["-s", "127.0.3.17", "-p", "7485", "-L", "127.0.3.18"]);
    assert!(c.status.success(), "{:?}", text(&c));
    assert!(finish(s).status.success());
    std::thread::sleep(Duration::from_millis(300));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &cap.id().to_string()])
        .status();
    let _ = cap.wait();
    let (dump, _) = text(&ferroce(&["dump", pcap.to_str().unwrap()]));
    // The service of TCP port 7471 + 14 (0x1d3d) in the REQ.
    assert!(dump.contains("ServiceID=0x0000000001061d3d"), "{dump}");
    // The client's message, then the server's: RC SEND_ONLY of 16 bytes.
    let sends: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("RC_SEND_ONLY"))
        .map(|l| l.split('→').next().unwrap().trim_end())
        .map(|from| from.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(sends.len(), 2, "{dump}");
    assert!(sends[0].starts_with("127.0.3.18:"), "{dump}");
    assert!(sends[1].starts_with("127.0.3.17:"), "{dump}");
    assert_eq!(dump.matches("RC_SEND_ONLY").count(), 2);
    assert_eq!(
        dump.lines()
            .filter(|l| l.contains("RC_SEND_ONLY") && l.contains(" len=16 "))
            .count(),
        2,
        "{dump}"
    );
    // Both sides disconnect at once: each DREQ sent gets a DREP.
    let count = |m: &str| dump.matches(&format!("| CM {m} ")).count();
    assert!(count("DREQ") >= 1, "{dump}");
    assert_eq!(count("DREQ"), count("DREP"), "{dump}");
    assert!(!dump.contains("ICRC BAD"), "{dump}");
}
