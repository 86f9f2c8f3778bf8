//! The BTH opcode table: one entry per opcode, saying which extension headers
//! follow the BTH, in which order, and whether a payload may follow them, and
//! what the packet means: its [`Kind`], its [`Position`] in the message, and
//! whether it carries immediate data, invalidates an R_Key, consumes a
//! receive WQE or is a response (as rxe's header masks in `rxe_opcode.h`).
//!
//! Parse and emit both walk this table, so they agree by construction.
//! Sources: IBA vol. 1 §9.2/§9.3 (RC, UC, RD, UD), Annex A14 (XRC), Annex A17
//! §A17.9.3 (CNP), IBA 1.5 (FLUSH 0x1C, ATOMIC WRITE 0x1D).
//!
//! Extension headers always appear in the canonical order of [`ExtHeader::ALL`]
//! (RDETH, DETH, XRCETH, FETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH,
//! CNP reserved bytes), so a set of headers fully determines their layout.
//!
//! This file holds the types and [`Opcode`]'s accessors; the per-opcode
//! table data (what each code means, and its full name) is built in `table`.

use core::fmt;

use crate::Header;

/// One extension header that may follow the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    /// Reliable Datagram ETH (4 bytes): the EE context (IBA 9.3.1).
    Rdeth,
    /// Datagram ETH (8 bytes): Q_Key and source QP (IBA 9.3.2).
    Deth,
    /// XRC ETH (4 bytes): the destination XRC SRQ (Annex A14).
    Xrceth,
    /// Flush ETH (4 bytes): selectivity and placement type of a FLUSH (IBA 1.5).
    Feth,
    /// RDMA ETH (16 bytes): virtual address, R_Key and DMA length (IBA 9.3.3).
    Reth,
    /// Atomic ETH (28 bytes): address, R_Key, swap/add and compare data (IBA 9.3.4).
    AtomicEth,
    /// ACK ETH (4 bytes): syndrome and MSN (IBA 9.3.5).
    Aeth,
    /// Atomic ACK ETH (8 bytes): the original remote value (IBA 9.3.6).
    AtomicAckEth,
    /// Immediate data (4 bytes) of a WITH_IMMEDIATE operation .
    ImmDt,
    /// Invalidate ETH (4 bytes): the R_Key to invalidate.
    Ieth,
    /// The 16 reserved bytes of a RoCE v2 CNP (Annex A17.9.3).
    CnpReserved,
}

impl ExtHeader {
    /// Every extension header, in wire order.
    pub const ALL: [Self; 11] = [
        Self::Rdeth,
        Self::Deth,
        Self::Xrceth,
        Self::Feth,
        Self::Reth,
        Self::AtomicEth,
        Self::Aeth,
        Self::AtomicAckEth,
        Self::ImmDt,
        Self::Ieth,
        Self::CnpReserved,
    ];

    /// Length on the wire in bytes.
    pub const fn wire_len(self) -> usize {
        match self {
            Self::Rdeth | Self::Xrceth | Self::Feth | Self::Aeth | Self::ImmDt | Self::Ieth => 4,
            Self::Deth | Self::AtomicAckEth => 8,
            Self::Reth | Self::CnpReserved => 16,
            Self::AtomicEth => 28,
        }
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }

    /// The matching [`Header`] (for errors).
    pub const fn header(self) -> Header {
        match self {
            Self::Rdeth => Header::Rdeth,
            Self::Deth => Header::Deth,
            Self::Xrceth => Header::Xrceth,
            Self::Feth => Header::Feth,
            Self::Reth => Header::Reth,
            Self::AtomicEth => Header::AtomicEth,
            Self::Aeth => Header::Aeth,
            Self::AtomicAckEth => Header::AtomicAckEth,
            Self::ImmDt => Header::ImmDt,
            Self::Ieth => Header::Ieth,
            Self::CnpReserved => Header::CnpReserved,
        }
    }
}

/// A set of extension headers; its iteration order is the wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtSet(u16);

impl ExtSet {
    /// No extension header.
    pub const EMPTY: Self = Self(0);

    /// The set with `h` added.
    pub const fn with(self, h: ExtHeader) -> Self {
        Self(self.0 | h.bit())
    }

    /// Whether `h` is in the set.
    pub const fn contains(self, h: ExtHeader) -> bool {
        self.0 & h.bit() != 0
    }

    /// Total length of the headers in the set.
    pub const fn len(self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < ExtHeader::ALL.len() {
            if self.contains(ExtHeader::ALL[i]) {
                n += ExtHeader::ALL[i].wire_len();
            }
            i += 1;
        }
        n
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Offset of `h` from the end of the BTH, if `h` is in the set.
    pub const fn offset(self, h: ExtHeader) -> Option<usize> {
        if !self.contains(h) {
            return None;
        }
        let mut n = 0;
        let mut i = 0;
        while i < ExtHeader::ALL.len() {
            let e = ExtHeader::ALL[i];
            if e as u16 == h as u16 {
                return Some(n);
            }
            if self.contains(e) {
                n += e.wire_len();
            }
            i += 1;
        }
        None
    }

    /// The headers in wire order.
    pub fn iter(self) -> impl Iterator<Item = ExtHeader> {
        ExtHeader::ALL
            .into_iter()
            .filter(move |h| self.contains(*h))
    }
}

/// The transport service an opcode belongs to (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (0x00-0x1F).
    Rc,
    /// Unreliable Connected (0x20-0x3F).
    Uc,
    /// Reliable Datagram (0x40-0x5F).
    Rd,
    /// Unreliable Datagram (0x60-0x7F).
    Ud,
    /// Congestion Notification Packet (0x80-0x9F; only 0x81 is defined).
    Cnp,
    /// Extended Reliable Connected (0xA0-0xBF).
    Xrc,
}

impl Transport {
    /// Its opcodes' top three bits, in place.
    pub const fn base(self) -> u8 {
        match self {
            Self::Rc => 0x00,
            Self::Uc => 0x20,
            Self::Rd => 0x40,
            Self::Ud => 0x60,
            Self::Cnp => 0x80,
            Self::Xrc => 0xa0,
        }
    }

    /// The short name printed in dumps.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Rc => "RC",
            Self::Uc => "UC",
            Self::Rd => "RD",
            Self::Ud => "UD",
            Self::Cnp => "CNP",
            Self::Xrc => "XRC",
        }
    }
}

/// What a packet does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// SEND (any position, with or without immediate or invalidate).
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// COMPARE SWAP and FETCH ADD.
    Atomic,
    /// ACKNOWLEDGE (ACK, RNR NAK, NAK: the AETH says which).
    Ack,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAck,
    /// FLUSH: make earlier RDMA WRITEs persistent or globally visible (IBA 1.5).
    Flush,
    /// ATOMIC WRITE: an 8-byte write performed atomically (IBA 1.5).
    AtomicWrite,
    /// RD RESYNC.
    Resync,
    /// Congestion Notification Packet.
    Cnp,
}

impl Kind {
    /// Whether packets of this kind are responses.
    pub const fn is_response(self) -> bool {
        matches!(self, Self::ReadResponse | Self::Ack | Self::AtomicAck)
    }
}

/// Where a packet sits in its message. A one-packet operation (a READ
/// request, an atomic, an ACK) is `Only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// The first packet of a multi-packet message.
    First,
    /// Neither the first nor the last packet of a message.
    Middle,
    /// The last packet of a multi-packet message.
    Last,
    /// The single packet of a one-packet message.
    Only,
}

impl Position {
    /// Whether the packet starts a message (FIRST or ONLY).
    pub const fn starts(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// Whether the packet ends a message (LAST or ONLY).
    pub const fn ends(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
}

/// What an opcode means on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// rdma-core style name, e.g. `RC_RDMA_WRITE_FIRST`.
    pub name: &'static str,
    /// The operation without the transport, e.g. `RDMA_WRITE_FIRST`.
    pub operation: &'static str,
    /// The transport service, from the opcode's top three bits.
    pub transport: Transport,
    /// The extension headers that follow the BTH.
    pub headers: ExtSet,
    /// Whether payload bytes may follow the headers.
    pub payload: bool,
    /// Whether the packet is a response (ACK, ATOMIC ACK, READ RESPONSE).
    pub response: bool,
    /// What the packet does.
    pub kind: Kind,
    /// Where the packet sits in its message.
    pub position: Position,
    /// Whether it carries immediate data (ImmDt).
    pub immediate: bool,
    /// Whether it invalidates an R_Key (IETH).
    pub invalidate: bool,
    /// Whether it takes a receive WQE at the responder: a SEND that starts
    /// a message, a WRITE with immediate (rxe's RWR mask).
    pub consumes_recv: bool,
    /// Total length of the extension headers (`headers.len()`, precomputed).
    pub headers_len: usize,
    /// Offset of each header after the BTH, indexed by `ExtHeader as usize`;
    /// `u8::MAX` where absent (`headers.offset()`, precomputed).
    offsets: [u8; 11],
}

/// The entry a view falls back to for an opcode it was not checked for.
pub(crate) const UNKNOWN_INFO: OpcodeInfo = OpcodeInfo {
    name: "UNKNOWN",
    operation: "UNKNOWN",
    transport: Transport::Rc,
    headers: ExtSet::EMPTY,
    payload: true,
    response: false,
    kind: Kind::Send,
    position: Position::Only,
    immediate: false,
    invalidate: false,
    consumes_recv: false,
    headers_len: 0,
    offsets: [u8::MAX; 11],
};

impl OpcodeInfo {
    /// Offset of `h` from the end of the BTH, if this opcode carries it.
    pub const fn offset(&self, h: ExtHeader) -> Option<usize> {
        match self.offsets[h as usize] {
            u8::MAX => None,
            o => Some(o as usize),
        }
    }
}

/// A BTH opcode. Any byte is an `Opcode`; [`Opcode::info`] says whether it is
/// one this table knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

mod table;
#[cfg(test)]
mod tests;

use table::TABLE;

impl Opcode {
    /// RC SEND FIRST (0x00): the first packet of a multi-packet SEND; BTH only.
    pub const RC_SEND_FIRST: Self = Self(0x00);
    /// RC SEND MIDDLE (0x01): a middle packet of a SEND; BTH only.
    pub const RC_SEND_MIDDLE: Self = Self(0x01);
    /// RC SEND LAST (0x02): the last packet of a multi-packet SEND; BTH only.
    pub const RC_SEND_LAST: Self = Self(0x02);
    /// RC SEND LAST WITH IMMEDIATE (0x03): the last packet of a SEND with immediate data; BTH, ImmDt.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: Self = Self(0x03);
    /// RC SEND ONLY (0x04): a one-packet SEND; BTH only.
    pub const RC_SEND_ONLY: Self = Self(0x04);
    /// RC SEND ONLY WITH IMMEDIATE (0x05): a one-packet SEND with immediate data; BTH, ImmDt.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x05);
    /// RC RDMA WRITE FIRST (0x06): the first packet of a multi-packet RDMA WRITE; BTH, RETH.
    pub const RC_RDMA_WRITE_FIRST: Self = Self(0x06);
    /// RC RDMA WRITE MIDDLE (0x07): a middle packet of an RDMA WRITE; BTH only.
    pub const RC_RDMA_WRITE_MIDDLE: Self = Self(0x07);
    /// RC RDMA WRITE LAST (0x08): the last packet of a multi-packet RDMA WRITE; BTH only.
    pub const RC_RDMA_WRITE_LAST: Self = Self(0x08);
    /// RC RDMA WRITE LAST WITH IMMEDIATE (0x09): the last packet of an RDMA WRITE with immediate data; BTH, ImmDt.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Self = Self(0x09);
    /// RC RDMA WRITE ONLY (0x0a): a one-packet RDMA WRITE; BTH, RETH.
    pub const RC_RDMA_WRITE_ONLY: Self = Self(0x0a);
    /// RC RDMA WRITE ONLY WITH IMMEDIATE (0x0b): a one-packet RDMA WRITE with immediate data; BTH, RETH, ImmDt.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Self = Self(0x0b);
    /// RC RDMA READ REQUEST (0x0c): an RDMA READ request, no payload; BTH, RETH.
    pub const RC_RDMA_READ_REQUEST: Self = Self(0x0c);
    /// RC RDMA READ RESPONSE FIRST (0x0d): the first packet of a multi-packet READ response; BTH, AETH.
    pub const RC_RDMA_READ_RESPONSE_FIRST: Self = Self(0x0d);
    /// RC RDMA READ RESPONSE MIDDLE (0x0e): a middle packet of a READ response; BTH only.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: Self = Self(0x0e);
    /// RC RDMA READ RESPONSE LAST (0x0f): the last packet of a multi-packet READ response; BTH, AETH.
    pub const RC_RDMA_READ_RESPONSE_LAST: Self = Self(0x0f);
    /// RC RDMA READ RESPONSE ONLY (0x10): a one-packet READ response; BTH, AETH.
    pub const RC_RDMA_READ_RESPONSE_ONLY: Self = Self(0x10);
    /// RC ACKNOWLEDGE (0x11): an ACK, RNR NAK or NAK, no payload; BTH, AETH.
    pub const RC_ACKNOWLEDGE: Self = Self(0x11);
    /// RC ATOMIC ACKNOWLEDGE (0x12): the response to an atomic, no payload; BTH, AETH, AtomicAckETH.
    pub const RC_ATOMIC_ACKNOWLEDGE: Self = Self(0x12);
    /// RC COMPARE SWAP (0x13): an atomic compare-and-swap request, no payload; BTH, AtomicETH.
    pub const RC_COMPARE_SWAP: Self = Self(0x13);
    /// RC FETCH ADD (0x14): an atomic fetch-and-add request, no payload; BTH, AtomicETH.
    pub const RC_FETCH_ADD: Self = Self(0x14);
    /// RC SEND LAST WITH INVALIDATE (0x16): the last packet of a SEND that invalidates an R_Key; BTH, IETH.
    pub const RC_SEND_LAST_WITH_INVALIDATE: Self = Self(0x16);
    /// RC SEND ONLY WITH INVALIDATE (0x17): a one-packet SEND that invalidates an R_Key; BTH, IETH.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: Self = Self(0x17);
    /// RC FLUSH (0x1c): a FLUSH request, no payload; BTH, FETH, RETH.
    pub const RC_FLUSH: Self = Self(0x1c);
    /// RC ATOMIC WRITE (0x1d): an ATOMIC WRITE request with its 8-byte payload; BTH, RETH.
    pub const RC_ATOMIC_WRITE: Self = Self(0x1d);
    /// UC SEND ONLY (0x24): a one-packet SEND; BTH only.
    pub const UC_SEND_ONLY: Self = Self(0x24);
    /// UC RDMA WRITE ONLY (0x2a): a one-packet RDMA WRITE; BTH, RETH.
    pub const UC_RDMA_WRITE_ONLY: Self = Self(0x2a);
    /// RD SEND FIRST (0x40): the first packet of a multi-packet SEND; BTH, RDETH, DETH.
    pub const RD_SEND_FIRST: Self = Self(0x40);
    /// RD SEND LAST (0x42): the last packet of a multi-packet SEND; BTH, RDETH, DETH.
    pub const RD_SEND_LAST: Self = Self(0x42);
    /// RD SEND ONLY (0x44): a one-packet SEND; BTH, RDETH, DETH.
    pub const RD_SEND_ONLY: Self = Self(0x44);
    /// RD ACKNOWLEDGE (0x51): an ACK, RNR NAK or NAK, no payload; BTH, RDETH, AETH.
    pub const RD_ACKNOWLEDGE: Self = Self(0x51);
    /// RD RESYNC (0x55): an RD RESYNC request, no payload; BTH, RDETH, DETH.
    pub const RD_RESYNC: Self = Self(0x55);
    /// UD SEND ONLY (0x64): a one-packet SEND; BTH, DETH.
    pub const UD_SEND_ONLY: Self = Self(0x64);
    /// UD SEND ONLY WITH IMMEDIATE (0x65): a one-packet SEND with immediate data; BTH, DETH, ImmDt.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x65);
    /// CNP (0x81): a RoCE v2 Congestion Notification Packet; 16 reserved bytes follow the BTH.
    pub const CNP: Self = Self(0x81);

    /// The table entry, or `None` for a reserved or unknown opcode.
    pub const fn info(self) -> Option<&'static OpcodeInfo> {
        TABLE[self.0 as usize].as_ref()
    }

    /// The name, or `None` for an unknown opcode.
    pub const fn name(self) -> Option<&'static str> {
        match self.info() {
            Some(i) => Some(i.name),
            None => None,
        }
    }

    /// Every opcode the table knows.
    pub fn all() -> impl Iterator<Item = Self> {
        (0..=255u8).map(Self).filter(|o| o.info().is_some())
    }

    /// The same operation in transport `t` (e.g. UC_SEND_FIRST for
    /// RC_SEND_FIRST and UC); [`Opcode::info`] says whether `t` has it.
    pub const fn in_transport(self, t: Transport) -> Self {
        Self(t.base() | self.operation())
    }

    /// The operation with the transport bits cleared (e.g. 0x06 for any WRITE FIRST).
    pub const fn operation(self) -> u8 {
        self.0 & 0x1f
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "UNKNOWN_{:#04x}", self.0),
        }
    }
}
