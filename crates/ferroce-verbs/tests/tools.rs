//! The unmodified Debian tools (ibverbs-utils, perftest) on ferroce's
//! `libibverbs.so.1`: `ibv_devices`, `ibv_devinfo`, the pingpongs (XRC's
//! `ibv_xsrq_pingpong` too) and `ib_write_bw`, each pair on loopback
//! (server on 127.0.0.1, client on 127.0.0.2), as root and, when the
//! tests run as root, as `nobody` too.
//!
//! The library under test is this crate's cdylib, copied as
//! `libibverbs.so.1` into a temporary directory that `LD_LIBRARY_PATH`
//! names (world-readable, so that `nobody` can load it). The tools must be
//! installed (`scripts/setup-test-deps.sh`); a missing one fails its test
//! with that advice. Each test binds UDP 4791 on 127.0.0.1 and 127.0.0.2,
//! so they take turns (one lock), and run the tools under a timeout.

mod common;

use std::io::Read;
use std::net::{IpAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{As, finish, lib_dir, serial, tool, users, wait_listening};

fn command(who: As, devices: &str, prog: &Path, args: &[&str]) -> Command {
    let mut c = match who {
        As::Me => Command::new(prog),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(prog);
            c
        }
    };
    c.args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FERROCE_DEVICES", devices)
        .env_remove("FERROCE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn run(who: As, devices: &str, prog: &Path, args: &[&str]) -> String {
    let child = command(who, devices, prog, args).spawn().unwrap();
    let out = finish(child, Duration::from_secs(30), &prog.display().to_string());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\n{text}\n{}",
        prog.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A TCP port free right now, for a tool's out-of-band exchange.
fn free_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

/// Runs a server (device 127.0.0.1) and a client (device 127.0.0.2,
/// connecting to 127.0.0.1) of `prog` with `args`; both must exit 0.
/// Returns their outputs.
fn pair(who: As, prog: &Path, args: &[&str]) -> (String, String) {
    let port = free_port();
    let mut server_args: Vec<&str> = args.to_vec();
    server_args.extend(["-p", &port]);
    let server = command(who, "127.0.0.1", prog, &server_args)
        .spawn()
        .unwrap();
    // The tools' clients connect once, without retrying: wait until the
    // server listens.
    wait_listening(&port, Duration::from_secs(20));
    let mut client_args = server_args.clone();
    client_args.push("127.0.0.1");
    let client = command(who, "127.0.0.2", prog, &client_args)
        .spawn()
        .unwrap();
    let name = prog.display().to_string();
    let c = finish(client, Duration::from_secs(60), &format!("{name} client"));
    let s = finish(server, Duration::from_secs(60), &format!("{name} server"));
    let text = |o: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(
        c.status.success() && s.status.success(),
        "{name} {args:?} as {who:?}: client {}, server {}\nclient:\n{}\nserver:\n{}",
        c.status,
        s.status,
        text(&c),
        text(&s)
    );
    (text(&s), text(&c))
}

/// The value of `key:` in ibv_devinfo's output (first match).
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
}

fn guid_text(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

#[test]
fn ibv_devices_lists_one_device_per_local_address() {
    let _g = serial();
    let prog = tool("ibv_devices", "ibverbs-utils");
    // 192.0.2.1 (TEST-NET-1) is nobody's address: left out, names kept dense.
    let out = run(As::Me, "127.0.0.1,192.0.2.1,127.0.0.2", &prog, &[]);
    for (name, addr) in [("ferroce0", "127.0.0.1"), ("ferroce1", "127.0.0.2")] {
        let guid = ferroce::query_device(addr.parse().unwrap())
            .unwrap()
            .node_guid
            .0;
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"));
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(format!("{guid:016x}").as_str()),
            "{out}"
        );
    }
    assert!(!out.contains("ferroce2"), "{out}");
}

#[test]
fn ibv_devinfo_reports_what_ferroce_reports() {
    let _g = serial();
    let prog = tool("ibv_devinfo", "ibverbs-utils");
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    let dev = ferroce::query_device(local).unwrap();
    let port = ferroce::query_port(local).unwrap();
    let out = run(As::Me, "127.0.0.1", &prog, &["-v"]);
    assert_eq!(field(&out, "hca_id"), "ferroce0");
    assert_eq!(field(&out, "transport"), "InfiniBand (0)");
    assert_eq!(field(&out, "fw_ver"), dev.fw_ver);
    assert_eq!(field(&out, "node_guid"), guid_text(dev.node_guid.0));
    assert_eq!(
        field(&out, "sys_image_guid"),
        guid_text(dev.sys_image_guid.0)
    );
    assert_eq!(field(&out, "vendor_id"), format!("{:#06x}", dev.vendor_id));
    assert_eq!(field(&out, "phys_port_cnt"), dev.phys_port_cnt.to_string());
    assert_eq!(field(&out, "max_qp"), dev.max_qp.to_string());
    assert_eq!(field(&out, "max_qp_wr"), dev.max_qp_wr.to_string());
    assert_eq!(field(&out, "max_cqe"), dev.max_cqe.to_string());
    assert_eq!(
        field(&out, "max_qp_rd_atom"),
        dev.max_qp_rd_atom.to_string()
    );
    assert_eq!(field(&out, "max_srq_wr"), dev.max_srq_wr.to_string());
    assert_eq!(
        field(&out, "device_cap_flags"),
        format!("0x{:08x}", dev.device_cap_flags.bits())
    );
    assert_eq!(
        field(&out, "device_cap_flags_ex"),
        format!("0x{:X}", dev.device_cap_flags_ex)
    );
    assert_eq!(
        field(&out, "num_comp_vectors"),
        dev.num_comp_vectors.to_string()
    );
    let mtu = |m: ferroce::Mtu| format!("{} ({})", m.bytes(), m as u32);
    assert_eq!(
        field(&out, "state"),
        format!("{} ({})", port.state.name(), port.state as u32)
    );
    assert_eq!(field(&out, "max_mtu"), mtu(port.max_mtu));
    assert_eq!(field(&out, "active_mtu"), mtu(port.active_mtu));
    assert_eq!(field(&out, "link_layer"), "Ethernet");
    assert_eq!(field(&out, "max_msg_sz"), format!("{:#x}", port.max_msg_sz));
    assert_eq!(
        field(&out, "port_cap_flags"),
        format!("0x{:08x}", port.port_cap_flags)
    );
    assert_eq!(field(&out, "gid_tbl_len"), port.gid_tbl_len.to_string());
    // The device's GID table: its own address at index 0, and nothing else.
    assert_eq!(field(&out, "GID[  0]"), "::ffff:127.0.0.1, RoCE v2");
    assert_eq!(out.matches("GID[").count(), 1, "{out}");
}

#[test]
fn ibv_rc_pingpong_runs_and_checks_its_data() {
    let _g = serial();
    let prog = tool("ibv_rc_pingpong", "ibverbs-utils");
    for who in users() {
        let (s, c) = pair(who, &prog, &["-g", "0", "-n", "100", "-s", "4096", "-c"]);
        for out in [&s, &c] {
            assert!(out.contains("100 iters in"), "{out}");
            assert!(!out.contains("invalid data"), "{out}");
        }
        assert!(
            c.contains("GID ::ffff:127.0.0.2") && c.contains("GID ::ffff:127.0.0.1"),
            "{c}"
        );
    }
}

#[test]
fn ibv_rc_pingpong_with_completion_events() {
    let _g = serial();
    let prog = tool("ibv_rc_pingpong", "ibverbs-utils");
    let (s, c) = pair(As::Me, &prog, &["-g", "0", "-n", "100", "-s", "1024", "-e"]);
    assert!(
        s.contains("100 iters in") && c.contains("100 iters in"),
        "{s}\n{c}"
    );
}

#[test]
fn ibv_uc_ud_and_srq_pingpong() {
    let _g = serial();
    for name in ["ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong"] {
        let prog = tool(name, "ibverbs-utils");
        let (s, c) = pair(As::Me, &prog, &["-g", "0", "-n", "100", "-s", "1024"]);
        assert!(
            s.contains("100 iters in") && c.contains("100 iters in"),
            "{name}\n{s}\n{c}"
        );
    }
}

/// `ibv_xsrq_pingpong`: XRC, both sides on ferroce (the kernel's rxe has
/// no XRC). Each side creates an XRC domain, an XRC SRQ, and per client a
/// target QP and an initiator QP; its SENDs name the peer's SRQ number.
#[test]
fn ibv_xsrq_pingpong_runs() {
    let _g = serial();
    let prog = tool("ibv_xsrq_pingpong", "ibverbs-utils");
    for who in users() {
        let (s, c) = pair(who, &prog, &["-g", "0", "-n", "100", "-s", "4096"]);
        for out in [&s, &c] {
            assert!(out.contains("success"), "{out}");
            assert!(out.contains("SRQN"), "{out}");
        }
    }
}

/// `ibv_xsrq_pingpong` with a server of two clients (two target QPs
/// feeding one SRQ), messages of several packets, and completion events.
#[test]
fn ibv_xsrq_pingpong_two_clients_with_events() {
    let _g = serial();
    let prog = tool("ibv_xsrq_pingpong", "ibverbs-utils");
    let port = free_port();
    let common = ["-g", "0", "-n", "200", "-s", "8192", "-e", "-p", &port];
    let mut server_args = common.to_vec();
    server_args.extend(["-c", "2"]);
    let server = command(As::Me, "127.0.0.1", &prog, &server_args)
        .spawn()
        .unwrap();
    wait_listening(&port, Duration::from_secs(20));
    let mut client_args = common.to_vec();
    client_args.push("127.0.0.1");
    let clients: Vec<_> = ["127.0.0.2", "127.0.0.3"]
        .into_iter()
        .map(|dev| {
            let child = command(As::Me, dev, &prog, &client_args).spawn().unwrap();
            // The server accepts its clients one after the other.
            std::thread::sleep(Duration::from_millis(200));
            child
        })
        .collect();
    let mut outs = Vec::new();
    for (i, c) in clients.into_iter().enumerate() {
        outs.push(finish(c, Duration::from_secs(60), &format!("client {i}")));
    }
    outs.push(finish(server, Duration::from_secs(60), "server"));
    for o in &outs {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success() && text.contains("success"), "{text}");
    }
}

#[test]
fn ib_write_bw_moves_data() {
    let _g = serial();
    let prog = tool("ib_write_bw", "perftest");
    for who in users() {
        let (_, c) = pair(who, &prog, &["-x", "0", "-n", "200", "-s", "65536"]);
        // The result row: size, iterations, peak and average MB/s, Mpps.
        let row = c
            .lines()
            .find(|l| l.split_whitespace().next() == Some("65536"))
            .unwrap_or_else(|| panic!("no result row:\n{c}"));
        let average: f64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(average > 0.0, "{row}");
    }
}

/// The result row of a perftest tool: the line that starts with the
/// message size.
fn result_row<'a>(out: &'a str, size: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(size))
        .unwrap_or_else(|| panic!("no result row for {size}:\n{out}"))
}

#[test]
fn perftest_bandwidth_tools_over_rc_uc_ud() {
    let _g = serial();
    let cases: [(&str, &[&str], &str); 6] = [
        ("ib_send_bw", &["-s", "65536"], "65536"),
        ("ib_read_bw", &["-s", "65536"], "65536"),
        ("ib_atomic_bw", &[], "8"),
        ("ib_send_bw", &["-c", "UC", "-s", "65536"], "65536"),
        ("ib_write_bw", &["-c", "UC", "-s", "65536"], "65536"),
        ("ib_send_bw", &["-c", "UD", "-s", "1024"], "1024"),
    ];
    for (name, extra, size) in cases {
        let prog = tool(name, "perftest");
        let mut args = vec!["-x", "0", "-n", "200"];
        args.extend_from_slice(extra);
        let (_, c) = pair(As::Me, &prog, &args);
        let row = result_row(&c, size);
        let average: f64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(average > 0.0, "{name} {extra:?}: {row}");
    }
}

#[test]
fn perftest_latency_tools() {
    let _g = serial();
    for name in [
        "ib_write_lat",
        "ib_send_lat",
        "ib_read_lat",
        "ib_atomic_lat",
    ] {
        let prog = tool(name, "perftest");
        let size = if name == "ib_atomic_lat" { "8" } else { "2" };
        let (_, c) = pair(As::Me, &prog, &["-x", "0", "-n", "200"]);
        // #bytes, #iterations, t_min, t_max, t_typical, ...
        let row = result_row(&c, size);
        let typical: f64 = row.split_whitespace().nth(4).unwrap().parse().unwrap();
        assert!(typical > 0.0, "{name}: {row}");
    }
}

#[test]
fn no_output_unless_asked() {
    let _g = serial();
    let prog = tool("ibv_devices", "ibverbs-utils");
    let child = command(As::Me, "127.0.0.1", &prog, &[]).spawn().unwrap();
    let out = finish(child, Duration::from_secs(30), "ibv_devices");
    let mut err = String::new();
    out.stderr.as_slice().read_to_string(&mut err).unwrap();
    assert!(err.is_empty(), "the library printed: {err}");
}
