//! Posting through a [`QpPoster`] (`qp::posts`): the same refusals as the
//! locked posts, order kept with them, a thread posting while another
//! drives the endpoint, queue room through Err and Reset, and a destroyed
//! QP's poster.

use super::util::{Opts, Pair, Side, connect, connect_with, recv_wr, rmem, send_wr, sge};
use ferroce_wire::Psn;

use crate::verbs::{
    Access, Mtu, Path, QpAttr, QpState, QpType, RecvWr, RoceMode, SendOp, SendWr, Sge, UdDest,
    VerbsError, WcOpcode, WcStatus,
};
use crate::{Endpoint, QpPoster};

fn write_to(side: &Side) -> SendOp {
    SendOp::Write {
        remote: rmem(side.mr.addr, side.mr.rkey),
    }
}

fn peer_path() -> Path {
    Path {
        remote: "127.0.0.2".parse().unwrap(),
        udp_src_port: 0xc000,
        traffic_class: 0,
        hop_limit: 64,
        roce: RoceMode::V2,
    }
}

fn to(state: QpState) -> QpAttr {
    QpAttr {
        state: Some(state),
        ..QpAttr::default()
    }
}

/// An endpoint with one QP of `qp_type` (queues of 2) and a 4 KiB region
/// with LOCAL_WRITE only, brought to `state` (Reset, Init or RTS).
fn lone(qp_type: QpType, state: QpState) -> (Endpoint, u32, crate::MrInfo) {
    let (mut e, qpn, mr) = super::calls::fresh_with(qp_type, 2);
    if state != QpState::Reset {
        e.modify_qp(
            qpn,
            &QpAttr {
                pkey_index: Some(0),
                port: Some(1),
                qkey: (qp_type == QpType::Ud).then_some(0x1111),
                access: (qp_type != QpType::Ud).then_some(Access::NONE),
                ..to(QpState::Init)
            },
        )
        .unwrap();
    }
    if state == QpState::Rts {
        let path = peer_path();
        let connected = qp_type != QpType::Ud;
        e.modify_qp(
            qpn,
            &QpAttr {
                path: connected.then_some(path),
                path_mtu: connected.then_some(Mtu::Mtu1024),
                dest_qpn: connected.then_some(0x22),
                rq_psn: connected.then_some(Psn::new(0)),
                max_dest_rd_atomic: (qp_type == QpType::Rc).then_some(1),
                min_rnr_timer: (qp_type == QpType::Rc).then_some(1),
                ..to(QpState::Rtr)
            },
        )
        .unwrap();
        e.modify_qp(
            qpn,
            &QpAttr {
                sq_psn: Some(Psn::new(0)),
                timeout: (qp_type == QpType::Rc).then_some(14),
                retry_cnt: (qp_type == QpType::Rc).then_some(7),
                rnr_retry: (qp_type == QpType::Rc).then_some(7),
                max_rd_atomic: (qp_type == QpType::Rc).then_some(1),
                ..to(QpState::Rts)
            },
        )
        .unwrap();
    }
    (e, qpn, mr)
}

/// Posts `wrs` to two identical endpoints, one through the lock and one
/// through a poster, and asserts each post gets the same answer.
fn same_answers(qp_type: QpType, state: QpState, wrs: &dyn Fn(&crate::MrInfo) -> Vec<Post>) {
    let (mut locked, qpn, mr) = lone(qp_type, state);
    let (free, qpn2, _) = lone(qp_type, state);
    assert_eq!(qpn, qpn2);
    let poster = free.qp_poster(qpn).unwrap();
    for (i, post) in wrs(&mr).into_iter().enumerate() {
        let (want, got) = match &post {
            Post::Send(wr, sg, inline) => {
                let wr = SendWr {
                    sg,
                    inline: inline.as_deref(),
                    ..*wr
                };
                (
                    locked.post_send(qpn, wr),
                    poster.try_post_send(wr).expect("a poster's request"),
                )
            }
            Post::Recv(id, sg) => (
                locked.post_recv(qpn, RecvWr::new(*id, sg)),
                poster
                    .try_post_recv(RecvWr::new(*id, sg))
                    .expect("a poster's request"),
            ),
        };
        assert_eq!(got, want, "post {i} ({qp_type:?} in {state:?})");
    }
}

enum Post {
    /// A request, its scatter list and its inline data (the request's own
    /// fields for these are replaced).
    Send(SendWr<'static>, Vec<Sge>, Option<Vec<u8>>),
    Recv(u64, Vec<Sge>),
}

fn send(id: u64, op: SendOp, sg: Vec<Sge>) -> Post {
    Post::Send(SendWr::new(id, op, &[]), sg, None)
}

fn sg(mr: &crate::MrInfo, offset: u64, len: u32) -> Vec<Sge> {
    vec![Sge {
        lkey: mr.lkey,
        offset,
        len,
    }]
}

const PEER: SendOp = SendOp::Write {
    remote: crate::verbs::RemoteSlice::new(0x1000, 0x55, 1 << 20),
};

#[test]
fn a_poster_refuses_what_the_locked_post_refuses() {
    for state in [QpState::Reset, QpState::Init] {
        same_answers(QpType::Rc, state, &|mr| {
            vec![send(1, PEER, sg(mr, 0, 8)), Post::Recv(2, sg(mr, 0, 8))]
        });
    }
    same_answers(QpType::Rc, QpState::Rts, &|mr| {
        let atomic = SendOp::FetchAdd {
            remote: crate::verbs::RemoteSlice::new(0x1004, 0x55, 8),
            add: 1,
        };
        vec![
            // No such region, outside it, a receive into it (no error: it
            // has LOCAL_WRITE), a READ into it, a misaligned atomic.
            send(
                1,
                PEER,
                sg(mr, 0, 8)
                    .into_iter()
                    .map(|s| Sge { lkey: 0x99, ..s })
                    .collect(),
            ),
            send(2, PEER, sg(mr, 4000, 200)),
            Post::Recv(3, sg(mr, 0, 64)),
            send(
                4,
                SendOp::Read {
                    remote: rmem(0x1000, 0x55),
                },
                sg(mr, 0, 64),
            ),
            send(5, atomic, sg(mr, 0, 8)),
            Post::Send(
                SendWr::new(6, SendOp::Read { remote: rmem(0, 1) }, &[]),
                vec![],
                Some(vec![1; 8]),
            ),
            // Room for two of each: the third is refused.
            send(7, PEER, sg(mr, 0, 8)),
            send(8, PEER, sg(mr, 0, 8)),
            Post::Recv(9, sg(mr, 0, 64)),
            Post::Recv(10, sg(mr, 0, 64)),
        ]
    });
    same_answers(QpType::Ud, QpState::Rts, &|mr| {
        let dest = UdDest {
            path: peer_path(),
            qpn: 0x22,
            qkey: 0x1111,
        };
        let mut long = SendWr::new(1, SendOp::Send, &[]);
        long.ud = Some(dest);
        let mut ok = long;
        ok.wr_id = 2;
        vec![
            // Longer than the path MTU, no destination, a WRITE on UD.
            Post::Send(long, vec![], Some(vec![0; 1025])),
            send(3, SendOp::Send, sg(mr, 0, 8)),
            send(4, PEER, sg(mr, 0, 8)),
            Post::Send(ok, sg(mr, 0, 8), None),
        ]
    });
}

#[test]
fn requests_that_need_the_engine_are_left_to_the_locked_post() {
    let (e, qpn, mr) = lone(QpType::Rc, QpState::Rts);
    let poster = e.qp_poster(qpn).unwrap();
    let inv = SendWr::new(1, SendOp::LocalInv(mr.rkey), &[]);
    assert!(poster.try_post_send(inv).is_none());
}

#[test]
fn posts_of_both_ways_complete_in_the_order_they_were_made() {
    let mut p = Pair::new(301);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let poster = p.eps[0].qp_poster(a.qpn).unwrap();
    let sg = sge(&a, 0, 64);
    for id in 0..40u64 {
        let mut wr = send_wr(id, write_to(&b), &sg);
        wr.signaled = true;
        if id % 3 == 0 {
            p.eps[0].post_send(a.qpn, wr).unwrap();
        } else {
            poster.try_post_send(wr).unwrap().unwrap();
        }
    }
    let ids: Vec<u64> = p.wait_cqes(0, a.cq, 40).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..40).collect::<Vec<_>>());
}

#[test]
fn a_thread_posts_while_another_drives_the_endpoint() {
    const N: u64 = 2_000;
    let mut p = Pair::new(302);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            max_send_wr: 16,
            max_recv_wr: 16,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    let sender = p.eps[0].qp_poster(a.qpn).unwrap();
    let receiver = p.eps[1].qp_poster(b.qpn).unwrap();
    let (sends, recvs) = (
        p.eps[0].cq_reader(a.cq).unwrap(),
        p.eps[1].cq_reader(b.cq).unwrap(),
    );
    let poster = std::thread::spawn(move || {
        let (sg_a, sg_b) = (sge(&a, 0, 32), sge(&b, 0, 32));
        let (mut sent, mut posted_recv) = (0u64, 0u64);
        // Bounded: each turn posts or waits for room the driver makes.
        for _ in 0..50_000_000u64 {
            if sent == N {
                return Ok(());
            }
            if posted_recv < N {
                match receiver.try_post_recv(recv_wr(posted_recv, &sg_b)).unwrap() {
                    Ok(()) => posted_recv += 1,
                    Err(VerbsError::QueueFull { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let mut wr = send_wr(sent, SendOp::Send, &sg_a);
            wr.signaled = true;
            match sender.try_post_send(wr).unwrap() {
                Ok(()) => sent += 1,
                Err(VerbsError::QueueFull { .. }) => std::thread::yield_now(),
                Err(e) => return Err(e),
            }
        }
        panic!("the driver made no room: {sent} of {N} sent");
    });
    let (mut done_sends, mut done_recvs) = (Vec::new(), Vec::new());
    for _ in 0..10_000_000 {
        if done_sends.len() as u64 == N && done_recvs.len() as u64 == N {
            break;
        }
        p.step();
        done_sends.extend(sends.poll(64));
        done_recvs.extend(recvs.poll(64));
    }
    poster.join().unwrap().unwrap();
    for (what, done) in [("sends", &done_sends), ("receives", &done_recvs)] {
        assert!(
            done.iter().all(|w| w.status == WcStatus::Success),
            "{what} failed"
        );
        let ids: Vec<u64> = done.iter().map(|w| w.wr_id).collect();
        assert_eq!(
            ids,
            (0..N).collect::<Vec<_>>(),
            "{what} out of order or missing"
        );
    }
}

#[test]
fn a_poster_on_a_qp_in_error_flushes_and_room_comes_back_after_reset() {
    let mut p = Pair::new(303);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            max_send_wr: 2,
            max_recv_wr: 2,
            ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
        },
    );
    let poster = p.eps[0].qp_poster(a.qpn).unwrap();
    let sg = sge(&a, 0, 8);
    p.eps[0].modify_qp(a.qpn, &to(QpState::Err)).unwrap();
    // The queue has room for two, again and again: each flush frees one.
    for id in 0..6 {
        poster
            .try_post_send(send_wr(id, write_to(&b), &sg))
            .unwrap()
            .unwrap();
        poster
            .try_post_recv(recv_wr(100 + id, &sg))
            .unwrap()
            .unwrap();
        p.settle(10);
    }
    let got: Vec<_> = p
        .completions(0, a.cq)
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode))
        .collect();
    let want: Vec<_> = (0..6)
        .flat_map(|id| {
            [
                (100 + id, WcStatus::WrFlushErr, WcOpcode::Recv),
                (id, WcStatus::WrFlushErr, WcOpcode::RdmaWrite),
            ]
        })
        .collect();
    assert_eq!(got, want);
    // Posts made before a modify_qp are taken before it: these two, made
    // in Err, are flushed by the Reset's call, and free their slots.
    poster.try_post_recv(recv_wr(7, &sg)).unwrap().unwrap();
    poster.try_post_recv(recv_wr(8, &sg)).unwrap().unwrap();
    p.eps[0].modify_qp(a.qpn, &to(QpState::Reset)).unwrap();
    let ids: Vec<u64> = p.completions(0, a.cq).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [7, 8]);
    assert!(matches!(
        poster.try_post_recv(recv_wr(9, &sg)).unwrap(),
        Err(VerbsError::WrongState {
            state: QpState::Reset,
            ..
        })
    ));
    p.eps[0]
        .modify_qp(
            a.qpn,
            &QpAttr {
                pkey_index: Some(0),
                port: Some(1),
                access: Some(Access::NONE),
                ..to(QpState::Init)
            },
        )
        .unwrap();
    for id in [10, 11] {
        poster.try_post_recv(recv_wr(id, &sg)).unwrap().unwrap();
    }
    assert!(matches!(
        poster.try_post_recv(recv_wr(12, &sg)).unwrap(),
        Err(VerbsError::QueueFull { depth: 2, .. })
    ));
}

#[test]
fn a_destroyed_qps_poster_names_the_qp() {
    let (mut e, qpn, mr) = lone(QpType::Rc, QpState::Rts);
    let poster: QpPoster = e.qp_poster(qpn).unwrap();
    e.destroy_qp(qpn).unwrap();
    let sg = sg(&mr, 0, 8);
    assert_eq!(
        poster.try_post_send(SendWr::new(1, PEER, &sg)).unwrap(),
        Err(VerbsError::NoSuchQp(qpn))
    );
    assert_eq!(
        poster.try_post_recv(RecvWr::new(2, &sg)).unwrap(),
        Err(VerbsError::NoSuchQp(qpn))
    );
}

#[test]
fn an_srq_poster_refuses_as_the_locked_post_and_feeds_its_qps_in_order() {
    let mut p = Pair::new(304);
    let (s, peers) = super::srq::shared_srq(&mut p, QpType::Rc, 2, 4, 0);
    let poster = p.eps[1].srq_poster(s.srq).unwrap();
    let slot = |i: u64| {
        vec![Sge {
            lkey: s.mr.lkey,
            offset: i * 4096,
            len: 4096,
        }]
    };
    let bad = vec![Sge {
        lkey: s.mr.lkey ^ 0x100,
        offset: 0,
        len: 8,
    }];
    let want_bad = p.eps[1]
        .post_srq_recv(s.srq, recv_wr(90, &bad))
        .unwrap_err();
    assert_eq!(poster.post_recv(recv_wr(91, &bad)), Err(want_bad));
    // Locked and lock-free posts share the depth of 4 and keep order.
    p.eps[1].post_srq_recv(s.srq, recv_wr(0, &slot(0))).unwrap();
    poster.post_recv(recv_wr(1, &slot(1))).unwrap();
    poster.post_recv(recv_wr(2, &slot(2))).unwrap();
    assert_eq!(p.eps[1].query_srq(s.srq).unwrap().wqes, 3);
    p.eps[1].post_srq_recv(s.srq, recv_wr(3, &slot(3))).unwrap();
    let full = VerbsError::SrqFull {
        srq: s.srq,
        depth: 4,
    };
    assert_eq!(poster.post_recv(recv_wr(4, &slot(4))), Err(full.clone()));
    assert_eq!(
        p.eps[1].post_srq_recv(s.srq, recv_wr(4, &slot(4))),
        Err(full)
    );
    for (i, peer) in [0, 1, 0, 1].iter().enumerate() {
        let sg = sge(&peers[*peer], 0, 100);
        let mut wr = send_wr(i as u64, SendOp::Send, &sg);
        wr.signaled = true;
        p.eps[0].post_send(peers[*peer].qpn, wr).unwrap();
        let r = p.wait_cqes(1, s.cq, 1);
        assert_eq!((r[0].wr_id, r[0].qpn), (i as u64, s.qps[*peer]));
    }
    // Each receive taken freed its slot.
    for i in 0..4 {
        poster.post_recv(recv_wr(10 + i, &slot(i))).unwrap();
    }
}
