//! Hostile input: malformed MADs are counted and dropped, and a flood of
//! REQs from made-up sources leaves the tables within their limits and an
//! established connection working.

use core::time::Duration;
use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::Instant;
use ferroce_wire::Psn;
use ferroce_wire::mad::{CmMessage, CmReq, MAD_HEADER_LEN, MAD_LEN, Mad, attr};
use proptest::prelude::*;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::sim::{Link, Net, OnReq, SERVICE};
use crate::{Cm, CmConfig, CmEvent, CmState, PeerAddr};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const MINUTE: Duration = Duration::from_secs(60);

/// A well-formed REQ for `SERVICE` from a made-up source.
fn req_mad(comm_id: u32, guid: u64, qpn: u32) -> Vec<u8> {
    let mut req = CmReq::parse(&[0u8; ferroce_wire::mad::CM_DATA_LEN]).unwrap();
    req.local_comm_id = comm_id;
    req.service_id = SERVICE;
    req.local_ca_guid = guid;
    req.local_qpn = qpn;
    req.starting_psn = Psn::new(1);
    req.local_cm_response_timeout = 20;
    req.remote_cm_response_timeout = 20;
    req.max_cm_retries = 15;
    req.primary_path.local_ack_timeout = 19;
    let mad = Mad {
        header: crate::Cm::header(u64::from(comm_id), attr::REQ),
        cm: Some(CmMessage::Req(req)),
    };
    let mut out = vec![0u8; MAD_LEN];
    mad.emit(&mut out).unwrap();
    out
}

fn peer(n: u32) -> PeerAddr {
    PeerAddr::gsi(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (n & 0x00ff_ffff))))
}

#[test]
fn malformed_mads_are_counted_by_cause() {
    let mut cm = Cm::new(CmConfig::default());
    cm.listen(SERVICE);
    let now = Instant::from_nanos(1);
    let good = req_mad(7, 0x1234, 0x11);
    for len in [0, 1, 23, 24, 100, 255] {
        cm.handle_mad(now, peer(1), &good[..len]);
    }
    let mut bad = good.clone();
    bad[0] = 0x80; // OPA's base version
    cm.handle_mad(now, peer(1), &bad);
    let mut bad = good.clone();
    bad[2] = 0x01;
    cm.handle_mad(now, peer(1), &bad);
    let mut bad = good.clone();
    bad[1] = 0x03; // SubnAdm
    cm.handle_mad(now, peer(1), &bad);
    let mut bad = good.clone();
    bad[16..18].copy_from_slice(&attr::LAP.to_be_bytes());
    cm.handle_mad(now, peer(1), &bad);
    let mut bad = good.clone();
    bad[3] = ferroce_wire::mad::method::GET;
    cm.handle_mad(now, peer(1), &bad);
    let mut bad = good.clone();
    bad[16..18].copy_from_slice(&attr::REJ.to_be_bytes());
    bad[MAD_HEADER_LEN + 9] = 73 << 1; // an ARI longer than its field
    cm.handle_mad(now, peer(1), &bad);
    let mut bad = good.clone();
    bad[16..18].copy_from_slice(&attr::SIDR_REP.to_be_bytes());
    bad[MAD_HEADER_LEN + 5] = 73;
    cm.handle_mad(now, peer(1), &bad);
    let stats = cm.stats().clone();
    assert_eq!(stats.received, 13);
    assert_eq!(stats.truncated, 6);
    assert_eq!((stats.bad_base_version, stats.bad_class_version), (1, 1));
    assert_eq!((stats.wrong_class, stats.unknown_attribute), (1, 2));
    assert_eq!(stats.malformed, 2);
    assert!(cm.is_empty() && cm.poll_event().is_none() && cm.poll_transmit().is_none());
    // The good one still works.
    cm.handle_mad(now, peer(1), &good);
    assert!(matches!(cm.poll_event(), Some(CmEvent::ReqReceived { .. })));
}

#[test]
fn a_flood_of_100000_reqs_keeps_the_tables_bounded_and_the_connection_up() {
    let mut net = Net::new(2, 9, Link::default());
    net.nodes[SERVER].cm.listen(SERVICE);
    let id = net.connect(CLIENT, SERVER);
    net.run_until(MINUTE, |n| {
        n.established(CLIENT, id)
            && n.passive_id(SERVER, id)
                .is_some_and(|s| n.established(SERVER, s))
    });
    let sid = net.passive_id(SERVER, id).unwrap();
    net.nodes[SERVER].on_req = OnReq::Ignore;
    let limits = CmConfig::default();
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut now = net.now;
    for n in 0..100_000u32 {
        let mad = req_mad(
            rng.next_u32() | 1,
            rng.next_u64(),
            rng.next_u32() & 0xff_ffff,
        );
        let server = &mut net.nodes[SERVER].cm;
        server.handle_mad(now, peer(n), &mad);
        if n % 1000 == 999 {
            // Time passes; the queue is drained only now and then.
            now = now.after(Duration::from_millis(100));
            server.handle_timeout(now);
            while server.poll_transmit().is_some() {}
            let (pending, timewait) = server.table_sizes();
            assert!(pending <= limits.max_pending && timewait <= limits.max_timewait);
            assert!(server.len() <= limits.max_pending + 1);
            server.check_invariants();
        }
    }
    net.now = now;
    let stats = net.nodes[SERVER].cm.stats().clone();
    assert_eq!(stats.pending_full, 100_000 - limits.max_pending as u64);
    assert_eq!(net.nodes[SERVER].cm.state(sid), Some(CmState::Established));
    // Events beyond the queue's limit were dropped, not kept.
    let events = std::iter::from_fn(|| net.nodes[SERVER].cm.poll_event()).count();
    assert!(events <= limits.max_events, "{events}");
    // The established connection still closes cleanly.
    net.nodes[CLIENT].cm.disconnect(net.now, id, &[]).unwrap();
    let closed = CmEvent::Disconnected {
        id,
        dreq_unanswered: false,
    };
    net.run_until(MINUTE, |n| n.count(CLIENT, |e| *e == closed) == 1);
    assert_eq!(net.nodes[SERVER].cm.state(sid), Some(CmState::TimeWait));
}

#[test]
fn a_full_timewait_table_ends_its_oldest_entry_early() {
    let mut net = Net::new(2, 10, Link::default());
    let config = CmConfig {
        max_timewait: 8,
        local_ca_guid: 0x5054_00ff_fe52_0000,
        ..CmConfig::default()
    };
    net.nodes[CLIENT].cm = Cm::new(config);
    net.nodes[SERVER].cm.listen(SERVICE);
    for _ in 0..20 {
        let id = net.connect(CLIENT, SERVER);
        net.run_until(MINUTE, |n| n.established(CLIENT, id));
        net.nodes[CLIENT].cm.disconnect(net.now, id, &[]).unwrap();
        net.run_until(MINUTE, |n| {
            n.nodes[CLIENT].cm.state(id) == Some(CmState::TimeWait)
        });
        assert!(net.nodes[CLIENT].cm.table_sizes().1 <= 8);
    }
    assert_eq!(net.nodes[CLIENT].cm.stats().timewait_evicted, 12);
    net.run_quiet(MINUTE);
    assert_eq!(
        net.count(CLIENT, |e| matches!(e, CmEvent::TimewaitExit { .. })),
        20
    );
}

#[test]
fn a_req_asking_for_hours_of_timewait_is_capped() {
    let mut cm = Cm::new(CmConfig::default());
    cm.listen(SERVICE);
    let mut mad = req_mad(5, 0x77, 0x12);
    // Local ACK timeout 31: a packet life time of 30, 2^22 ms of TimeWait.
    mad[MAD_HEADER_LEN + 52 + 43] = 31 << 3;
    let now = Instant::from_nanos(1);
    cm.handle_mad(now, peer(5), &mad);
    let Some(CmEvent::ReqReceived { id, .. }) = cm.poll_event() else {
        panic!("no REQ")
    };
    cm.reject(now, id, crate::reason::CONSUMER_DEFINED, &[])
        .unwrap();
    assert!(cm.is_empty(), "a rejected REQ leaves nothing behind");
    // Accept, let the REP go unanswered: the passive side enters TimeWait.
    let mut mad = req_mad(6, 0x77, 0x13);
    mad[MAD_HEADER_LEN + 52 + 43] = 31 << 3;
    mad[MAD_HEADER_LEN + 51] = 0; // no CM retries
    cm.handle_mad(now, peer(5), &mad);
    let Some(CmEvent::ReqReceived { id, .. }) = cm.poll_event() else {
        panic!("no REQ")
    };
    cm.accept(now, id, &crate::RepParams::default()).unwrap();
    let due = cm.poll_timeout().unwrap();
    cm.handle_timeout(due);
    assert_eq!(cm.state(id), Some(CmState::TimeWait));
    let exit = cm.poll_timeout().unwrap();
    assert_eq!(exit.since(due), CmConfig::default().timewait_cap);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut cm = Cm::new(CmConfig::default());
        cm.listen(SERVICE);
        cm.handle_mad(Instant::from_nanos(1), peer(1), &bytes);
        cm.handle_timeout(Instant::from_nanos(u64::MAX));
    }

    /// A valid CM header with random class data, for every attribute.
    #[test]
    fn random_cm_bodies_never_panic(
        attribute in 0x0010u16..=0x001a,
        body in prop::collection::vec(any::<u8>(), MAD_LEN - MAD_HEADER_LEN),
    ) {
        let mut cm = Cm::new(CmConfig::default());
        cm.listen(SERVICE);
        let mut mad = req_mad(1, 2, 3);
        mad[16..18].copy_from_slice(&attribute.to_be_bytes());
        mad[MAD_HEADER_LEN..].copy_from_slice(&body);
        cm.handle_mad(Instant::from_nanos(1), peer(1), &mad);
        while let Some(event) = cm.poll_event() {
            if let CmEvent::ReqReceived { id, .. } = event {
                let _ = cm.accept(Instant::from_nanos(2), id, &crate::RepParams::default());
            }
        }
        cm.handle_timeout(Instant::from_nanos(u64::MAX));
    }
}

/// A MAD of attribute `attribute` whose comm ID fields name live
/// communications, with the rest random.
fn aimed(attribute: u16, ids: (u32, u32), body: &[u8]) -> Vec<u8> {
    let mut mad = req_mad(1, 2, 3);
    mad[16..18].copy_from_slice(&attribute.to_be_bytes());
    mad[MAD_HEADER_LEN..].copy_from_slice(body);
    mad[MAD_HEADER_LEN..MAD_HEADER_LEN + 4].copy_from_slice(&ids.0.to_be_bytes());
    mad[MAD_HEADER_LEN + 4..MAD_HEADER_LEN + 8].copy_from_slice(&ids.1.to_be_bytes());
    mad
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random messages aimed at live communications (their comm IDs in
    /// place) in every phase of a connection: never a panic, and the tables
    /// stay consistent with what they describe.
    #[test]
    fn aimed_garbage_keeps_the_tables_consistent(
        seed in any::<u64>(),
        steps in 0usize..40,
        shots in prop::collection::vec(
            (0x0010u16..=0x0018, any::<bool>(), prop::collection::vec(any::<u8>(), MAD_LEN - MAD_HEADER_LEN)),
            1..8,
        ),
    ) {
        let mut net = Net::new(2, seed, Link::default());
        net.nodes[SERVER].cm.listen(SERVICE);
        let id = net.connect(CLIENT, SERVER);
        for _ in 0..steps {
            net.step();
        }
        let sid = net.passive_id(SERVER, id).map_or(0, |s| s.0);
        for (attribute, at_server, body) in shots {
            let (from, to, ids) = if at_server { (CLIENT, SERVER, (id.0, sid)) } else { (SERVER, CLIENT, (sid, id.0)) };
            net.inject(from, to, &aimed(attribute, ids, &body));
            net.nodes[to].cm.check_invariants();
        }
        net.run_quiet(Duration::from_secs(24 * 3600));
        for node in [CLIENT, SERVER] {
            net.nodes[node].cm.check_invariants();
        }
    }
}
