//! Unmodified libfabric 1.17 (Debian's libfabric-bin: `fi_info`,
//! `fi_pingpong`) on ferroce's `libibverbs.so.1` and `librdmacm.so.1`,
//! through its verbs provider.
//!
//! On loopback the verbs provider has its DGRAM endpoints (`verbs`, UD)
//! and RDM over them (`verbs;ofi_rxd`); it never offers a MSG endpoint on
//! `lo` (it skips loopback interfaces), so the MSG domain and the RDM
//! endpoints over it (`verbs;ofi_rxm`) are checked on a veth pair between
//! two network namespaces the test creates and removes, when the tests run
//! as root. Each `fi_pingpong` runs with `-c` (data check), server and
//! client both exit 0, and every row of their table has all its messages
//! acknowledged. A missing `fi_pingpong` skips the tests with a message.
//!
//! The loopback devices are 127.0.41.1 (server) and 127.0.41.2 (client),
//! apart from the other tests' pair; the tests take turns on them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Reap, both_libs_dir as libs, finish, is_root, serial, skip};

const SERVER: &str = "127.0.41.1";
const CLIENT: &str = "127.0.41.2";
/// How long one `fi_info` or one side of a pingpong may run.
const LIMIT: Duration = Duration::from_secs(60);

/// The libfabric tools, or None (after saying why) when not installed.
fn installed() -> Option<(PathBuf, PathBuf)> {
    let info = Path::new("/usr/bin/fi_info");
    let pingpong = Path::new("/usr/bin/fi_pingpong");
    if info.exists() && pingpong.exists() {
        Some((info.into(), pingpong.into()))
    } else {
        skip("tool missing: fi_info / fi_pingpong (Debian's libfabric-bin)");
        None
    }
}

/// `prog args` with ferroce's libraries and the device `device`, in the
/// network namespace `netns` if given.
fn command(netns: Option<&str>, device: &str, prog: &Path, args: &[&str]) -> Command {
    let mut c = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(prog);
            c
        }
        None => Command::new(prog),
    };
    c.args(args)
        .env("LD_LIBRARY_PATH", libs())
        .env("FERROCE_DEVICES", device)
        .env_remove("FERROCE_LOG")
        .env_remove("FI_LOG_LEVEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `fi_info -p verbs` on `device`: its output, after it exits 0.
fn fi_info(info: &Path, netns: Option<&str>, device: &str) -> String {
    let child = command(netns, device, info, &["-p", "verbs"])
        .spawn()
        .unwrap();
    let out = finish(child, LIMIT, "fi_info");
    assert!(out.status.success(), "fi_info failed:\n{}", text(&out));
    text(&out)
}

/// The `(provider, domain, type)` of each entry `fi_info` lists.
fn entries(listing: &str) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    let mut cur: [String; 3] = Default::default();
    for line in listing.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("provider:") {
            cur = [v.trim().into(), String::new(), String::new()];
        } else if let Some(v) = line.strip_prefix("domain:") {
            cur[1] = v.trim().into();
        } else if let Some(v) = line.strip_prefix("type:") {
            cur[2] = v.trim().into();
            all.push((cur[0].clone(), cur[1].clone(), cur[2].clone()));
        }
    }
    all
}

fn lists(listing: &str, provider: &str, domain: &str, ty: &str) -> bool {
    entries(listing)
        .iter()
        .any(|(p, d, t)| p == provider && d == domain && t == ty)
}

/// Waits until process `pid` (in whatever namespace) listens on TCP
/// `port`, from /proc/<pid>/net: `fi_pingpong`'s client connects its
/// control socket once, without retrying.
fn wait_listening(pid: u32, port: u16, limit: Duration) {
    let hex = format!(":{port:04X}");
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let listening = ["tcp", "tcp6"].iter().any(|f| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
                t.lines().skip(1).any(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() > 3 && w[1].ends_with(&hex) && w[3] == "0A"
                })
            })
        });
        if listening {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("fi_pingpong's server does not listen on TCP {port} after {limit:?}");
}

/// A TCP port free on loopback now, for the pingpong's control socket.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Where each side runs: its namespace (or none) and device address.
#[derive(Clone, Copy)]
struct Side<'a> {
    netns: Option<&'a str>,
    device: &'a str,
}

/// `fi_pingpong -p verbs -e <endpoint> -c args` between `server` and
/// `client`: both exit 0, and each prints a table whose every row has all
/// its messages acknowledged. Returns the client's table.
fn pingpong(
    pp: &Path,
    endpoint: &str,
    args: &[&str],
    server: Side<'_>,
    client: Side<'_>,
) -> String {
    let port = free_port().to_string();
    let mut common_args = vec!["-p", "verbs", "-e", endpoint, "-c"];
    common_args.extend_from_slice(args);
    let mut s_args = common_args.clone();
    s_args.extend(["-B", &port]);
    let s = command(server.netns, server.device, pp, &s_args)
        .spawn()
        .unwrap();
    let mut s = Reap(Some(s));
    let pid = s.0.as_ref().map(Child::id).unwrap();
    wait_listening(pid, port.parse().unwrap(), LIMIT);
    let mut c_args = common_args.clone();
    c_args.extend(["-P", &port, server.device]);
    let c = command(client.netns, client.device, pp, &c_args)
        .spawn()
        .unwrap();
    let c = finish(c, LIMIT, &format!("fi_pingpong -e {endpoint} client"));
    let s = finish(
        s.0.take().unwrap(),
        LIMIT,
        &format!("fi_pingpong -e {endpoint} server"),
    );
    assert!(
        c.status.success() && s.status.success(),
        "fi_pingpong -e {endpoint} {args:?}: client {}, server {}\nclient:\n{}\nserver:\n{}",
        c.status,
        s.status,
        text(&c),
        text(&s)
    );
    let table = text(&c);
    assert_all_acknowledged(&table);
    assert_all_acknowledged(&text(&s));
    table
}

/// Every row of a pingpong table (`bytes #sent #ack ...`) has `#ack`
/// equal to `=#sent`, and there is at least one row.
fn assert_all_acknowledged(out: &str) {
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.starts_with("bytes"))
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() >= 8)
        .collect();
    assert!(!rows.is_empty(), "no pingpong table in:\n{out}");
    for w in rows {
        assert_eq!(format!("={}", w[1]), w[2], "a row lost messages:\n{out}");
    }
}

const ON_LOOPBACK_SERVER: Side<'static> = Side {
    netns: None,
    device: SERVER,
};
const ON_LOOPBACK_CLIENT: Side<'static> = Side {
    netns: None,
    device: CLIENT,
};

#[test]
fn fi_info_lists_the_dgram_domain_on_loopback() {
    let Some((info, _)) = installed() else { return };
    let _turn = serial();
    let listing = fi_info(&info, None, SERVER);
    assert!(
        lists(&listing, "verbs", "ferroce0-dgram", "FI_EP_DGRAM"),
        "{listing}"
    );
    assert!(
        lists(&listing, "verbs;ofi_rxd", "ferroce0-dgram", "FI_EP_RDM"),
        "{listing}"
    );
}

#[test]
fn dgram_pingpong_checks_data_on_loopback() {
    let Some((_, pp)) = installed() else { return };
    let _turn = serial();
    let table = pingpong(
        &pp,
        "dgram",
        &["-S", "1024", "-I", "20"],
        ON_LOOPBACK_SERVER,
        ON_LOOPBACK_CLIENT,
    );
    assert!(table.contains("=20"), "{table}");
}

#[test]
fn rdm_pingpong_over_rxd_checks_data_on_loopback() {
    let Some((_, pp)) = installed() else { return };
    let _turn = serial();
    // 64 KiB: ofi_rxd splits it into many UD datagrams and reassembles.
    let table = pingpong(
        &pp,
        "rdm",
        &["-S", "65536", "-I", "10"],
        ON_LOOPBACK_SERVER,
        ON_LOOPBACK_CLIENT,
    );
    assert!(table.contains("=10"), "{table}");
}

/// Two network namespaces joined by a veth pair, 10.201.0.1/24 in the
/// first and 10.201.0.2/24 in the second, removed (with the pair) on drop.
struct Namespaces {
    a: String,
    b: String,
}

impl Namespaces {
    const A_ADDR: &'static str = "10.201.0.1";
    const B_ADDR: &'static str = "10.201.0.2";

    fn create() -> Self {
        let tag = std::process::id();
        let ns = Self {
            a: format!("ferroce-fi-{tag}-a"),
            b: format!("ferroce-fi-{tag}-b"),
        };
        let (va, vb) = (format!("ffi{tag}a"), format!("ffi{tag}b"));
        ip(&["netns", "add", &ns.a]);
        ip(&["netns", "add", &ns.b]);
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
        ip(&["link", "set", &va, "netns", &ns.a]);
        ip(&["link", "set", &vb, "netns", &ns.b]);
        for (n, v, addr) in [(&ns.a, &va, Self::A_ADDR), (&ns.b, &vb, Self::B_ADDR)] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", v]);
            ip(&["-n", n, "link", "set", v, "up"]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ns
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and its peer.
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(out.status.success(), "ip {args:?}: {}", text(&out));
}

/// Root only (it creates namespaces): the MSG domain and the RDM
/// endpoints over it are listed on a veth, and DGRAM pingpong crosses it.
#[test]
fn over_a_veth_pair_in_namespaces() {
    let Some((info, pp)) = installed() else {
        return;
    };
    let has_ip = ["/usr/bin/ip", "/sbin/ip", "/usr/sbin/ip"]
        .iter()
        .any(|p| Path::new(p).exists());
    if !is_root() {
        skip("not root: network namespaces need root");
        return;
    }
    if !has_ip {
        skip("tool missing: ip (Debian's iproute2)");
        return;
    }
    let ns = Namespaces::create();
    let a = Side {
        netns: Some(&ns.a),
        device: Namespaces::A_ADDR,
    };
    let b = Side {
        netns: Some(&ns.b),
        device: Namespaces::B_ADDR,
    };
    let listing = fi_info(&info, a.netns, a.device);
    for (provider, domain, ty) in [
        ("verbs", "ferroce0", "FI_EP_MSG"),
        ("verbs;ofi_rxm", "ferroce0", "FI_EP_RDM"),
        ("verbs", "ferroce0-dgram", "FI_EP_DGRAM"),
        ("verbs;ofi_rxd", "ferroce0-dgram", "FI_EP_RDM"),
    ] {
        assert!(
            lists(&listing, provider, domain, ty),
            "no {provider} {domain} {ty} in:\n{listing}"
        );
    }
    // The veth's MTU (1500) makes the RoCE MTU 1024: one datagram each.
    let table = pingpong(&pp, "dgram", &["-S", "1024", "-I", "20"], a, b);
    assert!(table.contains("=20"), "{table}");
    // MSG endpoints connect through rdma_cm, with the IDs moved onto the
    // event queue's channel; RDM over ofi_rxm runs on them.
    for ep in ["msg", "rdm"] {
        let table = pingpong(&pp, ep, &["-S", "65536", "-I", "10"], a, b);
        assert!(table.contains("=10"), "{ep}: {table}");
    }
}
