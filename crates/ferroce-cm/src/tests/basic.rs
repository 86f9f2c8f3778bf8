//! Set-up, rejection, teardown and SIDR on a clean link.

use core::time::Duration;

use ferroce_wire::mad::{SIDR_STATUS_OK, SIDR_STATUS_UNSUPPORTED};

use super::sim::{Link, Net, OnReq, SERVICE};
use crate::{CmEvent, CmState, SidrParams, SidrReplyParams, reason};

const CLIENT: usize = 0;
const SERVER: usize = 1;
const SECOND: Duration = Duration::from_secs(1);

fn net() -> Net {
    let mut net = Net::new(2, 1, Link::default());
    net.nodes[SERVER].cm.listen(SERVICE);
    net
}

#[test]
fn connect_accept_rtu_then_disconnect_and_timewait() {
    let mut net = net();
    let id = net.connect(CLIENT, SERVER);
    assert_eq!(net.nodes[CLIENT].cm.state(id), Some(CmState::ReqSent));
    net.run_until(SECOND, |n| n.established(CLIENT, id));
    let sid = net.passive_id(SERVER, id).expect("the server saw the REQ");
    net.run_until(SECOND, |n| n.established(SERVER, sid));
    // The REP named both sides' QPs and comm IDs.
    let rep = net.nodes[CLIENT].log.iter().find_map(|e| match e {
        CmEvent::RepReceived { rep, .. } => Some(rep.clone()),
        _ => None,
    });
    let rep = rep.expect("a REP");
    assert_eq!((rep.local_comm_id, rep.remote_comm_id), (sid.0, id.0));
    let (client, server) = (
        net.nodes[CLIENT].cm.info(id).unwrap(),
        net.nodes[SERVER].cm.info(sid).unwrap(),
    );
    assert_eq!(
        (client.remote_comm_id, server.remote_comm_id),
        (sid.0, id.0)
    );
    assert_eq!(
        (client.remote_qpn, server.remote_qpn),
        (server.local_qpn, client.local_qpn)
    );
    assert_eq!((client.service_id, server.service_id), (SERVICE, SERVICE));
    assert_eq!(server.peer, net.nodes[CLIENT].addr);

    let now = net.now;
    net.nodes[CLIENT].cm.disconnect(now, id, b"bye").unwrap();
    net.run_quiet(Duration::from_secs(30));
    for (node, id) in [(CLIENT, id), (SERVER, sid)] {
        let disconnected = |e: &CmEvent| matches!(e, CmEvent::Disconnected { id: i, dreq_unanswered: false } if *i == id);
        assert_eq!(net.count(node, disconnected), 1);
        let exit = |e: &CmEvent| matches!(e, CmEvent::TimewaitExit { id: i } if *i == id);
        assert_eq!(net.count(node, exit), 1);
        assert!(net.nodes[node].cm.is_empty());
    }
    let request = net.nodes[SERVER].log.iter().find_map(|e| match e {
        CmEvent::DisconnectRequest { private_data, .. } => Some(private_data.clone()),
        _ => None,
    });
    assert_eq!(&request.unwrap()[..3], b"bye");
}

#[test]
fn timewait_lasts_the_packet_life_time_and_holds_the_comm_id() {
    let mut net = net();
    let id = net.connect(CLIENT, SERVER);
    net.run_until(SECOND, |n| n.established(CLIENT, id));
    let sid = net.passive_id(SERVER, id).unwrap();
    net.run_until(SECOND, |n| n.established(SERVER, sid));
    let now = net.now;
    net.nodes[SERVER].cm.disconnect(now, sid, &[]).unwrap();
    net.run_until(SECOND, |n| {
        n.nodes[SERVER].cm.state(sid) == Some(CmState::TimeWait)
    });
    let entered = net.now;
    assert_eq!(net.nodes[SERVER].cm.table_sizes().1, 1);
    net.run_until(Duration::from_secs(10), |n| {
        n.nodes[SERVER].cm.state(sid).is_none()
    });
    // Life time 18 (rdma_cm over RoCE): the time of 19, 2048 ms.
    let waited = net.now.since(entered);
    assert!(
        waited >= Duration::from_millis(2048) && waited < Duration::from_millis(2049),
        "{waited:?}"
    );
}

#[test]
fn no_listener_is_rej_8_on_both_sides_terms() {
    let mut net = Net::new(2, 2, Link::default());
    let id = net.connect(CLIENT, SERVER);
    net.run_quiet(SECOND);
    let rejected = net.nodes[CLIENT].log.iter().find_map(|e| match e {
        CmEvent::Rejected { id: i, reason, .. } if *i == id => Some(*reason),
        _ => None,
    });
    assert_eq!(rejected, Some(reason::INVALID_SERVICE_ID));
    assert_eq!(net.nodes[SERVER].cm.stats().rejected_sent, 1);
    assert!(net.nodes[SERVER].log.is_empty());
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn consumer_reject_carries_private_data() {
    let mut net = net();
    net.nodes[SERVER].on_req = OnReq::Reject(b"go away".to_vec());
    let id = net.connect(CLIENT, SERVER);
    net.run_quiet(SECOND);
    let got = net.nodes[CLIENT].log.iter().find_map(|e| match e {
        CmEvent::Rejected {
            id: i,
            reason,
            private_data,
            ..
        } if *i == id => Some((*reason, private_data.clone())),
        _ => None,
    });
    let (why, private) = got.expect("a REJ");
    assert_eq!(why, reason::CONSUMER_DEFINED);
    assert_eq!(&private[..7], b"go away");
    assert_eq!(private.len(), 148);
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn a_repeated_req_the_application_sits_on_gets_the_delayed_mra() {
    let mut net = net();
    net.nodes[SERVER].on_req = OnReq::Ignore;
    let id = net.connect(CLIENT, SERVER);
    // The client repeats its REQ after 2 x 1024 ms + 4096 ms; the repeat
    // draws rdma_cm's delayed MRA (service timeout 24).
    let mra = |e: &CmEvent| {
        matches!(
            e,
            CmEvent::MraReceived {
                service_timeout: 24,
                ..
            }
        )
    };
    net.run_until(Duration::from_secs(7), |n| n.count(CLIENT, mra) == 1);
    assert_eq!(net.nodes[CLIENT].cm.state(id), Some(CmState::MraReqRcvd));
    assert_eq!(net.nodes[SERVER].cm.stats().delayed_mra, 1);
    // The next REQ now waits the MRA's 65.5 s plus the packet life time.
    let next = net.nodes[CLIENT].cm.poll_timeout().unwrap();
    assert!(
        next.since(net.now) > Duration::from_secs(65),
        "{:?}",
        next.since(net.now)
    );
    // The application answers 30 s later: nothing is due before then.
    net.now = net.now.after(Duration::from_secs(30));
    assert!(
        net.nodes
            .iter()
            .all(|n| n.cm.poll_timeout().is_none_or(|t| t > net.now))
    );
    let sid = net.passive_id(SERVER, id).unwrap();
    let now = net.now;
    let params = crate::RepParams {
        qpn: 0x99,
        ..Default::default()
    };
    net.nodes[SERVER].cm.accept(now, sid, &params).unwrap();
    net.run_until(SECOND, |n| {
        n.established(CLIENT, id) && n.established(SERVER, sid)
    });
    assert_eq!(net.nodes[CLIENT].cm.stats().resent, 1);
}

#[test]
fn send_mra_goes_at_once_and_a_slow_rtu_gets_one_too() {
    let mut net = net();
    net.nodes[SERVER].on_req = OnReq::Ignore;
    net.nodes[CLIENT].auto_rtu = false;
    let id = net.connect(CLIENT, SERVER);
    net.run_until(SECOND, |n| n.passive_id(SERVER, id).is_some());
    let sid = net.passive_id(SERVER, id).unwrap();
    net.nodes[SERVER].cm.send_mra(sid).unwrap();
    net.run_until(SECOND, |n| {
        n.count(CLIENT, |e| matches!(e, CmEvent::MraReceived { .. })) == 1
    });
    let now = net.now;
    net.nodes[SERVER]
        .cm
        .accept(now, sid, &Default::default())
        .unwrap();
    net.run_until(SECOND, |n| {
        n.count(CLIENT, |e| matches!(e, CmEvent::RepReceived { .. })) == 1
    });
    // The client's application is slow to send the RTU: the repeated REP
    // (after the REQ's 4096 ms local response timeout) draws an MRA.
    net.run_until(Duration::from_secs(5), |n| {
        n.count(SERVER, |e| matches!(e, CmEvent::MraReceived { .. })) == 1
    });
    assert_eq!(net.nodes[SERVER].cm.state(sid), Some(CmState::MraRepRcvd));
    net.nodes[CLIENT].cm.rtu(id, &[]).unwrap();
    net.run_until(SECOND, |n| n.established(SERVER, sid));
}

#[test]
fn accept_and_reject_check_the_state() {
    let mut net = net();
    net.nodes[SERVER].on_req = OnReq::Reject(Vec::new());
    let id = net.connect(CLIENT, SERVER);
    net.run_quiet(SECOND);
    let sid = net.passive_id(SERVER, id).unwrap();
    let now = net.now;
    let err = net.nodes[SERVER]
        .cm
        .accept(now, sid, &Default::default())
        .unwrap_err();
    assert_eq!(err, crate::CmError::UnknownId(sid));
    assert!(err.to_string().contains("ended or never existed"));
    let id = net.connect(CLIENT, SERVER);
    let err = net.nodes[CLIENT].cm.rtu(id, &[]).unwrap_err();
    assert!(matches!(
        err,
        crate::CmError::WrongState {
            call: "rtu",
            state: CmState::ReqSent,
            ..
        }
    ));
    let mut params = net.params(CLIENT, SERVER, SERVICE);
    params.private_data = vec![0; 93];
    let err = net.nodes[CLIENT].cm.connect(now, &params).unwrap_err();
    assert!(err.to_string().contains("at most 92"), "{err}");
}

#[test]
fn sidr_resolves_a_service_and_reports_none() {
    let mut net = net();
    let now = net.now;
    let params = |service_id| SidrParams {
        peer: net.nodes[SERVER].addr,
        service_id,
        partition_key: 0xffff,
        private_data: b"hello".to_vec(),
        timeout: Duration::from_millis(100),
        max_retries: 3,
    };
    let (p1, p2) = (params(SERVICE), params(SERVICE + 1));
    let id = net.nodes[CLIENT].cm.sidr_request(now, &p1).unwrap();
    let none = net.nodes[CLIENT].cm.sidr_request(now, &p2).unwrap();
    net.run_until(SECOND, |n| {
        n.nodes[SERVER]
            .log
            .iter()
            .any(|e| matches!(e, CmEvent::SidrRequest { .. }))
    });
    let (sid, private) = net.nodes[SERVER]
        .log
        .iter()
        .find_map(|e| match e {
            CmEvent::SidrRequest {
                id, private_data, ..
            } => Some((*id, private_data.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(&private[..5], b"hello");
    let reply = SidrReplyParams {
        status: SIDR_STATUS_OK,
        qpn: 0x42,
        qkey: 0x1111_2222,
        private_data: vec![7],
    };
    net.nodes[SERVER].cm.sidr_reply(sid, &reply).unwrap();
    net.run_quiet(SECOND);
    let replies: Vec<_> = net.nodes[CLIENT]
        .log
        .iter()
        .filter_map(|e| match e {
            CmEvent::SidrReply {
                id,
                status,
                qpn,
                qkey,
                ..
            } => Some((*id, *status, *qpn, *qkey)),
            _ => None,
        })
        .collect();
    assert!(replies.contains(&(id, SIDR_STATUS_OK, 0x42, 0x1111_2222)));
    assert!(replies.contains(&(none, SIDR_STATUS_UNSUPPORTED, 0, 0)));
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[SERVER].cm.is_empty());
}

#[test]
fn sidr_times_out_after_its_retries() {
    let mut net = net();
    net.drop_once = vec![ferroce_wire::mad::attr::SIDR_REQ; 4];
    let now = net.now;
    let params = SidrParams {
        peer: net.nodes[SERVER].addr,
        service_id: SERVICE,
        partition_key: 0xffff,
        private_data: Vec::new(),
        timeout: Duration::from_millis(100),
        max_retries: 3,
    };
    let id = net.nodes[CLIENT].cm.sidr_request(now, &params).unwrap();
    net.run_quiet(SECOND);
    assert_eq!(net.count(CLIENT, |e| *e == CmEvent::SidrTimeout { id }), 1);
    assert_eq!(net.nodes[CLIENT].cm.stats().resent, 3);
}
