//! UD multicast over real UDP sockets on loopback (127.0.0.171-176,
//! groups 239.255.71.x): every attached QP of every device gets a copy,
//! the sender's own included (the kernel's multicast loop); a detached QP
//! gets nothing; garbage sent to a group is dropped and counted; refusals
//! name the cause. (Linux does not loop IPv6 multicast on `lo`: IPv6
//! groups are tested on the simulated network.)
//! Run it in a network namespace of its own when other tests bind the
//! same addresses.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    CompletionQueue, Context, Error, McastRefusal, MemoryRegion, Path, Psn, QpAttr, QpInitAttr,
    QpState, QpType, QueuePair, RecvWr, RoceMode, SendWr, UdDest, VerbsError, WcStatus,
    WorkCompletion,
};

const GROUP: &str = "239.255.71.1";
const QKEY: u32 = 0x1234_5678;

struct Member {
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

fn ud_member(ctx: &Context) -> Member {
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(64).unwrap();
    let mr = pd.reg_mr(1 << 14, ferroce::Access::LOCAL_WRITE).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr::new(QpType::Ud, &cq, &cq))
        .unwrap();
    for attr in [
        QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(1),
            qkey: Some(QKEY),
            ..QpAttr::default()
        },
        QpAttr {
            state: Some(QpState::Rtr),
            ..QpAttr::default()
        },
        QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(Psn::new(0)),
            ..QpAttr::default()
        },
    ] {
        qp.modify(&attr).unwrap();
    }
    Member { cq, mr, qp }
}

fn post_recv(m: &Member, wr_id: u64) {
    m.qp.post_recv(RecvWr::new(wr_id, &[m.mr.sge(0, 4096)]))
        .unwrap();
}

fn to_group(group: IpAddr) -> UdDest {
    UdDest {
        path: Path {
            remote: group,
            udp_src_port: 0xc0de,
            traffic_class: 0,
            hop_limit: 64,
            roce: RoceMode::V2,
        },
        qpn: ferroce::MULTICAST_QPN,
        qkey: QKEY,
    }
}

/// Completions of `cq` within `wait`, at most `n`.
fn completions(cq: &CompletionQueue, n: usize, wait: Duration) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        got.extend(cq.poll(n - got.len()).unwrap());
    }
    got
}

fn send(from: &Member, group: IpAddr, data: &[u8]) {
    from.mr.write(0, data).unwrap();
    let sg = [from.mr.sge(0, data.len() as u32)];
    let mut wr = SendWr::send(1, &sg);
    wr.ud = Some(to_group(group));
    from.qp.post_send(wr).unwrap();
    let c = completions(&from.cq, 1, Duration::from_secs(10));
    assert_eq!(c.len(), 1, "send completion");
}

#[test]
fn every_attached_qp_of_every_device_gets_a_copy_until_detached() {
    let group: IpAddr = GROUP.parse().unwrap();
    let ctx: Vec<Context> = ["127.0.0.171", "127.0.0.172", "127.0.0.173"]
        .iter()
        .map(|a| Context::open(a.parse::<IpAddr>().unwrap()).unwrap())
        .collect();
    let tx = ud_member(&ctx[0]);
    let rx = [ud_member(&ctx[1]), ud_member(&ctx[1]), ud_member(&ctx[2])];
    tx.qp.attach_mcast(group).unwrap();
    for m in &rx {
        m.qp.attach_mcast(group).unwrap();
    }
    for (i, m) in rx.iter().enumerate() {
        post_recv(m, i as u64);
        post_recv(m, 10 + i as u64);
    }
    // The sender's receive comes first in its CQ: its own send completes
    // second at the earliest (the loop copy may overtake the completion).
    post_recv(&tx, 99);
    let data = b"to every member";
    tx.mr.write(0, data).unwrap();
    let sg = [tx.mr.sge(0, data.len() as u32)];
    let mut wr = SendWr::send(1, &sg);
    wr.ud = Some(to_group(group));
    tx.qp.post_send(wr).unwrap();
    let own = completions(&tx.cq, 2, Duration::from_secs(10));
    assert_eq!(own.len(), 2, "send and the sender's own copy: {own:?}");
    assert!(
        own.iter()
            .any(|c| c.wr_id == 99 && c.status == WcStatus::Success)
    );
    for (i, m) in rx.iter().enumerate() {
        let c = completions(&m.cq, 1, Duration::from_secs(10));
        assert_eq!(c.len(), 1, "member {i}");
        assert_eq!((c[0].status, c[0].wr_id), (WcStatus::Success, i as u64));
        assert_eq!(c[0].byte_len as usize, 40 + data.len());
        assert_eq!(c[0].src_qp, tx.qp.qpn());
        let mut got = vec![0; data.len()];
        m.mr.read(40, &mut got).unwrap();
        assert_eq!(got, data);
    }
    // The third device's only member leaves: its group socket goes, and
    // the next send reaches the others only.
    rx[2].qp.detach_mcast(group).unwrap();
    tx.qp.detach_mcast(group).unwrap();
    send(&tx, group, b"second");
    for (i, m) in rx[..2].iter().enumerate() {
        let c = completions(&m.cq, 1, Duration::from_secs(10));
        assert_eq!(c.len(), 1, "member {i}, second send");
        assert_eq!(c[0].wr_id, 10 + i as u64);
    }
    assert!(completions(&rx[2].cq, 1, Duration::from_millis(300)).is_empty());
    assert!(completions(&tx.cq, 1, Duration::from_millis(100)).is_empty());
}

#[test]
fn refusals_name_the_cause() {
    let ctx = Context::open("127.0.0.174".parse::<IpAddr>().unwrap()).unwrap();
    let m = ud_member(&ctx);
    let unicast: IpAddr = "127.0.0.9".parse().unwrap();
    let err = m.qp.attach_mcast(unicast).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Verbs(VerbsError::Mcast {
                why: McastRefusal::NotMulticast,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("not a multicast GID"), "{err}");
    let v6: IpAddr = "ff0e::71".parse().unwrap();
    let err = m.qp.attach_mcast(v6).unwrap_err();
    assert!(err.to_string().contains("address family"), "{err}");
    let err = m.qp.detach_mcast(GROUP.parse().unwrap()).unwrap_err();
    assert!(err.to_string().contains("not attached"), "{err}");
}

#[test]
fn garbage_sent_to_a_group_is_dropped_and_counted() {
    let group: IpAddr = "239.255.71.2".parse().unwrap();
    let ctx = Context::open("127.0.0.175".parse::<IpAddr>().unwrap()).unwrap();
    let m = ud_member(&ctx);
    m.qp.attach_mcast(group).unwrap();
    post_recv(&m, 1);
    let before = ctx.udp_stats();
    let sock = std::net::UdpSocket::bind("127.0.0.176:0").unwrap();
    sock.set_multicast_loop_v4(true).unwrap();
    // A UD SEND ONLY to the multicast QPN with rdma_cm's layout and a
    // zero ICRC, a runt, and an unknown opcode.
    let mut bad_icrc = vec![0x64, 0, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0, 0, 0, 1];
    bad_icrc.extend_from_slice(&QKEY.to_be_bytes());
    bad_icrc.extend_from_slice(&[0, 0, 0, 0x42]);
    bad_icrc.extend_from_slice(&[7; 8]);
    bad_icrc.extend_from_slice(&[0; 4]);
    let dest = std::net::SocketAddr::new(group, 4791);
    for d in [&bad_icrc[..], &[0xff; 5][..], &[0xfe; 40][..]] {
        sock.send_to(d, dest).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while ctx.udp_stats().rx_datagrams < before.rx_datagrams + 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = ctx.udp_stats();
    assert_eq!(after.rx_datagrams - before.rx_datagrams, 3, "{after:?}");
    assert_eq!(after.rx_bad_icrc - before.rx_bad_icrc, 1, "{after:?}");
    assert_eq!(after.rx_too_short - before.rx_too_short, 1, "{after:?}");
    assert_eq!(after.rx_bad_opcode - before.rx_bad_opcode, 1, "{after:?}");
    assert!(completions(&m.cq, 1, Duration::from_millis(200)).is_empty());
}
