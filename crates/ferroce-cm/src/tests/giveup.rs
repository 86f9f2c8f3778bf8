//! Giving up after the last retry, and destroying a communication in the
//! middle: the peer is told and both sides end empty.

use core::time::Duration;

use ferroce_wire::mad::attr;

use super::sim::{Link, Net, OnReq, SERVICE};
use crate::{CmEvent, CmState, Unanswered, reason};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const HOUR: Duration = Duration::from_secs(3600);

fn net() -> Net {
    let mut net = Net::new(2, 11, Link::default());
    net.nodes[SERVER].cm.listen(SERVICE);
    net
}

#[test]
fn every_req_lost_is_unreachable_after_max_cm_retries() {
    let mut net = net();
    net.drop_once = vec![attr::REQ; 16];
    let id = net.connect(CLIENT, SERVER);
    let start = net.now;
    net.run_quiet(HOUR);
    let unreachable = CmEvent::Unreachable {
        id,
        unanswered: Unanswered::Req,
    };
    assert_eq!(net.count(CLIENT, |e| *e == unreachable), 1);
    assert_eq!(net.nodes[CLIENT].cm.stats().resent, 15);
    // 16 waits of 2 x 1024 ms + 4096 ms.
    let took = net.now.since(start);
    assert!(took >= Duration::from_millis(16 * 6144), "{took:?}");
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn every_rep_lost_ends_with_a_consumer_rej_and_both_sides_clean() {
    let mut net = net();
    net.drop_once = vec![attr::REP; 16];
    let id = net.connect(CLIENT, SERVER);
    net.run_quiet(HOUR);
    let sid = net.passive_id(SERVER, id).unwrap();
    let unreachable = CmEvent::Unreachable {
        id: sid,
        unanswered: Unanswered::Rep,
    };
    assert_eq!(net.count(SERVER, |e| *e == unreachable), 1);
    let rejected = net.nodes[CLIENT].log.iter().any(|e| {
        matches!(e, CmEvent::Rejected { id: i, reason, .. } if *i == id && *reason == reason::CONSUMER_DEFINED)
    });
    assert!(rejected, "{:?}", net.nodes[CLIENT].log);
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn destroying_a_req_in_flight_withdraws_it_with_rej_timeout() {
    let mut net = net();
    net.nodes[SERVER].on_req = OnReq::Ignore;
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| {
        n.passive_id(SERVER, id).is_some()
    });
    let now = net.now;
    net.nodes[CLIENT].cm.destroy(now, id).unwrap();
    net.run_quiet(HOUR);
    // The server found its half by the client's CA GUID in the ARI.
    let sid = net.passive_id(SERVER, id).unwrap();
    let withdrawn = net.nodes[SERVER].log.iter().any(|e| {
        matches!(e, CmEvent::Rejected { id: i, reason, .. } if *i == sid && *reason == reason::TIMEOUT)
    });
    assert!(withdrawn, "{:?}", net.nodes[SERVER].log);
    assert!(net.nodes[CLIENT].log.is_empty(), "no event after destroy");
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn destroying_a_connection_sends_one_dreq_and_no_more_events() {
    let mut net = net();
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| {
        n.established(CLIENT, id)
            && n.passive_id(SERVER, id)
                .is_some_and(|s| n.established(SERVER, s))
    });
    let sid = net.passive_id(SERVER, id).unwrap();
    let before = net.nodes[CLIENT].log.len();
    let now = net.now;
    net.nodes[CLIENT].cm.destroy(now, id).unwrap();
    assert_eq!(net.nodes[CLIENT].cm.state(id), Some(CmState::TimeWait));
    net.run_quiet(HOUR);
    assert_eq!(
        net.nodes[CLIENT].log.len(),
        before,
        "{:?}",
        &net.nodes[CLIENT].log[before..]
    );
    let closed = CmEvent::Disconnected {
        id: sid,
        dreq_unanswered: false,
    };
    assert_eq!(net.count(SERVER, |e| *e == closed), 1);
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn destroying_an_unanswered_req_on_the_passive_side_rejects_it() {
    let mut net = net();
    net.nodes[SERVER].on_req = OnReq::Ignore;
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| {
        n.passive_id(SERVER, id).is_some()
    });
    let sid = net.passive_id(SERVER, id).unwrap();
    let now = net.now;
    net.nodes[SERVER].cm.destroy(now, sid).unwrap();
    net.run_quiet(HOUR);
    let rejected = CmEvent::Rejected {
        id,
        reason: reason::CONSUMER_DEFINED,
        ari: Vec::new(),
        private_data: vec![0; 148],
    };
    assert_eq!(net.count(CLIENT, |e| *e == rejected), 1);
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn every_dreq_lost_ends_in_timewait_and_the_peer_recovers_later() {
    let mut net = net();
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| {
        n.established(CLIENT, id)
            && n.passive_id(SERVER, id)
                .is_some_and(|s| n.established(SERVER, s))
    });
    let sid = net.passive_id(SERVER, id).unwrap();
    net.drop_once = vec![attr::DREQ; 16];
    let now = net.now;
    net.nodes[CLIENT].cm.disconnect(now, id, &[]).unwrap();
    net.run_quiet(HOUR);
    let gave_up = CmEvent::Disconnected {
        id,
        dreq_unanswered: true,
    };
    assert_eq!(net.count(CLIENT, |e| *e == gave_up), 1);
    assert_eq!(net.nodes[CLIENT].cm.stats().resent, 15);
    assert!(net.nodes[CLIENT].cm.is_empty());
    // The server never heard; its own DREQ later is answered by a client
    // that no longer knows the connection.
    assert_eq!(net.nodes[SERVER].cm.state(sid), Some(CmState::Established));
    let now = net.now;
    net.nodes[SERVER].cm.disconnect(now, sid, &[]).unwrap();
    net.run_quiet(HOUR);
    let closed = CmEvent::Disconnected {
        id: sid,
        dreq_unanswered: false,
    };
    assert_eq!(net.count(SERVER, |e| *e == closed), 1);
    assert!(net.nodes[SERVER].cm.is_empty());
}

#[test]
fn traffic_before_the_rtu_establishes_the_passive_side() {
    let mut net = net();
    net.drop_once = vec![attr::RTU];
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| n.established(CLIENT, id));
    let sid = net.passive_id(SERVER, id).unwrap();
    assert_eq!(net.nodes[SERVER].cm.state(sid), Some(CmState::RepSent));
    // The QP received the client's first packet (the COMM_EST event).
    net.nodes[SERVER].cm.comm_established(sid).unwrap();
    assert!(
        net.nodes[SERVER].cm.poll_timeout().is_none(),
        "the REP is no longer resent"
    );
    net.run_quiet(HOUR);
    assert!(net.established(SERVER, sid));
    assert_eq!(net.nodes[SERVER].cm.stats().resent, 0);
}

#[test]
fn both_sides_disconnecting_at_once_close_once_each() {
    let mut net = net();
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| {
        n.established(CLIENT, id)
            && n.passive_id(SERVER, id)
                .is_some_and(|s| n.established(SERVER, s))
    });
    let sid = net.passive_id(SERVER, id).unwrap();
    let now = net.now;
    net.nodes[CLIENT].cm.disconnect(now, id, &[]).unwrap();
    net.nodes[SERVER].cm.disconnect(now, sid, &[]).unwrap();
    net.run_quiet(HOUR);
    for (node, id) in [(CLIENT, id), (SERVER, sid)] {
        let closed = |e: &CmEvent| matches!(e, CmEvent::Disconnected { id: i, dreq_unanswered: false } if *i == id);
        assert_eq!(net.count(node, closed), 1, "{:?}", net.nodes[node].log);
        assert_eq!(net.count(node, |e| *e == CmEvent::TimewaitExit { id }), 1);
        assert!(net.nodes[node].cm.is_empty());
    }
}
