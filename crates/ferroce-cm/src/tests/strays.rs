//! Messages that name no communication, or the wrong QP: answered as the
//! kernel answers them, and nothing is created.

use core::time::Duration;

use ferroce_wire::mad::{CmDreq, CmMessage, CmRep, Mad};

use super::sim::{Link, Net, SERVICE};
use crate::{Cm, CmEvent, CmState, reason};

const CLIENT: usize = 0;
const SERVER: usize = 1;

fn only_reply(net: &mut Net, node: usize) -> CmMessage {
    let sent: Vec<_> = std::iter::from_fn(|| net.nodes[node].cm.poll_transmit()).collect();
    assert_eq!(sent.len(), 1, "one answer");
    Mad::parse(&sent[0].1).unwrap().cm.unwrap()
}

#[test]
fn a_rep_for_no_connection_gets_rej_invalid_comm_id() {
    let mut net = Net::new(2, 12, Link::default());
    let mut rep = CmRep::parse(&[0u8; ferroce_wire::mad::CM_DATA_LEN]).unwrap();
    rep.local_comm_id = 0x1111;
    rep.remote_comm_id = 0x2222;
    let mad = Cm::cm_mad(7, &CmMessage::Rep(rep));
    net.inject(SERVER, CLIENT, &mad);
    let CmMessage::Rej(rej) = only_reply(&mut net, CLIENT) else {
        panic!("not a REJ")
    };
    assert_eq!(rej.reason, reason::INVALID_COMM_ID);
    assert_eq!((rej.local_comm_id, rej.remote_comm_id), (0x2222, 0x1111));
    assert_eq!(rej.message_rejected, 1);
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[CLIENT].log.is_empty());
}

#[test]
fn a_dreq_for_no_connection_is_answered_with_a_drep() {
    let mut net = Net::new(2, 13, Link::default());
    let dreq = CmDreq {
        local_comm_id: 0x3333,
        remote_comm_id: 0x4444,
        remote_qpn: 0x11,
        private_data: [0; 220],
    };
    net.inject(SERVER, CLIENT, &Cm::cm_mad(9, &CmMessage::Dreq(dreq)));
    let CmMessage::Drep(drep) = only_reply(&mut net, CLIENT) else {
        panic!("not a DREP")
    };
    assert_eq!((drep.local_comm_id, drep.remote_comm_id), (0x4444, 0x3333));
    assert!(net.nodes[CLIENT].cm.is_empty() && net.nodes[CLIENT].log.is_empty());
}

#[test]
fn a_dreq_naming_another_qp_is_dropped() {
    let mut net = Net::new(2, 14, Link::default());
    net.nodes[SERVER].cm.listen(SERVICE);
    let id = net.connect(CLIENT, SERVER);
    net.run_until(Duration::from_secs(1), |n| {
        n.established(CLIENT, id)
            && n.passive_id(SERVER, id)
                .is_some_and(|s| n.established(SERVER, s))
    });
    let sid = net.passive_id(SERVER, id).unwrap();
    let dreq = CmDreq {
        local_comm_id: id.0,
        remote_comm_id: sid.0,
        remote_qpn: 0xdead,
        private_data: [0; 220],
    };
    let ignored = net.nodes[SERVER].cm.stats().ignored;
    net.inject(CLIENT, SERVER, &Cm::cm_mad(9, &CmMessage::Dreq(dreq)));
    assert_eq!(net.nodes[SERVER].cm.stats().ignored, ignored + 1);
    assert_eq!(net.nodes[SERVER].cm.state(sid), Some(CmState::Established));
    assert!(net.nodes[SERVER].cm.poll_transmit().is_none());
    assert!(
        !net.nodes[SERVER]
            .log
            .iter()
            .any(|e| matches!(e, CmEvent::DisconnectRequest { .. }))
    );
}
