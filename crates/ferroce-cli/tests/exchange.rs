//! The two-process tools against peers that misbehave: a client that sends
//! nothing, garbage or an impossible request is refused and the server
//! serves the next one; a client and server started for different tests
//! both say so and exit non-zero; a client that reaches something other
//! than a ferroce server names it; bad arguments are refused up front with
//! the range, and a taken address is named with the way out.
//!
//! Each test has its own addresses (127.0.0.9x / 10x) and TCP ports.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use common::{connect_when_listening, ferroce, spawn, text};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn pingpong_server_refuses_silent_and_malformed_clients_and_serves_the_next() {
    let server = spawn(&["pingpong", "-L", "127.0.0.91", "-p", "18791", "-n", "20"]);
    // Holds its connection open and says nothing.
    let _silent = connect_when_listening(addr("127.0.0.91:18791"));
    let mut garbage = connect_when_listening(addr("127.0.0.91:18791"));
    garbage.write_all(&[b'x'; 52]).unwrap();
    let client = ferroce(&[
        "pingpong",
        "-L",
        "127.0.0.92",
        "-p",
        "18791",
        "-n",
        "20",
        "127.0.0.91",
    ]);
    let server = server.wait_with_output().unwrap();
    let (out, err) = text(&client);
    assert!(client.status.success(), "client: {out}{err}");
    let (out, err) = text(&server);
    assert!(server.status.success(), "server: {out}{err}");
    assert!(out.contains("20 iters in"), "{out}");
    assert!(err.contains("no record within 5 s"), "{err}");
    assert!(err.contains("not a pingpong client"), "{err}");
}

#[test]
fn perf_server_refuses_impossible_and_malformed_hellos_and_serves_the_next() {
    let common = ["-p", "18793", "-s", "4096", "-n", "50", "--quiet"];
    let server = spawn(
        &[
            &["perf", "write", "--listen", "-L", "127.0.0.93"],
            &common[..],
        ]
        .concat(),
    );
    let hello = |line: &str| {
        let mut s = connect_when_listening(addr("127.0.0.93:18793"));
        s.write_all(line.as_bytes()).unwrap();
        // Refused: the server closes without a word.
        let mut rest = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = s.read_to_end(&mut rest);
        rest
    };
    let huge = r#"{"protocol":"ferroce-perf/1","test":"write","lat":false,"size":1099511627776,"iters":1,"qps":1,"tx_depth":1,"mtu":1024}"#;
    assert_eq!(hello(&format!("{huge}\n")), b"");
    assert_eq!(hello("GET / HTTP/1.0\n"), b"");
    let client = ferroce(
        &[
            &["perf", "write", "-L", "127.0.0.94", "127.0.0.93"],
            &common[..],
        ]
        .concat(),
    );
    let server = server.wait_with_output().unwrap();
    let (out, err) = text(&client);
    assert!(client.status.success(), "client: {out}{err}");
    assert!(out.contains("BW average"), "{out}");
    let (_, err) = text(&server);
    assert!(server.status.success(), "server: {err}");
    assert!(
        err.contains("size 1099511627776 is outside 1 ..= 8388608"),
        "{err}"
    );
    assert!(err.contains("not a line of JSON"), "{err}");
}

#[test]
fn perf_client_and_server_of_different_tests_both_fail_saying_why() {
    let server = spawn(&[
        "perf",
        "write",
        "--listen",
        "-L",
        "127.0.0.95",
        "-p",
        "18795",
        "-s",
        "4096",
    ]);
    let client = ferroce(&[
        "perf",
        "read",
        "-L",
        "127.0.0.96",
        "-p",
        "18795",
        "-s",
        "8192",
        "127.0.0.95",
    ]);
    let server = server.wait_with_output().unwrap();
    for (who, out) in [("client", &client), ("server", &server)] {
        let (_, err) = text(out);
        assert_eq!(out.status.code(), Some(2), "{who}: {err}");
        assert!(err.contains("started for different tests"), "{who}: {err}");
        assert!(
            err.contains("test read (client) vs write (server)"),
            "{who}: {err}"
        );
        assert!(
            err.contains("-s 8192 (client) vs -s 4096 (server)"),
            "{who}: {err}"
        );
    }
}

#[test]
fn perf_client_names_a_peer_that_is_not_a_ferroce_server() {
    // Answers as perftest's servers do: a 16-byte NUL-padded version.
    let listener = TcpListener::bind("127.0.0.97:18797").unwrap();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut version = [0u8; 16];
        version[..4].copy_from_slice(b"6.06");
        s.write_all(&version).unwrap();
        std::thread::sleep(Duration::from_secs(1));
    });
    let out = ferroce(&[
        "perf",
        "write",
        "-L",
        "127.0.0.98",
        "-p",
        "18797",
        "127.0.0.97",
    ]);
    fake.join().unwrap();
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("127.0.0.97"), "{err}");
    assert!(err.contains("expected a ferroce perf server"), "{err}");
    assert!(err.contains("--perftest"), "{err}");
}

#[test]
fn pingpong_client_names_a_peer_that_is_not_a_pingpong_server() {
    let listener = TcpListener::bind("127.0.0.102:18802").unwrap();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut record = [0u8; 52];
        s.read_exact(&mut record).unwrap();
        let mut answer = *b"HTTP/1.0 400 Bad Request\r\n\r\n........................";
        answer[51] = 0;
        s.write_all(&answer).unwrap();
        std::thread::sleep(Duration::from_secs(1));
    });
    let out = ferroce(&[
        "pingpong",
        "-L",
        "127.0.0.103",
        "-p",
        "18802",
        "127.0.0.102",
    ]);
    fake.join().unwrap();
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("127.0.0.102:18802"), "{err}");
    assert!(
        err.contains("not an ibv_*_pingpong or ferroce pingpong server"),
        "{err}"
    );
}

#[test]
fn perftest_server_refuses_silent_and_greedy_clients_and_serves_the_next() {
    let common = [
        "--perftest",
        "-p",
        "18804",
        "-s",
        "4096",
        "-n",
        "50",
        "--quiet",
    ];
    let server = spawn(
        &[
            &["perf", "write", "--listen", "-L", "127.0.0.104"],
            &common[..],
        ]
        .concat(),
    );
    let _silent = connect_when_listening(addr("127.0.0.104:18804"));
    // perftest's opening, announcing a 4 GiB cycle buffer (it would size
    // the server's memory region).
    let mut greedy = connect_when_listening(addr("127.0.0.104:18804"));
    let mut opening = b"6.06".to_vec();
    opening.resize(16, 0);
    opening.extend_from_slice(&u32::MAX.to_be_bytes());
    opening.extend_from_slice(&64u32.to_be_bytes());
    greedy.write_all(&opening).unwrap();
    let client = ferroce(
        &[
            &["perf", "write", "-L", "127.0.0.105", "127.0.0.104"],
            &common[..],
        ]
        .concat(),
    );
    let server = server.wait_with_output().unwrap();
    let (out, err) = text(&client);
    assert!(client.status.success(), "client: {out}{err}");
    assert!(out.contains("BW average"), "{out}");
    let (_, err) = text(&server);
    assert!(server.status.success(), "server: {err}");
    assert!(err.contains("refused the client"), "{err}");
    assert!(
        err.contains("the peer's cycle buffer 4294967295 is outside 1 ..= 8388608"),
        "{err}"
    );
}

#[test]
fn bad_arguments_are_refused_up_front_with_the_range() {
    for (args, says) in [
        (&["perf", "write", "-n", "0"][..], "0 is not in 1.."),
        (&["perf", "write", "-q", "0"], "0 is not in 1..=4096"),
        (&["perf", "write", "-t", "0"], "0 is not in 1..=32767"),
        (&["perf", "write", "-s", "0"], "0 is not in 1..=8388608"),
        (&["perf", "write", "-m", "1500"], "1500 is not an MTU"),
        (&["pingpong", "-n", "0"], "0 is not in 1.."),
        (&["pingpong", "-r", "0"], "0 is not in 1..=32767"),
        (&["pingpong", "-m", "1000"], "1000 is not an MTU"),
        (&["pingpong", "127.0.0.1:18515"], "-p 18515 127.0.0.1"),
        (&["perf", "write", "localhost:9000"], "-p 9000 localhost"),
        (
            &["pingpong", "-L", "192.0.2.1"],
            "192.0.2.1 is not an address of this machine",
        ),
    ] {
        let out = ferroce(args);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_taken_address_is_named_with_the_way_out() {
    let first = spawn(&["pingpong", "-L", "127.0.0.99", "-p", "18799"]);
    // The first holds UDP 4791 once it listens on TCP.
    drop(connect_when_listening(addr("127.0.0.99:18799")));
    let second = ferroce(&["pingpong", "-L", "127.0.0.99", "-p", "18800"]);
    let mut first = first;
    let _ = first.kill();
    let _ = first.wait();
    let (_, err) = text(&second);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("UDP port 4791 on 127.0.0.99 is taken"),
        "{err}"
    );
    assert!(err.contains("-L"), "{err}");
}

#[test]
fn a_read_against_a_perftest_write_server_is_refused_by_its_memory() {
    let server = spawn(&[
        "perf",
        "write",
        "--perftest",
        "--listen",
        "-L",
        "127.0.0.100",
        "-p",
        "18801",
        "-s",
        "4096",
        "-n",
        "20",
    ]);
    let client = ferroce(&[
        "perf",
        "read",
        "--perftest",
        "-L",
        "127.0.0.101",
        "-p",
        "18801",
        "-s",
        "4096",
        "-n",
        "20",
        "127.0.0.100",
    ]);
    let mut server = server;
    let _ = server.kill();
    let _ = server.wait();
    let (out, err) = text(&client);
    assert_eq!(client.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("remote access error"), "{err}");
}
