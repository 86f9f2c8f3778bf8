//! rdma_cm at scale and under loss, ferroce against ferroce over real UDP
//! on loopback (127.0.6.x, 127.0.7.x; run in a network namespace of its
//! own): 200 connect/disconnect cycles in a row, disconnect started by
//! either side in turn; 32 connections at once; and a lost REQ, REP, RTU or
//! DREQ, dropped by a relay between two devices on their own RoCE ports,
//! is sent again and the connection is made (or closed) all the same.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroce::cm::{CmEvent, CmId, ConnParam, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, Context, DeviceConfig, MemoryRegion, ProtectionDomain, QpInitAttr,
    QpType, QueuePair, RecvWr, SendWr, WcStatus,
};
use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::mad::attr;

const WAIT: Duration = Duration::from_secs(10);
/// Long enough for one CM resend: rdma_cm's REQ waits about 6 s for its
/// REP (response timeout 20 plus twice the packet life time 18).
const RESEND_WAIT: Duration = Duration::from_secs(30);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn expect_within(ch: &EventChannel, name: &str, wait: Duration) -> CmEvent {
    let event = ch
        .get_event_timeout(wait)
        .unwrap()
        .unwrap_or_else(|| panic!("no {name} within {wait:?}"));
    assert_eq!(event.kind.name(), name, "got {event}");
    event
}

fn expect(ch: &EventChannel, name: &str) -> CmEvent {
    expect_within(ch, name, WAIT)
}

fn listener(ch: &EventChannel, at: SocketAddr) -> CmId {
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.bind_addr(at).unwrap();
    id.listen(64).unwrap();
    id
}

/// A side's PD, CQ and memory, shared by its connections.
struct Verbs {
    pd: ProtectionDomain,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

impl Verbs {
    fn of(id: &CmId) -> Self {
        let ctx = id.verbs().unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(1024).unwrap();
        let mr = pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
        Self { pd, cq, mr }
    }

    fn qp(&self, id: &CmId) -> QueuePair {
        id.create_qp(&self.pd, &QpInitAttr::new(QpType::Rc, &self.cq, &self.cq))
            .unwrap()
    }

    fn wait_wc(&self) -> WcStatus {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(wc) = self.cq.poll(1).unwrap().pop() {
                return wc.status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no completion in 10 s"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// A client ID at `from`, resolved towards `service`.
fn resolved(ch: &EventChannel, from: IpAddr, service: SocketAddr) -> CmId {
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(SocketAddr::new(from, 0)), service, WAIT)
        .unwrap();
    expect(ch, "RDMA_CM_EVENT_ADDR_RESOLVED");
    id.resolve_route(WAIT).unwrap();
    expect(ch, "RDMA_CM_EVENT_ROUTE_RESOLVED");
    id
}

/// One SEND from `(cv, cqp)` to `(sv, sqp)`.
fn exchange(cv: &Verbs, cqp: &QueuePair, sv: &Verbs, sqp: &QueuePair) {
    sqp.post_recv(RecvWr::new(1, &[sv.mr.sge(0, 4096)]))
        .unwrap();
    cqp.post_send(SendWr::send(2, &[cv.mr.sge(0, 16)])).unwrap();
    assert_eq!(cv.wait_wc(), WcStatus::Success);
    assert_eq!(sv.wait_wc(), WcStatus::Success);
}

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
        // Within the TimeWait time (10 s at most), every connection past
        // the table's size ended an older one's TimeWait.
        if took < limits.timewait_cap {
            assert!(stats.timewait_evicted >= 1000, "{took:?}: {stats:?}");
        }
    }
}

/// Which MAD a relay drops: the `nth` (from 1) of attribute `attribute`.
#[derive(Clone, Copy)]
struct Drop {
    attribute: u16,
    nth: u32,
}

/// Forwards every datagram between two devices on their own RoCE ports,
/// from each's address, dropping one chosen MAD; counts the MADs it saw by
/// attribute.
struct Relay {
    seen: Arc<Mutex<HashMap<u16, u32>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The ports: each device receives on its own, sends to the relay's.
const RELAY_PORT: u16 = 4800;
const PORT_A: u16 = 4801;
const PORT_B: u16 = 4802;

impl Relay {
    fn start(a: IpAddr, b: IpAddr, drop: Drop) -> Self {
        let bind = |local| {
            let mut cfg = UdpConfig::new(local);
            cfg.port = RELAY_PORT;
            cfg.gso = false;
            UdpBackend::bind(cfg).unwrap()
        };
        // `at_a` takes what B sends to A (and sends as A to B), `at_b` the
        // other way.
        let (mut at_a, mut at_b) = (bind(a), bind(b));
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st2.load(Ordering::Relaxed) {
                let mut moved = forward(&mut at_b, &mut at_a, b, PORT_B, drop, &s2);
                moved += forward(&mut at_a, &mut at_b, a, PORT_A, drop, &s2);
                if moved == 0 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        });
        Self {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn seen(&self, attribute: u16) -> u32 {
        self.seen
            .lock()
            .unwrap()
            .get(&attribute)
            .copied()
            .unwrap_or(0)
    }
}

impl std::ops::Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Moves what `from` received to `to_ip:to_port`, sent from `via`'s
/// address (the sender's); drops the chosen MAD. Returns how many moved.
fn forward(
    from: &mut UdpBackend,
    via: &mut UdpBackend,
    to_ip: IpAddr,
    to_port: u16,
    drop: Drop,
    seen: &Mutex<HashMap<u16, u32>>,
) -> usize {
    let mut got: Vec<(u16, Vec<u8>)> = Vec::new();
    let _ = from.recv(|_, src_port, transport| {
        if let Some(attribute) = mad_attribute(transport) {
            let mut seen = seen.lock().unwrap();
            let n = seen.entry(attribute).or_insert(0);
            *n += 1;
            if attribute == drop.attribute && *n == drop.nth {
                return;
            }
        }
        got.push((src_port, transport.to_vec()));
    });
    for (src_port, mut transport) in got.iter_mut().map(|(p, t)| (*p, std::mem::take(t))) {
        let mut d = [OutDatagram {
            remote: to_ip,
            remote_port: to_port,
            src_port,
            transport: &mut transport,
        }];
        let _ = via.send(&mut d);
    }
    got.len()
}

/// The CM attribute of a MAD to QP1 (BTH dest QP 1; the MAD after BTH and
/// DETH, its attribute ID at bytes 16-17).
fn mad_attribute(transport: &[u8]) -> Option<u16> {
    let dest_qp = u32::from_be_bytes([0, transport[5], transport[6], transport[7]]);
    let id = transport.get(20 + 16..20 + 18)?;
    (dest_qp == 1).then(|| u16::from_be_bytes([id[0], id[1]]))
}

/// Two devices at `a` (client) and `b` (server) that reach each other only
/// through a relay dropping `drop`; connects, sends, and closes from the
/// client; checks the dropped MAD was seen again (resent).
fn survives_a_lost(a: &str, b: &str, drop: Drop) {
    let (a, b) = (ip(a), ip(b));
    let open = |local, port| {
        Context::open_with(DeviceConfig {
            port,
            peer_port: RELAY_PORT,
            ..DeviceConfig::new(local)
        })
        .unwrap()
    };
    let (_dev_a, _dev_b) = (open(a, PORT_A), open(b, PORT_B));
    let relay = Relay::start(a, b, drop);
    let service = SocketAddr::new(b, 7700);
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = listener(&sch, service);
    let sv = Verbs::of(&listen);
    let cid = resolved(&cch, a, service);
    let cv = Verbs::of(&cid);
    let cqp = cv.qp(&cid);
    cid.connect(&ConnParam::default()).unwrap();
    let sid = expect_within(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST", RESEND_WAIT).id;
    let sqp = sv.qp(&sid);
    sid.accept(&ConnParam::default()).unwrap();
    expect_within(&cch, "RDMA_CM_EVENT_ESTABLISHED", RESEND_WAIT);
    expect_within(&sch, "RDMA_CM_EVENT_ESTABLISHED", RESEND_WAIT);
    exchange(&cv, &cqp, &sv, &sqp);
    cid.disconnect().unwrap();
    expect_within(&sch, "RDMA_CM_EVENT_DISCONNECTED", RESEND_WAIT);
    sid.disconnect().unwrap();
    expect_within(&cch, "RDMA_CM_EVENT_DISCONNECTED", RESEND_WAIT);
    assert!(
        relay.seen(drop.attribute) > drop.nth,
        "the dropped MAD ({:#x}) was not sent again",
        drop.attribute
    );
    let resent = listen.verbs().unwrap().cm_stats().resent + cid.verbs().unwrap().cm_stats().resent;
    assert!(resent >= 1, "no CM counted a resend");
}

#[test]
fn a_lost_req_is_sent_again() {
    survives_a_lost(
        "127.0.7.1",
        "127.0.7.2",
        Drop {
            attribute: attr::REQ,
            nth: 1,
        },
    );
}

#[test]
fn a_lost_rep_is_sent_again() {
    survives_a_lost(
        "127.0.7.3",
        "127.0.7.4",
        Drop {
            attribute: attr::REP,
            nth: 1,
        },
    );
}

#[test]
fn a_lost_rtu_is_made_good() {
    survives_a_lost(
        "127.0.7.5",
        "127.0.7.6",
        Drop {
            attribute: attr::RTU,
            nth: 1,
        },
    );
}

#[test]
fn a_lost_dreq_is_sent_again() {
    survives_a_lost(
        "127.0.7.7",
        "127.0.7.8",
        Drop {
            attribute: attr::DREQ,
            nth: 1,
        },
    );
}
