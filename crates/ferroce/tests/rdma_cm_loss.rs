//! rdma_cm under loss, ferroce against ferroce over real UDP on loopback
//! (127.0.7.x; run in a network namespace of its own): two devices on
//! their own RoCE ports reach each other only through a relay that drops
//! one MAD; a lost REQ, REP, RTU or DREQ is sent again and the connection
//! is made (or closed) all the same.

mod cm_common;
mod cm_relay;

use std::net::SocketAddr;
use std::time::Duration;

use cm_common::{Verbs, exchange, expect_within, ip, listener, resolved};
use cm_relay::{Drop, PORT_A, PORT_B, RELAY_PORT, Relay};
use ferroce::cm::{ConnParam, EventChannel};
use ferroce::{Context, DeviceConfig};
use ferroce_wire::mad::attr;

/// Long enough for one CM resend: rdma_cm's REQ waits about 6 s for its
/// REP (response timeout 20 plus twice the packet life time 18).
const RESEND_WAIT: Duration = Duration::from_secs(30);

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
