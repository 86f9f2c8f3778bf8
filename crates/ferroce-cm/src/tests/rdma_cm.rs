//! rdma_cm's rules without a capture: service IDs, the header's refusals,
//! the private-data limits and the depth negotiation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ferroce_wire::mad::{
    CM_DATA_LEN, CmDrep, CmDreq, CmMra, CmRej, CmRep, CmReq, CmRtu, CmSidrRep, CmSidrReq,
    IpCmService,
};

use crate::rdma_cm::{
    CMA_HEADER_LEN, CmaHeader, Depth, Depths, DeviceLimits, Message, PortSpace, RdmaCmError,
    RdmaService, RetryCounts, accept_depths, app_limit, check_app_data, cm_ack_timeout,
    connect_depths, ib_cm_limit, req_private_data, sidr_req_private_data,
};

const SPACES: [PortSpace; 4] = [
    PortSpace::Ipoib,
    PortSpace::Tcp,
    PortSpace::Udp,
    PortSpace::Ib,
];

#[test]
fn service_ids_round_trip_and_agree_with_the_wire_crate() {
    for space in SPACES {
        for port in [0, 1, 7174, 0x8000, u16::MAX] {
            let service = RdmaService::new(space, port);
            let id = service.service_id();
            assert_eq!(id >> 32, 0);
            assert_eq!(RdmaService::from_service_id(id), Ok(service));
            // ferroce-wire's reading of REQs knows the three IP port spaces.
            if space != PortSpace::Ipoib {
                let wire = IpCmService::from_service_id(id).unwrap();
                assert_eq!((wire.port_space, wire.port), (space.value(), port));
            }
        }
    }
    // rping's default port on TCP, as the captured REQ carries it.
    assert_eq!(
        RdmaService::new(PortSpace::Tcp, 7174).service_id(),
        0x0106_1c06
    );
}

#[test]
fn foreign_service_ids_are_refused_with_the_reason() {
    let ib_service = 0x0002_c903_0000_0106_u64 << 16 | 7174;
    assert_eq!(
        RdmaService::from_service_id(ib_service),
        Err(RdmaCmError::NotRdmaCm {
            service_id: ib_service
        })
    );
    for space in [0x0000, 0x0107, 0x0110, 0x0140, 0xffff] {
        let id = u64::from(space) << 16 | 80;
        assert_eq!(
            RdmaService::from_service_id(id),
            Err(RdmaCmError::UnknownPortSpace {
                service_id: id,
                port_space: space
            })
        );
    }
    assert!(PortSpace::Tcp.connects() && PortSpace::Ib.connects());
    assert!(!PortSpace::Udp.connects() && !PortSpace::Ipoib.connects());
}

fn header(source: IpAddr, destination: IpAddr) -> CmaHeader {
    CmaHeader {
        source_port: 0xc474,
        source,
        destination,
    }
}

#[test]
fn the_header_round_trips_both_families_and_refuses_bad_ones() {
    let v4 = header(
        Ipv4Addr::new(10, 0, 0, 1).into(),
        Ipv4Addr::new(10, 0, 0, 2).into(),
    );
    let v6 = header(
        Ipv6Addr::new(0xfe80, 0, 0, 0, 1, 2, 3, 4).into(),
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9).into(),
    );
    for h in [v4, v6] {
        let bytes = h.emit().unwrap();
        assert_eq!(CmaHeader::parse(&bytes), Ok(h));
    }
    assert_eq!(v4.emit().unwrap()[1], 0x40);
    assert_eq!(v6.emit().unwrap()[1], 0x60);
    let mixed = header(v4.source, v6.destination);
    assert_eq!(mixed.emit(), Err(RdmaCmError::MixedFamilies));

    let good = v4.emit().unwrap();
    assert_eq!(
        CmaHeader::parse(&good[..CMA_HEADER_LEN - 1]),
        Err(RdmaCmError::HeaderTruncated { len: 35 })
    );
    let mut bad = good;
    bad[0] = 1;
    assert_eq!(
        CmaHeader::parse(&bad),
        Err(RdmaCmError::HeaderVersion { version: 1 })
    );
    let mut bad = good;
    bad[1] = 0x50;
    assert_eq!(
        CmaHeader::parse(&bad),
        Err(RdmaCmError::HeaderIpVersion { ip_version: 5 })
    );
}

/// The IB CM sizes are the wire structs' private data fields.
#[test]
fn ib_cm_limits_are_the_message_layouts() {
    let zero = [0u8; CM_DATA_LEN];
    let sizes = [
        (
            Message::Req,
            CmReq::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::Mra,
            CmMra::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::Rej,
            CmRej::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::Rep,
            CmRep::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::Rtu,
            CmRtu::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::Dreq,
            CmDreq::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::Drep,
            CmDrep::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::SidrReq,
            CmSidrReq::parse(&zero).unwrap().private_data.len(),
        ),
        (
            Message::SidrRep,
            CmSidrRep::parse(&zero).unwrap().private_data.len(),
        ),
    ];
    for (message, size) in sizes {
        assert_eq!(ib_cm_limit(message), size, "{message:?}");
    }
}

#[test]
fn application_limits_leave_room_for_the_header() {
    let expected = [
        (Message::Req, 56),
        (Message::SidrReq, 180),
        (Message::Rep, 196),
        (Message::Rej, 148),
        (Message::SidrRep, 136),
        (Message::Rtu, 0),
        (Message::Dreq, 0),
        (Message::Drep, 0),
        (Message::Mra, 0),
    ];
    for (message, limit) in expected {
        assert_eq!(app_limit(message), limit, "{message:?}");
        assert_eq!(check_app_data(message, limit), Ok(()));
        let err = check_app_data(message, limit + 1).unwrap_err();
        assert_eq!(
            err,
            RdmaCmError::PrivateDataTooLong {
                message,
                len: limit + 1,
                limit
            }
        );
        assert!(
            err.to_string().contains(&format!("at most {limit}")),
            "{err}"
        );
    }
    let h = header(
        Ipv4Addr::new(10, 0, 0, 1).into(),
        Ipv4Addr::new(10, 0, 0, 2).into(),
    );
    let app: Vec<u8> = (1..=56).collect();
    let req = req_private_data(&h, &app).unwrap();
    assert_eq!((&req[..36], &req[36..]), (&h.emit().unwrap()[..], &app[..]));
    assert!(req_private_data(&h, &[0; 57]).is_err());
    let sidr = sidr_req_private_data(&h, &[7; 180]).unwrap();
    assert_eq!(sidr[36..], [7; 180]);
    assert!(sidr_req_private_data(&h, &[0; 181]).is_err());
}

/// rxe's limits (`max_qp_rd_atom` and `max_qp_init_rd_atom` 128) and a
/// small device's.
const RXE: DeviceLimits = DeviceLimits {
    max_responder_resources: 128,
    max_initiator_depth: 128,
};
const SMALL: DeviceLimits = DeviceLimits {
    max_responder_resources: 4,
    max_initiator_depth: 2,
};

fn depths(responder_resources: u8, initiator_depth: u8) -> Depths {
    Depths {
        responder_resources,
        initiator_depth,
    }
}

#[test]
fn connect_takes_the_device_maximum_or_what_fits() {
    use Depth::{Exactly, Max};
    let table = [
        (RXE, Max, Max, Ok(depths(128, 128))),
        (SMALL, Max, Max, Ok(depths(4, 2))),
        (RXE, Exactly(1), Exactly(1), Ok(depths(1, 1))),
        (SMALL, Exactly(0), Max, Ok(depths(0, 2))),
        (
            SMALL,
            Exactly(5),
            Max,
            Err(RdmaCmError::DepthTooLarge {
                what: "responder_resources",
                asked: 5,
                device: 4,
            }),
        ),
        (
            SMALL,
            Max,
            Exactly(3),
            Err(RdmaCmError::DepthTooLarge {
                what: "initiator_depth",
                asked: 3,
                device: 2,
            }),
        ),
    ];
    for (device, res, init, expected) in table {
        assert_eq!(
            connect_depths(res, init, device),
            expected,
            "{device:?} {res:?} {init:?}"
        );
    }
}

#[test]
fn accept_takes_the_smaller_of_offer_and_device() {
    use Depth::{Exactly, Max};
    // A REQ with responder resources 3 and initiator depth 6 offers us
    // initiator depth 3 and responder resources 6.
    let offered = Depths::offered_by(depths(3, 6));
    assert_eq!(offered, depths(6, 3));
    let table = [
        (RXE, Max, Max, Ok(depths(6, 3))),
        (SMALL, Max, Max, Ok(depths(4, 2))),
        // An explicit value is the application's word, beyond the offer too.
        (RXE, Exactly(10), Exactly(1), Ok(depths(10, 1))),
        (SMALL, Exactly(0), Exactly(0), Ok(depths(0, 0))),
        (
            SMALL,
            Max,
            Exactly(9),
            Err(RdmaCmError::DepthTooLarge {
                what: "initiator_depth",
                asked: 9,
                device: 2,
            }),
        ),
    ];
    for (device, res, init, expected) in table {
        assert_eq!(
            accept_depths(res, init, offered, device),
            expected,
            "{device:?} {res:?} {init:?}"
        );
    }
}

#[test]
fn retry_counts_default_to_seven_and_are_capped() {
    assert_eq!(RetryCounts::DEFAULT, RetryCounts::new(7, 7));
    assert_eq!(
        RetryCounts::new(3, 0),
        RetryCounts {
            retry_count: 3,
            rnr_retry_count: 0
        }
    );
    assert_eq!(RetryCounts::new(200, 9), RetryCounts::DEFAULT);
}

#[test]
fn the_ack_timeout_follows_the_life_time_and_the_peers_delay() {
    // Round trip (life time + 1) well above the delay: + 0.
    assert_eq!(cm_ack_timeout(2, 18), 19);
    // Delay one below the round trip: + 1.
    assert_eq!(cm_ack_timeout(18, 18), 20);
    // Delay above: the delay, + 1 when the round trip is close.
    assert_eq!(cm_ack_timeout(25, 18), 25);
    assert_eq!(cm_ack_timeout(20, 18), 21);
    assert_eq!(cm_ack_timeout(31, 31), 31);
}

#[test]
fn ud_port_spaces_get_rdma_cms_qkey() {
    use crate::rdma_cm::{RDMA_UDP_QKEY, ud_init};
    assert_eq!(PortSpace::Udp.default_qkey(), Some(0x0123_4567));
    assert_eq!(PortSpace::Ib.default_qkey(), Some(RDMA_UDP_QKEY));
    assert_eq!(PortSpace::Tcp.default_qkey(), None);
    assert_eq!(PortSpace::Ipoib.default_qkey(), None);
    let attr = ud_init(1, 0, RDMA_UDP_QKEY);
    assert_eq!((attr.qkey, attr.access), (Some(RDMA_UDP_QKEY), None));
}
