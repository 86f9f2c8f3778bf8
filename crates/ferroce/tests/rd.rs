//! Reliable datagram over real UDP sockets on loopback, through the
//! driver: two devices (127.0.0.141 and 127.0.0.142), each with a reliable
//! datagram domain, one EE context joined to the other's, and RD QPs. One
//! RD QP of A reaches two RD QPs of B with SENDs of several packets, a
//! WRITE and a READ; a SEND with another Q_Key is refused by B's EE
//! context.

use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, Error, MemoryRegion, Mtu, QpInitAttr,
    QpState, QpType, QueuePair, RdDest, RecvWr, SendWr, VerbsError, WcOpcode, WcStatus,
    WorkCompletion,
};

const QKEY: u32 = 0x0bad_cafe;

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

struct Host {
    _ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    eec: ferroce::EeContext,
    qps: Vec<QueuePair>,
}

fn host(addr: &str, n_qps: usize) -> Host {
    let ctx = Context::open(addr.parse().unwrap()).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(1024).unwrap();
    let mr = pd
        .reg_mr(
            1 << 20,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    let rdd = ctx.alloc_rdd();
    let eec = rdd.create_eec(None).unwrap();
    let qps = (0..n_qps)
        .map(|_| {
            let q = pd
                .create_rd_qp(&QpInitAttr::new(QpType::Rd, &cq, &cq), &rdd)
                .unwrap();
            q.ready(QKEY, Access::REMOTE_WRITE | Access::REMOTE_READ)
                .unwrap();
            q
        })
        .collect();
    Host {
        _ctx: ctx,
        cq,
        mr,
        eec,
        qps,
    }
}

#[test]
fn rd_over_loopback_sockets() {
    let a = host("127.0.0.141", 1);
    let b = host("127.0.0.142", 2);
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu1024),
        ..ConnectOptions::default()
    };
    a.eec.connect(&b.eec.endpoint(), &opts).unwrap();
    b.eec.connect(&a.eec.endpoint(), &opts).unwrap();
    assert_eq!(a.eec.state().unwrap(), QpState::Rts);
    // SENDs of 5 packets to both of B's QPs, alternating.
    for n in 0..8u64 {
        let q = &b.qps[(n % 2) as usize];
        q.post_recv(RecvWr::new(n, &[b.mr.sge(n * 8192, 8192)]))
            .unwrap();
    }
    for n in 0..8u64 {
        let data: Vec<u8> = (0..4500u32).map(|i| (i * 7 + n as u32) as u8).collect();
        a.mr.write(n * 8192, &data).unwrap();
        let to = RdDest {
            eec: a.eec.eecn(),
            qpn: b.qps[(n % 2) as usize].qpn(),
            qkey: QKEY,
        };
        let sg = [a.mr.sge(n * 8192, 4500)];
        a.qps[0].post_send(SendWr::send(n, &sg).via(to)).unwrap();
    }
    let sent = wait(&a.cq, 8);
    assert!(
        sent.iter().all(|c| c.status == WcStatus::Success),
        "{sent:?}"
    );
    assert_eq!(
        sent.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    let got = wait(&b.cq, 8);
    for c in &got {
        let n = c.wr_id;
        assert_eq!(
            (c.status, c.byte_len, c.qpn, c.src_qp),
            (
                WcStatus::Success,
                4500,
                b.qps[(n % 2) as usize].qpn(),
                a.qps[0].qpn()
            )
        );
        let mut back = vec![0u8; 4500];
        b.mr.read(n * 8192, &mut back).unwrap();
        assert!(
            back.iter()
                .enumerate()
                .all(|(i, &x)| x == (i as u32 * 7 + n as u32) as u8)
        );
    }
    // A WRITE and a READ through the EE context.
    let to = RdDest {
        eec: a.eec.eecn(),
        qpn: b.qps[1].qpn(),
        qkey: QKEY,
    };
    let remote = b.mr.remote();
    a.mr.write(200_000, &[0x77; 3000]).unwrap();
    let sg = [a.mr.sge(200_000, 3000)];
    a.qps[0]
        .post_send(SendWr::write(20, &sg, remote.at(500_000, 3000).unwrap()).via(to))
        .unwrap();
    let sg = [a.mr.sge(300_000, 3000)];
    a.qps[0]
        .post_send(SendWr::read(21, &sg, remote.at(500_000, 3000).unwrap()).via(to))
        .unwrap();
    let c = wait(&a.cq, 2);
    assert_eq!(
        c.iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect::<Vec<_>>(),
        [
            (20, WcStatus::Success, WcOpcode::RdmaWrite),
            (21, WcStatus::Success, WcOpcode::RdmaRead)
        ]
    );
    let mut back = vec![0u8; 3000];
    a.mr.read(300_000, &mut back).unwrap();
    assert!(back.iter().all(|&x| x == 0x77));
    // Another Q_Key: refused by B's EE context.
    let wrong = RdDest { qkey: 1, ..to };
    let sg = [a.mr.sge(0, 8)];
    a.qps[0]
        .post_send(SendWr::send(30, &sg).via(wrong))
        .unwrap();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::RemInvRdReqErr);
    assert_eq!(a.qps[0].state().unwrap(), QpState::Err);
}

#[test]
fn rd_calls_name_what_is_wrong() {
    let a = host("127.0.0.143", 1);
    // An RD QP sends only through an EE context.
    let sg = [a.mr.sge(0, 8)];
    let err = a.qps[0].post_send(SendWr::send(1, &sg)).unwrap_err();
    assert!(err.to_string().contains("SendWr::via"), "{err}");
    // An EE context joins only another's endpoint.
    let qp_end = ferroce::QpEndpoint {
        qp_type: QpType::Rc,
        ..a.eec.endpoint()
    };
    assert!(matches!(
        a.eec.connect(&qp_end, &ConnectOptions::default()),
        Err(Error::QpTypeMismatch { .. })
    ));
    let to = RdDest {
        eec: 0x42,
        qpn: 1,
        qkey: QKEY,
    };
    assert!(matches!(
        a.qps[0].post_send(SendWr::send(1, &sg).via(to)),
        Err(Error::Verbs(VerbsError::NoSuchEec(0x42)))
    ));
}
