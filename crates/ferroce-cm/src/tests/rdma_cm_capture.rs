//! Against the kernel: the rdma_cm header in rping's REQ, and the QP
//! attributes derived from its REQ and REP are the ones rping's QPs ran with
//! (the first data packets of the same capture).

use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::verbs::{Access, Mtu, QpState};
use ferroce_wire::Psn;
use ferroce_wire::bth::Bth;
use ferroce_wire::mad::{CmMessage, CmRep, CmReq, Mad};

use super::capture::{RPING_REP, RPING_REQ, bytes};
use crate::rdma_cm::{
    CmaHeader, PortSpace, RdmaService, active_init, active_rtr, active_rts, passive_rtr,
    passive_rts, req_private_data,
};

/// The BTHs of packets 4 and 6 of /work/shared/vectors/rxe/rping.pcap: the
/// client's first SEND (198.18.0.12 -> .11) and the server's first SEND.
const CLIENT_FIRST_BTH: &str = "0400ffff0000001e80d79776";
const SERVER_FIRST_BTH: &str = "0c00ffff0000001e80214660";

fn bth(hex: &str) -> (u32, Psn) {
    let raw = bytes(hex);
    let bth = Bth::new_checked(&raw[..12]).unwrap();
    (bth.dest_qp(), bth.psn())
}

fn captured() -> (CmReq, CmRep) {
    let req = bytes(RPING_REQ);
    let rep = bytes(RPING_REP);
    let Some(CmMessage::Req(req)) = Mad::parse(&req).unwrap().cm else {
        panic!("packet 1 is not a REQ")
    };
    let Some(CmMessage::Rep(rep)) = Mad::parse(&rep).unwrap().cm else {
        panic!("packet 2 is not a REP")
    };
    (req, rep)
}

#[test]
fn the_kernels_header_reads_and_rebuilds_byte_for_byte() {
    let (req, _) = captured();
    let service = RdmaService::from_service_id(req.service_id).unwrap();
    assert_eq!(service, RdmaService::new(PortSpace::Tcp, 7174));
    let header = CmaHeader::parse(&req.private_data).unwrap();
    let client = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12));
    let server = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11));
    assert_eq!(
        header,
        CmaHeader {
            source_port: 50292,
            source: client,
            destination: server,
        }
    );
    // ferroce-wire's own reading of the REQ agrees.
    let wire = req.ip_cm().unwrap();
    assert_eq!(
        (
            wire.source_port,
            wire.source_ip,
            wire.destination_ip,
            wire.destination_port
        ),
        (
            header.source_port,
            header.source,
            header.destination,
            service.port
        )
    );
    // rping gives no private data of its own: the header and zeros.
    assert_eq!(req_private_data(&header, &[]).unwrap(), req.private_data);
}

#[test]
fn the_derived_attributes_are_what_rpings_qps_ran_with() {
    let (req, rep) = captured();
    let (client_to, client_psn) = bth(CLIENT_FIRST_BTH);
    let (server_to, server_psn) = bth(SERVER_FIRST_BTH);

    // Active side (the client), on the REP.
    let init = active_init(1, 0, &rep);
    assert_eq!(init.state, Some(QpState::Init));
    assert_eq!(
        init.access,
        Some(Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC)
    );
    let a_rtr = active_rtr(&req, &rep).unwrap();
    let a_rts = active_rts(&req, &rep, 18);
    assert_eq!(a_rtr.state, Some(QpState::Rtr));
    assert_eq!(a_rtr.path_mtu, Some(Mtu::Mtu1024));
    assert_eq!(a_rtr.dest_qpn, Some(client_to));
    assert_eq!(a_rtr.rq_psn, Some(server_psn));
    assert_eq!(a_rts.state, Some(QpState::Rts));
    assert_eq!(a_rts.sq_psn, Some(client_psn));
    assert_eq!(
        (a_rtr.max_dest_rd_atomic, a_rts.max_rd_atomic),
        (Some(1), Some(1))
    );
    assert_eq!((a_rts.retry_cnt, a_rts.rnr_retry), (Some(7), Some(7)));

    // Passive side (the server), in accept before the REP.
    let p_rtr = passive_rtr(&req, &rep).unwrap();
    let p_rts = passive_rts(&req, &rep);
    assert_eq!(p_rtr.path_mtu, Some(Mtu::Mtu1024));
    assert_eq!(p_rtr.dest_qpn, Some(server_to));
    assert_eq!(p_rtr.rq_psn, Some(client_psn));
    assert_eq!(p_rts.sq_psn, Some(server_psn));
    assert_eq!(
        (p_rtr.max_dest_rd_atomic, p_rts.max_rd_atomic),
        (Some(1), Some(1))
    );
    assert_eq!((p_rts.retry_cnt, p_rts.rnr_retry), (Some(7), Some(7)));
    // The capture's kernel used packet life time 18: the REQ says local ACK
    // timeout 19, the REP target ACK delay 15, so both sides wait 2^19.
    assert_eq!(req.primary_path.local_ack_timeout, 19);
    assert_eq!(p_rts.timeout, Some(19));
    assert_eq!(a_rts.timeout, p_rts.timeout);
    assert_eq!(
        (a_rtr.min_rnr_timer, p_rtr.min_rnr_timer),
        (Some(0), Some(0))
    );
    // The address vector is the driver's (from the route), not the messages'.
    assert_eq!((a_rtr.path, p_rtr.path), (None, None));
}

#[test]
fn a_req_with_no_valid_mtu_is_refused() {
    let (mut req, rep) = captured();
    for code in [0, 6, 15] {
        req.path_packet_mtu = code;
        let err = passive_rtr(&req, &rep).unwrap_err();
        assert!(err.to_string().contains(&format!("code {code}")), "{err}");
    }
}

#[test]
fn options_override_only_what_a_transition_sets() {
    use crate::rdma_cm::QpOptions;
    let (req, rep) = captured();
    let options = QpOptions {
        ack_timeout: Some(14),
        min_rnr_timer: Some(12),
    };
    let rtr = options.apply(passive_rtr(&req, &rep).unwrap());
    let rts = options.apply(passive_rts(&req, &rep));
    assert_eq!((rtr.min_rnr_timer, rtr.timeout), (Some(12), None));
    assert_eq!((rts.timeout, rts.min_rnr_timer), (Some(14), None));
    assert_eq!(QpOptions::default().apply(rts), rts);
}
