//! `VerbsError`: why a verbs call was refused, with rdma-core-style
//! `Debug` (hex QPNs and keys) and `Display`.

use core::fmt;

use super::{Hex, QpState, QpType, RemoteSlice};

/// Why a verbs call was refused. Each names what is wrong. `Debug`
/// prints QPNs and keys in hex, as `Display` and rdma-core do.
///
/// The C library (ferroce-verbs) maps
/// [`QueueFull`](Self::QueueFull) and [`SrqFull`](Self::SrqFull) to
/// `ENOMEM`, [`Busy`](Self::Busy) to `EBUSY` and every other variant to
/// `EINVAL`, as rdma-core's rxe provider answers.
#[derive(Clone, PartialEq, Eq)]
pub enum VerbsError {
    /// No protection domain with this handle (`ibv_pd`).
    NoSuchPd(u32),
    /// No completion queue with this handle (`ibv_cq`).
    NoSuchCq(u32),
    /// No queue pair with this QPN; QPN 0 and 1 (SMI, GSI) are the
    /// endpoint's own and never name a user QP.
    NoSuchQp(u32),
    /// No memory region with this L_Key or R_Key.
    NoSuchMr(u32),
    /// No shared receive queue with this handle (`ibv_srq`).
    NoSuchSrq(u32),
    /// No memory window has this R_Key's index.
    NoSuchMw(u32),
    /// No reliable datagram domain with this handle.
    NoSuchRdd(u32),
    /// No EE context with this number.
    NoSuchEec(u32),
    /// A BIND_MW that breaks a rule of memory windows (`why` names it).
    BadMwBind {
        /// The rule the bind breaks.
        why: &'static str,
    },
    /// The object is still in use (`what` says by what).
    Busy(&'static str),
    /// `modify_qp` from `from` to `to` is not a legal transition.
    BadTransition {
        /// The QP's current state (or `cur_qp_state` as given).
        from: QpState,
        /// The requested `qp_state`.
        to: QpState,
    },
    /// An attribute the transition requires is missing.
    MissingAttr {
        /// The state the call moves to.
        to: QpState,
        /// The ibverbs name of the missing attribute (e.g. `dest_qp_num`).
        attr: &'static str,
    },
    /// An attribute the transition does not allow is present.
    UnexpectedAttr {
        /// The state the call moves to.
        to: QpState,
        /// The ibverbs name of the attribute that is not allowed.
        attr: &'static str,
    },
    /// A value out of range (`what` names it).
    BadValue {
        /// The parameter or attribute (ibverbs name where there is one).
        what: &'static str,
        /// The value given.
        value: u64,
    },
    /// The QP is in a state that does not accept this call.
    WrongState {
        /// The QP.
        qpn: u32,
        /// Its state when the call came.
        state: QpState,
        /// The refused call (e.g. `post_send`).
        call: &'static str,
    },
    /// The queue is full.
    QueueFull {
        /// The QP.
        qpn: u32,
        /// Which queue (send, receive, or QP1's queue of MADs).
        queue: &'static str,
        /// Its depth in work requests (`max_send_wr` / `max_recv_wr`).
        depth: u32,
    },
    /// The shared receive queue is full.
    SrqFull {
        /// The SRQ's handle.
        srq: u32,
        /// Its depth in work requests (`max_wr`).
        depth: u32,
    },
    /// `post_recv` on a QP that takes its receives from an SRQ: they are
    /// posted to the SRQ (`post_srq_recv`), as ibverbs requires.
    QpHasSrq {
        /// The QP the receive was posted to.
        qpn: u32,
        /// The SRQ it takes its receives from.
        srq: u32,
    },
    /// A scatter/gather element cannot be used; `why` says what is wrong
    /// (no such region, another PD, outside the region, no LOCAL_WRITE).
    BadSge {
        /// The element's L_Key.
        lkey: u32,
        /// Its byte offset into the region.
        offset: u64,
        /// Its length in bytes.
        len: u32,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The operation does not exist on this QP type.
    BadOpForQpType {
        /// The operation (e.g. `RDMA READ`).
        op: &'static str,
        /// The QP's transport.
        qp_type: QpType,
    },
    /// An atomic's remote address is not 8-byte aligned.
    Unaligned(u64),
    /// Message longer than the device allows.
    TooLong {
        /// The message's length in bytes.
        len: u64,
        /// The largest length allowed: [`crate::MAX_MSG_SIZE`], the path
        /// MTU on UD, or the FLUSH range limit.
        max: u64,
    },
    /// A WRITE or READ longer than the remote slice it targets, or an
    /// atomic whose slice is shorter than 8 bytes.
    RemoteTooShort {
        /// The message's length in bytes.
        len: u64,
        /// The remote slice it targets.
        remote: RemoteSlice,
    },
    /// `offset`..`offset + len` is not inside a remote region of `size`
    /// bytes (`RemoteRegion::at`).
    OutsideRemote {
        /// The requested byte offset into the region.
        offset: u64,
        /// The requested length in bytes.
        len: u64,
        /// The region's size in bytes.
        size: u64,
    },
    /// No XRC domain with this handle.
    NoSuchXrcd(u32),
    /// An XRC call named an SRQ that is not an XRC SRQ.
    NotXrcSrq(u32),
    /// A call an XRC QP does not take (`call`: what it was; `fix`: what to
    /// do instead).
    XrcRefused {
        /// The XRC QP.
        qpn: u32,
        /// The refused call.
        call: &'static str,
        /// What to call instead.
        fix: &'static str,
    },
    /// `attach_mcast` / `detach_mcast` refused (see [`McastRefusal`]).
    Mcast {
        /// The QP.
        qpn: u32,
        /// The multicast GID, as an IP address.
        group: std::net::IpAddr,
        /// Why the call was refused.
        why: McastRefusal,
    },
}

/// Why a multicast attach or detach was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastRefusal {
    /// Only UD QPs join multicast groups (IBA 10.5.2.2; ibverbs: EINVAL).
    NotUd(QpType),
    /// The GID is not a multicast one (RoCE v2: IPv4 224.0.0.0/4, mapped or
    /// not, or IPv6 ff00::/8).
    NotMulticast,
    /// The QP is attached to the group already.
    AlreadyAttached,
    /// The QP is not attached to the group.
    NotAttached,
    /// The group has [`crate::MAX_MCAST_QP_ATTACH`] QPs already, or the
    /// endpoint [`crate::MAX_MCAST_GROUPS`] groups.
    Full,
}

impl fmt::Debug for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NoSuchPd(h) => f.debug_tuple("NoSuchPd").field(&h).finish(),
            Self::NoSuchCq(h) => f.debug_tuple("NoSuchCq").field(&h).finish(),
            Self::NoSuchQp(n) => f.debug_tuple("NoSuchQp").field(&Hex(n)).finish(),
            Self::NoSuchMr(k) => f.debug_tuple("NoSuchMr").field(&Hex(k)).finish(),
            Self::NoSuchSrq(h) => f.debug_tuple("NoSuchSrq").field(&h).finish(),
            Self::NoSuchMw(k) => f.debug_tuple("NoSuchMw").field(&Hex(k)).finish(),
            Self::NoSuchRdd(h) => f.debug_tuple("NoSuchRdd").field(&h).finish(),
            Self::NoSuchEec(n) => f.debug_tuple("NoSuchEec").field(&Hex(n)).finish(),
            Self::BadMwBind { why } => f.debug_struct("BadMwBind").field("why", &why).finish(),
            Self::NoSuchXrcd(h) => f.debug_tuple("NoSuchXrcd").field(&h).finish(),
            Self::NotXrcSrq(h) => f.debug_tuple("NotXrcSrq").field(&h).finish(),
            Self::XrcRefused { qpn, call, fix } => f
                .debug_struct("XrcRefused")
                .field("qpn", &Hex(qpn))
                .field("call", &call)
                .field("fix", &fix)
                .finish(),
            Self::Busy(what) => f.debug_tuple("Busy").field(&what).finish(),
            Self::BadTransition { from, to } => f
                .debug_struct("BadTransition")
                .field("from", &from)
                .field("to", &to)
                .finish(),
            Self::MissingAttr { to, attr } => f
                .debug_struct("MissingAttr")
                .field("to", &to)
                .field("attr", &attr)
                .finish(),
            Self::UnexpectedAttr { to, attr } => f
                .debug_struct("UnexpectedAttr")
                .field("to", &to)
                .field("attr", &attr)
                .finish(),
            Self::BadValue { what, value } => f
                .debug_struct("BadValue")
                .field("what", &what)
                .field("value", &value)
                .finish(),
            Self::WrongState { qpn, state, call } => f
                .debug_struct("WrongState")
                .field("qpn", &Hex(qpn))
                .field("state", &state)
                .field("call", &call)
                .finish(),
            Self::QueueFull { qpn, queue, depth } => f
                .debug_struct("QueueFull")
                .field("qpn", &Hex(qpn))
                .field("queue", &queue)
                .field("depth", &depth)
                .finish(),
            Self::SrqFull { srq, depth } => f
                .debug_struct("SrqFull")
                .field("srq", &srq)
                .field("depth", &depth)
                .finish(),
            Self::QpHasSrq { qpn, srq } => f
                .debug_struct("QpHasSrq")
                .field("qpn", &Hex(qpn))
                .field("srq", &srq)
                .finish(),
            Self::BadSge {
                lkey,
                offset,
                len,
                why,
            } => f
                .debug_struct("BadSge")
                .field("lkey", &Hex(lkey))
                .field("offset", &offset)
                .field("len", &len)
                .field("why", &why)
                .finish(),
            Self::BadOpForQpType { op, qp_type } => f
                .debug_struct("BadOpForQpType")
                .field("op", &op)
                .field("qp_type", &qp_type)
                .finish(),
            Self::Unaligned(a) => write!(f, "Unaligned({a:#x})"),
            Self::Mcast { qpn, group, why } => f
                .debug_struct("Mcast")
                .field("qpn", &Hex(qpn))
                .field("group", &group)
                .field("why", &why)
                .finish(),
            Self::TooLong { len, max } => f
                .debug_struct("TooLong")
                .field("len", &len)
                .field("max", &max)
                .finish(),
            Self::RemoteTooShort { len, remote } => f
                .debug_struct("RemoteTooShort")
                .field("len", &len)
                .field("remote", &remote)
                .finish(),
            Self::OutsideRemote { offset, len, size } => f
                .debug_struct("OutsideRemote")
                .field("offset", &offset)
                .field("len", &len)
                .field("size", &size)
                .finish(),
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchPd(h) => write!(f, "no protection domain {h}"),
            Self::NoSuchCq(h) => write!(f, "no completion queue {h}"),
            Self::NoSuchQp(n @ 0..=1) => write!(
                f,
                "queue pair {n} is reserved (QP0 the SMI, QP1 the GSI, the endpoint's own): \
                 MADs go through send_mad and poll_mad"
            ),
            Self::NoSuchQp(n) => write!(f, "no queue pair {n:#x}"),
            Self::NoSuchMr(k) => write!(f, "no memory region with key {k:#x}"),
            Self::NoSuchSrq(h) => write!(f, "no shared receive queue {h}"),
            Self::NoSuchMw(k) => write!(f, "no memory window with key {k:#x}"),
            Self::NoSuchRdd(h) => write!(
                f,
                "no reliable datagram domain {h}: allocate one (alloc_rdd)"
            ),
            Self::NoSuchEec(n) => write!(f, "no EE context {n:#x}: create one (create_eec)"),
            Self::BadMwBind { why } => write!(f, "memory window bind refused: {why}"),
            Self::NoSuchXrcd(h) => write!(f, "no XRC domain {h}: open one (open_xrcd)"),
            Self::NotXrcSrq(h) => write!(
                f,
                "shared receive queue {h} is not an XRC SRQ: create one with an XRC domain \
                 (create_xrc_srq)"
            ),
            Self::XrcRefused { qpn, call, fix } => write!(f, "{call} on XRC QP {qpn:#x}: {fix}"),
            Self::Busy(what) => write!(f, "still in use: {what}"),
            Self::BadTransition { from, to } => {
                write!(f, "modify_qp: no transition from {from:?} to {to:?}")
            }
            Self::MissingAttr { to, attr } => {
                write!(f, "modify_qp to {to:?}: required attribute {attr} missing")
            }
            Self::UnexpectedAttr { to, attr } => {
                write!(f, "modify_qp to {to:?}: attribute {attr} not allowed")
            }
            Self::BadValue { what, value } => write!(f, "bad {what}: {value}"),
            Self::WrongState { qpn, state, call } => {
                write!(f, "{call} on QP {qpn:#x} in state {state:?}")
            }
            Self::QueueFull { qpn, queue, depth } => {
                write!(f, "QP {qpn:#x}: {queue} full ({depth} entries)")
            }
            Self::SrqFull { srq, depth } => {
                write!(f, "shared receive queue {srq} full ({depth} entries)")
            }
            Self::QpHasSrq { qpn, srq } => write!(
                f,
                "post_recv on QP {qpn:#x}, which takes its receives from shared \
                 receive queue {srq}: post them to the SRQ (post_srq_recv)"
            ),
            Self::BadSge {
                lkey,
                offset,
                len,
                why,
            } => write!(
                f,
                "scatter/gather element lkey {lkey:#x} offset {offset} length {len}: {why}"
            ),
            Self::BadOpForQpType { op, qp_type } => {
                write!(f, "{op} is not supported on a {qp_type:?} QP")
            }
            Self::Unaligned(a) => write!(f, "atomic address {a:#x} is not 8-byte aligned"),
            Self::TooLong { len, max } => write!(f, "message of {len} bytes exceeds {max}"),
            Self::RemoteTooShort { len, remote } => write!(
                f,
                "message of {len} bytes does not fit the remote slice of {} bytes at \
                 {:#x}: take a longer slice or post a shorter message",
                remote.len(),
                remote.addr()
            ),
            Self::OutsideRemote { offset, len, size } => write!(
                f,
                "{len} bytes at offset {offset} are outside the remote region of {size} \
                 bytes: take a range inside it"
            ),
            Self::Mcast { qpn, group, why } => {
                write!(f, "QP {qpn:#x} and multicast group {group}: ")?;
                match why {
                    McastRefusal::NotUd(t) => write!(
                        f,
                        "a {t:?} QP cannot join a multicast group: only UD QPs do"
                    ),
                    McastRefusal::NotMulticast => write!(
                        f,
                        "not a multicast GID: take one in 224.0.0.0/4 (IPv4 or \
                         ::ffff:224.0.0.0/100) or ff00::/8"
                    ),
                    McastRefusal::AlreadyAttached => {
                        write!(f, "the QP is attached already: detach it first")
                    }
                    McastRefusal::NotAttached => write!(
                        f,
                        "the QP is not attached to this group: attach before detaching"
                    ),
                    McastRefusal::Full => write!(
                        f,
                        "the device's multicast limits are reached (max_mcast_grp, \
                         max_mcast_qp_attach): detach other QPs or groups first"
                    ),
                }
            }
        }
    }
}

impl std::error::Error for VerbsError {}
