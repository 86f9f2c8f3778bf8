//! Debian's unmodified UCX 1.13 (`ucx-utils`, `libucx0`) on ferroce's
//! `libibverbs.so.1`, with its default settings: `ucx_info -d` lists the
//! device with the `rc_verbs` and `ud_verbs` transports, and
//! `ucx_perftest` pairs run RC put/get/atomics, UD active messages and
//! UCP tag matching between two processes on loopback, each test with a
//! few hundred iterations under a timeout; `io_demo` connects through
//! UCX's rdmacm connection manager on ferroce's `librdmacm.so.1` and moves
//! checked data.
//!
//! UCX takes a device only if `/dev/infiniband/<dev_name>` is a character
//! device the user may read and write; ferroce's `dev_name` leads from
//! `/dev/infiniband` to `/dev/null`, so that directory must exist. Where
//! it does not, a root run creates it (`mkdir /dev/infiniband`, as loading
//! the kernel's RDMA stack would) and any other run skips with the reason,
//! as it does when `ucx_perftest` is not installed.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{As, Reap, both_libs_dir, finish, is_root, serial, skip, users, wait_listening};

/// The server's and the client's device addresses.
const SERVER: &str = "127.0.0.1";
const CLIENT: &str = "127.0.0.2";
/// Each run's bound (the tests' pairs take a second or two each).
const LIMIT: Duration = Duration::from_secs(30);
/// The directory UCX looks for uverbs devices in.
const UVERBS_DIR: &str = "/dev/infiniband";

/// Why these tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    if !Path::new("/usr/bin/ucx_perftest").exists() {
        return Some("tool missing: ucx_perftest (Debian's ucx-utils)".into());
    }
    if !Path::new(UVERBS_DIR).is_dir() {
        if !is_root() {
            return Some(format!(
                "not root: {UVERBS_DIR} does not exist and only root can create it \
                 (mkdir {UVERBS_DIR})"
            ));
        }
        if let Err(e) = std::fs::create_dir_all(UVERBS_DIR) {
            return Some(format!("cannot create {UVERBS_DIR}: {e}"));
        }
    }
    None
}

fn ucx(prog: &str, devices: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    ucx_as(As::Me, prog, devices, args, env)
}

/// `prog` run by `who` (`nobody` through setpriv).
fn ucx_as(who: As, prog: &str, devices: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    let path = Path::new("/usr/bin").join(prog);
    let mut c = match who {
        As::Me => Command::new(path),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(path);
            c
        }
    };
    c.args(args)
        .env("LD_LIBRARY_PATH", both_libs_dir())
        .env("FERROCE_DEVICES", devices)
        .env_remove("FERROCE_LOG")
        .env_remove("UCX_TLS")
        .env_remove("UCX_NET_DEVICES")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// A TCP port free right now, for ucx_perftest's exchange.
fn free_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port().to_string()
}

/// The figures of the client's `Final:` line: iterations, then the
/// 50th percentile, average and overall latency or overhead (µs),
/// bandwidth average and overall (MB/s), message rate average and
/// overall.
fn final_line(out: &str) -> Vec<f64> {
    let line = out
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_else(|| panic!("no Final: line in\n{out}"));
    line.split_whitespace()
        .skip(1)
        .map(|w| w.parse().unwrap())
        .collect()
}

/// One ucx_perftest pair with `args` (and `env`); returns the client's
/// `Final:` figures.
fn perftest(args: &[&str], env: &[(&str, &str)]) -> Vec<f64> {
    perftest_as(As::Me, args, env)
}

/// [`perftest`] with both sides run by `who`.
fn perftest_as(who: As, args: &[&str], env: &[(&str, &str)]) -> Vec<f64> {
    let port = free_port();
    let mut all: Vec<&str> = vec!["-p", &port, "-w", "20"];
    all.extend_from_slice(args);
    // A client that fails or hangs does not leave its server running (it
    // holds the device's port and fails the tests after it).
    let mut server = Reap::new(ucx_as(who, "ucx_perftest", SERVER, &all, env));
    wait_listening(&port, LIMIT);
    let mut client_args = vec![SERVER];
    client_args.extend_from_slice(&all);
    let client = ucx_as(who, "ucx_perftest", CLIENT, &client_args, env);
    let what = format!("ucx_perftest {args:?} as {who:?}");
    let c = finish(client, LIMIT, &format!("{what} (client)"));
    let server = server.0.take().expect("the server was spawned");
    let s = finish(server, LIMIT, &format!("{what} (server)"));
    for (side, out) in [("client", &c), ("server", &s)] {
        assert!(
            out.status.success(),
            "{what}: the {side} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&c.stdout).into_owned();
    let f = final_line(&text);
    let iters = args
        .windows(2)
        .find(|w| w[0] == "-n")
        .map(|w| w[1].parse::<f64>().unwrap());
    assert_eq!(Some(f[0]), iters, "{what}: iterations\n{text}");
    assert!(f.iter().all(|v| v.is_finite() && *v >= 0.0), "{text}");
    println!(
        "{what}: {}",
        text.lines().find(|l| l.starts_with("Final:")).unwrap()
    );
    f
}

#[test]
fn ucx_info_lists_the_device_with_rc_and_ud_verbs() {
    if let Some(why) = skip_reason() {
        skip(&why);
        return;
    }
    let _l = serial();
    let out = finish(ucx("ucx_info", SERVER, &["-d"], &[]), LIMIT, "ucx_info -d");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ucx_info -d: {}\n{text}", out.status);
    // The ferroce0 memory domain's section, up to the next domain.
    let start = text
        .find("# Memory domain: ferroce0")
        .unwrap_or_else(|| panic!("no ferroce0 memory domain:\n{text}"));
    let section = &text[start..];
    let section = &section[..section[1..]
        .find("# Memory domain:")
        .map_or(section.len(), |e| e + 1)];
    for want in [
        "Component: ib",
        "Transport: rc_verbs",
        "Transport: ud_verbs",
        "Device: ferroce0:1",
        "atomic_fadd: 64 bit",
        "atomic_cswap: 64 bit",
    ] {
        assert!(section.contains(want), "no {want:?} in\n{section}");
    }
}

#[test]
fn ucx_perftest_rc_verbs_put_get_and_atomics() {
    if let Some(why) = skip_reason() {
        skip(&why);
        return;
    }
    let _l = serial();
    let rc = ["-d", "ferroce0:1", "-x", "rc_verbs"];
    let with = |more: &[&'static str]| [&rc[..], more].concat();
    // Unprivileged too, when the tests run as root.
    for who in users() {
        let put = perftest_as(
            who,
            &with(&["-t", "put_bw", "-D", "zcopy", "-s", "65536", "-n", "300"]),
            &[],
        );
        assert!(put[4] > 0.0, "put_bw moved no bytes");
    }
    let get = perftest(
        &with(&["-t", "get", "-D", "zcopy", "-s", "65536", "-n", "300"]),
        &[],
    );
    assert!(get[4] > 0.0, "get moved no bytes");
    for t in ["add_lat", "fadd", "cswap"] {
        perftest(&with(&["-t", t, "-n", "300"]), &[]);
    }
}

#[test]
fn ucx_perftest_ud_verbs_active_messages() {
    if let Some(why) = skip_reason() {
        skip(&why);
        return;
    }
    let _l = serial();
    let ud = ["-d", "ferroce0:1", "-x", "ud_verbs"];
    let lat = perftest(&[&ud[..], &["-t", "am_lat", "-n", "500"]].concat(), &[]);
    assert!(lat[1] > 0.0, "am_lat: no latency");
    let bw = perftest(&[&ud[..], &["-t", "am_bw", "-n", "500"]].concat(), &[]);
    assert!(bw[6] > 0.0, "am_bw: no messages");
}

#[test]
fn ucx_perftest_ucp_tag_matching_over_rc_and_ud() {
    if let Some(why) = skip_reason() {
        skip(&why);
        return;
    }
    let _l = serial();
    // UCP wires up over UD and moves the data on RC.
    let env = [("UCX_TLS", "rc_verbs,ud_verbs")];
    perftest(&["-t", "tag_lat", "-n", "300"], &env);
    let bw = perftest(&["-t", "tag_bw", "-s", "65536", "-n", "300"], &env);
    assert!(bw[4] > 0.0, "tag_bw moved no bytes");
}

#[test]
fn io_demo_connects_through_the_rdmacm_connection_manager() {
    if let Some(why) = skip_reason() {
        skip(&why);
        return;
    }
    let _l = serial();
    // rdmacm alone: no fallback to UCX's TCP connection manager.
    let env = [("UCX_SOCKADDR_TLS_PRIORITY", "rdmacm")];
    let port = free_port();
    let server = ucx("io_demo", SERVER, &["-p", &port], &env);
    let server = Reap::new(server);
    // The server listens through rdma_cm, not TCP: the client retries its
    // connection every 100 ms, 50 times at most, until the listener is up.
    // Then 1,000 writes of data the server checks (-q), and a clean close.
    let args = [
        "-p", &port, "-c", "50", "-y", "0.1s", "-i", "1000", "-q", SERVER,
    ];
    let client = finish(ucx("io_demo", CLIENT, &args, &env), LIMIT, "io_demo");
    drop(server);
    let text = String::from_utf8_lossy(&client.stdout);
    let err = String::from_utf8_lossy(&client.stderr);
    assert!(
        client.status.success() && text.contains("Client exit with status 'OK'"),
        "io_demo client ({}):\n{text}\n{err}",
        client.status
    );
    assert!(text.contains("write"), "no writes reported:\n{text}");
}
