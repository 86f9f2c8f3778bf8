//! `tests/c/rdmacm.c`, built against rdma-core's real `<rdma/rdma_cma.h>`
//! and `<rdma/rdma_verbs.h>` and linked with this crate's
//! `librdmacm.so.1` (and ferroce-verbs' `libibverbs.so.1`), run with two
//! devices (127.0.0.1 and 127.0.0.2) in one process: misuse gets an errno,
//! the channel descriptor is pollable, REJECTED carries reason 8 (no
//! listener) or 28 with the server's private data, either side can
//! disconnect, and `rdma_create_ep` with the `rdma_verbs.h` helpers moves
//! data. It prints one line per check and exits 1 if one failed.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{build_c, finish, lib_dir, serial, text};

#[test]
fn rdmacm_c_program_checks_pass() {
    let _g = serial();
    let exe = build_c("rdmacm", "rdmacm-check");
    let child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FERROCE_DEVICES", "127.0.0.1,127.0.0.2")
        .env_remove("FERROCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(60), "rdmacm-check");
    let t = text(&out);
    assert!(
        out.status.success() && !t.contains("FAIL"),
        "rdmacm.c ({}):\n{t}",
        out.status
    );
    for want in [
        "ok   REJECTED, status 8 (no listener)",
        "ok   REJECTED, status 28 with the server's private data",
        "ok   poll: channel readable with ADDR_RESOLVED waiting",
        "ok   client: get_recv_comp, \"pong\" arrived",
        "ok   the side that started sees DISCONNECTED",
        "ok   client: init_qp_attr(RTR) before the REP: EINVAL",
        "ok   client's RTR/RTS against the server's QP (PSNs, MTU, read depth)",
        "ok   server's RTR/RTS against the client's QP (PSNs, MTU, read depth)",
        "ok   RTR paths: GRH to the peer's GID, one flow label both ways",
    ] {
        assert!(t.contains(want), "missing `{want}`:\n{t}");
    }
}
