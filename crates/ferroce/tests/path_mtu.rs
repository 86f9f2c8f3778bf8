//! The path MTU `QueuePair::connect` picks: by default the smaller of the
//! two ports' active MTUs (each endpoint carries its port's), an explicit
//! `ConnectOptions::mtu` as given. Seen from outside: the packets a
//! 16 KiB RDMA READ's responses take (the responder segments them at the
//! path MTU), counted by the requester's device. Each test uses its own
//! 127.0.77.x pair.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, Mtu, QpEndpoint, QpInitAttr,
    QpType, QueuePair, SendWr, WcStatus,
};

const LEN: usize = 16 << 10;

struct End {
    ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

fn end(ip: &str) -> End {
    let ip: IpAddr = ip.parse().unwrap();
    let ctx = Context::open(ip).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let mr = pd
        .reg_mr(LEN, Access::LOCAL_WRITE | Access::REMOTE_READ)
        .unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    End { ctx, cq, mr, qp }
}

/// Connects `a` to `b` with `a_opts` and `b_opts` (each side's own, and
/// each sees the other's endpoint as `peer` rewrites it), READs 16 KiB
/// from `b` and returns the packets `a`'s device received for it.
fn read_packets(
    addrs: [&str; 2],
    a_opts: ConnectOptions,
    b_opts: ConnectOptions,
    peer: impl Fn(QpEndpoint) -> QpEndpoint,
) -> u64 {
    let (a, b) = (end(addrs[0]), end(addrs[1]));
    a.qp.connect(&peer(b.qp.endpoint()), &a_opts).unwrap();
    b.qp.connect(&peer(a.qp.endpoint()), &b_opts).unwrap();
    let before = a.ctx.stats().rx_packets;
    let sg = [a.mr.sge(0, LEN as u32)];
    let remote = b.mr.remote().whole();
    a.qp.post_send(SendWr::read(1, &sg, remote)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let wcs = a.cq.wait(1, Duration::from_millis(100)).unwrap();
        if let Some(wc) = wcs.first() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no READ completion in 10 s");
    }
    a.ctx.stats().rx_packets - before
}

/// The active MTU of loopback's port, as `ibv_query_port` reports it.
fn active(ctx_ip: &str) -> Mtu {
    let ctx = Context::open(ctx_ip.parse().unwrap()).unwrap();
    ctx.query_port().unwrap().active_mtu
}

#[test]
fn an_endpoint_carries_its_ports_active_mtu() {
    let e = end("127.0.77.1");
    let port = e.ctx.query_port().unwrap().active_mtu;
    assert_eq!(e.qp.endpoint().mtu, Some(port));
    let decoded = QpEndpoint::from_bytes(&e.qp.endpoint().to_bytes()).unwrap();
    assert_eq!(decoded.mtu, Some(port));
}

#[test]
fn the_default_takes_the_ports_active_mtu_and_an_explicit_one_is_kept() {
    let port = active("127.0.77.2");
    assert!(port > Mtu::Mtu1024, "loopback's active MTU is {port:?}");
    let responses = |mtu: Mtu| (LEN / mtu.bytes()) as u64;
    // Default on both sides: the port's MTU (1024 before).
    let got = read_packets(
        ["127.0.77.2", "127.0.77.3"],
        ConnectOptions::default(),
        ConnectOptions::default(),
        |e| e,
    );
    assert_eq!(got, responses(port), "default options");
    // Explicit, below the port's: as given.
    let explicit = ConnectOptions {
        mtu: Some(Mtu::Mtu1024),
        ..ConnectOptions::default()
    };
    let got = read_packets(["127.0.77.4", "127.0.77.5"], explicit, explicit, |e| e);
    assert_eq!(got, responses(Mtu::Mtu1024), "explicit 1024");
}

#[test]
fn the_default_takes_the_smaller_of_both_ports() {
    // The peer's endpoint says its port's MTU is 512: both sides use it.
    let small = |e: QpEndpoint| QpEndpoint {
        mtu: Some(Mtu::Mtu512),
        ..e
    };
    let got = read_packets(
        ["127.0.77.6", "127.0.77.7"],
        ConnectOptions::default(),
        ConnectOptions::default(),
        small,
    );
    assert_eq!(got, (LEN / 512) as u64);
}

#[test]
fn path_mtu_resolves_as_documented() {
    let peer = |mtu| QpEndpoint {
        mtu,
        ..QpEndpoint::new(
            "10.0.0.1".parse().unwrap(),
            QpType::Rc,
            0x11,
            ferroce::Psn::new(1),
        )
    };
    let auto = ConnectOptions::default();
    assert_eq!(auto.mtu, None);
    assert_eq!(auto.path_mtu(Mtu::Mtu4096, &peer(None)), Mtu::Mtu4096);
    assert_eq!(
        auto.path_mtu(Mtu::Mtu4096, &peer(Some(Mtu::Mtu2048))),
        Mtu::Mtu2048
    );
    assert_eq!(
        auto.path_mtu(Mtu::Mtu1024, &peer(Some(Mtu::Mtu4096))),
        Mtu::Mtu1024
    );
    let fixed = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    assert_eq!(
        fixed.path_mtu(Mtu::Mtu1024, &peer(Some(Mtu::Mtu512))),
        Mtu::Mtu4096
    );
}
