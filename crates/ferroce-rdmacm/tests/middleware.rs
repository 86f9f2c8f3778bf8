//! librdmacm behaviours that real middleware relies on, checked by C
//! programs built against rdma-core's headers and run on this crate's
//! `librdmacm.so.1` (and ferroce-verbs' `libibverbs.so.1`):
//!
//! * `tests/c/middleware.c migrate`: a synchronous ID moved to a channel
//!   delivers its later events there (libfabric's verbs MSG endpoints), and
//!   back (NULL: synchronous; a synchronous ID to NULL: EINVAL);
//! * `idpd`: `id->pd` is the device's PD once the ID has a device (UCX's
//!   rdmacm CM creates its QP on it);
//! * `eintr`: blocked `ibv_get_cq_event`, `rdma_get_cm_event` and
//!   `ibv_get_async_event` fail with EINTR after a SIGALRM handler without
//!   `SA_RESTART` (qperf's event mode), and go on with one;
//! * `tests/c/cm_exit.c`: a process that returns from `main` with a
//!   connected ID disconnects it (the peer sees DISCONNECTED within 1 s, as
//!   with the kernel closing the process's rdma_cm descriptor) while a
//!   child it forked exits without touching it, and one that exits owing
//!   the DREP for a DREQ it received sends it.
//!
//! The devices are on 127.0.0.31 and 127.0.0.32 (no other test uses them).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{As, Reap, build_c, command, finish, serial, text};

const SERVER: &str = "127.0.0.31";
const CLIENT: &str = "127.0.0.32";

/// Runs `middleware MODE` with both devices in one process; its output.
fn middleware(mode: &str) -> String {
    let exe = build_c("middleware", "middleware");
    let devices = format!("{SERVER},{CLIENT}");
    let child = command(As::Me, &devices, &exe, &[mode, SERVER, CLIENT])
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(30), "middleware");
    let t = text(&out);
    assert!(
        out.status.success() && !t.contains("FAIL"),
        "middleware {mode} ({}):\n{t}",
        out.status
    );
    t
}

#[test]
fn a_synchronous_id_migrated_to_a_channel_delivers_its_events_there() {
    let _g = serial();
    let t = middleware("migrate");
    for want in [
        "ok   async: ROUTE_RESOLVED arrives on the channel",
        "ok   async -> NULL: rdma_resolve_addr waits, id->event holds ADDR_RESOLVED",
        "ok   sync -> NULL: EINVAL",
    ] {
        assert!(t.contains(want), "missing `{want}`:\n{t}");
    }
}

#[test]
fn an_id_with_a_device_has_its_pd() {
    let _g = serial();
    let t = middleware("idpd");
    for want in [
        "ok   after bind: id->pd is a PD of id->verbs",
        "ok   after resolve_addr: the same device's PD (one per device)",
        "ok   ibv_create_qp(id->pd) (UCX's rdmacm CM)",
    ] {
        assert!(t.contains(want), "missing `{want}`:\n{t}");
    }
}

#[test]
fn blocked_event_calls_fail_with_eintr_as_read_would() {
    let _g = serial();
    let t = middleware("eintr");
    for want in [
        "ok   ibv_get_cq_event: -1/EINTR",
        "ok   ibv_get_async_event: -1/EINTR",
        "ok   rdma_get_cm_event: -1/EINTR",
        "ok   rdma_get_cm_event with SA_RESTART",
    ] {
        assert!(t.contains(want), "missing `{want}`:\n{t}");
    }
}

/// A `cm_exit server` on `port`: its lines as they come, each with the
/// time it arrived, and a guard that kills it.
fn exit_server(port: u16, linger_ms: &str) -> (mpsc::Receiver<(Instant, String)>, Reap) {
    let exe = build_c("cm_exit", "cm_exit");
    let port = port.to_string();
    let mut child = command(As::Me, SERVER, &exe, &["server", SERVER, &port, linger_ms])
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let reap = Reap(Some(child.id()));
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
        let _ = child.wait();
    });
    (rx, reap)
}

/// Waits up to `limit` for a line of `rx` that starts with `want`.
fn line(rx: &mpsc::Receiver<(Instant, String)>, want: &str, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((at, l)) if l.starts_with(want) => return at,
            Ok((_, l)) => seen.push(l),
            Err(_) => panic!(
                "no `{want}` within {limit:?}; server said:\n{}",
                seen.join("\n")
            ),
        }
    }
}

fn exit_client(port: u16, mode: &str) -> String {
    let exe = build_c("cm_exit", "cm_exit");
    let port = port.to_string();
    let child = command(As::Me, CLIENT, &exe, &["client", SERVER, &port, mode])
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(20), "cm_exit client");
    let t = text(&out);
    assert!(out.status.success(), "client ({}):\n{t}", out.status);
    t
}

#[test]
fn a_client_that_exits_connected_disconnects_its_peer_at_once() {
    let _g = serial();
    let (rx, _reap) = exit_server(7601, "500");
    line(&rx, "server: listening", Duration::from_secs(10));
    let t = exit_client(7601, "fork-exit");
    let exited = Instant::now();
    assert!(
        t.contains("client: still connected after its forked child's exit"),
        "{t}"
    );
    assert!(t.contains("client: exiting connected"), "{t}");
    let disconnected = line(&rx, "server: disconnected", Duration::from_secs(10));
    let after = disconnected.saturating_duration_since(exited);
    assert!(
        after < Duration::from_secs(1),
        "the server saw DISCONNECTED {after:?} after the client exited"
    );
}

#[test]
fn a_server_that_exits_owing_the_drep_sends_it() {
    let _g = serial();
    let (rx, _reap) = exit_server(7602, "-1");
    line(&rx, "server: listening", Duration::from_secs(10));
    let started = Instant::now();
    let t = exit_client(7602, "disconnect");
    let took = started.elapsed();
    assert!(t.contains("client: disconnected"), "{t}");
    // The client's DISCONNECTED comes with the DREP the server's exit
    // sends; without it, only the DREQ's timeout (over a minute) ends it.
    assert!(
        took < Duration::from_secs(5),
        "the client's connect and disconnect took {took:?}:\n{t}"
    );
}
