//! Against the kernel: the REQ this CM builds with rdma_cm's defaults is the
//! REQ the kernel's rdma_cm sent in a real capture, byte for byte, but for
//! the comm ID (random on both) and the transaction ID made from it.

use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::Instant;
use ferroce_wire::Psn;
use ferroce_wire::mad::{CmMessage, MAD_HEADER_LEN, MAD_LEN, Mad};

use crate::{Cm, CmConfig, CmEvent, ConnectParams, PeerAddr, RepParams};

use ferroce_wire::samples::rping::{DREP as RPING_DREP, DREQ as RPING_DREQ, RTU as RPING_RTU};
/// rping's CM MADs from the kernel (`shared/vectors/rxe/rping.pcap`).
pub(super) use ferroce_wire::samples::rping::{REP as RPING_REP, REQ as RPING_REQ};
const CLIENT_COMM_ID: u32 = 0x64ba_f67c;

/// A captured MAD with the client's comm ID replaced by `ours` wherever it
/// appears (the TID's low half holds it byte-swapped).
fn as_client(hex: &str, ours: u32) -> Vec<u8> {
    let mut mad = bytes(hex);
    let tid = 2u64 << 32 | u64::from(ours.swap_bytes());
    mad[8..16].copy_from_slice(&tid.to_be_bytes());
    for at in [MAD_HEADER_LEN, MAD_HEADER_LEN + 4] {
        if mad[at..at + 4] == CLIENT_COMM_ID.to_be_bytes() {
            mad[at..at + 4].copy_from_slice(&ours.to_be_bytes());
        }
    }
    mad
}

pub(super) fn bytes(hex: &str) -> Vec<u8> {
    let mut out = vec![0u8; MAD_LEN];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap();
    }
    out
}

#[test]
fn the_req_matches_the_kernels_byte_for_byte() {
    let captured = bytes(RPING_REQ);
    let Some(CmMessage::Req(theirs)) = Mad::parse(&captured).unwrap().cm else {
        panic!("not a REQ")
    };
    let config = CmConfig {
        local_ca_guid: theirs.local_ca_guid,
        ..CmConfig::default()
    };
    let mut cm = Cm::new(config);
    let server = PeerAddr::gsi(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11)));
    // What rdma_cm's layer will put in: the path's addresses and flow
    // label, the QP and PSN, and its private-data header.
    let mut params = ConnectParams::new(
        server,
        theirs.service_id,
        theirs.local_qpn,
        theirs.starting_psn,
    );
    params.path.local_port_gid = theirs.primary_path.local_port_gid;
    params.path.remote_port_gid = theirs.primary_path.remote_port_gid;
    params.path.flow_label = theirs.primary_path.flow_label;
    params.private_data = theirs.private_data.to_vec();
    let id = cm.connect(Instant::from_nanos(1), &params).unwrap();
    let (to, mut ours) = cm.poll_transmit().unwrap();
    assert_eq!(to, server);
    // Put the capture's comm ID in place of ours; with the kernel's TID
    // layout (agent half 2, then the comm ID's bytes) the TID follows.
    ours[MAD_HEADER_LEN..MAD_HEADER_LEN + 4].copy_from_slice(&theirs.local_comm_id.to_be_bytes());
    let tid = 2u64 << 32 | u64::from(theirs.local_comm_id.swap_bytes());
    assert_eq!(cm.own_tid(id.0), 2u64 << 32 | u64::from(id.0.swap_bytes()));
    ours[8..16].copy_from_slice(&tid.to_be_bytes());
    assert_eq!(ours, captured);
}

#[test]
fn the_kernels_req_is_accepted_and_answered_in_its_transaction() {
    let captured = bytes(RPING_REQ);
    let config = CmConfig {
        local_ca_guid: 0x5054_00ff_fe52_000a,
        ..CmConfig::default()
    };
    let mut cm = Cm::new(config);
    cm.listen(0x0000_0000_0106_1c06);
    let client = PeerAddr::gsi(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12)));
    let now = Instant::from_nanos(1);
    cm.handle_mad(now, client, &captured);
    let Some(CmEvent::ReqReceived { id, req, .. }) = cm.poll_event() else {
        panic!("no ReqReceived")
    };
    assert_eq!((req.local_qpn, req.max_cm_retries), (0x1e, 15));
    // What rdma_cm's layer answered with: QP 0x1e, one read each way, RNR
    // retry 7.
    let params = RepParams {
        qpn: 0x1e,
        starting_psn: Psn::new(0xd7_9776),
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        ..RepParams::default()
    };
    cm.accept(now, id, &params).unwrap();
    let (to, rep) = cm.poll_transmit().unwrap();
    assert_eq!(to, client);
    // Byte for byte the kernel's REP, but for our comm ID.
    let mut theirs = bytes(RPING_REP);
    theirs[MAD_HEADER_LEN..MAD_HEADER_LEN + 4].copy_from_slice(&id.0.to_be_bytes());
    assert_eq!(rep, theirs);
    let rep_mad = Mad::parse(&rep).unwrap();
    // The REP continues the REQ's transaction and names both comm IDs.
    assert_eq!(rep_mad.header.transaction_id, 0x0000_0002_7cf6_ba64);
    let Some(CmMessage::Rep(rep)) = rep_mad.cm else {
        panic!("not a REP")
    };
    assert_eq!((rep.local_comm_id, rep.remote_comm_id), (id.0, 0x64ba_f67c));
    // The REP is resent after the REQ's local response timeout (20: 4096 ms).
    let due = cm.poll_timeout().unwrap();
    assert_eq!(due.since(now).as_millis(), 4096);
}

#[test]
fn as_the_client_the_whole_conversation_matches_the_kernels() {
    let captured = bytes(RPING_REQ);
    let Some(CmMessage::Req(theirs)) = Mad::parse(&captured).unwrap().cm else {
        panic!("not a REQ")
    };
    let config = CmConfig {
        local_ca_guid: theirs.local_ca_guid,
        ..CmConfig::default()
    };
    let mut cm = Cm::new(config);
    let server = PeerAddr::gsi(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11)));
    let mut params = ConnectParams::new(
        server,
        theirs.service_id,
        theirs.local_qpn,
        theirs.starting_psn,
    );
    params.path.local_port_gid = theirs.primary_path.local_port_gid;
    params.path.remote_port_gid = theirs.primary_path.remote_port_gid;
    params.path.flow_label = theirs.primary_path.flow_label;
    params.private_data = theirs.private_data.to_vec();
    let now = Instant::from_nanos(1);
    let id = cm.connect(now, &params).unwrap();
    let sent = |cm: &mut Cm| cm.poll_transmit().map(|(_, b)| b);
    assert_eq!(sent(&mut cm), Some(as_client(RPING_REQ, id.0)));
    cm.handle_mad(now, server, &as_client(RPING_REP, id.0));
    assert!(matches!(cm.poll_event(), Some(CmEvent::RepReceived { .. })));
    cm.rtu(id, &[]).unwrap();
    assert_eq!(sent(&mut cm), Some(as_client(RPING_RTU, id.0)));
    cm.disconnect(now, id, &[]).unwrap();
    assert_eq!(sent(&mut cm), Some(as_client(RPING_DREQ, id.0)));
    cm.handle_mad(now, server, &as_client(RPING_DREP, id.0));
    let events: Vec<_> = std::iter::from_fn(|| cm.poll_event()).collect();
    assert!(
        events.contains(&CmEvent::Disconnected {
            id,
            dreq_unanswered: false
        }),
        "{events:?}"
    );
    assert_eq!(cm.state(id), Some(crate::CmState::TimeWait));
}
