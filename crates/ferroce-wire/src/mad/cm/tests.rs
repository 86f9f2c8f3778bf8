//! Round trips and hand-worked layouts of the CM message bodies.

use super::*;
use proptest::prelude::*;

fn bytes<const N: usize>() -> impl Strategy<Value = [u8; N]> {
    prop::collection::vec(any::<u8>(), N).prop_map(|v| {
        let mut a = [0u8; N];
        a.copy_from_slice(&v);
        a
    })
}

prop_compose! {
    fn path()(
        lids in any::<(u16, u16)>(),
        gids in (bytes::<16>(), bytes::<16>()),
        flow_label in 0u32..1 << 20,
        packet_rate in 0u8..1 << 6,
        class_and_hops in any::<(u8, u8)>(),
        sl in 0u8..1 << 4,
        subnet_local in any::<bool>(),
        local_ack_timeout in 0u8..1 << 5,
    ) -> CmPath {
        CmPath {
            local_port_lid: lids.0,
            remote_port_lid: lids.1,
            local_port_gid: gids.0,
            remote_port_gid: gids.1,
            flow_label,
            packet_rate,
            traffic_class: class_and_hops.0,
            hop_limit: class_and_hops.1,
            sl,
            subnet_local,
            local_ack_timeout,
        }
    }
}

prop_compose! {
    fn req()(
        ids in any::<(u32, u64, u64, u32)>(),
        qp in (0u32..1 << 24, any::<u8>(), 0u32..1 << 24, any::<u8>(), 0u32..1 << 24),
        timeouts in (0u8..1 << 5, 0u8..1 << 5),
        transport in (0u8..1 << 2, any::<bool>(), 0u8..1 << 3),
        starting_psn in 0u32..1 << 24,
        retries in (0u8..1 << 3, 0u8..1 << 3, 0u8..1 << 4),
        partition_key in any::<u16>(),
        path_packet_mtu in 0u8..1 << 4,
        flags in any::<(bool, bool, bool)>(),
        paths in (path(), path()),
        private_data in bytes::<92>(),
    ) -> CmReq {
        CmReq {
            local_comm_id: ids.0,
            service_id: ids.1,
            local_ca_guid: ids.2,
            local_qkey: ids.3,
            local_qpn: qp.0,
            responder_resources: qp.1,
            local_eecn: qp.2,
            initiator_depth: qp.3,
            remote_eecn: qp.4,
            remote_cm_response_timeout: timeouts.0,
            transport_service_type: transport.0,
            end_to_end_flow_control: transport.1,
            starting_psn: Psn::new(starting_psn),
            local_cm_response_timeout: timeouts.1,
            retry_count: retries.0,
            partition_key,
            path_packet_mtu,
            rdc_exists: flags.0,
            rnr_retry_count: retries.1,
            max_cm_retries: retries.2,
            srq: flags.1,
            extended_transport_type: transport.2,
            primary_path: paths.0,
            alternate_path: paths.1,
            sap_supported: flags.2,
            private_data,
        }
    }
}

prop_compose! {
    fn rep()(
        ids in any::<(u32, u32, u32, u64)>(),
        qp in (0u32..1 << 24, 0u32..1 << 24, 0u32..1 << 24),
        depth in any::<(u8, u8)>(),
        target_ack_delay in 0u8..1 << 5,
        failover_accepted in 0u8..1 << 2,
        rnr_retry_count in 0u8..1 << 3,
        flags in any::<(bool, bool)>(),
        private_data in bytes::<196>(),
    ) -> CmRep {
        CmRep {
            local_comm_id: ids.0,
            remote_comm_id: ids.1,
            local_qkey: ids.2,
            local_qpn: qp.0,
            local_eecn: qp.1,
            starting_psn: Psn::new(qp.2),
            responder_resources: depth.0,
            initiator_depth: depth.1,
            target_ack_delay,
            failover_accepted,
            end_to_end_flow_control: flags.0,
            rnr_retry_count,
            srq: flags.1,
            local_ca_guid: ids.3,
            private_data,
        }
    }
}

proptest! {
    #[test]
    fn req_round_trips(req in req()) {
        let mut data = [0xffu8; CM_DATA_LEN];
        req.emit(&mut data).unwrap();
        prop_assert_eq!(CmReq::parse(&data).unwrap(), req);
    }

    #[test]
    fn rep_round_trips(rep in rep()) {
        let mut data = [0xffu8; CM_DATA_LEN];
        rep.emit(&mut data).unwrap();
        prop_assert_eq!(CmRep::parse(&data).unwrap(), rep);
    }

    #[test]
    fn short_messages_round_trip(
        ids in any::<(u32, u32)>(),
        small in (0u8..1 << 2, 0u8..1 << 5, 0u8..=72, any::<u16>()),
        remote_qpn in 0u32..1 << 24,
        private_data in bytes::<224>(),
    ) {
        let messages = [
            CmMessage::Mra(CmMra {
                local_comm_id: ids.0,
                remote_comm_id: ids.1,
                message_mraed: small.0,
                service_timeout: small.1,
                private_data: private_data[..222].try_into().unwrap(),
            }),
            CmMessage::Rej(CmRej {
                local_comm_id: ids.0,
                remote_comm_id: ids.1,
                message_rejected: small.0,
                rejected_info_length: small.2,
                reason: small.3,
                ari: private_data[..72].try_into().unwrap(),
                private_data: private_data[76..].try_into().unwrap(),
            }),
            CmMessage::Rtu(CmRtu { local_comm_id: ids.0, remote_comm_id: ids.1, private_data }),
            CmMessage::Dreq(CmDreq {
                local_comm_id: ids.0,
                remote_comm_id: ids.1,
                remote_qpn,
                private_data: private_data[4..].try_into().unwrap(),
            }),
            CmMessage::Drep(CmDrep { local_comm_id: ids.0, remote_comm_id: ids.1, private_data }),
        ];
        for message in messages {
            let mut data = [0xffu8; CM_DATA_LEN];
            message.emit(&mut data).unwrap();
            let back = CmMessage::parse(message.attribute_id(), &data).unwrap();
            prop_assert_eq!(back, Some(message));
            prop_assert_eq!(message.local_comm_id(), ids.0);
            prop_assert_eq!(message.remote_comm_id(), Some(ids.1));
        }
    }
}

fn sample_req() -> CmReq {
    let mut data = [0u8; CM_DATA_LEN];
    data[8..16].copy_from_slice(&0x0000_0000_0111_1234u64.to_be_bytes());
    CmReq::parse(&data).unwrap()
}

#[test]
fn emit_refuses_values_wider_than_their_field() {
    let overflow = |field, value| Err(Error::FieldOverflow { field, value });
    let mut data = [0u8; CM_DATA_LEN];
    let mut req = sample_req();
    req.local_qpn = 0x0100_0000;
    assert_eq!(req.emit(&mut data), overflow("req.local_qpn", 0x0100_0000));
    let mut req = sample_req();
    req.transport_service_type = 4;
    assert_eq!(
        req.emit(&mut data),
        overflow("req.transport_service_type", 4)
    );
    let mut req = sample_req();
    req.alternate_path.flow_label = 0x10_0000;
    let expected = overflow("req.alternate_path.flow_label", 0x10_0000);
    assert_eq!(req.emit(&mut data), expected);
    let mut req = sample_req();
    req.primary_path.sl = 16;
    assert_eq!(req.emit(&mut data), overflow("req.primary_path.sl", 16));
    let mut rep = CmRep::parse(&data).unwrap();
    rep.rnr_retry_count = 8;
    assert_eq!(rep.emit(&mut data), overflow("rep.rnr_retry_count", 8));
    let mut rej = CmRej::parse(&[0u8; CM_DATA_LEN]).unwrap();
    rej.rejected_info_length = 73;
    assert_eq!(
        rej.emit(&mut data),
        overflow("rej.rejected_info_length", 73)
    );
    let mut dreq = CmDreq::parse(&[0u8; CM_DATA_LEN]).unwrap();
    dreq.remote_qpn = 0x0100_0000;
    assert_eq!(
        dreq.emit(&mut data),
        overflow("dreq.remote_qpn", 0x0100_0000)
    );
    let err = sample_req().emit(&mut data[..CM_DATA_LEN - 1]);
    assert!(matches!(
        err,
        Err(Error::BufferTooSmall { needed: 232, .. })
    ));
}

#[test]
fn ip_cm_needs_an_ip_service_id_and_a_valid_header() {
    let mut req = sample_req();
    req.private_data[1] = 0x60;
    req.private_data[2..4].copy_from_slice(&[0x12, 0x34]);
    req.private_data[4..20]
        .copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let ip = req.ip_cm().unwrap();
    assert_eq!((ip.port_space, ip.destination_port), (IP_CM_PS_UDP, 0x1234));
    assert_eq!(ip.source_port, 0x1234);
    assert_eq!(ip.source_ip, "fe80::1".parse::<IpAddr>().unwrap());
    assert_eq!(ip.destination_ip, "::".parse::<IpAddr>().unwrap());
    req.private_data[0] = 0x01;
    assert_eq!(req.ip_cm(), None);
    req.private_data[0] = 0x00;
    req.private_data[1] = 0x50;
    assert_eq!(req.ip_cm(), None);
    req.private_data[1] = 0x60;
    req.service_id = 0x0000_0001_0106_1234;
    assert_eq!(req.ip_cm(), None);
    req.service_id = 0x0000_0000_0107_1234;
    assert_eq!(req.ip_cm(), None);
    let service = IpCmService {
        port_space: IP_CM_PS_IB,
        port: 0x4791,
    };
    assert_eq!(service.service_id(), 0x0000_0000_013f_4791);
    assert_eq!(
        IpCmService::from_service_id(service.service_id()),
        Some(service)
    );
}
