//! rdma_cm over real UDP sockets on loopback (127.0.1.x, one pair of
//! addresses per test): connect, accept with private data both ways, data
//! on the connected QPs, disconnect from either side, a port with no
//! listener, a consumer reject, UD through SIDR, and a wildcard listener.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ferroce::cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr, WcStatus,
};

const WAIT: Duration = Duration::from_secs(10);

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn next(ch: &EventChannel) -> CmEvent {
    ch.get_event_timeout(WAIT)
        .unwrap()
        .expect("an rdma_cm event within 10 s")
}

fn expect(ch: &EventChannel, name: &str) -> CmEvent {
    let event = next(ch);
    assert_eq!(event.kind.name(), name, "got {event}");
    event
}

/// The QP, CQ and memory of one side, on the ID's device.
struct Side {
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
}

fn side(id: &CmId, qp_type: QpType) -> Side {
    let ctx = id.verbs().expect("a resolved ID has a device");
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(64).unwrap();
    let mr = pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
    let qp = id
        .create_qp(&pd, &QpInitAttr::new(qp_type, &cq, &cq))
        .unwrap();
    Side { qp, cq, mr }
}

fn wait_wc(cq: &CompletionQueue) -> ferroce::WorkCompletion {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(wc) = cq.poll(1).unwrap().pop() {
            return wc;
        }
        assert!(std::time::Instant::now() < deadline, "no completion");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A client ID resolved towards `dst` from `src`.
fn client(ch: &EventChannel, ps: PortSpace, src: &str, dst: SocketAddr) -> CmId {
    let id = ch.create_id(ps).unwrap();
    let src: IpAddr = src.parse().unwrap();
    id.resolve_addr(Some(SocketAddr::new(src, 0)), dst, WAIT)
        .unwrap();
    expect(ch, "RDMA_CM_EVENT_ADDR_RESOLVED");
    id.resolve_route(WAIT).unwrap();
    expect(ch, "RDMA_CM_EVENT_ROUTE_RESOLVED");
    id
}

fn listener(ch: &EventChannel, ps: PortSpace, at: SocketAddr) -> CmId {
    let id = ch.create_id(ps).unwrap();
    id.bind_addr(at).unwrap();
    id.listen(8).unwrap();
    id
}

#[test]
fn rc_connect_exchanges_private_data_carries_data_and_disconnects() {
    let service = addr("127.0.1.1:7471");
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let _listen = listener(&sch, PortSpace::Tcp, service);
    let cid = client(&cch, PortSpace::Tcp, "127.0.1.2", service);
    let c = side(&cid, QpType::Rc);
    cid.connect(&ConnParam {
        private_data: b"hello from the client".to_vec(),
        ..ConnParam::default()
    })
    .unwrap();

    let req = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST");
    let CmEventKind::ConnectRequest { param, .. } = &req.kind else {
        unreachable!()
    };
    assert!(param.private_data.starts_with(b"hello from the client"));
    assert_eq!(param.qp_num, c.qp.qpn());
    let sid = req.id.clone();
    assert_eq!(sid.peer_addr().unwrap(), cid.local_addr().unwrap());
    let s = side(&sid, QpType::Rc);
    s.qp.post_recv(RecvWr::new(1, &[s.mr.sge(0, 4096)]))
        .unwrap();
    sid.accept(&ConnParam {
        private_data: b"welcome".to_vec(),
        ..ConnParam::default()
    })
    .unwrap();

    let est = expect(&cch, "RDMA_CM_EVENT_ESTABLISHED");
    let CmEventKind::Established { param, .. } = &est.kind else {
        unreachable!()
    };
    assert!(param.private_data.starts_with(b"welcome"));
    assert_eq!(param.qp_num, s.qp.qpn());
    expect(&sch, "RDMA_CM_EVENT_ESTABLISHED");

    c.mr.write(0, b"data over an rdma_cm connection").unwrap();
    c.qp.post_send(SendWr::send(2, &[c.mr.sge(0, 31)])).unwrap();
    assert_eq!(wait_wc(&c.cq).status, WcStatus::Success);
    let wc = wait_wc(&s.cq);
    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 31));
    let mut got = [0u8; 31];
    s.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"data over an rdma_cm connection");

    cid.disconnect().unwrap();
    expect(&sch, "RDMA_CM_EVENT_DISCONNECTED");
    sid.disconnect().unwrap();
    expect(&cch, "RDMA_CM_EVENT_DISCONNECTED");
}

#[test]
fn the_server_can_disconnect_first() {
    let service = addr("127.0.1.3:7472");
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let _listen = listener(&sch, PortSpace::Tcp, service);
    let cid = client(&cch, PortSpace::Tcp, "127.0.1.4", service);
    let _c = side(&cid, QpType::Rc);
    cid.connect(&ConnParam::default()).unwrap();
    let sid = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST").id;
    let _s = side(&sid, QpType::Rc);
    sid.accept(&ConnParam::default()).unwrap();
    expect(&cch, "RDMA_CM_EVENT_ESTABLISHED");
    expect(&sch, "RDMA_CM_EVENT_ESTABLISHED");
    sid.disconnect().unwrap();
    expect(&cch, "RDMA_CM_EVENT_DISCONNECTED");
    cid.disconnect().unwrap();
    expect(&sch, "RDMA_CM_EVENT_DISCONNECTED");
}

#[test]
fn a_port_with_no_listener_is_rejected_with_reason_8() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    // A device on the server's address, with nothing listening on 7473.
    let _other = listener(&sch, PortSpace::Tcp, addr("127.0.1.5:9999"));
    let cid = client(&cch, PortSpace::Tcp, "127.0.1.6", addr("127.0.1.5:7473"));
    let _c = side(&cid, QpType::Rc);
    cid.connect(&ConnParam::default()).unwrap();
    let event = expect(&cch, "RDMA_CM_EVENT_REJECTED");
    let CmEventKind::Rejected {
        reason, message, ..
    } = &event.kind
    else {
        unreachable!()
    };
    assert_eq!(*reason, 8);
    assert_eq!(
        message,
        "rejected by 127.0.1.5: no listener on port 7473 (REJ reason 8)"
    );
    assert!(sch.try_get_event().is_none());
}

#[test]
fn a_consumer_reject_carries_its_private_data() {
    let service = addr("127.0.1.7:7474");
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let _listen = listener(&sch, PortSpace::Tcp, service);
    let cid = client(&cch, PortSpace::Tcp, "127.0.1.8", service);
    let _c = side(&cid, QpType::Rc);
    cid.connect(&ConnParam::default()).unwrap();
    let sid = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST").id;
    sid.reject(b"go away").unwrap();
    let event = expect(&cch, "RDMA_CM_EVENT_REJECTED");
    let CmEventKind::Rejected {
        reason,
        private_data,
        ..
    } = &event.kind
    else {
        unreachable!()
    };
    assert_eq!(*reason, 28);
    assert!(private_data.starts_with(b"go away"));
    assert!(sid.accept(&ConnParam::default()).is_err());
}

#[test]
fn ud_peers_resolve_each_other_through_sidr() {
    let service = addr("127.0.1.9:7475");
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let _listen = listener(&sch, PortSpace::Udp, service);
    let cid = client(&cch, PortSpace::Udp, "127.0.1.10", service);
    let c = side(&cid, QpType::Ud);
    cid.connect(&ConnParam {
        private_data: b"sidr".to_vec(),
        ..ConnParam::default()
    })
    .unwrap();
    let req = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST");
    let CmEventKind::ConnectRequest { param, .. } = &req.kind else {
        unreachable!()
    };
    assert!(param.private_data.starts_with(b"sidr"));
    let sid = req.id.clone();
    let s = side(&sid, QpType::Ud);
    s.qp.post_recv(RecvWr::new(1, &[s.mr.sge(0, 4096)]))
        .unwrap();
    sid.accept(&ConnParam::default()).unwrap();
    let est = expect(&cch, "RDMA_CM_EVENT_ESTABLISHED");
    let CmEventKind::Established { ud: Some(ud), .. } = &est.kind else {
        panic!("a UD ESTABLISHED carries the peer: {est}")
    };
    assert_eq!(ud.dest.qpn, s.qp.qpn());
    c.mr.write(0, b"a datagram").unwrap();
    let sg = [c.mr.sge(0, 10)];
    c.qp.post_send(SendWr {
        ud: Some(ud.dest),
        ..SendWr::send(2, &sg)
    })
    .unwrap();
    assert_eq!(wait_wc(&c.cq).status, WcStatus::Success);
    let wc = wait_wc(&s.cq);
    assert_eq!(wc.status, WcStatus::Success);
}

#[test]
fn a_wildcard_listener_serves_a_device_opened_later() {
    let (sch, cch) = (EventChannel::new().unwrap(), EventChannel::new().unwrap());
    let _listen = listener(&sch, PortSpace::Tcp, addr("0.0.0.0:7476"));
    let cid = client(&cch, PortSpace::Tcp, "127.0.1.12", addr("127.0.1.11:7476"));
    // Nothing is open on 127.0.1.11 yet: open it, as a server process would.
    let _server_dev = ferroce::Context::open("127.0.1.11".parse().unwrap()).unwrap();
    let _c = side(&cid, QpType::Rc);
    cid.connect(&ConnParam::default()).unwrap();
    let sid = expect(&sch, "RDMA_CM_EVENT_CONNECT_REQUEST").id;
    assert_eq!(sid.local_addr().unwrap(), addr("127.0.1.11:7476"));
    let _s = side(&sid, QpType::Rc);
    sid.accept(&ConnParam::default()).unwrap();
    expect(&cch, "RDMA_CM_EVENT_ESTABLISHED");
    expect(&sch, "RDMA_CM_EVENT_ESTABLISHED");
}

#[test]
fn calls_out_of_order_say_what_comes_first() {
    let ch = EventChannel::new().unwrap();
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    let err = id.connect(&ConnParam::default()).unwrap_err().to_string();
    assert!(
        err.contains("resolve the address and the route first"),
        "{err}"
    );
    let err = id.resolve_route(WAIT).unwrap_err().to_string();
    assert!(err.contains("resolve_addr"), "{err}");
    // 192.0.2.1 (TEST-NET-1) is no address of this host.
    let err = id
        .resolve_addr(Some(addr("192.0.2.1:0")), addr("127.0.1.13:7477"), WAIT)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("address resolution: "), "{err}");
    assert!(err.contains("192.0.2.1"), "{err}");
    assert!(
        ch.try_get_event().is_none(),
        "a failed resolution reports no event"
    );
}

#[test]
fn verbs_objects_keep_their_device_open() {
    // An application that keeps only the PD, CQs and QP it made on an ID's
    // device (`CmId::verbs`) must not lose the driver under them.
    let end = |ip: &str| {
        let ctx = ferroce::Context::open(ip.parse().unwrap()).unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(16).unwrap();
        let mr = pd.reg_mr(64, Access::LOCAL_WRITE).unwrap();
        let qp = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
            .unwrap();
        Side { qp, cq, mr }
    };
    let (a, b) = (end("127.0.1.14"), end("127.0.1.15"));
    let opts = ferroce::ConnectOptions::default();
    a.qp.connect(&b.qp.endpoint(), &opts).unwrap();
    b.qp.connect(&a.qp.endpoint(), &opts).unwrap();
    b.qp.post_recv(RecvWr::new(1, &[b.mr.sge(0, 64)])).unwrap();
    a.qp.post_send(SendWr::send(2, &[a.mr.sge(0, 8)])).unwrap();
    // Blocking waits: only the drivers move the packets.
    let wc = b.cq.wait(1, WAIT).unwrap();
    assert_eq!(wc.first().map(|w| w.status), Some(WcStatus::Success));
    let wc = a.cq.wait(1, WAIT).unwrap();
    assert_eq!(wc.first().map(|w| w.status), Some(WcStatus::Success));
}
