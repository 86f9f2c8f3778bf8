//! rdma_cm against hostile input over real UDP on loopback (127.0.2.x,
//! 127.0.3.x, 127.0.4.x; run in a network namespace of its own): forged
//! MADs (bad base or class version, unknown attribute, a broken field,
//! truncated, wrong Q_Key) are dropped and counted, never a crash; a REQ
//! naming an unsupported transport or MTU is rejected with IBA's reason
//! (9, 26; the kernel's rdma_cm sends 28: see the README's "Where
//! ferroce follows IBA"); a flood of 100,000 REQs from made-up sources
//! leaves the CM's tables within their limits, memory bounded, and an
//! established connection carrying data during and after it.

mod cm_forge;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cm_forge::{MadForger, QKEY, ReqFields, Rng, cm_header, emit, eventually};
use ferroce::cm::{CmEvent, CmId, CmTables, ConnParam, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, Context, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr,
    WcStatus,
};
use ferroce_cm::reason;
use ferroce_wire::mad::{TRANSPORT_RD, TRANSPORT_UC, attr};

const WAIT: Duration = Duration::from_secs(10);
/// A port no forger receives on: the CM's answers to it go unread.
const DEAF_PORT: u16 = 4792;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn expect(ch: &EventChannel, name: &str) -> CmEvent {
    let event = ch
        .get_event_timeout(WAIT)
        .unwrap()
        .unwrap_or_else(|| panic!("no {name} within 10 s"));
    assert_eq!(event.kind.name(), name, "got {event}");
    event
}

fn listener(ch: &EventChannel, at: SocketAddr) -> CmId {
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.bind_addr(at).unwrap();
    id.listen(8).unwrap();
    id
}

/// One side of a connection: its ID, QP, CQ and memory.
struct End {
    id: CmId,
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

fn end(id: CmId) -> End {
    let ctx = id.verbs().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(256).unwrap();
    let mr = pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let qp = id
        .create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, &cq))
        .unwrap();
    End { id, qp, cq, mr }
}

/// Connects a client at `from` to the listener at `service`: (client,
/// server), both ESTABLISHED.
fn connect(sch: &EventChannel, cch: &EventChannel, from: IpAddr, service: SocketAddr) -> [End; 2] {
    let id = cch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(SocketAddr::new(from, 0)), service, WAIT)
        .unwrap();
    expect(cch, "RDMA_CM_EVENT_ADDR_RESOLVED");
    id.resolve_route(WAIT).unwrap();
    expect(cch, "RDMA_CM_EVENT_ROUTE_RESOLVED");
    let c = end(id);
    c.id.connect(&ConnParam::default()).unwrap();
    let s = end(expect(sch, "RDMA_CM_EVENT_CONNECT_REQUEST").id);
    s.id.accept(&ConnParam::default()).unwrap();
    expect(cch, "RDMA_CM_EVENT_ESTABLISHED");
    expect(sch, "RDMA_CM_EVENT_ESTABLISHED");
    [c, s]
}

fn wait_wc(cq: &CompletionQueue) -> WcStatus {
    let mut status = None;
    assert!(
        eventually(WAIT, || {
            status = cq.poll(1).unwrap().pop().map(|wc| wc.status);
            status.is_some()
        }),
        "no completion within 10 s"
    );
    status.unwrap()
}

/// One SEND from `c` to `s`, both completions successful.
fn exchange(c: &End, s: &End) {
    s.qp.post_recv(RecvWr::new(1, &[s.mr.sge(0, 4096)]))
        .unwrap();
    c.mr.write(0, b"still here").unwrap();
    c.qp.post_send(SendWr::send(2, &[c.mr.sge(0, 10)])).unwrap();
    assert_eq!(wait_wc(&c.cq), WcStatus::Success);
    assert_eq!(wait_wc(&s.cq), WcStatus::Success);
}

#[test]
fn malformed_mads_are_dropped_and_counted_by_cause() {
    let service: SocketAddr = "127.0.2.1:7500".parse().unwrap();
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = listener(&sch, service);
    let ctx = listen.verbs().unwrap();
    let mut forger = MadForger::new(ip("127.0.2.2"), DEAF_PORT, service.ip());
    let good = ReqFields::new(
        7,
        0x1234,
        0x11,
        service.port(),
        ip("127.0.2.2"),
        service.ip(),
    )
    .mad();
    let with = |at: usize, bytes: &[u8]| {
        let mut m = good.clone();
        m[at..at + bytes.len()].copy_from_slice(bytes);
        m
    };
    let (cm0, mad0) = (ctx.cm_stats(), ctx.mad_stats());
    let bad_cm = [
        with(0, &[0x80]),                           // base version (OPA's)
        with(2, &[0x01]),                           // class version
        with(16, &attr::LAP.to_be_bytes()),         // LAP: not handled
        with(3, &[ferroce_wire::mad::method::GET]), // a method the CM does not take
        with(1, &[0x03]),                           // SubnAdm, not the CM class
    ];
    assert_eq!(forger.send(&bad_cm, QKEY, 1), bad_cm.len());
    // A REJ whose ARI length is longer than its field.
    let mut rej = emit(cm_header(9, attr::REJ), None);
    rej[24 + 9] = 73 << 1;
    assert_eq!(forger.send(&[rej], QKEY, 1), 1);
    // QP1 refuses these before the CM sees them.
    assert_eq!(forger.send(&[good[..100].to_vec()], QKEY, 1), 1);
    assert_eq!(forger.send(std::slice::from_ref(&good), 0x1111_1111, 1), 1);

    let settled = eventually(WAIT, || ctx.cm_stats().received - cm0.received == 6);
    let cm = ctx.cm_stats();
    assert!(settled, "{cm:?}");
    assert_eq!(cm.bad_base_version - cm0.bad_base_version, 1, "{cm:?}");
    assert_eq!(cm.bad_class_version - cm0.bad_class_version, 1, "{cm:?}");
    assert_eq!(cm.unknown_attribute - cm0.unknown_attribute, 2, "{cm:?}");
    assert_eq!(cm.wrong_class - cm0.wrong_class, 1, "{cm:?}");
    assert_eq!(cm.malformed - cm0.malformed, 1, "{cm:?}");
    assert!(eventually(WAIT, || ctx.mad_stats().rx_bad_qkey > mad0.rx_bad_qkey));
    let mad_now = ctx.mad_stats();
    assert_eq!(mad_now.rx_bad_length - mad0.rx_bad_length, 1, "{mad_now:?}");
    assert_eq!(mad_now.rx_bad_qkey - mad0.rx_bad_qkey, 1, "{mad_now:?}");
    assert!(sch.try_get_event().is_none(), "a forged MAD made an event");
    assert_eq!(ctx.cm_tables().total, 0);

    // The device still connects.
    let [c, s] = connect(&sch, &cch, ip("127.0.2.3"), service);
    exchange(&c, &s);
}

#[test]
fn a_req_naming_an_unsupported_transport_or_mtu_is_rejected_with_the_kernels_reason() {
    let service: SocketAddr = "127.0.2.11:7501".parse().unwrap();
    let sch = EventChannel::new().unwrap();
    let listen = listener(&sch, service);
    let from = ip("127.0.2.12");
    // On 4791: the CM's REJs come here.
    let mut forger = MadForger::new(from, ferroce_wire::udp::ROCE_V2_PORT, service.ip());
    let base = ReqFields::new(0, 0x5054_0000, 0, service.port(), from, service.ip());
    let cases = [
        (TRANSPORT_UC, cm_forge::MTU_1024, reason::CONSUMER_DEFINED),
        (TRANSPORT_RD, cm_forge::MTU_1024, reason::CONSUMER_DEFINED),
        (3, cm_forge::MTU_1024, reason::CONSUMER_DEFINED), // XRC
        (base.transport, 0, reason::CONSUMER_DEFINED),
        (base.transport, 6, reason::CONSUMER_DEFINED),
        (base.transport, 15, reason::CONSUMER_DEFINED),
    ];
    let mads: Vec<Vec<u8>> = cases
        .iter()
        .enumerate()
        .map(|(i, &(transport, mtu, _))| {
            let i = i as u32 + 1;
            let req = ReqFields {
                comm_id: 0x100 + i,
                qpn: 0x200 + i,
                transport,
                mtu,
                ..base
            };
            req.mad()
        })
        .collect();
    for mad in &mads {
        forger.send(std::slice::from_ref(mad), QKEY, 1);
    }
    let rejs = forger.rejs(cases.len(), WAIT);
    assert_eq!(rejs.len(), cases.len(), "{rejs:?}");
    for (i, &(transport, mtu, why)) in cases.iter().enumerate() {
        let comm = 0x100 + i as u32 + 1;
        let rej = rejs.iter().find(|r| r.remote_comm_id == comm);
        let rej = rej.unwrap_or_else(|| panic!("no REJ for transport {transport}, MTU {mtu}"));
        assert_eq!(rej.reason, why, "transport {transport}, MTU code {mtu}");
        assert_eq!(rej.message_rejected, 0, "the REQ is what was rejected");
    }
    assert!(sch.try_get_event().is_none(), "a refused REQ made an event");
    let ctx = listen.verbs().unwrap();
    assert!(
        eventually(WAIT, || ctx.cm_tables().total == 0),
        "{:?}",
        ctx.cm_tables()
    );
}

/// Resident bytes of this process.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

const FLOOD: u64 = 100_000;
/// Made-up source addresses: 127.0.4.1 ...
const SOURCES: u8 = 64;
/// REQs sent ahead of what the CM has taken: keeps the device's socket
/// buffer from overflowing (the kernel would drop, uncounted by ferroce).
const AHEAD: u64 = 4096;

/// Runs SENDs from `c` to `s` until `stop`, counting them.
fn keep_sending(c: &End, s: &End, stop: &AtomicBool, done: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        exchange(c, s);
        done.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sets its flag when dropped, so that a failing flood still stops the
/// sender thread (a scope waits for it).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_flood_of_100000_reqs_keeps_tables_and_memory_bounded_and_the_connection_up() {
    let service: SocketAddr = "127.0.3.1:7510".parse().unwrap();
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let listen = listener(&sch, service);
    let ctx: Context = listen.verbs().unwrap();
    let [c, s] = connect(&sch, &cch, ip("127.0.3.2"), service);
    exchange(&c, &s);
    let mut forgers: Vec<MadForger> = (0..usize::from(SOURCES))
        .map(|i| MadForger::new(source_ip(i), DEAF_PORT, service.ip()))
        .collect();
    let (cm0, mad0, rss0) = (ctx.cm_stats(), ctx.mad_stats(), resident());
    let taken = || {
        let (cm, mad) = (ctx.cm_stats(), ctx.mad_stats());
        cm.received - cm0.received + mad.rx_overflow - mad0.rx_overflow
    };
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let mut rng = Rng(12);
    let mut peak = CmTables {
        pending: 0,
        timewait: 0,
        total: 0,
    };
    std::thread::scope(|scope| {
        scope.spawn(|| keep_sending(&c, &s, &stop, &done));
        let _stop = StopOnDrop(&stop);
        let mut sent = 0u64;
        while sent < FLOOD {
            let i = source_index(sent);
            let reqs = made_up_reqs(&mut rng, FLOOD - sent, source_ip(i), service);
            sent += forgers[i].send(&reqs, QKEY, (rng.next() & 0xff_ffff) as u32) as u64;
            let caught_up = eventually(WAIT, || taken() + AHEAD >= sent);
            assert!(caught_up, "the CM took {} of {sent} REQs in 10 s", taken());
            peak = larger(peak, ctx.cm_tables());
        }
        assert!(
            eventually(WAIT, || taken() == FLOOD),
            "took {} of {FLOOD}",
            taken()
        );
    });
    let (cm, mad, rss) = (ctx.cm_stats(), ctx.mad_stats(), resident());
    let defaults = ferroce_cm::CmConfig::default();
    let reqs = cm.received - cm0.received;
    eprintln!(
        "flood: {reqs} REQs reached the CM, {} dropped by QP1's queue; pending_full +{}; \
         peak tables {peak:?}; resident {} -> {} MiB; {} SENDs during the flood",
        mad.rx_overflow - mad0.rx_overflow,
        cm.pending_full - cm0.pending_full,
        rss0 >> 20,
        rss >> 20,
        done.load(Ordering::Relaxed)
    );
    assert!(peak.pending <= defaults.max_pending, "{peak:?}");
    assert!(peak.timewait <= defaults.max_timewait, "{peak:?}");
    assert!(peak.total <= defaults.max_pending + 1, "{peak:?}");
    assert_eq!(
        cm.pending_full - cm0.pending_full,
        reqs - defaults.max_pending as u64
    );
    assert!(
        done.load(Ordering::Relaxed) > 0,
        "no SEND completed during the flood"
    );
    assert!(
        rss.saturating_sub(rss0) < 64 << 20,
        "resident grew by {} MiB",
        (rss - rss0) >> 20
    );
    exchange(&c, &s);

    // The application refuses what it was asked: the pending table empties
    // and a new client connects.
    let mut requests = 0;
    while let Some(event) = sch.try_get_event() {
        assert_eq!(event.kind.name(), "RDMA_CM_EVENT_CONNECT_REQUEST");
        event.id.reject(&[]).unwrap();
        requests += 1;
    }
    assert_eq!(requests, defaults.max_pending);
    assert!(
        eventually(WAIT, || ctx.cm_tables().pending == 0),
        "{:?}",
        ctx.cm_tables()
    );
    let [c2, s2] = connect(&sch, &cch, ip("127.0.3.3"), service);
    exchange(&c2, &s2);
    exchange(&c, &s);
}

/// REQs go 64 at a time from each forger in turn.
const PER_SOURCE: u64 = 64;

/// The forger that sends the REQs from number `sent` on.
fn source_index(sent: u64) -> usize {
    (sent / PER_SOURCE % u64::from(SOURCES)) as usize
}

/// Forger `i`'s made-up address (the REQs name it in rdma_cm's header too).
fn source_ip(i: usize) -> IpAddr {
    IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 4, 1 + i as u8))
}

/// Up to [`PER_SOURCE`] (at most `left`) well-formed REQs for `service`
/// from `from`, with random comm IDs, CA GUIDs and QPNs.
fn made_up_reqs(rng: &mut Rng, left: u64, from: IpAddr, service: SocketAddr) -> Vec<Vec<u8>> {
    (0..left.min(PER_SOURCE))
        .map(|_| {
            let (r, guid) = (rng.next(), rng.next());
            let (comm_id, qpn) = (r as u32 | 1, (r >> 40) as u32);
            ReqFields::new(comm_id, guid, qpn, service.port(), from, service.ip()).mad()
        })
        .collect()
}

/// Each table's larger size.
fn larger(a: CmTables, b: CmTables) -> CmTables {
    CmTables {
        pending: a.pending.max(b.pending),
        timewait: a.timewait.max(b.timewait),
        total: a.total.max(b.total),
    }
}
