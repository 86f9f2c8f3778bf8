//! `ferroce rping` server and client as two processes on loopback (IPv4 on
//! 127.0.2.x, IPv6 on ::1 with two RoCE ports), as rping runs: the ping
//! data both sides print, checked against rping's pattern computed here;
//! a port with no listener; a persistent server; a client whose buffer is
//! larger than the server's; a peer that sends what rping never does; and a
//! server that disconnects before the pings.

mod common;

use std::net::SocketAddr;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{Spawned, ferroce, spawn, text};
use ferroce::cm::{CmEventKind, ConnParam, EventChannel, PortSpace};
use ferroce::{Access, QpInitAttr, QpType, SendWr};

/// rping's ping data for ping `n` of `size` bytes, as its client builds it
/// (written out here independently of the tool): `rdma-ping-N: `, then
/// the ASCII codes 65..=122 in a cycle that starts at 65 + n (mod 58),
/// up to size - 1 bytes.
fn expected(n: u32, size: usize) -> String {
    let mut s = format!("rdma-ping-{n}: ");
    let mut c = 65 + n % 58;
    while s.len() < size - 1 {
        s.push(char::from_u32(c).unwrap());
        c = if c == 122 { 65 } else { c + 1 };
    }
    s
}

/// Waits for `child` (up to 60 s; killed and failed past that).
fn finish(child: Spawned, who: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut child = child;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("{who} still running after 60 s: {:?}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn lines_with(stdout: &str, prefix: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(str::to_owned)
        .collect()
}

/// A server and a client (`-C 5 -v -V`), both succeed and print rping's
/// five lines.
fn ping_pair(server: &[&str], client: &[&str], size: usize) {
    let s = spawn(&[&["rping", "-s", "-v"], server].concat());
    std::thread::sleep(Duration::from_millis(300));
    let size_arg = size.to_string();
    let c = finish(
        spawn(
            &[
                &["rping", "-c", "-C", "5", "-v", "-V", "-S", &size_arg],
                client,
            ]
            .concat(),
        ),
        "client",
    );
    let s = finish(s, "server");
    let want: Vec<String> = (0..5).map(|n| expected(n, size)).collect();
    for (who, out, prefix) in [
        ("client", &c, "ping data: "),
        ("server", &s, "server ping data: "),
    ] {
        let (stdout, stderr) = text(out);
        assert!(out.status.success(), "{who} failed: {stdout}\n{stderr}");
        assert_eq!(lines_with(&stdout, prefix), want, "{who}: {stdout}");
    }
    assert!(text(&s).1.contains("server DISCONNECT EVENT..."));
}

#[test]
fn five_pings_over_ipv4_with_data_printed_and_checked() {
    ping_pair(
        &["-a", "127.0.2.1", "-p", "7301"],
        &["-a", "127.0.2.1", "-p", "7301", "-I", "127.0.2.2"],
        64,
    );
}

/// `-q` on both sides: each creates its QP itself and moves it with the
/// CM's attributes (`CmId::qp_attr`), the server before accept, the client
/// at CONNECT_RESPONSE before its RTU (`establish`).
#[test]
fn pings_with_qps_the_application_moves_itself() {
    ping_pair(
        &["-q", "-a", "127.0.2.15", "-p", "7309", "-S", "3000"],
        &["-q", "-a", "127.0.2.15", "-p", "7309", "-I", "127.0.2.16"],
        3000,
    );
}

/// `-q` on one side only: the wire is the same, so either side may move
/// its own QP while the other's is the CM's.
#[test]
fn a_q_client_and_a_plain_server_and_the_reverse() {
    ping_pair(
        &["-a", "127.0.2.17", "-p", "7310"],
        &["-q", "-a", "127.0.2.17", "-p", "7310", "-I", "127.0.2.18"],
        64,
    );
    ping_pair(
        &["-q", "-a", "127.0.2.19", "-p", "7311"],
        &["-a", "127.0.2.19", "-p", "7311", "-I", "127.0.2.20"],
        64,
    );
}

#[test]
fn multi_packet_pings_over_ipv6() {
    // Both on ::1: each device its own RoCE port. 4000 bytes: READ
    // responses and WRITEs of four packets.
    ping_pair(
        &[
            "-a",
            "::1",
            "-p",
            "7302",
            "-S",
            "4000",
            "--roce-port",
            "47995",
            "--peer-roce-port",
            "47996",
        ],
        &[
            "-a",
            "::1",
            "-I",
            "::1",
            "-p",
            "7302",
            "--roce-port",
            "47996",
            "--peer-roce-port",
            "47995",
        ],
        4000,
    );
}

#[test]
fn a_port_with_no_listener_fails_with_reject_reason_8() {
    // A device on 127.0.2.3 (its server listens on another port).
    let s = spawn(&["rping", "-s", "-a", "127.0.2.3", "-p", "7303"]);
    std::thread::sleep(Duration::from_millis(300));
    let c = ferroce(&[
        "rping",
        "-c",
        "-a",
        "127.0.2.3",
        "-p",
        "7304",
        "-I",
        "127.0.2.4",
        "-C",
        "1",
    ]);
    let (stdout, stderr) = text(&c);
    assert_eq!(c.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("cma event RDMA_CM_EVENT_REJECTED, error 8"),
        "{stderr}"
    );
    assert!(
        stderr.contains("no listener on port 7304 (REJ reason 8)"),
        "{stderr}"
    );
    // The server on 7303 is untouched: it still serves a client.
    let c = ferroce(&[
        "rping",
        "-c",
        "-a",
        "127.0.2.3",
        "-p",
        "7303",
        "-I",
        "127.0.2.4",
        "-C",
        "1",
    ]);
    assert!(c.status.success(), "{:?}", text(&c));
    assert!(finish(s, "server").status.success());
}

#[test]
fn a_persistent_server_serves_clients_one_after_another_and_at_once() {
    let s = spawn(&[
        "rping",
        "-s",
        "-P",
        "--connections",
        "4",
        "-a",
        "127.0.2.5",
        "-p",
        "7305",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    let client = |src: &'static str| {
        move || {
            ferroce(&[
                "rping",
                "-c",
                "-a",
                "127.0.2.5",
                "-p",
                "7305",
                "-I",
                src,
                "-C",
                "3",
                "-V",
            ])
        }
    };
    for src in ["127.0.2.6", "127.0.2.6"] {
        let c = client(src)();
        assert!(c.status.success(), "{:?}", text(&c));
    }
    let two: Vec<_> = ["127.0.2.7", "127.0.2.8"]
        .into_iter()
        .map(|src| std::thread::spawn(client(src)))
        .collect();
    for t in two {
        let c = t.join().unwrap();
        assert!(c.status.success(), "{:?}", text(&c));
    }
    let s = finish(s, "server");
    assert!(s.status.success(), "{:?}", text(&s));
    assert_eq!(text(&s).1.matches("server DISCONNECT EVENT...").count(), 4);
}

#[test]
fn a_client_buffer_larger_than_the_servers_is_named() {
    let s = spawn(&["rping", "-s", "-a", "127.0.2.9", "-p", "7306", "-S", "32"]);
    std::thread::sleep(Duration::from_millis(300));
    let c = ferroce(&[
        "rping",
        "-c",
        "-a",
        "127.0.2.9",
        "-p",
        "7306",
        "-I",
        "127.0.2.10",
        "-C",
        "1",
        "-S",
        "100",
    ]);
    let s = finish(s, "server");
    let (_, stderr) = text(&s);
    assert_eq!(s.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the client's ping buffer is 100 bytes, more than this server's 32"),
        "{stderr}"
    );
    assert!(stderr.contains("-S 100"), "{stderr}");
    assert!(!c.status.success(), "{:?}", text(&c));
}

#[test]
fn a_peer_that_sends_a_short_message_is_refused_with_its_size() {
    let s = spawn(&["rping", "-s", "-a", "127.0.2.11", "-p", "7307"]);
    std::thread::sleep(Duration::from_millis(300));
    // A client of our own through ferroce::cm that sends 5 bytes where
    // rping sends its 16-byte buffer description.
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let dst: SocketAddr = "127.0.2.11:7307".parse().unwrap();
    let src: SocketAddr = "127.0.2.12:0".parse().unwrap();
    id.resolve_addr(Some(src), dst, Duration::from_secs(2))
        .unwrap();
    id.resolve_route(Duration::from_secs(2)).unwrap();
    let ctx = id.verbs().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let qp = id
        .create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    let mr = pd.reg_mr(16, Access::LOCAL_WRITE).unwrap();
    id.connect(&ConnParam::default()).unwrap();
    let established = loop {
        let e = ch
            .get_event_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("an event");
        if !matches!(
            e.kind,
            CmEventKind::AddrResolved | CmEventKind::RouteResolved
        ) {
            break e;
        }
    };
    assert_eq!(established.kind.name(), "RDMA_CM_EVENT_ESTABLISHED");
    qp.post_send(SendWr::send(1, &[mr.sge(0, 5)])).unwrap();
    let s = finish(s, "server");
    let (_, stderr) = text(&s);
    assert_eq!(s.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Received bogus data, size 5"), "{stderr}");
}

#[test]
fn options_outside_rpings_ranges_are_refused() {
    for (args, says) in [
        (&["rping", "-c", "-a", "127.0.0.1", "-S", "25"][..], "25"),
        (
            &["rping", "-c", "-a", "127.0.0.1", "-S", "65536"][..],
            "65536",
        ),
        (&["rping", "-a", "127.0.0.1"][..], "-s"),
        (&["rping", "-c"][..], "-a ADDRESS"),
    ] {
        let out = ferroce(args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn a_client_whose_server_disconnects_early_says_after_how_many_pings() {
    // A server of our own through ferroce::cm: accepts, then disconnects
    // before any ping.
    let ch = EventChannel::new().unwrap();
    let listen = ch.create_id(PortSpace::Tcp).unwrap();
    listen
        .bind_addr("127.0.2.13:7308".parse().unwrap())
        .unwrap();
    listen.listen(1).unwrap();
    let c = spawn(&[
        "rping",
        "-c",
        "-a",
        "127.0.2.13",
        "-p",
        "7308",
        "-I",
        "127.0.2.14",
        "-C",
        "3",
    ]);
    let req = listen.get_request(Duration::from_secs(10)).unwrap();
    let id = req.id.clone();
    let ctx = id.verbs().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let _qp = id
        .create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    id.accept(&ConnParam::default()).unwrap();
    loop {
        let e = ch
            .get_event_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("ESTABLISHED");
        if e.kind.name() == "RDMA_CM_EVENT_ESTABLISHED" {
            break;
        }
    }
    id.disconnect().unwrap();
    let c = finish(c, "client");
    let (_, stderr) = text(&c);
    assert_eq!(c.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("client DISCONNECT EVENT..."), "{stderr}");
    assert!(
        stderr.contains("the server disconnected after 0 of 3 pings"),
        "{stderr}"
    );
}
