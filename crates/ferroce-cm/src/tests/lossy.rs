//! Loss, duplication, reordering, stale connections, and many connections.

use core::time::Duration;

use ferroce_wire::mad::{MadHeader, attr};
use proptest::prelude::*;

use super::sim::{Link, Net, SERVICE};
use crate::{Cm, CmConfig, CmEvent, CmId, CmState, reason};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const MINUTE: Duration = Duration::from_secs(60);

fn net(seed: u64, link: Link) -> Net {
    let mut net = Net::new(2, seed, link);
    net.nodes[SERVER].cm.listen(SERVICE);
    net
}

/// Connects and waits for both sides; returns (client ID, server ID).
fn establish(net: &mut Net) -> (CmId, CmId) {
    let id = net.connect(CLIENT, SERVER);
    net.run_until(MINUTE, |n| {
        n.passive_id(SERVER, id)
            .is_some_and(|sid| n.established(SERVER, sid))
            && n.established(CLIENT, id)
    });
    (id, net.passive_id(SERVER, id).unwrap())
}

fn once(net: &Net, node: usize, event: &CmEvent) -> usize {
    net.count(node, |e| e == event)
}

#[test]
fn each_lost_message_is_resent_and_the_connection_forms_and_closes() {
    for lost in [attr::REQ, attr::REP, attr::RTU, attr::DREQ, attr::DREP] {
        let mut net = net(3, Link::default());
        net.drop_once = vec![lost];
        let (id, sid) = establish(&mut net);
        let now = net.now;
        net.nodes[CLIENT].cm.disconnect(now, id, &[]).unwrap();
        net.run_quiet(5 * MINUTE);
        for (node, id) in [(CLIENT, id), (SERVER, sid)] {
            assert_eq!(
                once(&net, node, &CmEvent::Established { id }),
                1,
                "lost {lost:#x}"
            );
            let closed = CmEvent::Disconnected {
                id,
                dreq_unanswered: false,
            };
            assert_eq!(once(&net, node, &closed), 1, "lost {lost:#x}");
            assert_eq!(once(&net, node, &CmEvent::TimewaitExit { id }), 1);
            assert!(net.nodes[node].cm.is_empty());
        }
        let resent = net.nodes.iter().map(|n| n.cm.stats().resent).sum::<u64>();
        assert!(resent >= 1, "lost {lost:#x}: nothing was resent");
        assert!(net.drop_once.is_empty());
    }
}

#[test]
fn every_message_duplicated_makes_one_connection() {
    let link = Link {
        loss: 0,
        duplicate: 1000,
        jitter_us: 300,
    };
    let mut net = net(4, link);
    let (id, sid) = establish(&mut net);
    let now = net.now;
    net.nodes[SERVER].cm.disconnect(now, sid, &[]).unwrap();
    net.run_quiet(5 * MINUTE);
    assert_eq!(
        net.count(SERVER, |e| matches!(e, CmEvent::ReqReceived { .. })),
        1
    );
    for (node, id) in [(CLIENT, id), (SERVER, sid)] {
        assert_eq!(once(&net, node, &CmEvent::Established { id }), 1);
        assert_eq!(
            net.count(node, |e| matches!(e, CmEvent::Disconnected { .. })),
            1
        );
        assert!(net.nodes[node].cm.is_empty());
    }
    let stats = |n: usize| net.nodes[n].cm.stats().clone();
    let dups = stats(CLIENT).duplicates_answered
        + stats(CLIENT).duplicates_ignored
        + stats(SERVER).duplicates_answered
        + stats(SERVER).duplicates_ignored;
    assert!(dups >= 3, "{dups}");
}

#[test]
fn a_duplicate_req_in_timewait_gets_rej_stale() {
    let mut net = net(5, Link::default());
    let (id, sid) = establish(&mut net);
    let now = net.now;
    net.nodes[CLIENT].cm.disconnect(now, id, &[]).unwrap();
    net.run_until(MINUTE, |n| {
        n.nodes[SERVER].cm.state(sid) == Some(CmState::TimeWait)
    });
    let req = net.trace.iter().find(|(from, b)| {
        *from == CLIENT && MadHeader::parse(b).is_ok_and(|h| h.attribute_id == attr::REQ)
    });
    let req = req.unwrap().1.clone();
    let before = net.nodes[SERVER].cm.stats().stale;
    net.inject(CLIENT, SERVER, &req);
    assert_eq!(net.nodes[SERVER].cm.stats().stale, before + 1);
    // The last MAD queued (the DREP may still be queued ahead of it).
    let queued = std::iter::from_fn(|| net.nodes[SERVER].cm.poll_transmit());
    let (to, rej) = queued.last().expect("a REJ");
    assert_eq!(to, net.nodes[CLIENT].addr);
    let rej = ferroce_wire::mad::Mad::parse(&rej).unwrap();
    let Some(ferroce_wire::mad::CmMessage::Rej(rej)) = rej.cm else {
        panic!("not a REJ")
    };
    assert_eq!(rej.reason, reason::STALE_CONN);
    assert_eq!(
        net.count(SERVER, |e| matches!(e, CmEvent::ReqReceived { .. })),
        1
    );
}

#[test]
fn a_rebooted_client_reusing_its_qp_is_rejected_stale_and_the_old_connection_closed() {
    let mut net = net(6, Link::default());
    let (id, sid) = establish(&mut net);
    let old_qpn = net.nodes[CLIENT].next_qpn - 1;
    // The client forgets everything (a restart) but keeps its CA GUID.
    let config = CmConfig {
        seed: 77,
        local_ca_guid: 0x5054_00ff_fe52_0000,
        ..CmConfig::default()
    };
    net.nodes[CLIENT].cm = Cm::new(config);
    let mut params = net.params(CLIENT, SERVER, SERVICE);
    params.qpn = old_qpn;
    let now = net.now;
    let new = net.nodes[CLIENT].cm.connect(now, &params).unwrap();
    assert_ne!(new, id);
    net.run_quiet(5 * MINUTE);
    let rejected = net.nodes[CLIENT].log.iter().any(|e| {
        matches!(e, CmEvent::Rejected { id, reason, .. } if *id == new && *reason == reason::STALE_CONN)
    });
    assert!(rejected, "{:?}", net.nodes[CLIENT].log);
    // The server closed the old connection with a DREQ the new client
    // answered with a DREP although it knows no such connection.
    let closed = CmEvent::Disconnected {
        id: sid,
        dreq_unanswered: false,
    };
    assert_eq!(once(&net, SERVER, &closed), 1);
    assert!(net.nodes[SERVER].cm.is_empty() && net.nodes[CLIENT].cm.is_empty());
    // The QP can connect again now.
    let mut params = net.params(CLIENT, SERVER, SERVICE);
    params.qpn = old_qpn;
    let now = net.now;
    let again = net.nodes[CLIENT].cm.connect(now, &params).unwrap();
    net.run_until(MINUTE, |n| n.established(CLIENT, again));
}

#[test]
fn two_hundred_connect_disconnect_cycles() {
    let mut net = net(7, Link::default());
    let mut ids = Vec::new();
    for cycle in 0..200 {
        let (id, sid) = establish(&mut net);
        let (node, nid) = if cycle % 2 == 0 {
            (CLIENT, id)
        } else {
            (SERVER, sid)
        };
        let now = net.now;
        net.nodes[node].cm.disconnect(now, nid, &[]).unwrap();
        net.run_until(MINUTE, |n| {
            [(CLIENT, id), (SERVER, sid)].iter().all(|&(node, id)| {
                n.count(
                    node,
                    |e| matches!(e, CmEvent::Disconnected { id: i, .. } if *i == id),
                ) == 1
            })
        });
        // A new comm ID never equals one still in TimeWait.
        assert!(!ids.contains(&id), "comm ID {id:?} reused");
        ids.push(id);
    }
    assert!(
        net.nodes[CLIENT].cm.table_sizes().1 > 0,
        "earlier cycles still in TimeWait"
    );
    net.run_quiet(MINUTE);
    for node in [CLIENT, SERVER] {
        assert_eq!(
            net.count(node, |e| matches!(e, CmEvent::Established { .. })),
            200
        );
        assert_eq!(
            net.count(node, |e| matches!(e, CmEvent::TimewaitExit { .. })),
            200
        );
        assert!(net.nodes[node].cm.is_empty());
    }
}

#[test]
fn thirty_two_connections_at_once() {
    let link = Link {
        loss: 0,
        duplicate: 0,
        jitter_us: 500,
    };
    let mut net = net(8, link);
    let ids: Vec<_> = (0..32).map(|_| net.connect(CLIENT, SERVER)).collect();
    net.run_until(MINUTE, |n| {
        n.count(SERVER, |e| matches!(e, CmEvent::Established { .. })) == 32
            && ids.iter().all(|&id| n.established(CLIENT, id))
    });
    let now = net.now;
    for &id in &ids {
        net.nodes[CLIENT].cm.disconnect(now, id, &[]).unwrap();
    }
    net.run_quiet(MINUTE);
    for node in [CLIENT, SERVER] {
        assert_eq!(
            net.count(node, |e| matches!(
                e,
                CmEvent::Disconnected {
                    dreq_unanswered: false,
                    ..
                }
            )),
            32
        );
        assert!(net.nodes[node].cm.is_empty());
    }
}

/// Whether the client's connection `id` has settled: failed, or established
/// on the client and settled on the server too.
fn settled(net: &Net, id: CmId) -> bool {
    let failed = |node: usize, id: CmId| {
        net.count(node, |e| {
            matches!(e, CmEvent::Rejected { id: i, .. } | CmEvent::Unreachable { id: i, .. } if *i == id)
        }) > 0
    };
    if failed(CLIENT, id) {
        return true;
    }
    let server = net.passive_id(SERVER, id);
    net.established(CLIENT, id)
        && server.is_some_and(|sid| net.established(SERVER, sid) || failed(SERVER, sid))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any seed of a lossy, duplicating, reordering link ends with both
    /// sides agreeing: each connection formed once on both sides and closed
    /// on both, or failed; no table holds anything afterwards.
    #[test]
    fn random_links_end_consistent(
        seed in any::<u64>(),
        loss in 0u32..300,
        duplicate in 0u32..300,
        jitter_us in 0u64..3000,
        from_server in any::<[bool; 4]>(),
    ) {
        let mut net = net(seed, Link { loss, duplicate, jitter_us });
        let ids: Vec<_> = (0..4).map(|_| net.connect(CLIENT, SERVER)).collect();
        net.run_until(30 * MINUTE, |n| ids.iter().all(|&id| settled(n, id)));
        let now = net.now;
        for (&id, &server) in ids.iter().zip(&from_server) {
            let sid = net.passive_id(SERVER, id);
            let (node, nid) = match sid {
                Some(sid) if server => (SERVER, sid),
                _ => (CLIENT, id),
            };
            if net.nodes[node].cm.state(nid) == Some(CmState::Established) {
                net.nodes[node].cm.disconnect(now, nid, &[]).unwrap();
            }
        }
        net.run_quiet(60 * MINUTE);
        for node in [CLIENT, SERVER] {
            net.nodes[node].cm.check_invariants();
            prop_assert!(net.nodes[node].cm.is_empty(), "{:?}", net.nodes[node].cm);
            prop_assert_eq!(net.nodes[node].cm.table_sizes(), (0, 0));
        }
        for &id in &ids {
            let requests = net.count(SERVER, |e| matches!(e, CmEvent::ReqReceived { req, .. } if req.local_comm_id == id.0));
            prop_assert!(requests <= 1, "a second connection for {:?}", id);
            let sid = net.passive_id(SERVER, id);
            let client_up = net.established(CLIENT, id);
            let server_up = sid.is_some_and(|sid| net.established(SERVER, sid));
            let established = CmEvent::Established { id };
            prop_assert!(net.count(CLIENT, |e| *e == established) <= 1);
            if let Some(sid) = sid {
                let established = CmEvent::Established { id: sid };
                prop_assert!(net.count(SERVER, |e| *e == established) <= 1);
            }
            if client_up && server_up {
                let sid = sid.unwrap();
                for (node, id) in [(CLIENT, id), (SERVER, sid)] {
                    let down = net.count(node, |e| matches!(e, CmEvent::Disconnected { id: i, .. } if *i == id));
                    let rejected = net.count(node, |e| matches!(e, CmEvent::Rejected { id: i, .. } if *i == id));
                    prop_assert_eq!(down + rejected, 1, "node {} {:?}", node, net.nodes[node].log);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A server that rejects everything, on any seed of a bad link: each
    /// REQ ends rejected with the server's private data exactly once on the
    /// client, nothing is ever established, and no table holds anything.
    #[test]
    fn random_links_with_a_rejecting_server_end_consistent(
        seed in any::<u64>(),
        loss in 0u32..300,
        duplicate in 0u32..300,
        jitter_us in 0u64..3000,
    ) {
        let mut net = net(seed, Link { loss, duplicate, jitter_us });
        net.nodes[SERVER].on_req = super::sim::OnReq::Reject(b"no".to_vec());
        let ids: Vec<_> = (0..4).map(|_| net.connect(CLIENT, SERVER)).collect();
        net.run_quiet(60 * MINUTE);
        for node in [CLIENT, SERVER] {
            prop_assert!(net.nodes[node].cm.is_empty());
            prop_assert_eq!(net.count(node, |e| matches!(e, CmEvent::Established { .. })), 0);
        }
        for &id in &ids {
            let rejected = net.count(CLIENT, |e| matches!(e,
                CmEvent::Rejected { id: i, reason, private_data, .. }
                    if *i == id && *reason == reason::CONSUMER_DEFINED && private_data.starts_with(b"no")));
            let unreachable = net.count(CLIENT, |e| matches!(e, CmEvent::Unreachable { id: i, .. } if *i == id));
            prop_assert_eq!(rejected + unreachable, 1, "{:?}", net.nodes[CLIENT].log);
        }
    }
}
