//! rdma_cm at scale, ferroce against ferroce over real UDP on loopback
//! (127.0.6.x; run in a network namespace of its own): 200
//! connect/disconnect cycles in a row, disconnect started by either side
//! in turn; 32 connections at once; and more connections than the TimeWait
//! table holds, opened and closed 64 at a time. Loss is in rdma_cm_loss.rs.

mod cm_common;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use cm_common::{Verbs, WAIT, exchange, expect, ip, listener, resolved};
use ferroce::QueuePair;
use ferroce::cm::{CmId, ConnParam, EventChannel, PortSpace};

/// Closes a connection from the client's side or the server's, each side
/// seeing DISCONNECTED.
fn close(cch: &EventChannel, cid: &CmId, sch: &EventChannel, sid: &CmId, client_first: bool) {
    let [(first, _), (second, second_ch)] = if client_first {
        [(cid, cch), (sid, sch)]
    } else {
        [(sid, sch), (cid, cch)]
    };
    first.disconnect().unwrap();
    expect(second_ch, "RDMA_CM_EVENT_DISCONNECTED");
    second.disconnect().unwrap();
    let first_ch = if client_first { cch } else { sch };
    expect(first_ch, "RDMA_CM_EVENT_DISCONNECTED");
}

#[test]
fn two_hundred_connect_disconnect_cycles_in_a_row_either_side_closing() {
    let service: SocketAddr = "127.0.6.1:7600".parse().unwrap();
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = listener(&sch, service);
    let sv = Verbs::of(&listen);
    let first = resolved(&cch, ip("127.0.6.2"), service);
    let cv = Verbs::of(&first);
    // The device lives while a Context or an ID holds it; a PD alone does
    // not keep it open.
    let _client_dev = first.verbs().unwrap();
    drop(first);
    for cycle in 0..200 {
        let cid = resolved(&cch, ip("127.0.6.2"), service);
        let cqp = cv.qp(&cid);
        cid.connect(&ConnParam::default()).unwrap();
        let sid = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST").id;
        let sqp = sv.qp(&sid);
        sid.accept(&ConnParam::default()).unwrap();
        expect(&cch, "RDMA_CM_EVENT_ESTABLISHED");
        expect(&sch, "RDMA_CM_EVENT_ESTABLISHED");
        exchange(&cv, &cqp, &sv, &sqp);
        close(&cch, &cid, &sch, &sid, cycle % 2 == 0);
    }
    // Every communication ended: only TimeWait entries remain, within the
    // table's limit, and nothing is being set up.
    let tables = listen.verbs().unwrap().cm_tables();
    assert_eq!(tables.pending, 0, "{tables:?}");
    assert!(tables.timewait <= ferroce_cm::CmConfig::default().max_timewait);
    assert!(sch.try_get_event().is_none() && cch.try_get_event().is_none());
}

#[test]
fn thirty_two_connections_at_once() {
    const N: usize = 32;
    let service: SocketAddr = "127.0.6.3:7601".parse().unwrap();
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = listener(&sch, service);
    let sv = Verbs::of(&listen);
    let cids: Vec<CmId> = (0..N)
        .map(|_| resolved(&cch, ip("127.0.6.4"), service))
        .collect();
    let cv = Verbs::of(&cids[0]);
    let cqps: Vec<QueuePair> = cids.iter().map(|id| cv.qp(id)).collect();
    for id in &cids {
        id.connect(&ConnParam::default()).unwrap();
    }
    // The server accepts each request as it comes, the client sees its
    // ESTABLISHEDs in whatever order.
    let mut servers = Vec::new();
    for _ in 0..N {
        let sid = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST").id;
        let qp = sv.qp(&sid);
        sid.accept(&ConnParam::default()).unwrap();
        servers.push((sid, qp));
    }
    let mut established = Vec::new();
    for _ in 0..N {
        established.push(expect(&cch, "RDMA_CM_EVENT_ESTABLISHED").id);
        expect(&sch, "RDMA_CM_EVENT_ESTABLISHED");
    }
    assert!(cids.iter().all(|c| established.contains(c)));
    // Each client ID's server ID: the one whose peer is its address.
    let server_of = |cid: &CmId| {
        servers
            .iter()
            .find(|(sid, _)| sid.peer_addr() == cid.local_addr())
            .expect("a server ID for each client ID")
    };
    for (cid, cqp) in cids.iter().zip(&cqps) {
        exchange(&cv, cqp, &sv, &server_of(cid).1);
    }
    for (i, cid) in cids.iter().enumerate() {
        close(&cch, cid, &sch, &server_of(cid).0, i % 2 == 0);
    }
}

/// Connections a churn keeps opening and closing at once.
const CHURN_PARALLEL: usize = 64;

/// Opens and closes `total` connections from `cch` to the listener on
/// `sch`, `CHURN_PARALLEL` at a time, on this one thread; calls `sample`
/// now and then. Returns how long it took.
fn churn(
    cch: &EventChannel,
    sch: &EventChannel,
    (cv, sv): (&Verbs, &Verbs),
    (from, service): (IpAddr, SocketAddr),
    total: usize,
    mut sample: impl FnMut(),
) -> Duration {
    let start = std::time::Instant::now();
    let begin = || {
        let id = cch.create_id(PortSpace::Tcp).unwrap();
        id.resolve_addr(Some(SocketAddr::new(from, 0)), service, WAIT)
            .unwrap();
    };
    // Each side's connections, by QP number (IDs and QPs live until
    // closed); the two devices number their QPs alike.
    let mut clients: HashMap<u32, (CmId, QueuePair)> = HashMap::new();
    let mut servers: HashMap<u32, (CmId, QueuePair)> = HashMap::new();
    let (mut started, mut closed) = (CHURN_PARALLEL.min(total), 0);
    (0..started).for_each(|_| begin());
    let mut idle_since = std::time::Instant::now();
    while closed < total {
        let mut busy = false;
        while let Some(e) = cch.try_get_event() {
            busy = true;
            match e.kind.name() {
                "RDMA_CM_EVENT_ADDR_RESOLVED" => e.id.resolve_route(WAIT).unwrap(),
                "RDMA_CM_EVENT_ROUTE_RESOLVED" => {
                    let qp = cv.qp(&e.id);
                    e.id.connect(&ConnParam::default()).unwrap();
                    clients.insert(qp.qpn(), (e.id, qp));
                }
                "RDMA_CM_EVENT_ESTABLISHED" => e.id.disconnect().unwrap(),
                "RDMA_CM_EVENT_DISCONNECTED" => {
                    clients.remove(&e.id.qp_num().unwrap());
                    closed += 1;
                    if started < total {
                        begin();
                        started += 1;
                    }
                    if closed % 256 == 0 {
                        sample();
                    }
                }
                other => panic!("client: {other}: {e}"),
            }
        }
        while let Some(e) = sch.try_get_event() {
            busy = true;
            match e.kind.name() {
                "RDMA_CM_EVENT_CONNECT_REQUEST" => {
                    let qp = sv.qp(&e.id);
                    e.id.accept(&ConnParam::default()).unwrap();
                    servers.insert(qp.qpn(), (e.id, qp));
                }
                "RDMA_CM_EVENT_ESTABLISHED" => {}
                "RDMA_CM_EVENT_DISCONNECTED" => {
                    e.id.disconnect().unwrap();
                    servers.remove(&e.id.qp_num().unwrap());
                }
                other => panic!("server: {other}: {e}"),
            }
        }
        if busy {
            idle_since = std::time::Instant::now();
        } else {
            assert!(
                idle_since.elapsed() < WAIT,
                "stuck: {closed} of {total} closed"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    start.elapsed()
}

#[test]
fn more_connections_than_the_timewait_table_holds_end_its_oldest_early() {
    let limits = ferroce_cm::CmConfig::default();
    let total = limits.max_timewait + 1000;
    let service: SocketAddr = "127.0.6.5:7602".parse().unwrap();
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = listener(&sch, service);
    let sv = Verbs::of(&listen);
    let first = resolved(&cch, ip("127.0.6.6"), service);
    let cv = Verbs::of(&first);
    let devices = [listen.verbs().unwrap(), first.verbs().unwrap()];
    drop(first);
    let mut peak = 0;
    let took = churn(
        &cch,
        &sch,
        (&cv, &sv),
        (ip("127.0.6.6"), service),
        total,
        || {
            for d in &devices {
                peak = peak.max(d.cm_tables().timewait);
            }
        },
    );
    assert!(peak <= limits.max_timewait, "TimeWait held {peak}");
    for d in &devices {
        let (tables, stats) = (d.cm_tables(), d.cm_stats());
        assert!(tables.timewait <= limits.max_timewait, "{tables:?}");
        // Within the TimeWait time (the time of rdma_cm's packet life time
        // 18 + 1, about 2.1 s), every connection past the table's size
        // ended an older one's TimeWait. A slower churn lets TimeWaits end
        // on their own; the bound above is then all there is to check (the
        // eviction itself is tested on the CM's simulated network).
        if took < ferroce_cm::timing::timewait(18, limits.timewait_cap) {
            assert!(stats.timewait_evicted >= 1000, "{took:?}: {stats:?}");
        }
    }
}
