//! A QP's path traffic class (`ConnectOptions::traffic_class`, rdma_cm's
//! ToS) is the IP header's TOS of every packet it sends: requests one way,
//! ACKs the other, each side with its own class.
//!
//! Reads the wire with a packet capture (an `AF_PACKET` socket), so it
//! needs root (CAP_NET_RAW), as CI has, and fails otherwise. Run it in a
//! network namespace of its own: `ip netns exec NAME cargo test -p ferroce
//! --test tos`.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, QpInitAttr, QpType, QueuePair,
    SendWr,
};
use ferroce_wire::{ethernet, ipv4, udp};
use socket2::{Domain, Protocol, Socket, Type};

/// The class of each side: DSCP 24 with ECT(0), and EF (46) with ECT(1).
const TOS_A: u8 = 0x62;
const TOS_B: u8 = 0xb9;

struct End {
    _ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

fn end(ip: IpAddr) -> End {
    let ctx = Context::open(ip).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(256).unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let mr = pd.reg_mr(1 << 20, access).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    End {
        _ctx: ctx,
        cq,
        mr,
        qp,
    }
}

/// The IPv4 source, TOS, UDP destination and source ports of an Ethernet
/// frame holding a UDP datagram.
fn parse(frame: &[u8]) -> Option<(Ipv4Addr, u8, u16, u16)> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let ip = frame.get(ethernet::HEADER_LEN..)?;
    if ethertype != ethernet::ETHERTYPE_IPV4 || *ip.get(9)? != ipv4::PROTO_UDP {
        return None;
    }
    let src = Ipv4Addr::from(<[u8; 4]>::try_from(ip.get(12..16)?).ok()?);
    let udp_at = usize::from(ip[0] & 0x0f) * 4;
    let src_port = u16::from_be_bytes(ip.get(udp_at..udp_at + 2)?.try_into().ok()?);
    let dst_port = u16::from_be_bytes(ip.get(udp_at + 2..udp_at + 4)?.try_into().ok()?);
    Some((src, ip[1], dst_port, src_port))
}

/// Held by each test for its whole run. A capture sees every test's
/// packets: the other test's 64 KiB GSO frames, arriving while this
/// capture's thread waits for a core behind the drivers' polling threads,
/// overflowed its socket buffer, and the few packets it was there to see
/// were dropped with them.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads the capture on its own thread until `stop`, so that its socket
/// buffer never fills (a full one drops frames): every (source, TOS,
/// UDP destination port, UDP source port) seen.
fn capture_until(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(Ipv4Addr, u8, u16, u16)>> {
    let all = Protocol::from(i32::from((libc::ETH_P_ALL as u16).to_be()));
    let cap = Socket::new(Domain::PACKET, Type::RAW, Some(all))
        .unwrap_or_else(|e| panic!("a packet capture needs root (CAP_NET_RAW), as CI has: {e}"));
    cap.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    // As large as the system allows (net.core.rmem_max), against bursts.
    cap.set_recv_buffer_size(16 << 20).unwrap();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut frame = vec![0u8; 70_000];
        loop {
            match (&cap).read(&mut frame) {
                Ok(n) => seen.extend(parse(&frame[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stop.load(Ordering::SeqCst) {
                        return seen;
                    }
                }
                Err(e) => panic!("capture: {e}"),
            }
        }
    })
}

#[test]
fn every_packet_carries_its_qps_traffic_class() {
    let _alone = one_at_a_time();
    let stop = Arc::new(AtomicBool::new(false));
    let capture = capture_until(stop.clone());
    let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, 0, 97), Ipv4Addr::new(127, 0, 0, 98));
    let (a, b) = (end(ip_a.into()), end(ip_b.into()));
    let with = |traffic_class| ConnectOptions {
        traffic_class,
        ..ConnectOptions::default()
    };
    a.qp.connect(&b.qp.endpoint(), &with(TOS_A)).unwrap();
    b.qp.connect(&a.qp.endpoint(), &with(TOS_B)).unwrap();
    // Four 64 KiB WRITEs: GSO trains from a, ACKs from b.
    for i in 0..4u64 {
        let target = b.mr.remote().at(i << 16, 1 << 16).unwrap();
        a.qp.post_send(SendWr::write(i, &[a.mr.sge(i << 16, 1 << 16)], target))
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut done = 0;
    while done < 4 {
        for wc in a.cq.poll(4).unwrap() {
            wc.ok().unwrap();
            done += 1;
        }
        assert!(Instant::now() < deadline, "{done} of 4 WRITEs completed");
    }
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let seen = capture.join().unwrap();

    // Everything to UDP 4791 between the two, as captured.
    let (mut requests, mut acks) = (0, 0);
    for (src, tos, port, _) in seen {
        if port != udp::ROCE_V2_PORT {
            continue;
        }
        if src == ip_a {
            assert_eq!(tos, TOS_A, "a request left with TOS {tos:#04x}");
            requests += 1;
        } else if src == ip_b {
            assert_eq!(tos, TOS_B, "an ACK left with TOS {tos:#04x}");
            acks += 1;
        }
    }
    assert!(requests > 0 && acks > 0, "{requests} requests, {acks} ACKs");
}

/// Set in the child process of `rdma_cm_connections_take_the_ports_default_or_their_own`.
const CHILD: &str = "FERROCE_TOS_TEST_CHILD";
/// `default_roce_tos` in the child's settings file, and the listener's own ToS.
const DEFAULT_TOS: u8 = 0x48;
const LISTENER_TOS: u8 = 0x22;
/// rxe's (and ferroce's) UDP source port for QP1: the CM's MADs.
const QP1_PORT: u16 = 55410;

#[test]
fn rdma_cm_connections_take_the_ports_default_or_their_own() {
    // The settings file is read through FERROCE_CONFIG, which must not leak
    // into other tests: the connections run in a child process (this test
    // binary again, running `rdma_cm_child` only), the capture here.
    let dir = std::env::temp_dir().join(format!("ferroce-tos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("rdma_cm.conf");
    std::fs::write(
        &settings,
        format!("ferroce0/ports/1/default_roce_tos = {DEFAULT_TOS}\n"),
    )
    .unwrap();
    let _alone = one_at_a_time();
    let stop = Arc::new(AtomicBool::new(false));
    let capture = capture_until(stop.clone());
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rdma_cm_child", "--nocapture"])
        .env(CHILD, "1")
        .env("FERROCE_CONFIG", &settings)
        .status()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let seen = capture.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "the child's connection failed: {status}");
    let (client, server) = (Ipv4Addr::new(127, 0, 1, 21), Ipv4Addr::new(127, 0, 1, 22));
    let mut counted = (0, 0);
    for (src, tos, port, sport) in seen {
        if port != udp::ROCE_V2_PORT || sport == QP1_PORT {
            continue;
        }
        if src == client {
            assert_eq!(
                tos, DEFAULT_TOS,
                "the client's packet left with TOS {tos:#04x}"
            );
            counted.0 += 1;
        } else if src == server {
            assert_eq!(
                tos, LISTENER_TOS,
                "the server's packet left with TOS {tos:#04x}"
            );
            counted.1 += 1;
        }
    }
    assert!(
        counted.0 > 0 && counted.1 > 0,
        "{counted:?} packets (client, server)"
    );
}

/// The child of the test above; does nothing unless started by it.
#[test]
fn rdma_cm_child() {
    use ferroce::cm::{ConnParam, EventChannel, PortSpace};
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let wait = Duration::from_secs(10);
    let next = |ch: &EventChannel| ch.get_event_timeout(wait).unwrap().expect("an event");
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = sch.create_id(PortSpace::Tcp).unwrap();
    listen.set_tos(LISTENER_TOS);
    listen
        .bind_addr("127.0.1.22:7480".parse().unwrap())
        .unwrap();
    listen.listen(1).unwrap();
    let cid = cch.create_id(PortSpace::Tcp).unwrap();
    cid.resolve_addr(
        Some("127.0.1.21:0".parse().unwrap()),
        "127.0.1.22:7480".parse().unwrap(),
        wait,
    )
    .unwrap();
    cid.resolve_route(wait).unwrap();
    let make = |id: &ferroce::cm::CmId| {
        let ctx = id.verbs().unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(16).unwrap();
        let mr = pd.reg_mr(1 << 16, Access::LOCAL_WRITE).unwrap();
        let qp = id
            .create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq))
            .unwrap();
        End {
            _ctx: ctx,
            cq,
            mr,
            qp,
        }
    };
    let c = make(&cid);
    cid.connect(&ConnParam::default()).unwrap();
    let mut sid = None;
    while sid.is_none() {
        let e = next(&sch);
        if e.kind.name() == "RDMA_CM_EVENT_CONNECT_REQUEST" {
            sid = Some(e.id);
        }
    }
    let sid = sid.unwrap();
    let s = make(&sid);
    s.qp.post_recv(ferroce::RecvWr::new(1, &[s.mr.sge(0, 1 << 16)]))
        .unwrap();
    sid.accept(&ConnParam::default()).unwrap();
    while next(&cch).kind.name() != "RDMA_CM_EVENT_ESTABLISHED" {}
    c.qp.post_send(SendWr::send(2, &[c.mr.sge(0, 8192)]))
        .unwrap();
    for cq in [&c.cq, &s.cq] {
        let wc = cq.wait(1, wait).unwrap();
        wc.first().expect("a completion").ok().unwrap();
    }
}
