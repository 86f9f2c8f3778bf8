//! The values that travel out of band and the completion vocabulary, with
//! no sockets: the byte encodings of [`QpEndpoint`] and [`RemoteRegion`]
//! (round trips and every refusal), bounds of remote slices, `WcStatus`
//! wording, `WorkCompletion::ok`, hex QPNs in `Debug`.

use ferroce::{
    DecodeError, Error, Psn, QpEndpoint, QpType, RemoteRegion, VerbsError, WcOpcode, WcStatus,
    WorkCompletion,
};

fn endpoint(gid: &str) -> QpEndpoint {
    QpEndpoint {
        gid: gid.parse().unwrap(),
        qp_type: QpType::Uc,
        qpn: 0xab_cdef,
        psn: Psn::new(0x12_3456),
        mtu: Some(ferroce::Mtu::Mtu2048),
    }
}

#[test]
fn endpoints_round_trip_over_ipv4_and_ipv6() {
    for gid in ["198.18.0.11", "fe80::5054:ff:fe52:a", "::1"] {
        let e = endpoint(gid);
        let bytes = e.to_bytes();
        assert_eq!(QpEndpoint::from_bytes(&bytes), Ok(e), "{gid}");
    }
    // The layout is the documented one: kind, version, type, MTU code,
    // GID, QPN, PSN.
    let b = endpoint("198.18.0.11").to_bytes();
    assert_eq!(b.len(), QpEndpoint::ENCODED_LEN);
    assert_eq!(&b[..4], &[b'Q', 1, 1, 4]);
    assert_eq!(
        &b[4..20],
        &"::ffff:198.18.0.11"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
    );
    assert_eq!(&b[20..], &[0, 0xab, 0xcd, 0xef, 0, 0x12, 0x34, 0x56]);
}

/// Every QP type has its code, XRC's halves 3 (initiator) and 4 (target).
#[test]
fn every_qp_type_round_trips_with_its_code() {
    let types = [
        QpType::Rc,
        QpType::Uc,
        QpType::Ud,
        QpType::XrcIni,
        QpType::XrcTgt,
    ];
    for (code, qp_type) in types.into_iter().enumerate() {
        let e = QpEndpoint {
            qp_type,
            ..endpoint("10.0.0.1")
        };
        let b = e.to_bytes();
        assert_eq!(usize::from(b[2]), code, "{qp_type:?}");
        assert_eq!(QpEndpoint::from_bytes(&b), Ok(e));
    }
}

#[test]
fn endpoint_decoding_refuses_and_says_why() {
    let good = endpoint("10.0.0.1").to_bytes();
    let with = |at: usize, v: u8| {
        let mut b = good;
        b[at] = v;
        b
    };
    let cases: [(&[u8], DecodeError, &str); 8] = [
        (
            &with(1, 2),
            DecodeError::Version {
                found: 2,
                supported: 1,
            },
            "version 2",
        ),
        (
            &good[..27],
            DecodeError::Length {
                expected: 28,
                found: 27,
            },
            "cut short",
        ),
        (
            &[good.as_slice(), &[0]].concat(),
            DecodeError::Length {
                expected: 28,
                found: 29,
            },
            "29 bytes",
        ),
        (
            &[],
            DecodeError::Length {
                expected: 28,
                found: 0,
            },
            "0 bytes",
        ),
        (
            &with(0, b'R'),
            DecodeError::WrongKind {
                expected: "QP endpoint",
                found: b'R',
            },
            "not an encoded QP endpoint",
        ),
        (
            &with(2, 9),
            DecodeError::BadValue {
                what: "QP type",
                value: 9,
            },
            "QP type",
        ),
        (
            &with(3, 6),
            DecodeError::BadValue {
                what: "port MTU code (0 unknown, 1-5)",
                value: 6,
            },
            "port MTU",
        ),
        (
            &with(20, 1),
            DecodeError::BadValue {
                what: "QPN",
                value: 0x1ab_cdef,
            },
            "QPN",
        ),
    ];
    for (bytes, want, words) in cases {
        let err = QpEndpoint::from_bytes(bytes).unwrap_err();
        assert_eq!(err, want);
        assert!(err.to_string().contains(words), "{err}");
    }
    // An earlier build's encoding (MTU byte 0) reads as an unknown MTU.
    let earlier = QpEndpoint::from_bytes(&with(3, 0)).unwrap();
    assert_eq!(earlier.mtu, None);
    assert_eq!(
        earlier,
        QpEndpoint::new(earlier.gid, QpType::Uc, 0xab_cdef, Psn::new(0x12_3456))
    );
    let psn_too_big = with(24, 1);
    assert!(matches!(
        QpEndpoint::from_bytes(&psn_too_big),
        Err(DecodeError::BadValue { what: "PSN", .. })
    ));
}

#[test]
fn regions_round_trip_and_refuse_bad_input() {
    let r = RemoteRegion::new(0x7f00_1234_0000, 0xdead_beef, 16 << 20).unwrap();
    let bytes = r.to_bytes();
    assert_eq!((bytes.len(), RemoteRegion::ENCODED_LEN), (24, 24));
    assert_eq!(RemoteRegion::from_bytes(&bytes).unwrap(), r);
    let mut v2 = bytes;
    v2[1] = 2;
    assert_eq!(
        RemoteRegion::from_bytes(&v2),
        Err(DecodeError::Version {
            found: 2,
            supported: 1
        })
    );
    assert_eq!(
        RemoteRegion::from_bytes(&bytes[..10]),
        Err(DecodeError::Length {
            expected: 24,
            found: 10
        })
    );
    // An endpoint is not a region, and a region's end must fit 64 bits.
    assert!(matches!(
        RemoteRegion::from_bytes(&endpoint("::1").to_bytes()),
        Err(DecodeError::WrongKind { found: b'Q', .. })
    ));
    let mut past_end = bytes;
    past_end[4..12].copy_from_slice(&u64::MAX.to_be_bytes());
    assert!(matches!(
        RemoteRegion::from_bytes(&past_end),
        Err(DecodeError::BadValue { .. })
    ));
    assert!(RemoteRegion::new(u64::MAX - 3, 1, 8).is_err());
}

#[test]
fn remote_slices_stay_inside_their_region() {
    let r = RemoteRegion::new(0x1000, 0x42, 4096).unwrap();
    let s = r.at(4088, 8).unwrap();
    assert_eq!((s.addr(), s.rkey(), s.len()), (0x1000 + 4088, 0x42, 8));
    assert_eq!(r.at(4096, 0).unwrap().addr(), 0x2000);
    assert_eq!(r.whole().len(), 4096);
    for (offset, len) in [
        (4089, 8),
        (4096, 1),
        (0, 4097),
        (u64::MAX, 2),
        (8, u64::MAX),
    ] {
        let err = r.at(offset, len).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Verbs(VerbsError::OutsideRemote { size: 4096, .. })
            ),
            "{offset} {len}: {err:?}"
        );
        assert!(
            err.to_string()
                .contains("outside the remote region of 4096 bytes"),
            "{err}"
        );
    }
}

/// rdma-core's `ibv_wc_status_str` and the `IBV_WC_*` numbers, for the
/// statuses ferroce produces.
#[test]
fn wc_status_reads_as_rdma_core_prints_it() {
    let table = [
        (WcStatus::Success, 0, "success"),
        (WcStatus::LocLenErr, 1, "local length error"),
        (WcStatus::LocQpOpErr, 2, "local QP operation error"),
        (WcStatus::LocProtErr, 4, "local protection error"),
        (WcStatus::WrFlushErr, 5, "Work Request Flushed Error"),
        (WcStatus::BadRespErr, 7, "bad response error"),
        (WcStatus::LocAccessErr, 8, "local access error"),
        (WcStatus::RemInvReqErr, 9, "remote invalid request error"),
        (WcStatus::RemAccessErr, 10, "remote access error"),
        (WcStatus::RemOpErr, 11, "remote operation error"),
        (
            WcStatus::RetryExcErr,
            12,
            "transport retry counter exceeded",
        ),
        (WcStatus::RnrRetryExcErr, 13, "RNR retry counter exceeded"),
        (WcStatus::GeneralErr, 21, "general error"),
    ];
    for (status, code, text) in table {
        assert_eq!((status.to_string().as_str(), status.code()), (text, code));
    }
}

#[test]
fn ok_passes_successes_and_names_failures() {
    let mut wc = WorkCompletion {
        wr_id: 77,
        opcode: WcOpcode::RdmaRead,
        qpn: 0x11,
        ..WorkCompletion::default()
    };
    assert_eq!(wc.ok().map(|w| w.wr_id), Ok(77));
    wc.status = WcStatus::RemAccessErr;
    let err = wc.ok().unwrap_err();
    assert_eq!(
        (err.status, err.wr_id, err.qpn),
        (WcStatus::RemAccessErr, 77, 0x11)
    );
    let text = err.to_string();
    for words in [
        "work request 0x4d",
        "RdmaRead",
        "QP 0x11",
        "remote access error (10)",
    ] {
        assert!(text.contains(words), "{text}");
    }
    let boxed: Box<dyn std::error::Error> = err.into();
    assert!(boxed.to_string().contains("0x11"));
}

#[test]
fn debug_prints_qpns_in_hex() {
    let wc = WorkCompletion {
        qpn: 0x1234,
        src_qp: 0x11,
        ..WorkCompletion::default()
    };
    let text = format!("{wc:?}");
    assert!(
        text.contains("qpn: 0x1234") && text.contains("src_qp: 0x11"),
        "{text}"
    );
    assert_eq!(
        endpoint("10.0.0.1").to_string(),
        "UC QP 0xabcdef PSN 0x123456 at 10.0.0.1"
    );
    let e = format!("{:?}", endpoint("::1"));
    assert!(
        e.contains("qpn: 0xabcdef") && e.contains("psn: 0x123456"),
        "{e}"
    );
    let ev = format!("{:?}", ferroce::AsyncEvent::QpFatal { qpn: 0x2a });
    assert_eq!(ev, "QpFatal { qpn: 0x2a }");
    let err = VerbsError::QueueFull {
        qpn: 0x2a,
        queue: "send queue",
        depth: 4,
    };
    assert_eq!(
        format!("{err:?}"),
        r#"QueueFull { qpn: 0x2a, queue: "send queue", depth: 4 }"#
    );
    assert_eq!(
        format!("{:?}", VerbsError::NoSuchQp(0x11)),
        "NoSuchQp(0x11)"
    );
}

#[cfg(feature = "serde")]
#[test]
fn serde_round_trips_and_checks() {
    let e = endpoint("198.18.0.11");
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(
        json,
        r#"{"gid":"198.18.0.11","qp_type":"UC","qpn":11259375,"psn":1193046,"mtu":2048}"#
    );
    assert_eq!(serde_json::from_str::<QpEndpoint>(&json).unwrap(), e);
    let bad = json.replace("11259375", "16777216");
    assert!(serde_json::from_str::<QpEndpoint>(&bad).is_err());
    let bad = json.replace("2048", "1500");
    assert!(serde_json::from_str::<QpEndpoint>(&bad).is_err());
    let earlier = json.replace(r#","mtu":2048"#, "");
    let e_unknown = QpEndpoint { mtu: None, ..e };
    assert_eq!(
        serde_json::from_str::<QpEndpoint>(&earlier).unwrap(),
        e_unknown
    );
    let r = RemoteRegion::new(0x1000, 7, 4096).unwrap();
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<RemoteRegion>(&json).unwrap(), r);
}

/// The API objects may be shared between threads (the README says so).
#[test]
fn api_objects_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<ferroce::Context>();
    both::<ferroce::ProtectionDomain>();
    both::<ferroce::MemoryRegion>();
    both::<ferroce::CompletionQueue>();
    both::<ferroce::QueuePair>();
    both::<ferroce::SharedReceiveQueue>();
    both::<QpEndpoint>();
    both::<RemoteRegion>();
}
