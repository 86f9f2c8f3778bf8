//! The unmodified Debian rdma_cm programs on ferroce's `librdmacm.so.1`
//! (rdmacm-utils 44: `rping`, `ucmatose`, `udaddy`, `mckey`, `rdma_server` /
//! `rdma_client`; perftest: `ib_write_bw -R`, `ib_send_bw -R`), each pair
//! on loopback (server on 127.0.0.1, client on 127.0.0.2, one device per
//! process through `FERROCE_DEVICES`), as this user and, when the tests
//! run as root, as `nobody`. Both must exit 0, and the output must show
//! the data went through.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{As, Reap, command, finish, finish_or_kill, serial, text, tool, users, wait_device};

/// Runs `prog server_args` on 127.0.0.1 and, once its device is open and
/// `settle` has passed (its listen follows the device's opening),
/// `prog client_args` on 127.0.0.2. Returns (server, client) outputs.
fn pair(
    who: As,
    prog: &Path,
    server_args: &[&str],
    client_args: &[&str],
    settle: Duration,
) -> (String, String) {
    let server = command(who, "127.0.0.1", prog, server_args)
        .spawn()
        .unwrap();
    let mut reap = Reap(Some(server.id()));
    wait_device([127, 0, 0, 1], Duration::from_secs(20));
    std::thread::sleep(settle);
    let client = command(who, "127.0.0.2", prog, client_args)
        .spawn()
        .unwrap();
    let name = prog.display().to_string();
    let c = finish(client, Duration::from_secs(60), &format!("{name} client"));
    // A failed client leaves the server waiting: stop it at once.
    let limit = Duration::from_secs(if c.status.success() { 60 } else { 2 });
    let s = finish_or_kill(server, limit);
    reap.0 = None;
    assert!(
        c.status.success() && s.status.success(),
        "{name} as {who:?}: client {}, server {}\nclient:\n{}\nserver:\n{}",
        c.status,
        s.status,
        text(&c),
        text(&s)
    );
    (text(&s), text(&c))
}

const SETTLE: Duration = Duration::from_millis(300);

#[test]
fn rping_verifies_ten_pings_of_64_and_4096_bytes() {
    let _g = serial();
    let rping = tool("rping", "rdmacm-utils");
    for who in users() {
        for size in ["64", "4096"] {
            let server = [
                "-s",
                "-a",
                "127.0.0.1",
                "-p",
                "7471",
                "-C",
                "10",
                "-S",
                size,
                "-V",
            ];
            let client = [
                "-c",
                "-a",
                "127.0.0.1",
                "-p",
                "7471",
                "-C",
                "10",
                "-S",
                size,
                "-v",
                "-V",
            ];
            let (_, c) = pair(who, &rping, &server, &client, SETTLE);
            let pings = c
                .lines()
                .filter(|l| l.starts_with("ping data: rdma-ping-"))
                .count();
            assert_eq!(pings, 10, "rping -S {size} as {who:?}:\n{c}");
        }
    }
}

/// `-q`: each side creates its QP with `ibv_create_qp` and moves it
/// itself with the attributes `rdma_init_qp_attr` gives (the server
/// before `rdma_accept`, the client at CONNECT_RESPONSE, then
/// `rdma_establish`); the connect and accept carry the QP's number.
#[test]
fn rping_moves_its_own_qp_with_init_qp_attr() {
    let _g = serial();
    let rping = tool("rping", "rdmacm-utils");
    for who in users() {
        let server = [
            "-q",
            "-s",
            "-a",
            "127.0.0.1",
            "-p",
            "7472",
            "-C",
            "10",
            "-V",
        ];
        let client = [
            "-q",
            "-c",
            "-a",
            "127.0.0.1",
            "-p",
            "7472",
            "-C",
            "10",
            "-v",
            "-V",
        ];
        let (_, c) = pair(who, &rping, &server, &client, SETTLE);
        let pings = c
            .lines()
            .filter(|l| l.starts_with("ping data: rdma-ping-"))
            .count();
        assert_eq!(pings, 10, "rping -q as {who:?}:\n{c}");
    }
}

#[test]
fn ucmatose_eight_connections() {
    let _g = serial();
    let prog = tool("ucmatose", "rdmacm-utils");
    for who in users() {
        let (s, c) = pair(
            who,
            &prog,
            &["-c", "8"],
            &["-c", "8", "-s", "127.0.0.1"],
            SETTLE,
        );
        for out in [&s, &c] {
            assert!(out.contains("data transfers complete"), "{out}");
            assert!(out.contains("return status 0"), "{out}");
        }
    }
}

/// `-m`: after the transfers both sides move their IDs to a new event
/// channel (`rdma_migrate_id`) and take the disconnect events there.
#[test]
fn ucmatose_migrates_its_ids_to_a_new_channel() {
    let _g = serial();
    let prog = tool("ucmatose", "rdmacm-utils");
    let server = ["-m", "-c", "4"];
    let client = ["-m", "-c", "4", "-s", "127.0.0.1"];
    let (s, c) = pair(As::Me, &prog, &server, &client, SETTLE);
    assert!(c.contains("migrating to new event channel"), "{c}");
    for out in [&s, &c] {
        assert!(out.contains("return status 0"), "{out}");
    }
}

#[test]
fn udaddy_resolves_and_exchanges_datagrams() {
    let _g = serial();
    let prog = tool("udaddy", "rdmacm-utils");
    for who in users() {
        let (s, c) = pair(who, &prog, &[], &["-s", "127.0.0.1"], SETTLE);
        for out in [&s, &c] {
            assert!(out.contains("data transfers complete"), "{out}");
            assert!(out.contains("return status 0"), "{out}");
        }
    }
}

#[test]
fn mckey_joins_and_multicasts_to_every_receiving_id() {
    let _g = serial();
    let prog = tool("mckey", "rdmacm-utils");
    for who in users() {
        let group = ["-m", "239.255.0.72"];
        let (s, c) = pair(
            who,
            &prog,
            &[&group[..], &["-b", "127.0.0.1", "-c", "2", "-C", "5"]].concat(),
            // -l: rdma_create_qp_ex with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB.
            &[&group[..], &["-b", "127.0.0.2", "-s", "-l", "-C", "5"]].concat(),
            SETTLE,
        );
        let joined = "mckey: joined dgid: ::ffff:239.255.0.72 mlid 0x0 sl 0";
        assert_eq!(s.matches(joined).count(), 2, "{s}");
        assert!(s.contains("receiving data transfers"), "{s}");
        assert!(c.contains("initiating data transfers"), "{c}");
        for out in [&s, &c] {
            assert!(out.contains("data transfers complete"), "{out}");
            assert!(out.contains("return status 0"), "{out}");
        }
    }
}

#[test]
fn rdma_server_and_client_use_the_rdma_verbs_helpers() {
    let _g = serial();
    let server = tool("rdma_server", "rdmacm-utils");
    let client = tool("rdma_client", "rdmacm-utils");
    for who in users() {
        let s = command(who, "127.0.0.1", &server, &["-p", "7473"])
            .spawn()
            .unwrap();
        let mut reap = Reap(Some(s.id()));
        wait_device([127, 0, 0, 1], Duration::from_secs(20));
        std::thread::sleep(SETTLE);
        let c = command(
            who,
            "127.0.0.2",
            &client,
            &["-s", "127.0.0.1", "-p", "7473"],
        )
        .spawn()
        .unwrap();
        let c = finish(c, Duration::from_secs(60), "rdma_client");
        let s = finish(s, Duration::from_secs(60), "rdma_server");
        reap.0 = None;
        assert!(text(&c).contains("rdma_client: end 0"), "{}", text(&c));
        assert!(text(&s).contains("rdma_server: end 0"), "{}", text(&s));
        assert!(c.status.success() && s.status.success());
    }
}

/// perftest's `-R` server takes a moment after opening its device before
/// it listens.
const PERFTEST_SETTLE: Duration = Duration::from_millis(1500);

/// How often a perftest `-R` pair is tried. After the first connection
/// (the one perftest exchanges its keys over) both sides sync, then the
/// server makes a new listener for the test's QPs while the client
/// connects at once: a client that gets there first is rejected (REJ 8,
/// no listener), as it would be by the kernel, and perftest 4.5's own
/// retry then uses the IDs it has just destroyed and crashes. So the
/// test runs the pair again when, and only when, that happened.
const PERFTEST_TRIES: usize = 5;

/// Runs a perftest `-R` pair, again while the client lost that race.
fn perftest_pair(who: As, prog: &Path, args: &[&str]) -> (String, String) {
    let mut client: Vec<&str> = args.to_vec();
    client.push("127.0.0.1");
    for _ in 1..PERFTEST_TRIES {
        let server = command(who, "127.0.0.1", prog, args).spawn().unwrap();
        let mut reap = Reap(Some(server.id()));
        wait_device([127, 0, 0, 1], Duration::from_secs(20));
        std::thread::sleep(PERFTEST_SETTLE);
        let c = command(who, "127.0.0.2", prog, &client).spawn().unwrap();
        let c = finish(c, Duration::from_secs(60), "perftest client");
        let raced = !c.status.success() && text(&c).contains("RDMA_CM_EVENT_REJECTED; error: 8");
        let s = finish_or_kill(server, Duration::from_secs(if raced { 2 } else { 60 }));
        reap.0 = None;
        if raced {
            continue;
        }
        assert!(
            c.status.success() && s.status.success(),
            "{} as {who:?}: client {}, server {}\nclient:\n{}\nserver:\n{}",
            prog.display(),
            c.status,
            s.status,
            text(&c),
            text(&s)
        );
        return (text(&s), text(&c));
    }
    pair(who, prog, args, &client, PERFTEST_SETTLE)
}

#[test]
fn perftest_write_and_send_bandwidth_over_rdma_cm() {
    let _g = serial();
    for (name, args) in [
        ("ib_write_bw", ["-R", "-s", "65536", "-n", "2000"]),
        ("ib_send_bw", ["-R", "-s", "65536", "-n", "2000"]),
    ] {
        let prog = tool(name, "perftest");
        for who in users() {
            let (s, c) = perftest_pair(who, &prog, &args);
            for out in [&s, &c] {
                let row = out
                    .lines()
                    .find(|l| l.trim_start().starts_with("65536 "))
                    .unwrap_or_else(|| panic!("{name} -R as {who:?}: no result row:\n{out}"));
                let avg: f64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
                assert!(avg > 0.0, "{name} -R as {who:?}: {row}");
            }
        }
    }
}
