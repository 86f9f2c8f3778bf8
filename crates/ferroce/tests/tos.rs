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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The IPv4 source, TOS and UDP destination port of an Ethernet frame
/// holding a UDP datagram.
fn parse(frame: &[u8]) -> Option<(Ipv4Addr, u8, u16)> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let ip = frame.get(ethernet::HEADER_LEN..)?;
    if ethertype != ethernet::ETHERTYPE_IPV4 || *ip.get(9)? != ipv4::PROTO_UDP {
        return None;
    }
    let src = Ipv4Addr::from(<[u8; 4]>::try_from(ip.get(12..16)?).ok()?);
    let udp_at = usize::from(ip[0] & 0x0f) * 4;
    let dst_port = u16::from_be_bytes(ip.get(udp_at + 2..udp_at + 4)?.try_into().ok()?);
    Some((src, ip[1], dst_port))
}

/// Reads the capture on its own thread until `stop`, so that its socket
/// buffer never fills (a full one drops frames): every (source, TOS,
/// UDP destination port) seen.
fn capture_until(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(Ipv4Addr, u8, u16)>> {
    let all = Protocol::from(i32::from((libc::ETH_P_ALL as u16).to_be()));
    let cap = Socket::new(Domain::PACKET, Type::RAW, Some(all))
        .unwrap_or_else(|e| panic!("a packet capture needs root (CAP_NET_RAW), as CI has: {e}"));
    cap.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
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
    for (src, tos, port) in seen {
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
