//! A shared receive queue over real UDP sockets on loopback: two RC QPs of
//! one device take their receives from one SRQ while two QPs of another
//! device send to them (127.0.0.81 and 127.0.0.82, port 4791, in the style
//! of `loopback.rs`).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce_io::wait::readable;

use ferroce::{
    Access, AsyncEvent, CompletionQueue, ConnectOptions, Context, Error, Psn, QpInitAttr, QpType,
    RecvWr, SendWr, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

fn wait(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut v = Vec::new();
    while v.len() < n {
        v.extend(cq.poll(n - v.len()).unwrap());
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions",
            v.len()
        );
    }
    v
}

fn send(wr_id: u64, sg: &[ferroce::Sge]) -> SendWr<'_> {
    SendWr::send(wr_id, sg)
}

/// Message `n`: its length and bytes, different for each.
fn message(n: u64) -> Vec<u8> {
    let len = 5000 + 700 * n as usize;
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(n as u32) as u8
        })
        .collect()
}

#[test]
fn two_rc_qps_share_an_srq_over_udp() {
    const SLOT: u64 = 16384;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let ips: [IpAddr; 2] = ["127.0.0.81".parse().unwrap(), "127.0.0.82".parse().unwrap()];
    // The receiving device: one SRQ, one CQ, two QPs.
    let server = Context::open(ips[0]).unwrap();
    let pd = server.alloc_pd();
    let cq = server.create_cq(256).unwrap();
    let mr = pd.reg_mr(16 * SLOT as usize, access).unwrap();
    let srq = pd.create_srq(16).unwrap();
    let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
    attr.srq = Some(&srq);
    // First PSNs just before the 24-bit wrap on one side.
    fn with_psn<'a>(attr: &QpInitAttr<'a>, psn: u32) -> QpInitAttr<'a> {
        QpInitAttr {
            psn: Some(Psn::new(psn)),
            ..*attr
        }
    }
    let b = [
        pd.create_qp(&with_psn(&attr, 0xfffff0)).unwrap(),
        pd.create_qp(&with_psn(&attr, 0xfffff1)).unwrap(),
    ];
    // The sending device: two QPs, one per server QP.
    let client = Context::open(ips[1]).unwrap();
    let cpd = client.alloc_pd();
    let ccq = client.create_cq(256).unwrap();
    let cmr = cpd.reg_mr(16 * SLOT as usize, access).unwrap();
    let cattr = QpInitAttr::new(QpType::Rc, &ccq, &ccq);
    let a = [
        cpd.create_qp(&with_psn(&cattr, 100)).unwrap(),
        cpd.create_qp(&with_psn(&cattr, 101)).unwrap(),
    ];
    let opts = ConnectOptions::default();
    for (a, b) in a.iter().zip(&b) {
        a.connect(&b.endpoint(), &opts).unwrap();
        b.connect(&a.endpoint(), &opts).unwrap();
    }

    // Receives go to the SRQ, not to its QPs.
    let refused = b[0].post_recv(RecvWr::new(0, &[mr.sge(0, 16)]));
    assert!(
        matches!(refused, Err(Error::Verbs(VerbsError::QpHasSrq { .. }))),
        "{refused:?}"
    );

    // An empty SRQ: the first SEND waits out RNR NAKs until a receive is
    // posted.
    let first = message(0);
    cmr.write(0, &first).unwrap();
    a[0].post_send(send(0, &[cmr.sge(0, first.len() as u32)]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(cq.poll(1).unwrap().is_empty());
    srq.post_recv(RecvWr::new(0, &[mr.sge(0, SLOT as u32)]))
        .unwrap();
    let r = wait(&cq, 1);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].qpn, r[0].byte_len),
        (0, WcStatus::Success, b[0].qpn(), first.len() as u32)
    );
    assert_eq!(wait(&ccq, 1)[0].status, WcStatus::Success);

    // Eight more WQEs, the limit armed at 3, four SENDs from each peer.
    for wr_id in 1..=8 {
        srq.post_recv(RecvWr::new(wr_id, &[mr.sge(wr_id * SLOT, SLOT as u32)]))
            .unwrap();
    }
    srq.arm_limit(3).unwrap();
    assert_eq!(srq.query().unwrap().srq_limit, 3);
    for n in 1..=8u64 {
        let m = message(n);
        let off = n * SLOT;
        cmr.write(off, &m).unwrap();
        a[(n % 2) as usize]
            .post_send(send(n, &[cmr.sge(off, m.len() as u32)]))
            .unwrap();
    }
    let got = wait(&cq, 8);
    let mut per_qp = [0; 2];
    for wc in &got {
        assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Recv));
        // Which message filled this WQE tells which peer sent it.
        let mut buf = vec![0u8; wc.byte_len as usize];
        mr.read(wc.wr_id * SLOT, &mut buf).unwrap();
        let n = (1..=8)
            .find(|&n| message(n) == buf)
            .unwrap_or_else(|| panic!("WQE {} holds no message", wc.wr_id));
        let i = (n % 2) as usize;
        assert_eq!(wc.qpn, b[i].qpn(), "message {n}");
        assert_eq!(wc.src_qp, a[i].qpn());
        per_qp[i] += 1;
    }
    assert_eq!(per_qp, [4, 4]);
    let sent = wait(&ccq, 8);
    assert!(
        sent.iter().all(|w| w.status == WcStatus::Success),
        "{sent:?}"
    );
    assert_eq!(srq.query().unwrap().wqes, 0);
    // Below 3 left: reported once, and the limit disarmed. The driver
    // moved the event out of the engine: its descriptor says so before any
    // call asks, and stops saying so once it is taken.
    let fd = server.async_event_fd();
    assert!(readable(fd, Duration::from_secs(2)).unwrap(), "async fd");
    assert_eq!(
        server.poll_async_event(),
        Some(AsyncEvent::SrqLimitReached { srq: srq.handle() })
    );
    assert!(!readable(server.async_event_fd(), Duration::ZERO).unwrap());
    assert_eq!(server.poll_async_event(), None);
    assert_eq!(srq.query().unwrap().srq_limit, 0);
    assert_eq!(client.poll_async_event(), None);
}
