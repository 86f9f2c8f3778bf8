//! Route resolution against real routing tables.
//!
//! Each namespace test builds two network namespaces joined by a veth pair
//! (`va` in the first, `vb` in the second) with `ip`, runs its queries in
//! the first one (this test binary run again under `ip netns exec`, as the
//! `probe_child` test, which prints one line per query), and removes the
//! namespaces afterwards, also when an assertion fails (a guard's `Drop`).
//! Nothing is sent over the veth: resolution only asks the kernel. They
//! need root and are skipped, saying so, without it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use ferroce_io::route::{self, Route, RouteError};

#[path = "../../ferroce-verbs/tests/shared/skip.rs"]
mod skip;

/// The queries a `probe_child` run answers: `DST[%IFNAME][ from SRC]`, `;`
/// between queries.
const PROBE_ENV: &str = "FERROCE_ROUTE_PROBE";

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?.to_owned();
            Some(line.split_whitespace().nth(1)? == "0")
        })
        .unwrap_or(false)
}

/// Two network namespaces, deleted on drop.
struct Netns {
    a: String,
    b: String,
}

impl Netns {
    /// `tag` names the test; the process id and a counter make the names
    /// unique among concurrent runs.
    fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("froute-{tag}-{}-{n}", std::process::id());
        let ns = Self {
            a: format!("{base}-a"),
            b: format!("{base}-b"),
        };
        run(&["netns", "add", &ns.a]);
        run(&["netns", "add", &ns.b]);
        ns.ip_a(&["link", "set", "lo", "up"]);
        ns.ip_a(&[
            "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &ns.b,
        ]);
        for (ns_name, dev) in [(&ns.a, "va"), (&ns.b, "vb")] {
            // No kernel-made link-local address: the tests give their own,
            // so which one the kernel picks is known.
            run(&["-n", ns_name, "link", "set", dev, "addrgenmode", "none"]);
            run(&["-n", ns_name, "link", "set", dev, "up"]);
        }
        ns.ip_a(&["addr", "add", "198.18.5.1/24", "dev", "va"]);
        ns.ip_a(&["-6", "addr", "add", "fd00:5::1/64", "dev", "va", "nodad"]);
        ns.ip_a(&["-6", "addr", "add", "fe80::a/64", "dev", "va", "nodad"]);
        ns.ip_b(&["addr", "add", "198.18.5.2/24", "dev", "vb"]);
        ns.ip_b(&["-6", "addr", "add", "fd00:5::2/64", "dev", "vb", "nodad"]);
        ns.ip_b(&["-6", "addr", "add", "fe80::b/64", "dev", "vb", "nodad"]);
        ns
    }

    fn ip_a(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.a];
        all.extend_from_slice(args);
        run(&all);
    }

    fn ip_b(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.b];
        all.extend_from_slice(args);
        run(&all);
    }

    /// Runs `queries` in the first namespace; the answer line of each.
    fn probe(&self, queries: &[&str]) -> HashMap<String, String> {
        let exe = std::env::current_exe().unwrap();
        let out = Command::new("ip")
            .args(["netns", "exec", &self.a])
            .arg(exe)
            .args(["--exact", "probe_child", "--nocapture", "--test-threads=1"])
            .env(PROBE_ENV, queries.join(";"))
            .output()
            .expect("running ip netns exec");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "probe failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answers: HashMap<String, String> = stdout
            .lines()
            // The first line follows libtest's "test probe_child ... ".
            .filter_map(|l| l.split_once("PROBE ").map(|(_, rest)| rest))
            .filter_map(|l| l.split_once(" => "))
            .map(|(q, a)| (q.to_owned(), a.to_owned()))
            .collect();
        for q in queries {
            assert!(answers.contains_key(*q), "no answer to {q}: {stdout}");
        }
        answers
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs `ip args`, failing the test with its error output.
fn run(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One answer line as `key=value` fields (an error is `err=Variant` with
/// `errno=N`, then its message after `: `).
fn fields(line: &str) -> HashMap<&str, &str> {
    let head = line.split_once(": ").map_or(line, |(h, _)| h);
    head.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

/// Asserts that the answer to `q` has each `key=value` of `want`.
fn expect(answers: &HashMap<String, String>, q: &str, want: &[(&str, &str)]) {
    let line = &answers[q];
    let got = fields(line);
    for (k, v) in want {
        assert_eq!(got.get(k), Some(v), "{q}: {k} in {line}");
    }
}

fn describe(r: &Result<Route, RouteError>) -> String {
    match r {
        Ok(r) => format!(
            "ok src={} if={} ifindex={} ifmtu={} pmtu={} locked={} ib={} hop={} gw={} local={}",
            r.source,
            r.interface,
            r.ifindex,
            r.interface_mtu,
            r.path_mtu,
            r.path_mtu_locked,
            r.ib_mtu,
            r.hop_limit,
            r.gateway.map_or("none".to_owned(), |g| g.to_string()),
            r.local
        ),
        Err(e) => {
            let dbg = format!("{e:?}");
            let variant = dbg.split([' ', '{', '(']).next().unwrap_or_default();
            format!("err={variant} errno={}: {e}", e.errno())
        }
    }
}

/// `ADDR` or `ADDR%IFNAME` (the index read from this namespace's /sys,
/// which `ip netns exec` mounts for it).
fn parse_addr(s: &str) -> SocketAddr {
    match s.split_once('%') {
        Some((a, ifname)) => {
            let index = std::fs::read_to_string(format!("/sys/class/net/{ifname}/ifindex"))
                .unwrap_or_else(|e| panic!("no interface {ifname}: {e}"));
            let index: u32 = index.trim().parse().unwrap();
            SocketAddr::V6(SocketAddrV6::new(a.parse().unwrap(), 0, 0, index))
        }
        None => SocketAddr::new(s.parse::<IpAddr>().unwrap(), 0),
    }
}

fn answer(query: &str) -> String {
    let (dst, src) = match query.split_once(" from ") {
        Some((d, s)) => (d, Some(parse_addr(s))),
        None => (query, None),
    };
    describe(&route::resolve_scoped(parse_addr(dst), src))
}

/// Answers the queries of [`PROBE_ENV`] (run by [`Netns::probe`] inside
/// a namespace). Run alone, it answers 127.0.0.1 here and checks the line
/// the namespace tests parse.
#[test]
fn probe_child() {
    match std::env::var(PROBE_ENV) {
        Ok(queries) => {
            for q in queries.split(';') {
                println!("PROBE {q} => {}", answer(q));
            }
        }
        Err(_) => {
            let line = answer("127.0.0.1");
            let f = fields(&line);
            assert_eq!(f.get("local"), Some(&"true"), "{line}");
            assert_eq!(f.get("src"), Some(&"127.0.0.1"), "{line}");
        }
    }
}

fn skip_unless_root() -> bool {
    if is_root() {
        return false;
    }
    skip::skip("not root: network namespaces need root");
    true
}

#[test]
fn loopback_here() {
    for q in ["127.0.0.1", "127.0.0.5", "::ffff:127.0.0.1"] {
        let r = route::resolve(q.parse().unwrap(), None).unwrap();
        assert!(r.local, "{q}: {r:?}");
        assert!(r.source.is_loopback(), "{q}: {r:?}");
        assert!(r.destination.is_ipv4(), "{q}: {r:?}");
        assert_eq!(r.path_mtu, r.interface_mtu, "{q}: {r:?}");
        assert_eq!(Some(r.ib_mtu), route::ib_mtu_for(r.interface_mtu));
    }
    let has_v6_loopback = ferroce_io::netif::interface_of("::1".parse().unwrap())
        .unwrap()
        .is_some();
    if !has_v6_loopback {
        skip::skip("no ::1 on lo (IPv6 disabled): only the ::1 checks are skipped");
        return;
    }
    let r = route::resolve("::1".parse().unwrap(), None).unwrap();
    assert!(
        r.local && r.source == "::1".parse::<IpAddr>().unwrap(),
        "{r:?}"
    );
}

#[test]
fn veth_mtus_give_rdma_cms_ib_mtus() {
    if skip_unless_root() {
        return;
    }
    let ns = Netns::new("mtu");
    for (mtu, ib) in [("1500", "1024"), ("9000", "4096"), ("1280", "1024")] {
        ns.ip_a(&["link", "set", "va", "mtu", mtu]);
        let a = ns.probe(&["198.18.5.2", "fd00:5::2"]);
        for (q, src) in [("198.18.5.2", "198.18.5.1"), ("fd00:5::2", "fd00:5::1")] {
            expect(
                &a,
                q,
                &[
                    ("src", src),
                    ("if", "va"),
                    ("ifmtu", mtu),
                    ("pmtu", mtu),
                    ("locked", "false"),
                    ("ib", ib),
                    ("hop", "64"),
                    ("gw", "none"),
                    ("local", "false"),
                ],
            );
        }
    }
}

#[test]
fn route_metrics_mtu_lock_and_hop_limit() {
    if skip_unless_root() {
        return;
    }
    let ns = Netns::new("lock");
    ns.ip_a(&["link", "set", "va", "mtu", "9000"]);
    let via4 = ["via", "198.18.5.2", "dev", "va"];
    let lock = ["mtu", "lock", "1400", "hoplimit", "17"];
    ns.ip_a(&[&["route", "add", "198.18.77.0/24"][..], &via4, &lock].concat());
    ns.ip_a(
        &[
            &["route", "add", "198.18.78.0/24"][..],
            &via4,
            &["mtu", "2000"],
        ]
        .concat(),
    );
    ns.ip_a(&[
        "-6",
        "route",
        "add",
        "fd00:77::/64",
        "via",
        "fd00:5::2",
        "dev",
        "va",
        "mtu",
        "lock",
        "1400",
        "hoplimit",
        "9",
    ]);
    let a = ns.probe(&["198.18.77.9", "198.18.78.9", "fd00:77::9", "198.18.5.2"]);
    let locked = [
        ("if", "va"),
        ("ifmtu", "9000"),
        ("pmtu", "1400"),
        ("locked", "true"),
    ];
    expect(&a, "198.18.77.9", &locked);
    expect(
        &a,
        "198.18.77.9",
        &[("ib", "1024"), ("hop", "17"), ("gw", "198.18.5.2")],
    );
    expect(&a, "fd00:77::9", &locked);
    expect(
        &a,
        "fd00:77::9",
        &[
            ("ib", "1024"),
            ("hop", "9"),
            ("gw", "fd00:5::2"),
            ("src", "fd00:5::1"),
        ],
    );
    // An unlocked route MTU counts too: 2000 - 96 leaves room for 1024.
    expect(
        &a,
        "198.18.78.9",
        &[
            ("pmtu", "2000"),
            ("locked", "false"),
            ("ib", "1024"),
            ("hop", "64"),
        ],
    );
    // The directly connected network keeps the interface's.
    expect(&a, "198.18.5.2", &[("pmtu", "9000"), ("ib", "4096")]);

    // A route MTU above the interface's is what the kernel reports as the
    // path MTU, but packets cannot leave larger than the interface takes:
    // the IB MTU follows the smaller.
    ns.ip_a(&["link", "set", "va", "mtu", "1500"]);
    ns.ip_a(
        &[
            &["route", "add", "198.18.79.0/24"][..],
            &via4,
            &["mtu", "9200"],
        ]
        .concat(),
    );
    let a = ns.probe(&["198.18.79.9"]);
    expect(
        &a,
        "198.18.79.9",
        &[("ifmtu", "1500"), ("pmtu", "9200"), ("ib", "1024")],
    );
}

#[test]
fn sources_and_missing_routes() {
    if skip_unless_root() {
        return;
    }
    let ns = Netns::new("err");
    ns.ip_a(&["route", "add", "unreachable", "198.18.66.0/24"]);
    ns.ip_a(&["route", "add", "prohibit", "198.18.67.0/24"]);
    ns.ip_a(&["route", "add", "blackhole", "198.18.68.0/24"]);
    let a = ns.probe(&[
        "198.18.5.2 from 198.18.5.1",
        "198.18.5.2 from 198.18.9.9",
        "198.18.5.2 from 127.0.0.1",
        "203.0.113.1",
        "198.18.66.1",
        "198.18.67.1",
        "198.18.68.1",
        "2001:db8::1",
        "198.18.5.2 from fd00:5::1",
    ]);
    expect(
        &a,
        "198.18.5.2 from 198.18.5.1",
        &[("src", "198.18.5.1"), ("if", "va")],
    );
    expect(
        &a,
        "198.18.5.2 from 198.18.9.9",
        &[("err", "SourceNotLocal"), ("errno", "99")],
    );
    // A loopback source cannot leave through va (the kernel says EINVAL).
    expect(
        &a,
        "198.18.5.2 from 127.0.0.1",
        &[("err", "NoRoute"), ("errno", "22")],
    );
    expect(&a, "203.0.113.1", &[("err", "NoRoute"), ("errno", "101")]);
    expect(&a, "198.18.66.1", &[("err", "NoRoute"), ("errno", "113")]);
    expect(&a, "198.18.67.1", &[("err", "NoRoute"), ("errno", "13")]);
    expect(&a, "198.18.68.1", &[("err", "NoRoute"), ("errno", "22")]);
    expect(&a, "2001:db8::1", &[("err", "NoRoute"), ("errno", "101")]);
    expect(
        &a,
        "198.18.5.2 from fd00:5::1",
        &[("err", "FamilyMismatch"), ("errno", "22")],
    );
    let msg = &a["203.0.113.1"];
    assert!(
        msg.contains(
            "no route to 203.0.113.1: add a route or pass a source address on the right interface"
        ),
        "{msg}"
    );
}

#[test]
fn ipv6_link_local_needs_a_scope() {
    if skip_unless_root() {
        return;
    }
    let ns = Netns::new("ll");
    let a = ns.probe(&[
        "fe80::b",
        "fe80::b from fe80::a",
        "fe80::b%va",
        "fe80::b%va from fe80::a",
        "fe80::b from fe80::a%va",
        "fe80::a%va",
    ]);
    for q in ["fe80::b", "fe80::b from fe80::a"] {
        expect(&a, q, &[("err", "NeedsScope"), ("errno", "22")]);
    }
    let on_va = [("src", "fe80::a"), ("if", "va"), ("local", "false")];
    // One scope id, on either address, names the interface.
    for q in [
        "fe80::b%va",
        "fe80::b%va from fe80::a",
        "fe80::b from fe80::a%va",
    ] {
        expect(&a, q, &on_va);
    }
    expect(&a, "fe80::a%va", &[("if", "va"), ("local", "true")]);

    // The same link-local address on two interfaces: the scope decides.
    ns.ip_a(&["link", "add", "vc", "type", "veth", "peer", "name", "vd"]);
    for dev in ["vc", "vd"] {
        ns.ip_a(&["link", "set", dev, "addrgenmode", "none"]);
        ns.ip_a(&["link", "set", dev, "mtu", "1280"]);
        ns.ip_a(&["link", "set", dev, "up"]);
    }
    ns.ip_a(&["-6", "addr", "add", "fe80::a/64", "dev", "vc", "nodad"]);
    let a = ns.probe(&["fe80::a%va", "fe80::a%vc"]);
    expect(
        &a,
        "fe80::a%va",
        &[("if", "va"), ("ifmtu", "1500"), ("local", "true")],
    );
    expect(
        &a,
        "fe80::a%vc",
        &[("if", "vc"), ("ifmtu", "1280"), ("local", "true")],
    );
}

#[test]
fn local_addresses_resolve_to_their_interface() {
    if skip_unless_root() {
        return;
    }
    let ns = Netns::new("local");
    ns.ip_a(&["link", "set", "va", "mtu", "1280"]);
    let a = ns.probe(&["198.18.5.1", "fd00:5::1", "127.0.0.5", "::1"]);
    // The route goes through lo, but the device is the one on the address,
    // with its MTU, as rdma_cm translates a loopback route.
    for (q, src) in [("198.18.5.1", "198.18.5.1"), ("fd00:5::1", "fd00:5::1")] {
        expect(
            &a,
            q,
            &[
                ("src", src),
                ("if", "va"),
                ("ifmtu", "1280"),
                ("pmtu", "1280"),
                ("ib", "1024"),
                ("local", "true"),
            ],
        );
    }
    let lo = [
        ("if", "lo"),
        ("ifmtu", "65536"),
        ("ib", "4096"),
        ("local", "true"),
    ];
    expect(&a, "127.0.0.5", &lo);
    expect(&a, "127.0.0.5", &[("src", "127.0.0.1")]);
    expect(&a, "::1", &lo);
    expect(&a, "::1", &[("src", "::1")]);
}
