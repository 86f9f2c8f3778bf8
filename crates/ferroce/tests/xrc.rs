//! XRC over real UDP sockets on loopback, through the driver: a device
//! with one XRC domain, two XRC SRQs (each with its own CQ) and two target
//! QPs, reached by two initiator QPs of another device (127.0.0.91 and
//! 127.0.0.92, port 4791, in the style of `srq.rs`). SENDs to both SRQs
//! through both targets, a WRITE and a READ, a FETCH_ADD, and a request
//! naming an SRQ of no domain of the target's.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, Error, Psn, QpInitAttr, QpState, QpType,
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

/// Message `n`: its length and bytes, different for each.
fn message(n: u64) -> Vec<u8> {
    let len = 3000 + 1100 * n as usize;
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(n as u32) as u8
        })
        .collect()
}

#[test]
fn xrc_initiators_reach_two_srqs_through_two_targets_over_udp() {
    const SLOT: u64 = 16384;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let ips: [IpAddr; 2] = ["127.0.0.91".parse().unwrap(), "127.0.0.92".parse().unwrap()];
    let server = Context::open(ips[0]).unwrap();
    let pd = server.alloc_pd();
    let xrcd = server.open_xrcd();
    let cqs = [server.create_cq(64).unwrap(), server.create_cq(64).unwrap()];
    let mr = pd.reg_mr(16 * SLOT as usize, access).unwrap();
    let srqs = [
        pd.create_xrc_srq(&xrcd, &cqs[0], 16).unwrap(),
        pd.create_xrc_srq(&xrcd, &cqs[1], 16).unwrap(),
    ];
    let srqn = [srqs[0].srq_num().unwrap(), srqs[1].srq_num().unwrap()];
    let tgts = [
        xrcd.create_tgt_qp(Some(Psn::new(0xfffff0))).unwrap(),
        xrcd.create_tgt_qp(None).unwrap(),
    ];

    let client = Context::open(ips[1]).unwrap();
    let cpd = client.alloc_pd();
    let ccq = client.create_cq(256).unwrap();
    let cmr = cpd.reg_mr(16 * SLOT as usize, access).unwrap();
    let attr = QpInitAttr::new(QpType::XrcIni, &ccq, &ccq);
    let inis = [cpd.create_qp(&attr).unwrap(), cpd.create_qp(&attr).unwrap()];
    let opts = ConnectOptions {
        access,
        ..ConnectOptions::default()
    };
    for (i, t) in inis.iter().zip(&tgts) {
        i.connect(&t.endpoint(), &opts).unwrap();
        t.connect(&i.endpoint(), &opts).unwrap();
    }
    assert_eq!(tgts[0].state().unwrap(), QpState::Rts);

    // A target takes no receives; an initiator's request names an SRQ.
    let refused = tgts[0].post_recv(RecvWr::new(0, &[mr.sge(0, 16)]));
    assert!(matches!(
        refused,
        Err(Error::Verbs(VerbsError::XrcRefused { .. }))
    ));
    let refused = inis[0].post_send(SendWr::send(0, &[cmr.sge(0, 16)]));
    assert!(matches!(
        refused,
        Err(Error::Verbs(VerbsError::XrcRefused { .. }))
    ));

    // Eight SENDs: initiator n % 2, SRQ n / 4.
    for n in 0..8u64 {
        let k = (n / 4) as usize;
        srqs[k]
            .post_recv(RecvWr::new(n, &[mr.sge(n * SLOT, SLOT as u32)]))
            .unwrap();
    }
    for n in 0..8u64 {
        let m = message(n);
        cmr.write(n * SLOT, &m).unwrap();
        let sg = [cmr.sge(n * SLOT, m.len() as u32)];
        let wr = SendWr::send(n, &sg);
        inis[(n % 2) as usize]
            .post_send(wr.to_srq(srqn[(n / 4) as usize]))
            .unwrap();
    }
    let sent = wait(&ccq, 8);
    assert!(
        sent.iter().all(|c| c.status == WcStatus::Success),
        "{sent:?}"
    );
    for (k, cq) in cqs.iter().enumerate() {
        for wc in wait(cq, 4) {
            assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Recv));
            // WQEs go in arrival order: which message filled this one
            // tells which initiator (and so which target) carried it.
            let mut buf = vec![0u8; wc.byte_len as usize];
            mr.read(wc.wr_id * SLOT, &mut buf).unwrap();
            let n = (0..8)
                .find(|&n| message(n) == buf)
                .unwrap_or_else(|| panic!("WQE {} holds no message", wc.wr_id));
            assert_eq!(n / 4, k as u64, "SEND {n} completes on its SRQ's CQ");
            assert_eq!(wc.wr_id / 4, k as u64, "a WQE of that SRQ");
            assert_eq!(wc.qpn, tgts[(n % 2) as usize].qpn());
            assert_eq!(wc.src_qp, inis[(n % 2) as usize].qpn());
        }
    }

    // WRITE, READ back, FETCH_ADD, all against the SRQ's PD.
    let data = message(9);
    cmr.write(8 * SLOT, &data).unwrap();
    let len = data.len() as u32;
    let remote = mr.remote().at(10 * SLOT, u64::from(len)).unwrap();
    let (src, dst, old8) = (
        [cmr.sge(8 * SLOT, len)],
        [cmr.sge(9 * SLOT, len)],
        [cmr.sge(11 * SLOT, 8)],
    );
    let w = SendWr::write(20, &src, remote).to_srq(srqn[1]);
    inis[0].post_send(w).unwrap();
    let r = SendWr::read(21, &dst, remote).to_srq(srqn[1]);
    inis[0].post_send(r).unwrap();
    mr.write(12 * SLOT, &5u64.to_ne_bytes()).unwrap();
    let counter = mr.remote().at(12 * SLOT, 8).unwrap();
    let f = SendWr::fetch_add(22, &old8, counter, 3).to_srq(srqn[0]);
    inis[1].post_send(f).unwrap();
    let done = wait(&ccq, 3);
    assert!(
        done.iter().all(|c| c.status == WcStatus::Success),
        "{done:?}"
    );
    let mut back = vec![0u8; data.len()];
    cmr.read(9 * SLOT, &mut back).unwrap();
    assert_eq!(back, data);
    let mut old = [0u8; 8];
    cmr.read(11 * SLOT, &mut old).unwrap();
    assert_eq!(u64::from_ne_bytes(old), 5);
    mr.read(12 * SLOT, &mut old).unwrap();
    assert_eq!(u64::from_ne_bytes(old), 8);

    // A request naming no XRC SRQ of the domain: NAK, the target in error.
    let small = [cmr.sge(0, 8)];
    let bad = SendWr::send(30, &small).to_srq(0xabcdef);
    inis[1].post_send(bad).unwrap();
    let got = wait(&ccq, 1);
    assert_eq!(got[0].status, WcStatus::RemInvReqErr);
    assert_eq!(tgts[1].state().unwrap(), QpState::Err);
    assert_eq!(server.stats().rx_bad_xrc_srq, 1);
}
