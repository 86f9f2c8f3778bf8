//! Tests of the `modify_qp` state machine against the kernel's table.

use std::net::{IpAddr, Ipv4Addr};

use ferroce_wire::Psn;

use super::*;
use crate::verbs::{Access, Mtu, Path};

const TYPES: [QpType; 3] = [QpType::Rc, QpType::Uc, QpType::Ud];
const STATES: [QpState; 7] = [S::Reset, S::Init, S::Rtr, S::Rts, S::Sqd, S::Sqe, S::Err];
fn all_names() -> [&'static str; 15] {
    ATTRIBUTES.map(|a| a.name)
}

/// The legal transitions, written out independently of the table.
fn is_legal(from: QpState, to: QpState) -> bool {
    matches!(
        (from, to),
        (_, S::Reset)
            | (S::Init | S::Rtr | S::Rts | S::Sqd | S::Sqe | S::Err, S::Err)
            | (S::Reset | S::Init, S::Init)
            | (S::Init, S::Rtr)
            | (S::Rtr | S::Rts | S::Sqd | S::Sqe, S::Rts)
            | (S::Rts | S::Sqd, S::Sqd)
    )
}

/// Required attributes: ibv_modify_qp(3) NOTES; nothing elsewhere.
fn required(qp_type: QpType, from: QpState, to: QpState) -> &'static [&'static str] {
    use QpType::{Rc, Uc, Ud};
    match (qp_type, from, to) {
        (Rc | Uc, S::Reset, S::Init) => &["pkey_index", "port", "access"],
        (Ud, S::Reset, S::Init) => &["pkey_index", "port", "qkey"],
        (Rc, S::Init, S::Rtr) => &[
            "path",
            "path_mtu",
            "dest_qpn",
            "rq_psn",
            "max_dest_rd_atomic",
            "min_rnr_timer",
        ],
        (Uc, S::Init, S::Rtr) => &["path", "path_mtu", "dest_qpn", "rq_psn"],
        (Rc, S::Rtr, S::Rts) => &[
            "sq_psn",
            "max_rd_atomic",
            "retry_cnt",
            "rnr_retry",
            "timeout",
        ],
        (Uc | Ud, S::Rtr, S::Rts) => &["sq_psn"],
        _ => &[],
    }
}

/// Optional attributes: the kernel's qp_state_table, by name.
fn optional(qp_type: QpType, from: QpState, to: QpState) -> &'static [&'static str] {
    use QpType::{Rc, Uc, Ud};
    match (qp_type, from, to) {
        (Rc | Uc, S::Init, S::Init) => &["pkey_index", "port", "access"],
        (Ud, S::Init, S::Init) => &["pkey_index", "port", "qkey"],
        (Rc | Uc, S::Init, S::Rtr) => &["access", "pkey_index"],
        (Ud, S::Init, S::Rtr) => &["pkey_index", "qkey"],
        (Rc, S::Rtr | S::Rts | S::Sqd, S::Rts) => &["access", "min_rnr_timer"],
        (Uc, S::Rtr | S::Rts | S::Sqd | S::Sqe, S::Rts) => &["access"],
        (Ud, S::Rtr | S::Rts | S::Sqd | S::Sqe, S::Rts) => &["qkey"],
        (Rc, S::Sqd, S::Sqd) => &[
            "port",
            "path",
            "timeout",
            "retry_cnt",
            "rnr_retry",
            "max_rd_atomic",
            "max_dest_rd_atomic",
            "access",
            "pkey_index",
            "min_rnr_timer",
        ],
        (Uc, S::Sqd, S::Sqd) => &["path", "access", "pkey_index"],
        (Ud, S::Sqd, S::Sqd) => &["pkey_index", "qkey"],
        _ => &[],
    }
}

/// A call to `to` carrying the named attributes, each with a valid value.
fn call(to: QpState, names: &[&str]) -> QpAttr {
    let mut attr = QpAttr {
        state: Some(to),
        ..QpAttr::default()
    };
    for &name in names {
        match name {
            "pkey_index" => attr.pkey_index = Some(0),
            "port" => attr.port = Some(1),
            "qkey" => attr.qkey = Some(0x1111_1111),
            "access" => attr.access = Some(Access::LOCAL_WRITE | Access::REMOTE_READ),
            "path" => {
                attr.path = Some(Path {
                    remote: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
                    udp_src_port: 0xc001,
                    traffic_class: 0,
                    hop_limit: 64,
                    roce: crate::verbs::RoceMode::V2,
                });
            }
            "path_mtu" => attr.path_mtu = Some(Mtu::Mtu1024),
            "dest_qpn" => attr.dest_qpn = Some(0x00ab_cdef),
            "rq_psn" => attr.rq_psn = Some(Psn::new(100)),
            "sq_psn" => attr.sq_psn = Some(Psn::new(200)),
            "max_rd_atomic" => attr.max_rd_atomic = Some(4),
            "max_dest_rd_atomic" => attr.max_dest_rd_atomic = Some(4),
            "min_rnr_timer" => attr.min_rnr_timer = Some(12),
            "timeout" => attr.timeout = Some(14),
            "retry_cnt" => attr.retry_cnt = Some(7),
            "rnr_retry" => attr.rnr_retry = Some(7),
            other => panic!("no attribute {other}"),
        }
    }
    attr
}

fn legal_transitions() -> impl Iterator<Item = (QpType, QpState, QpState)> {
    TYPES.into_iter().flat_map(|t| {
        STATES
            .into_iter()
            .flat_map(move |from| STATES.into_iter().map(move |to| (t, from, to)))
            .filter(|&(_, from, to)| is_legal(from, to))
    })
}

#[test]
fn each_attribute_is_detected_under_its_own_name() {
    for name in all_names() {
        let present = AttrSet::present_in(&call(S::Init, &[name]));
        assert_eq!(present.first_name(), Some(name));
        assert_eq!(present.without(present).first_name(), None);
        assert_eq!(present.0.count_ones(), 1, "{name}");
    }
    assert_eq!(
        AttrSet::present_in(&call(S::Init, &all_names()))
            .0
            .count_ones(),
        15
    );
}

#[test]
fn legal_transitions_accept_exactly_their_required_set() {
    for (t, from, to) in legal_transitions() {
        let attr = call(to, required(t, from, to));
        assert_eq!(
            check_modify(t, from, &attr),
            Ok(to),
            "{t:?} {from:?}->{to:?}"
        );
    }
}

#[test]
fn legal_transitions_accept_every_optional_attribute() {
    for (t, from, to) in legal_transitions() {
        let mut names = required(t, from, to).to_vec();
        names.extend_from_slice(optional(t, from, to));
        assert_eq!(
            check_modify(t, from, &call(to, &names)),
            Ok(to),
            "{t:?} {from:?}->{to:?}"
        );
    }
}

#[test]
fn dropping_a_required_attribute_names_it() {
    for (t, from, to) in legal_transitions() {
        let needed = required(t, from, to);
        for &dropped in needed {
            let kept: Vec<&str> = needed.iter().copied().filter(|&n| n != dropped).collect();
            assert_eq!(
                check_modify(t, from, &call(to, &kept)),
                Err(VerbsError::MissingAttr { to, attr: dropped }),
                "{t:?} {from:?}->{to:?}"
            );
        }
    }
}

#[test]
fn an_attribute_outside_the_rule_is_unexpected() {
    for (t, from, to) in legal_transitions() {
        let (needed, allowed) = (required(t, from, to), optional(t, from, to));
        for extra in all_names()
            .into_iter()
            .filter(|n| !needed.contains(n) && !allowed.contains(n))
        {
            let mut names = needed.to_vec();
            names.push(extra);
            assert_eq!(
                check_modify(t, from, &call(to, &names)),
                Err(VerbsError::UnexpectedAttr { to, attr: extra }),
                "{t:?} {from:?}->{to:?}"
            );
        }
    }
}

#[test]
fn illegal_transitions_are_refused_before_attributes_are_looked_at() {
    let mut refused = 0;
    for t in TYPES {
        for (from, to) in STATES.into_iter().flat_map(|f| STATES.map(|to| (f, to))) {
            if is_legal(from, to) {
                continue;
            }
            refused += 1;
            for names in [&[][..], &all_names()[..]] {
                assert_eq!(
                    check_modify(t, from, &call(to, names)),
                    Err(VerbsError::BadTransition { from, to }),
                );
            }
        }
    }
    // 49 pairs minus 13 to Reset or Err minus 9 others, for 3 types.
    assert_eq!(refused, 3 * 27);
}

#[test]
fn without_a_state_the_qp_keeps_its_state() {
    let unexpected = |to, attr| Err(VerbsError::UnexpectedAttr { to, attr });
    type Case = (
        QpType,
        QpState,
        &'static [&'static str],
        Result<QpState, VerbsError>,
    );
    let cases: [Case; 6] = [
        (QpType::Rc, S::Init, &["access"], Ok(S::Init)),
        (QpType::Ud, S::Rts, &["qkey"], Ok(S::Rts)),
        (QpType::Rc, S::Reset, &[], Ok(S::Reset)),
        (
            QpType::Rc,
            S::Reset,
            &["port"],
            unexpected(S::Reset, "port"),
        ),
        (
            QpType::Uc,
            S::Rts,
            &["timeout"],
            unexpected(S::Rts, "timeout"),
        ),
        (
            QpType::Uc,
            S::Rtr,
            &[],
            Err(VerbsError::BadTransition {
                from: S::Rtr,
                to: S::Rtr,
            }),
        ),
    ];
    for (qp_type, current, names, expected) in cases {
        let attr = QpAttr {
            state: None,
            ..call(current, names)
        };
        assert_eq!(
            check_modify(qp_type, current, &attr),
            expected,
            "{qp_type:?} {current:?}"
        );
    }
}

#[test]
fn out_of_range_values_are_refused_and_limits_accepted() {
    let cases = [
        (S::Rtr, S::Rts, "timeout", 31, 32),
        (S::Rtr, S::Rts, "retry_cnt", 7, 8),
        (S::Rtr, S::Rts, "rnr_retry", 7, 8),
        (S::Init, S::Rtr, "min_rnr_timer", 31, 32),
        (S::Init, S::Rtr, "dest_qpn", 0xff_ffff, 0x100_0000),
        (S::Reset, S::Init, "port", 1, 2),
        (S::Reset, S::Init, "port", 1, 0),
        (S::Reset, S::Init, "pkey_index", 0, 1),
    ];
    for (from, to, what, good, bad) in cases {
        let mut attr = call(to, required(QpType::Rc, from, to));
        set_number(&mut attr, what, good);
        assert_eq!(
            check_modify(QpType::Rc, from, &attr),
            Ok(to),
            "{what} = {good}"
        );
        set_number(&mut attr, what, bad);
        let refusal = VerbsError::BadValue {
            what,
            value: u64::from(bad),
        };
        assert_eq!(check_modify(QpType::Rc, from, &attr), Err(refusal));
    }
}

fn set_number(attr: &mut QpAttr, name: &str, value: u32) {
    let byte = u8::try_from(value).ok();
    match name {
        "timeout" => attr.timeout = byte,
        "retry_cnt" => attr.retry_cnt = byte,
        "rnr_retry" => attr.rnr_retry = byte,
        "min_rnr_timer" => attr.min_rnr_timer = byte,
        "port" => attr.port = byte,
        "pkey_index" => attr.pkey_index = u16::try_from(value).ok(),
        "dest_qpn" => attr.dest_qpn = Some(value),
        other => panic!("no numeric attribute {other}"),
    }
}

#[test]
fn a_disallowed_attribute_is_unexpected_even_with_a_bad_value() {
    let mut attr = call(S::Rts, required(QpType::Uc, S::Rtr, S::Rts));
    attr.timeout = Some(200);
    assert_eq!(
        check_modify(QpType::Uc, S::Rtr, &attr),
        Err(VerbsError::UnexpectedAttr {
            to: S::Rts,
            attr: "timeout"
        })
    );
}

/// XRC's halves take RC's rules less what they do not use, as the kernel's
/// table: an initiator's RTR needs no responder attributes, a target's RTS
/// no requester ones; RC still needs both. The rest is RC's.
#[test]
fn xrc_rules_are_rcs_less_the_unused_half() {
    let rc_rtr = required(QpType::Rc, S::Init, S::Rtr);
    let ini_rtr: Vec<&str> = rc_rtr
        .iter()
        .copied()
        .filter(|a| !["max_dest_rd_atomic", "min_rnr_timer"].contains(a))
        .collect();
    let rtr = call(S::Rtr, &ini_rtr);
    assert_eq!(check_modify(QpType::XrcIni, S::Init, &rtr), Ok(S::Rtr));
    assert!(matches!(
        check_modify(QpType::Rc, S::Init, &rtr),
        Err(VerbsError::MissingAttr { .. })
    ));
    assert!(check_modify(QpType::XrcTgt, S::Init, &rtr).is_err());
    assert_eq!(
        check_modify(QpType::XrcTgt, S::Init, &call(S::Rtr, rc_rtr)),
        Ok(S::Rtr)
    );
    let rts = call(S::Rts, &["sq_psn", "timeout"]);
    assert_eq!(check_modify(QpType::XrcTgt, S::Rtr, &rts), Ok(S::Rts));
    assert!(check_modify(QpType::XrcIni, S::Rtr, &rts).is_err());
    assert!(check_modify(QpType::Rc, S::Rtr, &rts).is_err());
    // What a half does not need, it may still be given.
    let full = call(S::Rts, required(QpType::Rc, S::Rtr, S::Rts));
    assert_eq!(check_modify(QpType::XrcTgt, S::Rtr, &full), Ok(S::Rts));
    assert_eq!(check_modify(QpType::XrcIni, S::Rtr, &full), Ok(S::Rts));
    for t in [QpType::XrcIni, QpType::XrcTgt] {
        let init = call(S::Init, required(QpType::Rc, S::Reset, S::Init));
        assert_eq!(check_modify(t, S::Reset, &init), Ok(S::Init));
        assert!(check_modify(t, S::Reset, &call(S::Rts, &[])).is_err());
    }
}
