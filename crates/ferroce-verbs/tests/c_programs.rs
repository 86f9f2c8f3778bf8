//! C programs against ferroce's `libibverbs.so.1`, each built against
//! rdma-core's real `<infiniband/verbs.h>` and linked with this crate's
//! library (`tests/c/`). Each prints one line per check and exits 1 if one
//! failed.
//!
//! * `loopback.c`: two RC QPs of one device connected to each other; SEND
//!   with immediate, inline SEND, RDMA WRITE and READ, FETCH_ADD and
//!   CMP_SWAP checked in the application's own buffers (registered in
//!   place), a completion channel whose descriptor poll(2) sees become
//!   readable, and a WRITE out of bounds completing with a remote access
//!   error.
//! * `bad_use.c`: misuse (NULL and out-of-range arguments, a post to a QP
//!   in RESET, destroying objects still in use, verbs ferroce lacks) gets
//!   rdma-core's errno, and no thread of ferroce's outlives the last
//!   `ibv_close_device`.
//!
//! * `ext_verbs.c`: the extended verbs: `ibv_create_cq_ex` and its
//!   polling callbacks, `ibv_create_qp_ex`, `ibv_qp_to_qp_ex` and the
//!   `ibv_wr_*` builders for every operation ferroce has, and what each
//!   create refuses.
//! * `windows.c`: memory windows: type 1 bound by `ibv_bind_mw`, type 2 by
//!   `IBV_WR_BIND_MW` and `ibv_wr_bind_mw`, WRITE and READ through them,
//!   `ibv_dereg_mr` refused while one is bound, LOCAL_INV (both ways) and a
//!   peer's SEND with invalidate closing one, and a bind that breaks a
//!   rule completing with `IBV_WC_MW_BIND_ERR`.
//! * `mw_peer.c`: the same between two processes (owner and requester,
//!   exchanging over TCP): what `scripts/interop-cabi.sh` runs against rxe.
//! * `xrc.c`: XRC: a domain, two XRC SRQs with their numbers, a target and
//!   an initiator QP, SENDs naming each SRQ (through `ibv_post_send` and
//!   `ibv_wr_set_xrc_srqn`), an RDMA WRITE, a SEND naming no SRQ, and which
//!   destroys are refused while objects are in use.
//! * `contexts.c`: two contexts of one device (as UCX opens them): each
//!   `async_fd` and `ibv_get_async_event` carries its own objects' events,
//!   and O_NONBLOCK on one descriptor leaves the other blocking.
//! * `errors.c`: O_NONBLOCK on a completion channel and on `async_fd`
//!   (EAGAIN), `async_fd` readable exactly while an event waits, a blocked
//!   `ibv_get_async_event` that does not spin, posts to a QP in ERR
//!   (flushed), posts with more SGEs than the QP's caps (EINVAL, as rxe), bad lkeys (LOC_PROT_ERR, the QP in ERR), a peer's WRITE into freed heap
//!   memory, a peer process SIGKILLed mid-connection (RETRY_EXC_ERR), and
//!   one that calls exit(0) with WRITEs to it in flight (it exits at once;
//!   the requests after end in errors). The peers are child processes on
//!   127.0.0.2 and 127.0.0.3.
//!
//! * `multicast.c`: UD QPs attached to a group with `ibv_attach_mcast`
//!   receive a send to it (each its own copy, behind a GRH naming the
//!   group), a detached one no more; the refusals' errnos.
//!
//! `loopback.c` runs on 127.0.0.1 and on `::1`. They bind UDP 4791: they
//! take turns.

mod common;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::{finish, lib_dir};

static SERIAL: Mutex<()> = Mutex::new(());

/// Builds `tests/c/<name>.c` against rdma-core's header, linked with this
/// crate's library; returns the executable.
fn build(name: &str) -> std::path::PathBuf {
    let src = format!("{}/tests/c/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let exe = lib_dir().join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(lib_dir().join("libibverbs.so.1"))
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}; install gcc (scripts/setup-test-deps.sh)"));
    assert!(
        built.status.success(),
        "{cc} failed on {name}.c (is libibverbs-dev installed? scripts/setup-test-deps.sh):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    exe
}

/// Builds `tests/c/<name>.c` and runs it on the device at `address`;
/// returns its output, failing on a failed check.
fn build_and_run(name: &str, address: &str) -> String {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let exe = build(name);
    let child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FERROCE_DEVICES", address)
        .env_remove("FERROCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(60), name);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !text.contains("FAIL"),
        "{name} ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn loopback_data_lands_in_application_memory() {
    let out = build_and_run("loopback", "127.0.0.1");
    assert!(out.contains("ok   WRITE landed in B's buffer"), "{out}");
    assert!(out.contains("ok   poll: channel readable"), "{out}");
}

#[test]
fn multicast_reaches_every_attached_qp() {
    let out = build_and_run("multicast", "127.0.0.1");
    assert!(out.contains("ok   b received it again"), "{out}");
}

#[test]
fn loopback_over_ipv6() {
    let out = build_and_run("loopback", "::1");
    assert!(out.contains("ok   READ landed in A's buffer"), "{out}");
}

#[test]
fn misuse_gets_errnos_not_crashes() {
    let out = build_and_run("bad_use", "127.0.0.1");
    assert!(
        out.contains("ok   no thread of ferroce's after the last close"),
        "{out}"
    );
}

#[test]
fn extended_cqs_and_the_wr_api() {
    let out = build_and_run("ext_verbs", "127.0.0.1");
    assert!(out.contains("ok   READ landed in A's buffer"), "{out}");
    assert!(
        out.contains("ok   ATOMIC WRITE: 8 bytes placed, IBV_WC_ATOMIC_WRITE"),
        "{out}"
    );
    assert!(
        out.contains("ok   the aborted and failed batches posted nothing"),
        "{out}"
    );
}

#[test]
fn memory_windows() {
    let out = build_and_run("windows", "127.0.0.1");
    assert!(
        out.contains("ok   WRITE through the type 1 window lands in B's buffer"),
        "{out}"
    );
    assert!(
        out.contains("ok   WRITE through the invalidated window: REM_ACCESS_ERR"),
        "{out}"
    );
}

/// `mw_peer.c` in two processes, the window owner on 127.0.0.2 and the
/// requester on 127.0.0.3 (the program that runs against rxe in
/// `scripts/interop-cabi.sh`).
#[test]
fn memory_windows_between_two_processes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let exe = build("mw_peer");
    let spawn = |address: &str, args: &[&str]| {
        Command::new(&exe)
            .args(args)
            .env("LD_LIBRARY_PATH", lib_dir())
            .env("FERROCE_DEVICES", address)
            .env_remove("FERROCE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let owner = spawn("127.0.0.2", &["-p", "18611"]);
    let requester = spawn("127.0.0.3", &["-p", "18611", "127.0.0.2"]);
    for (child, name, last) in [
        (requester, "requester", "requester: all checks passed"),
        (owner, "owner", "owner: all checks passed"),
    ] {
        let out = finish(child, Duration::from_secs(60), name);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(last),
            "{name} ({}):\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn xrc_through_the_header() {
    let out = build_and_run("xrc", "127.0.0.1");
    for want in [
        "ok   SRQ 0's CQ: its WQE, 2000 bytes, the target's QP number",
        "ok   a SEND naming no SRQ: REM_INV_REQ_ERR",
        "ok   destroy the SRQs, then close the domain",
    ] {
        assert!(out.contains(want), "{out}");
    }
}

#[test]
fn each_context_gets_its_own_objects_events() {
    let out = build_and_run("contexts", "127.0.0.1");
    for want in [
        "ok   O_NONBLOCK on B's leaves A's blocking",
        "ok   B: EAGAIN, A's event is not B's",
        "ok   A: QP_FATAL naming A's QP",
    ] {
        assert!(out.contains(want), "{out}");
    }
}

#[test]
fn errors_and_event_descriptors() {
    let out = build_and_run("errors", "127.0.0.1");
    assert!(
        out.contains("ok   WRITE to the dead peer: RETRY_EXC_ERR, not a hang"),
        "{out}"
    );
    assert!(
        out.contains("ok   get_async_event with O_NONBLOCK and no event: EAGAIN"),
        "{out}"
    );
    assert!(
        out.contains("ok   lkey of another PD: posted, completes with LOC_PROT_ERR"),
        "{out}"
    );
    assert!(
        out.contains("ok   post_recv with 2 SGEs on a QP of max_recv_sge 1: EINVAL"),
        "{out}"
    );
    assert!(
        out.contains(
            "ok   wr_complete with a deregistered MR's lkey: 0, LOC_PROT_ERR, the QP in ERR"
        ),
        "{out}"
    );
}
