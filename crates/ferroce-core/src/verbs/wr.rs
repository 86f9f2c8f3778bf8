//! Work requests and their scatter lists: SGEs, remote slices, send
//! operations, `SendWr` / `RecvWr` as posted, and the owned copies the
//! queues keep.

use core::fmt;

use super::{Hex, MwBind, Path};

/// One scatter/gather element: `len` bytes at `offset` in the region `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// The L_Key of the memory region the element lies in.
    pub lkey: u32,
    /// Byte offset from the start of the region (`addr - mr.addr` in ibverbs).
    pub offset: u64,
    /// Bytes; one message is at most [`crate::MAX_MSG_SIZE`] (8 MiB, as
    /// rxe; IBA's DMA length allows 2 GiB), so 32 bits, as
    /// `ibv_sge::length`.
    pub len: u32,
}

/// A bounded range of a peer's registered memory: where a WRITE, READ or
/// atomic lands. Made by `RemoteRegion::at` in the `ferroce` crate, which
/// checks the range against the region the peer advertised, so that no
/// caller computes `addr + offset` by hand. A work request whose message is
/// longer than the slice is refused at post time.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteSlice {
    addr: u64,
    rkey: u32,
    len: u64,
}

impl RemoteSlice {
    /// A slice of `len` bytes at the peer's address `addr`, under `rkey`,
    /// taken on trust: for memory described by other means (another
    /// tool's exchange). The peer still checks every access.
    pub const fn new(addr: u64, rkey: u32, len: u64) -> Self {
        Self { addr, rkey, len }
    }

    /// The peer's virtual address of the slice's first byte (the RETH VA).
    pub const fn addr(&self) -> u64 {
        self.addr
    }

    /// The key the peer registered the region under.
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Bytes in the slice.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the slice holds no bytes (a zero-length WRITE or READ).
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for RemoteSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RemoteSlice {{ addr: {:#x}, rkey: {:#x}, len: {} }}",
            self.addr, self.rkey, self.len
        )
    }
}

/// What a send work request asks for (`ibv_wr_opcode` and its operands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// `IBV_WR_SEND`.
    Send,
    /// `IBV_WR_SEND_WITH_IMM`: the peer's receive completion carries it.
    SendWithImm(u32),
    /// `IBV_WR_SEND_WITH_INV`: the peer invalidates this R_Key.
    SendWithInv(u32),
    /// `IBV_WR_RDMA_WRITE` into `remote`.
    Write {
        /// Where the message lands.
        remote: RemoteSlice,
    },
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`: consumes a receive at the peer.
    WriteWithImm {
        /// Where the message lands.
        remote: RemoteSlice,
        /// Immediate data, host order; the peer's completion carries it.
        imm: u32,
    },
    /// `IBV_WR_RDMA_READ` from `remote` into the scatter list.
    Read {
        /// The peer memory read.
        remote: RemoteSlice,
    },
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` on the 8 bytes at `remote` (aligned);
    /// the original value lands in the 8-byte scatter list.
    CompareSwap {
        /// The 8 bytes compared and swapped (address 8-byte aligned).
        remote: RemoteSlice,
        /// The value they are compared with (`compare_add`).
        compare: u64,
        /// The value stored when they are equal (`swap`).
        swap: u64,
    },
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` on the 8 bytes at `remote` (aligned).
    FetchAdd {
        /// The 8 bytes added to (address 8-byte aligned).
        remote: RemoteSlice,
        /// The addend, wrapping (`compare_add`).
        add: u64,
    },
    /// `IBV_WR_ATOMIC_WRITE` (IBA 1.5): the request's 8 bytes (its scatter
    /// list or inline data) placed whole at `remote` (8-byte aligned), as
    /// one store; the peer's region needs remote write access.
    AtomicWrite {
        /// The 8 bytes written.
        remote: RemoteSlice,
    },
    /// `IBV_WR_FLUSH` (IBA 1.5): the bytes at `remote` (or, with
    /// [`FlushLevel::Region`], its whole region) made visible to `to`
    /// before the peer answers. No data; an empty scatter list.
    Flush {
        /// The range flushed (its region with [`FlushLevel::Region`]).
        remote: RemoteSlice,
        /// Global visibility or persistence.
        to: FlushType,
        /// The range or the whole region.
        level: FlushLevel,
    },
    /// `IBV_WR_BIND_MW`: binds the window `mw` (any R_Key it has had) as
    /// `bind` says, giving it `rkey`'s key byte. Executed by this QP in
    /// order, nothing on the wire; a type 2 window is then reachable only
    /// through this QP. [`crate::Endpoint::bind_mw`] posts one for a type 1
    /// window.
    BindMw {
        /// The window, by any R_Key it has had.
        mw: u32,
        /// The R_Key whose low byte (key) the window takes.
        rkey: u32,
        /// The region, range and access the window is bound to.
        bind: MwBind,
    },
    /// `IBV_WR_LOCAL_INV`: invalidates the type 2 window (or region) with
    /// this R_Key, in order, nothing on the wire.
    LocalInv(u32),
}

/// Where a FLUSH makes the bytes visible (FETH placement type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushType {
    /// Global visibility (`IBV_FLUSH_GLOBAL`, 1).
    Global,
    /// Persistence (`IBV_FLUSH_PERSISTENT`, 2): needs persistent memory.
    Persistent,
}

impl FlushType {
    /// The FETH placement-type bits.
    pub const fn bits(self) -> u32 {
        match self {
            Self::Global => 1,
            Self::Persistent => 2,
        }
    }
}

/// What a FLUSH covers (FETH selectivity level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushLevel {
    /// The RETH's range (`IBV_FLUSH_RANGE`, 0).
    Range,
    /// The whole region of the R_Key (`IBV_FLUSH_MR`, 1).
    Region,
}

impl FlushLevel {
    /// The FETH selectivity bits (bits 5:4).
    pub const fn bits(self) -> u32 {
        match self {
            Self::Range => 0,
            Self::Region => 1 << 4,
        }
    }
}

impl SendOp {
    /// The peer memory the operation touches, if any.
    pub const fn remote(&self) -> Option<RemoteSlice> {
        match *self {
            Self::Write { remote }
            | Self::WriteWithImm { remote, .. }
            | Self::Read { remote }
            | Self::CompareSwap { remote, .. }
            | Self::FetchAdd { remote, .. }
            | Self::AtomicWrite { remote }
            | Self::Flush { remote, .. } => Some(remote),
            Self::Send
            | Self::SendWithImm(_)
            | Self::SendWithInv(_)
            | Self::BindMw { .. }
            | Self::LocalInv(_) => None,
        }
    }

    /// Whether the operation writes the scatter list (READ and atomics).
    pub const fn writes_local(&self) -> bool {
        matches!(
            self,
            Self::Read { .. } | Self::CompareSwap { .. } | Self::FetchAdd { .. }
        )
    }

    /// Whether the request is carried out by the QP itself, without a
    /// packet (BIND_MW, LOCAL_INV).
    pub const fn is_local(&self) -> bool {
        matches!(self, Self::BindMw { .. } | Self::LocalInv(_))
    }
}

/// A send work request (`ibv_send_wr`). It borrows its scatter list (and
/// inline data): `post_send` copies what it needs into the send queue, so
/// the caller's slices are free again when it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation and its operands (`opcode` and `wr.*`).
    pub op: SendOp,
    /// Local memory the message is gathered from (READ, atomics: scattered
    /// into).
    pub sg: &'a [Sge],
    /// Produce a completion even on a QP created with `sq_sig_all = false`.
    pub signaled: bool,
    /// Wait for earlier READs and atomics to complete before starting.
    pub fence: bool,
    /// Ask the peer to raise a solicited event.
    pub solicited: bool,
    /// Data carried in the request itself instead of `sg`
    /// (`IBV_SEND_INLINE`): copied at post, no registered memory needed.
    pub inline: Option<&'a [u8]>,
    /// For UD: destination and its QPN and Q_Key.
    pub ud: Option<UdDest>,
    /// For XRC_INI: the number of the XRC SRQ at the target that takes the
    /// request (`wr.qp_type.xrc.remote_srqn`), sent in every packet's XRCETH.
    pub remote_srqn: Option<u32>,
    /// For RD: the EE context that carries the request, and the
    /// destination QP and its Q_Key.
    pub rd: Option<RdDest>,
}

impl<'a> SendWr<'a> {
    /// A signaled request with no flags, inline data or UD destination.
    pub const fn new(wr_id: u64, op: SendOp, sg: &'a [Sge]) -> Self {
        Self {
            wr_id,
            op,
            sg,
            signaled: true,
            fence: false,
            solicited: false,
            inline: None,
            ud: None,
            remote_srqn: None,
            rd: None,
        }
    }

    /// A SEND of the bytes `sg` names.
    pub const fn send(wr_id: u64, sg: &'a [Sge]) -> Self {
        Self::new(wr_id, SendOp::Send, sg)
    }

    /// A SEND of the bytes `sg` names, carrying `imm` (host order): the
    /// peer's receive completion has it in [`WorkCompletion::imm`](crate::verbs::WorkCompletion::imm)
    /// (`IBV_WR_SEND_WITH_IMM`).
    pub const fn send_with_imm(wr_id: u64, sg: &'a [Sge], imm: u32) -> Self {
        Self::new(wr_id, SendOp::SendWithImm(imm), sg)
    }

    /// An RDMA WRITE of `sg` into `remote` (which must hold the message).
    pub const fn write(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice) -> Self {
        Self::new(wr_id, SendOp::Write { remote }, sg)
    }

    /// An RDMA READ of `remote` into `sg`.
    pub const fn read(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice) -> Self {
        Self::new(wr_id, SendOp::Read { remote }, sg)
    }

    /// A FETCH_ADD of `add` on the 8 bytes at `remote`; the old value
    /// lands in `sg` (8 bytes).
    pub const fn fetch_add(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice, add: u64) -> Self {
        Self::new(wr_id, SendOp::FetchAdd { remote, add }, sg)
    }

    /// An ATOMIC WRITE of the 8 bytes `sg` names to `remote` (8-byte
    /// aligned), placed whole.
    pub const fn atomic_write(wr_id: u64, sg: &'a [Sge], remote: RemoteSlice) -> Self {
        Self::new(wr_id, SendOp::AtomicWrite { remote }, sg)
    }

    /// A FLUSH of `remote` (its range, or with [`FlushLevel::Region`] its
    /// whole region) to `to`: complete once the peer answers, every
    /// earlier WRITE of this QP then visible there.
    pub const fn flush(wr_id: u64, remote: RemoteSlice, to: FlushType, level: FlushLevel) -> Self {
        Self::new(wr_id, SendOp::Flush { remote, to, level }, &[])
    }

    /// A CMP_SWAP at `remote`: `swap` is stored if the 8 bytes there equal
    /// `compare`; the old value lands in `sg` (8 bytes).
    pub const fn compare_swap(
        wr_id: u64,
        sg: &'a [Sge],
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
    ) -> Self {
        Self::new(
            wr_id,
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            },
            sg,
        )
    }

    /// A BIND_MW of the window `mw` (a type 2 window: by its R_Key) with
    /// the key byte of `rkey` (usually [`crate::verbs::inc_rkey`] of its
    /// R_Key now).
    pub const fn bind_mw(wr_id: u64, mw: u32, rkey: u32, bind: MwBind) -> Self {
        Self::new(wr_id, SendOp::BindMw { mw, rkey, bind }, &[])
    }

    /// A LOCAL_INV of the type 2 window with this R_Key.
    pub const fn local_inv(wr_id: u64, rkey: u32) -> Self {
        Self::new(wr_id, SendOp::LocalInv(rkey), &[])
    }

    /// The same request, completing only on error (or with `sq_sig_all`).
    pub const fn unsignaled(mut self) -> Self {
        self.signaled = false;
        self
    }

    /// The same request with the solicited-event bit set
    /// (`IBV_SEND_SOLICITED`): the peer's CQ, armed for solicited
    /// completions only, raises an event for its receive.
    pub const fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }

    /// The same request sent to the XRC SRQ numbered `srqn` at the target
    /// (XRC_INI QPs only).
    pub const fn to_srq(mut self, srqn: u32) -> Self {
        self.remote_srqn = Some(srqn);
        self
    }

    /// The same request sent by an RD QP through `dest`'s EE context.
    pub const fn via(mut self, dest: RdDest) -> Self {
        self.rd = Some(dest);
        self
    }
}

/// Where an RD request goes: the local EE context that carries it (which
/// is connected to one EE context of the peer), the destination RD QP
/// there, and its Q_Key (one with the high bit set stands for the sending
/// QP's own, as for UD).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RdDest {
    /// The local EE context's number.
    pub eec: u32,
    /// The destination RD QP's number (`remote_qpn`).
    pub qpn: u32,
    /// The Q_Key to send (`remote_qkey`); high bit set: the QP's own.
    pub qkey: u32,
}

impl fmt::Debug for RdDest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdDest")
            .field("eec", &Hex(self.eec))
            .field("qpn", &Hex(self.qpn))
            .field("qkey", &Hex(self.qkey))
            .finish()
    }
}

/// The destination of a UD send (an address handle, QPN and Q_Key).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The address handle: where the datagram goes.
    pub path: Path,
    /// The destination QP's number (`remote_qpn`).
    pub qpn: u32,
    /// The Q_Key to send (`remote_qkey`); with the high bit set the
    /// sending QP's own Q_Key is sent instead (IBA C10-15).
    pub qkey: u32,
}

impl fmt::Debug for UdDest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdDest")
            .field("path", &self.path)
            .field("qpn", &Hex(self.qpn))
            .field("qkey", &Hex(self.qkey))
            .finish()
    }
}

/// A receive work request (`ibv_recv_wr`), borrowing its scatter list as
/// [`SendWr`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the incoming message is scattered.
    pub sg: &'a [Sge],
}

impl<'a> RecvWr<'a> {
    /// A receive into `sg`.
    pub const fn new(wr_id: u64, sg: &'a [Sge]) -> Self {
        Self { wr_id, sg }
    }
}

/// Scatter/gather elements a queued work request keeps in place without
/// a heap allocation; longer lists go to the heap.
pub const INLINE_SGES: usize = 4;

/// A queued request's copy of its scatter list: up to [`INLINE_SGES`]
/// elements held in place (the common case posts without allocating).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum SgList {
    Inline { len: u8, sges: [Sge; INLINE_SGES] },
    Heap(Box<[Sge]>),
}

impl From<&[Sge]> for SgList {
    fn from(sg: &[Sge]) -> Self {
        if sg.len() <= INLINE_SGES {
            let mut sges = [Sge::default(); INLINE_SGES];
            sges[..sg.len()].copy_from_slice(sg);
            Self::Inline {
                len: sg.len() as u8,
                sges,
            }
        } else {
            Self::Heap(sg.into())
        }
    }
}

impl core::ops::Deref for SgList {
    type Target = [Sge];
    fn deref(&self) -> &[Sge] {
        match self {
            Self::Inline { len, sges } => &sges[..*len as usize],
            Self::Heap(sges) => sges,
        }
    }
}

impl<'a> IntoIterator for &'a SgList {
    type Item = &'a Sge;
    type IntoIter = core::slice::Iter<'a, Sge>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Debug for SgList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A send work request as the send queue holds it: [`SendWr`] with its
/// borrowed parts copied.
#[derive(Debug, Clone)]
pub(crate) struct QueuedSend {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    pub(crate) sg: SgList,
    pub(crate) signaled: bool,
    pub(crate) fence: bool,
    pub(crate) solicited: bool,
    pub(crate) inline: Option<Box<[u8]>>,
    pub(crate) ud: Option<UdDest>,
    pub(crate) remote_srqn: Option<u32>,
    pub(crate) rd: Option<RdDest>,
}

impl From<&SendWr<'_>> for QueuedSend {
    fn from(wr: &SendWr<'_>) -> Self {
        Self {
            wr_id: wr.wr_id,
            op: wr.op,
            sg: wr.sg.into(),
            signaled: wr.signaled,
            fence: wr.fence,
            solicited: wr.solicited,
            inline: wr.inline.map(Box::from),
            ud: wr.ud,
            remote_srqn: wr.remote_srqn,
            rd: wr.rd,
        }
    }
}

/// A receive work request as a receive queue or SRQ holds it.
#[derive(Debug, Clone)]
pub(crate) struct QueuedRecv {
    pub(crate) wr_id: u64,
    pub(crate) sg: SgList,
}

impl From<&RecvWr<'_>> for QueuedRecv {
    fn from(wr: &RecvWr<'_>) -> Self {
        Self {
            wr_id: wr.wr_id,
            sg: wr.sg.into(),
        }
    }
}
