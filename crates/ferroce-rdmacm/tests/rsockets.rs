//! rsockets on ferroce's `librdmacm.so.1`, with the unmodified Debian
//! programs: `rstream` (blocking, and nonblocking with `rpoll`),
//! `riostream` (`riomap`/`riowrite`), `rcopy` (a file, eight times through one server, compared after each), and
//! `iperf3` under rdma-core's `librspreload.so`, whose connections must be
//! rsockets (no kernel TCP socket on iperf3's port while it runs). Server
//! on 127.0.5.1, client on 127.0.5.2; every process has a time limit.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{As, Reap, command, finish, finish_or_kill, serial, text, tool, wait_device};

const SERVER: &str = "127.0.5.1";
const CLIENT: &str = "127.0.5.2";
const SERVER_IP: [u8; 4] = [127, 0, 5, 1];
/// Between the device opening and the server's listen.
const SETTLE: Duration = Duration::from_millis(300);
const LIMIT: Duration = Duration::from_secs(60);

/// Debian's librspreload.so (package librdmacm1) for this machine.
fn preload() -> String {
    format!(
        "/usr/lib/{}-linux-gnu/rsocket/librspreload.so",
        std::env::consts::ARCH
    )
}

/// Starts `server`, then runs `client` to the end; the server must end
/// too (`server_exits`) or is stopped. Returns (server, client) outputs.
fn pair(server: Command, client: Command, server_exits: bool, what: &str) -> (String, String) {
    let (mut server, mut client) = (server, client);
    let s = server.spawn().unwrap();
    let mut reap = Reap(Some(s.id()));
    wait_device(SERVER_IP, Duration::from_secs(20));
    std::thread::sleep(SETTLE);
    let c = finish(client.spawn().unwrap(), LIMIT, &format!("{what} client"));
    let limit = Duration::from_secs(if c.status.success() && server_exits {
        30
    } else {
        2
    });
    let s = finish_or_kill(s, limit);
    reap.0 = None;
    assert!(
        c.status.success() && (s.status.success() || !server_exits),
        "{what}: client {}, server {}\nclient:\n{}\nserver:\n{}",
        c.status,
        s.status,
        text(&c),
        text(&s)
    );
    (text(&s), text(&c))
}

fn run(prog: &Path, server_args: &[&str], client_args: &[&str], what: &str) -> String {
    let server = command(As::Me, SERVER, prog, server_args);
    let client = command(As::Me, CLIENT, prog, client_args);
    pair(server, client, true, what).1
}

/// The result line of an rstream/riostream run of `count` transfers.
fn assert_custom_row(out: &str, count: &str) {
    let row = out.lines().find(|l| l.starts_with("custom"));
    let cols: Vec<&str> = row.unwrap_or_default().split_whitespace().collect();
    assert!(
        cols.len() >= 7 && cols[2] == count,
        "no result row of {count} transfers:\n{out}"
    );
}

#[test]
fn rstream_blocking_verifies_its_data() {
    let _g = serial();
    let rstream = tool("rstream", "rdmacm-utils");
    let args = ["-T", "v", "-S", "100000", "-C", "50", "-p", "7481"];
    let client = [&["-s", SERVER][..], &args].concat();
    assert_custom_row(&run(&rstream, &args, &client, "rstream"), "50");
}

#[test]
fn rstream_nonblocking_with_rpoll_verifies_its_data() {
    let _g = serial();
    let rstream = tool("rstream", "rdmacm-utils");
    let args = [
        "-T", "v", "-T", "a", "-T", "n", "-S", "70000", "-C", "50", "-p", "7482",
    ];
    let client = [&["-s", SERVER][..], &args].concat();
    assert_custom_row(&run(&rstream, &args, &client, "rstream -T an"), "50");
}

#[test]
fn riostream_writes_into_the_peers_mapped_buffer() {
    let _g = serial();
    let riostream = tool("riostream", "rdmacm-utils");
    let args = ["-T", "v", "-S", "65536", "-C", "50", "-p", "7483"];
    let client = [&["-s", SERVER][..], &args].concat();
    assert_custom_row(&run(&riostream, &args, &client, "riostream"), "50");
}

/// Copies in a row through one rcopy server. Each is a new connection,
/// and a connection's first moments are where a race hid: the server lends
/// the second half of its ring as soon as it accepts, which can land before
/// the client has taken in the server's private data.
const RCOPY_ROUNDS: usize = 8;
/// One copy's limit: a few hundred milliseconds when it works.
const RCOPY_LIMIT: Duration = Duration::from_secs(20);

#[test]
fn rcopy_copies_a_file_again_and_again() {
    let _g = serial();
    let rcopy = tool("rcopy", "rdmacm-utils");
    let dir = std::env::temp_dir().join(format!("ferroce-rcopy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    let data: Vec<u8> = (0..3_000_017u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&src, &data).unwrap();
    let target = format!("{SERVER}:{}", dst.display());
    // The server waits for the next client after each: it is stopped.
    let server = command(As::Me, SERVER, &rcopy, &["-p", "7484"])
        .spawn()
        .unwrap();
    let reap = Reap(Some(server.id()));
    wait_device(SERVER_IP, Duration::from_secs(20));
    std::thread::sleep(SETTLE);
    for round in 1..=RCOPY_ROUNDS {
        let _ = std::fs::remove_file(&dst);
        let mut client = command(
            As::Me,
            CLIENT,
            &rcopy,
            &[src.to_str().unwrap(), &target, "-p", "7484"],
        );
        let what = format!("rcopy client, copy {round} of {RCOPY_ROUNDS}");
        let c = finish(client.spawn().unwrap(), RCOPY_LIMIT, &what);
        let copied = std::fs::read(&dst).unwrap_or_default();
        if c.status.success() && copied == data {
            continue;
        }
        drop(reap);
        let s = finish_or_kill(server, Duration::ZERO);
        std::fs::remove_dir_all(&dir).unwrap();
        panic!(
            "copy {round} of {RCOPY_ROUNDS}: client {}, {} bytes of {} copied{}\nclient:\n{}\nserver:\n{}",
            c.status,
            copied.len(),
            data.len(),
            if copied == data { "" } else { " (they differ)" },
            text(&c),
            text(&s)
        );
    }
    drop(reap);
    let _ = finish_or_kill(server, Duration::ZERO);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether a kernel TCP socket (IPv4 or IPv6) has `port` at either end.
fn tcp_port_in_use(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 2 && (w[1].ends_with(&want) || w[2].ends_with(&want))
            })
        })
    })
}

#[test]
fn iperf3_under_librspreload_runs_over_rsockets() {
    let _g = serial();
    let iperf3 = tool("iperf3", "iperf3");
    let preload = preload();
    assert!(
        Path::new(&preload).exists(),
        "{preload} is missing: install Debian's librdmacm1"
    );
    let port = 5299u16;
    let p = port.to_string();
    let mut server = command(
        As::Me,
        SERVER,
        &iperf3,
        &["-s", "-1", "-B", SERVER, "-p", &p],
    );
    server.env("LD_PRELOAD", &preload);
    let s = server.spawn().unwrap();
    let mut reap = Reap(Some(s.id()));
    wait_device(SERVER_IP, Duration::from_secs(20));
    std::thread::sleep(SETTLE);
    let mut client = command(
        As::Me,
        CLIENT,
        &iperf3,
        &["-c", SERVER, "-p", &p, "-t", "2", "-f", "m"],
    );
    client.env("LD_PRELOAD", &preload);
    let mut c = client.spawn().unwrap();
    let deadline = Instant::now() + LIMIT;
    let mut kernel_tcp = false;
    while c.try_wait().unwrap().is_none() && Instant::now() < deadline {
        kernel_tcp |= tcp_port_in_use(port);
        std::thread::sleep(Duration::from_millis(50));
    }
    let c = finish_or_kill(c, Duration::from_secs(1));
    let s = finish_or_kill(s, Duration::from_secs(10));
    reap.0 = None;
    let out = text(&c);
    assert!(
        c.status.success(),
        "iperf3 client {}:\n{out}\nserver:\n{}",
        c.status,
        text(&s)
    );
    assert!(
        !kernel_tcp,
        "a kernel TCP socket had port {port}: not rsockets\n{out}"
    );
    let received = out
        .lines()
        .find(|l| l.ends_with("receiver"))
        .unwrap_or_default();
    let mbytes: f64 = received
        .split_whitespace()
        .zip(received.split_whitespace().skip(1))
        .find(|(_, unit)| *unit == "MBytes")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0.0);
    assert!(mbytes > 1.0, "iperf3 moved {mbytes} MBytes:\n{out}");
}
