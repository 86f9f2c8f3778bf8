//! The `modify_qp` state machine: which QP state transitions are legal and,
//! for each one and each QP type, which attributes the call must carry and
//! which it may carry.
//!
//! # Contract
//!
//! [`check_modify`] judges one `modify_qp` call on a QP of a given type in a
//! given state, and returns the state the QP moves to. It changes nothing;
//! the caller applies the attributes only when it returns `Ok`. The target
//! state is `attr.state`, or the current state when that is absent (as in
//! ibverbs, where a mask without `IBV_QP_STATE` asks for the current ->
//! current transition and so only the attributes that transition allows).
//! The checks run in this order, and the first failure is returned:
//!
//! 1. the transition is legal, else [`VerbsError::BadTransition`];
//! 2. every required attribute is present, else [`VerbsError::MissingAttr`];
//! 3. nothing beyond the required and optional attributes is present, else
//!    [`VerbsError::UnexpectedAttr`];
//! 4. the present values are in range, else [`VerbsError::BadValue`].
//!
//! # Sources
//!
//! The states and transitions are those of the QP state diagram in the IBA
//! specification (Vol. 1, section 10.3, on QP and EE context states);
//! the attributes required on the way Reset -> Init -> RTR -> RTS are listed
//! in the NOTES of `ibv_modify_qp(3)` (rdma-core); the full table of legal
//! transitions with their required and optional attributes per QP type is the
//! Linux kernel's `qp_state_table`, which `ib_modify_qp_is_ok()` in
//! `drivers/infiniband/core/verbs.c` consults. Our attributes map onto its
//! `IB_QP_*` mask bits one to one (`path` is `IB_QP_AV`, `access` is
//! `IB_QP_ACCESS_FLAGS`). The bits we do not model (alternate path, path
//! migration state, `IB_QP_CUR_STATE`, SQD async notification, rate limit,
//! capabilities) are left out of both sets.
//!
//! Two consequences of following the kernel table that may surprise:
//! Reset -> Err is refused (the table has no such entry, although every other
//! state may go to Err), and SQE -> RTS is accepted for RC with no attribute
//! although an RC QP never enters SQE.

use core::ops::RangeInclusive;

use crate::verbs::{QpAttr, QpState, QpType, VerbsError};

use AttrSet as A;
use QpState as S;

/// Checks a modify_qp call; returns the state the QP moves to.
pub(crate) fn check_modify(
    qp_type: QpType,
    current: QpState,
    attr: &QpAttr,
) -> Result<QpState, VerbsError> {
    let next = attr.state.unwrap_or(current);
    let rule = attr_rule(qp_type, current, next).ok_or(VerbsError::BadTransition {
        from: current,
        to: next,
    })?;
    let present = AttrSet::present_in(attr);
    if let Some(name) = rule.required.without(present).first_name() {
        return Err(VerbsError::MissingAttr {
            to: next,
            attr: name,
        });
    }
    let allowed = rule.required.union(rule.optional);
    if let Some(name) = present.without(allowed).first_name() {
        return Err(VerbsError::UnexpectedAttr {
            to: next,
            attr: name,
        });
    }
    check_values(attr)?;
    Ok(next)
}

/// The only port of the device.
const ONLY_PORT: u8 = 1;
/// The index of the only P_Key in the port's P_Key table.
const ONLY_PKEY_INDEX: u16 = 0;
/// The largest QP number: QPNs are 24 bits.
const MAX_QPN: u32 = 0x00ff_ffff;
/// The largest value of a 5-bit timer code (`timeout`, `min_rnr_timer`).
const MAX_TIMER_CODE: u8 = 31;
/// The largest value of a 3-bit retry counter (`retry_cnt`, `rnr_retry`).
const MAX_RETRY_COUNT: u8 = 7;

/// Refuses the first present attribute whose value is out of range.
fn check_values(attr: &QpAttr) -> Result<(), VerbsError> {
    within(
        "pkey_index",
        attr.pkey_index,
        ONLY_PKEY_INDEX..=ONLY_PKEY_INDEX,
    )?;
    within("port", attr.port, ONLY_PORT..=ONLY_PORT)?;
    within("dest_qpn", attr.dest_qpn, 0..=MAX_QPN)?;
    within("min_rnr_timer", attr.min_rnr_timer, 0..=MAX_TIMER_CODE)?;
    within("timeout", attr.timeout, 0..=MAX_TIMER_CODE)?;
    within("retry_cnt", attr.retry_cnt, 0..=MAX_RETRY_COUNT)?;
    within("rnr_retry", attr.rnr_retry, 0..=MAX_RETRY_COUNT)
}

/// Refuses `value`, if present, when it lies outside `allowed`.
fn within<T: Copy + PartialOrd + Into<u64>>(
    what: &'static str,
    value: Option<T>,
    allowed: RangeInclusive<T>,
) -> Result<(), VerbsError> {
    match value {
        Some(value) if !allowed.contains(&value) => Err(VerbsError::BadValue {
            what,
            value: value.into(),
        }),
        _ => Ok(()),
    }
}

/// A set of `QpAttr` attributes (all but `state`), one bit each, like the
/// kernel's `ib_qp_attr_mask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AttrSet(u16);

impl AttrSet {
    const PKEY_INDEX: Self = Self(1 << 0);
    const PORT: Self = Self(1 << 1);
    const QKEY: Self = Self(1 << 2);
    const ACCESS: Self = Self(1 << 3);
    const PATH: Self = Self(1 << 4);
    const PATH_MTU: Self = Self(1 << 5);
    const DEST_QPN: Self = Self(1 << 6);
    const RQ_PSN: Self = Self(1 << 7);
    const SQ_PSN: Self = Self(1 << 8);
    const MAX_RD_ATOMIC: Self = Self(1 << 9);
    const MAX_DEST_RD_ATOMIC: Self = Self(1 << 10);
    const MIN_RNR_TIMER: Self = Self(1 << 11);
    const TIMEOUT: Self = Self(1 << 12);
    const RETRY_CNT: Self = Self(1 << 13);
    const RNR_RETRY: Self = Self(1 << 14);

    const fn of(members: &[Self]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < members.len() {
            bits |= members[i].0;
            i += 1;
        }
        Self(bits)
    }

    const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The attributes a call carries.
    fn present_in(attr: &QpAttr) -> Self {
        ATTRIBUTES
            .iter()
            .filter(|a| (a.is_present)(attr))
            .fold(Self(0), |set, a| set.union(a.member))
    }

    /// The name of the first member, in `QpAttr` field order.
    fn first_name(self) -> Option<&'static str> {
        ATTRIBUTES
            .iter()
            .find(|a| self.contains(a.member))
            .map(|a| a.name)
    }
}

/// One attribute of `QpAttr`: its bit, its name (the field's) and how to tell
/// whether a call carries it.
struct Attribute {
    member: AttrSet,
    name: &'static str,
    is_present: fn(&QpAttr) -> bool,
}

impl Attribute {
    const fn new(member: AttrSet, name: &'static str, is_present: fn(&QpAttr) -> bool) -> Self {
        Self {
            member,
            name,
            is_present,
        }
    }
}

/// Every attribute but `state`, in `QpAttr` field order.
const ATTRIBUTES: [Attribute; 15] = [
    Attribute::new(AttrSet::PKEY_INDEX, "pkey_index", |a| {
        a.pkey_index.is_some()
    }),
    Attribute::new(AttrSet::PORT, "port", |a| a.port.is_some()),
    Attribute::new(AttrSet::QKEY, "qkey", |a| a.qkey.is_some()),
    Attribute::new(AttrSet::ACCESS, "access", |a| a.access.is_some()),
    Attribute::new(AttrSet::PATH, "path", |a| a.path.is_some()),
    Attribute::new(AttrSet::PATH_MTU, "path_mtu", |a| a.path_mtu.is_some()),
    Attribute::new(AttrSet::DEST_QPN, "dest_qpn", |a| a.dest_qpn.is_some()),
    Attribute::new(AttrSet::RQ_PSN, "rq_psn", |a| a.rq_psn.is_some()),
    Attribute::new(AttrSet::SQ_PSN, "sq_psn", |a| a.sq_psn.is_some()),
    Attribute::new(AttrSet::MAX_RD_ATOMIC, "max_rd_atomic", |a| {
        a.max_rd_atomic.is_some()
    }),
    Attribute::new(AttrSet::MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic", |a| {
        a.max_dest_rd_atomic.is_some()
    }),
    Attribute::new(AttrSet::MIN_RNR_TIMER, "min_rnr_timer", |a| {
        a.min_rnr_timer.is_some()
    }),
    Attribute::new(AttrSet::TIMEOUT, "timeout", |a| a.timeout.is_some()),
    Attribute::new(AttrSet::RETRY_CNT, "retry_cnt", |a| a.retry_cnt.is_some()),
    Attribute::new(AttrSet::RNR_RETRY, "rnr_retry", |a| a.rnr_retry.is_some()),
];

/// What one legal transition asks of one QP type.
#[derive(Debug, Clone, Copy)]
struct AttrRule {
    required: AttrSet,
    optional: AttrSet,
}

const fn rule(required: &[AttrSet], optional: &[AttrSet]) -> AttrRule {
    AttrRule {
        required: AttrSet::of(required),
        optional: AttrSet::of(optional),
    }
}

/// The rule of the transitions that take no attribute at all.
const NO_ATTRIBUTES: AttrRule = rule(&[], &[]);

/// A legal transition that takes attributes, with its rule per QP type.
struct Transition {
    from: QpState,
    to: QpState,
    rc: AttrRule,
    uc: AttrRule,
    ud: AttrRule,
}

/// The kernel's `qp_state_table` for RC, UC and UD, restricted to the
/// attributes we model; transitions to Reset and Err are in [`attr_rule`].
const TRANSITIONS: [Transition; 9] = [
    Transition {
        from: S::Reset,
        to: S::Init,
        rc: rule(&[A::PKEY_INDEX, A::PORT, A::ACCESS], &[]),
        uc: rule(&[A::PKEY_INDEX, A::PORT, A::ACCESS], &[]),
        ud: rule(&[A::PKEY_INDEX, A::PORT, A::QKEY], &[]),
    },
    Transition {
        from: S::Init,
        to: S::Init,
        rc: rule(&[], &[A::PKEY_INDEX, A::PORT, A::ACCESS]),
        uc: rule(&[], &[A::PKEY_INDEX, A::PORT, A::ACCESS]),
        ud: rule(&[], &[A::PKEY_INDEX, A::PORT, A::QKEY]),
    },
    Transition {
        from: S::Init,
        to: S::Rtr,
        rc: rule(
            &[
                A::PATH,
                A::PATH_MTU,
                A::DEST_QPN,
                A::RQ_PSN,
                A::MAX_DEST_RD_ATOMIC,
                A::MIN_RNR_TIMER,
            ],
            &[A::ACCESS, A::PKEY_INDEX],
        ),
        uc: rule(
            &[A::PATH, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN],
            &[A::ACCESS, A::PKEY_INDEX],
        ),
        ud: rule(&[], &[A::PKEY_INDEX, A::QKEY]),
    },
    Transition {
        from: S::Rtr,
        to: S::Rts,
        rc: rule(
            &[
                A::SQ_PSN,
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::MAX_RD_ATOMIC,
            ],
            &[A::ACCESS, A::MIN_RNR_TIMER],
        ),
        uc: rule(&[A::SQ_PSN], &[A::ACCESS]),
        ud: rule(&[A::SQ_PSN], &[A::QKEY]),
    },
    Transition {
        from: S::Rts,
        to: S::Rts,
        rc: rule(&[], &[A::ACCESS, A::MIN_RNR_TIMER]),
        uc: rule(&[], &[A::ACCESS]),
        ud: rule(&[], &[A::QKEY]),
    },
    // Only the SQD-drained notification request, which we do not model.
    Transition {
        from: S::Rts,
        to: S::Sqd,
        rc: NO_ATTRIBUTES,
        uc: NO_ATTRIBUTES,
        ud: NO_ATTRIBUTES,
    },
    Transition {
        from: S::Sqd,
        to: S::Rts,
        rc: rule(&[], &[A::ACCESS, A::MIN_RNR_TIMER]),
        uc: rule(&[], &[A::ACCESS]),
        ud: rule(&[], &[A::QKEY]),
    },
    // A drained send queue is where a connection may be re-pointed; note that
    // path_mtu is not among the attributes, and port only for RC.
    Transition {
        from: S::Sqd,
        to: S::Sqd,
        rc: rule(
            &[],
            &[
                A::PORT,
                A::PATH,
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::MAX_RD_ATOMIC,
                A::MAX_DEST_RD_ATOMIC,
                A::ACCESS,
                A::PKEY_INDEX,
                A::MIN_RNR_TIMER,
            ],
        ),
        uc: rule(&[], &[A::PATH, A::ACCESS, A::PKEY_INDEX]),
        ud: rule(&[], &[A::PKEY_INDEX, A::QKEY]),
    },
    // Recovery from a send queue error (UC and UD only enter SQE).
    Transition {
        from: S::Sqe,
        to: S::Rts,
        rc: NO_ATTRIBUTES,
        uc: rule(&[], &[A::ACCESS]),
        ud: rule(&[], &[A::QKEY]),
    },
];

/// The rule of `from -> to` for `qp_type`, or `None` if that is no transition.
fn attr_rule(qp_type: QpType, from: QpState, to: QpState) -> Option<AttrRule> {
    match (from, to) {
        (_, S::Reset) => Some(NO_ATTRIBUTES),
        (S::Reset, S::Err) => None,
        (_, S::Err) => Some(NO_ATTRIBUTES),
        _ => TRANSITIONS
            .iter()
            .find(|t| t.from == from && t.to == to)
            .map(|t| match qp_type {
                QpType::Rc => t.rc,
                QpType::Uc => t.uc,
                QpType::Ud => t.ud,
                QpType::XrcIni | QpType::XrcTgt => xrc_rule(qp_type, to, t.rc),
                QpType::Rd => rd_rule(to, t.ud),
            }),
    }
}

/// XRC's rules are RC's (IBA A14), less what a half without a responder
/// or without a requester does not use, as the kernel's `qp_state_table`
/// has them: an initiator needs no responder attributes to reach RTR, a
/// target no requester ones to reach RTS. They stay allowed.
fn xrc_rule(qp_type: QpType, to: QpState, rc: AttrRule) -> AttrRule {
    let unused = match (qp_type, to) {
        (QpType::XrcIni, S::Rtr) => A::of(&[A::MAX_DEST_RD_ATOMIC, A::MIN_RNR_TIMER]),
        (QpType::XrcTgt, S::Rts) => A::of(&[A::RETRY_CNT, A::RNR_RETRY, A::MAX_RD_ATOMIC]),
        _ => A(0),
    };
    AttrRule {
        required: rc.required.without(unused),
        optional: rc.optional.union(unused),
    }
}

/// An RD QP's rules are UD's (Q_Key, P_Key index, port, first PSN): its
/// peers and paths are its EE contexts'. It may also be given the remote
/// access its RD peers' RDMA and atomics need.
fn rd_rule(to: QpState, ud: AttrRule) -> AttrRule {
    let access = match to {
        S::Init | S::Rtr | S::Rts => A::of(&[A::ACCESS]),
        _ => A(0),
    };
    AttrRule {
        optional: ud.optional.union(access),
        ..ud
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
