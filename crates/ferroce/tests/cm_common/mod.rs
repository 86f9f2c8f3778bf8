//! What the rdma_cm scale and loss tests share: waiting for events, a
//! listener, a resolved client ID, a side's verbs and a SEND between two
//! QPs.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ferroce::cm::{CmEvent, CmId, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, MemoryRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr,
    SendWr, WcStatus,
};

pub(crate) const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(crate) fn expect_within(ch: &EventChannel, name: &str, wait: Duration) -> CmEvent {
    let event = ch
        .get_event_timeout(wait)
        .unwrap()
        .unwrap_or_else(|| panic!("no {name} within {wait:?}"));
    assert_eq!(event.kind.name(), name, "got {event}");
    event
}

pub(crate) fn expect(ch: &EventChannel, name: &str) -> CmEvent {
    expect_within(ch, name, WAIT)
}

pub(crate) fn listener(ch: &EventChannel, at: SocketAddr) -> CmId {
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.bind_addr(at).unwrap();
    id.listen(64).unwrap();
    id
}

/// A side's PD, CQ and memory, shared by its connections.
pub(crate) struct Verbs {
    pub(crate) pd: ProtectionDomain,
    pub(crate) cq: CompletionQueue,
    pub(crate) mr: MemoryRegion,
}

impl Verbs {
    pub(crate) fn of(id: &CmId) -> Self {
        let ctx = id.verbs().unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(1024).unwrap();
        let mr = pd.reg_mr(4096, Access::LOCAL_WRITE).unwrap();
        Self { pd, cq, mr }
    }

    pub(crate) fn qp(&self, id: &CmId) -> QueuePair {
        id.create_qp(&self.pd, &QpInitAttr::new(QpType::Rc, &self.cq, &self.cq))
            .unwrap()
    }

    pub(crate) fn wait_wc(&self) -> WcStatus {
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
pub(crate) fn resolved(ch: &EventChannel, from: IpAddr, service: SocketAddr) -> CmId {
    let id = ch.create_id(PortSpace::Tcp).unwrap();
    id.resolve_addr(Some(SocketAddr::new(from, 0)), service, WAIT)
        .unwrap();
    expect(ch, "RDMA_CM_EVENT_ADDR_RESOLVED");
    id.resolve_route(WAIT).unwrap();
    expect(ch, "RDMA_CM_EVENT_ROUTE_RESOLVED");
    id
}

/// One SEND from `(cv, cqp)` to `(sv, sqp)`.
pub(crate) fn exchange(cv: &Verbs, cqp: &QueuePair, sv: &Verbs, sqp: &QueuePair) {
    sqp.post_recv(RecvWr::new(1, &[sv.mr.sge(0, 4096)]))
        .unwrap();
    cqp.post_send(SendWr::send(2, &[cv.mr.sge(0, 16)])).unwrap();
    assert_eq!(cv.wait_wc(), WcStatus::Success);
    assert_eq!(sv.wait_wc(), WcStatus::Success);
}
