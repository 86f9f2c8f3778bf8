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

use core::fmt;

use crate::Header;

/// One extension header that may follow the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    Rdeth,
    Deth,
    Xrceth,
    Feth,
    Reth,
    AtomicEth,
    Aeth,
    AtomicAckEth,
    ImmDt,
    Ieth,
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
    Flush,
    AtomicWrite,
    /// RD RESYNC.
    Resync,
    /// Congestion Notification Packet.
    Cnp,
}

/// Where a packet sits in its message. A one-packet operation (a READ
/// request, an atomic, an ACK) is `Only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    First,
    Middle,
    Last,
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
    pub transport: Transport,
    /// The extension headers that follow the BTH.
    pub headers: ExtSet,
    /// Whether payload bytes may follow the headers.
    pub payload: bool,
    /// Whether the packet is a response (ACK, ATOMIC ACK, READ RESPONSE).
    pub response: bool,
    pub kind: Kind,
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

// The operation is the low five bits; the same operation exists in several
// transports. `Op` is that low part plus its headers.
struct Op {
    name: &'static str,
    kind: Kind,
    position: Position,
    headers: ExtSet,
    payload: bool,
}

const E: ExtSet = ExtSet::EMPTY;

const fn op(
    name: &'static str,
    kind: Kind,
    position: Position,
    headers: ExtSet,
    payload: bool,
) -> Option<Op> {
    Some(Op {
        name,
        kind,
        position,
        headers,
        payload,
    })
}

const fn ops(low: u8) -> Option<Op> {
    use ExtHeader::*;
    use Kind::*;
    use Position::*;
    match low {
        0x00 => op("SEND_FIRST", Send, First, E, true),
        0x01 => op("SEND_MIDDLE", Send, Middle, E, true),
        0x02 => op("SEND_LAST", Send, Last, E, true),
        0x03 => op("SEND_LAST_WITH_IMMEDIATE", Send, Last, E.with(ImmDt), true),
        0x04 => op("SEND_ONLY", Send, Only, E, true),
        0x05 => op("SEND_ONLY_WITH_IMMEDIATE", Send, Only, E.with(ImmDt), true),
        0x06 => op("RDMA_WRITE_FIRST", Write, First, E.with(Reth), true),
        0x07 => op("RDMA_WRITE_MIDDLE", Write, Middle, E, true),
        0x08 => op("RDMA_WRITE_LAST", Write, Last, E, true),
        0x09 => op(
            "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            Write,
            Last,
            E.with(ImmDt),
            true,
        ),
        0x0A => op("RDMA_WRITE_ONLY", Write, Only, E.with(Reth), true),
        0x0B => op(
            "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            Write,
            Only,
            E.with(Reth).with(ImmDt),
            true,
        ),
        0x0C => op("RDMA_READ_REQUEST", ReadRequest, Only, E.with(Reth), false),
        0x0D => op(
            "RDMA_READ_RESPONSE_FIRST",
            ReadResponse,
            First,
            E.with(Aeth),
            true,
        ),
        0x0E => op("RDMA_READ_RESPONSE_MIDDLE", ReadResponse, Middle, E, true),
        0x0F => op(
            "RDMA_READ_RESPONSE_LAST",
            ReadResponse,
            Last,
            E.with(Aeth),
            true,
        ),
        0x10 => op(
            "RDMA_READ_RESPONSE_ONLY",
            ReadResponse,
            Only,
            E.with(Aeth),
            true,
        ),
        0x11 => op("ACKNOWLEDGE", Ack, Only, E.with(Aeth), false),
        0x12 => op(
            "ATOMIC_ACKNOWLEDGE",
            AtomicAck,
            Only,
            E.with(Aeth).with(AtomicAckEth),
            false,
        ),
        0x13 => op("COMPARE_SWAP", Atomic, Only, E.with(AtomicEth), false),
        0x14 => op("FETCH_ADD", Atomic, Only, E.with(AtomicEth), false),
        0x16 => op("SEND_LAST_WITH_INVALIDATE", Send, Last, E.with(Ieth), true),
        0x17 => op("SEND_ONLY_WITH_INVALIDATE", Send, Only, E.with(Ieth), true),
        0x1C => op("FLUSH", Flush, Only, E.with(Feth).with(Reth), false),
        0x1D => op("ATOMIC_WRITE", AtomicWrite, Only, E.with(Reth), true),
        _ => None,
    }
}

impl Kind {
    /// Whether packets of this kind are responses.
    pub const fn is_response(self) -> bool {
        matches!(self, Self::ReadResponse | Self::Ack | Self::AtomicAck)
    }
}

const fn build(code: u8) -> Option<OpcodeInfo> {
    use ExtHeader::*;
    let low = code & 0x1f;
    let (transport, o) = match code >> 5 {
        0 => match ops(low) {
            Some(o) => (Transport::Rc, o),
            None => return None,
        },
        1 if low <= 0x0b => match ops(low) {
            Some(o) => (Transport::Uc, o),
            None => return None,
        },
        2 if low <= 0x14 => match ops(low) {
            Some(o) => {
                let pre = if o.kind.is_response() {
                    E.with(Rdeth)
                } else {
                    E.with(Rdeth).with(Deth)
                };
                let headers = ExtSet(pre.0 | o.headers.0);
                (Transport::Rd, Op { headers, ..o })
            }
            None => return None,
        },
        2 if low == 0x15 => (
            Transport::Rd,
            Op {
                name: "RESYNC",
                kind: Kind::Resync,
                position: Position::Only,
                headers: E.with(Rdeth).with(Deth),
                payload: false,
            },
        ),
        3 if low == 0x04 || low == 0x05 => match ops(low) {
            Some(o) => {
                let headers = ExtSet(o.headers.0 | Deth.bit());
                (Transport::Ud, Op { headers, ..o })
            }
            None => return None,
        },
        4 if low == 0x01 => (
            Transport::Cnp,
            Op {
                name: "CNP",
                kind: Kind::Cnp,
                position: Position::Only,
                headers: E.with(CnpReserved),
                payload: false,
            },
        ),
        5 if low <= 0x17 => match ops(low) {
            Some(o) => {
                let headers = if o.kind.is_response() {
                    o.headers
                } else {
                    ExtSet(o.headers.0 | Xrceth.bit())
                };
                (Transport::Xrc, Op { headers, ..o })
            }
            None => return None,
        },
        _ => return None,
    };
    let headers = o.headers;
    let mut offsets = [u8::MAX; 11];
    let mut i = 0;
    while i < ExtHeader::ALL.len() {
        if let Some(off) = headers.offset(ExtHeader::ALL[i]) {
            offsets[i] = off as u8;
        }
        i += 1;
    }
    let immediate = headers.contains(ImmDt);
    let consumes_recv = match o.kind {
        Kind::Send => o.position.starts(),
        Kind::Write => immediate,
        _ => false,
    };
    Some(OpcodeInfo {
        name: NAMES[code as usize],
        operation: o.name,
        transport,
        headers,
        payload: o.payload,
        response: o.kind.is_response(),
        kind: o.kind,
        position: o.position,
        immediate,
        invalidate: headers.contains(Ieth),
        consumes_recv,
        headers_len: headers.len(),
        offsets,
    })
}

const TABLE: [Option<OpcodeInfo>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = build(i as u8);
        i += 1;
    }
    t
};

impl Opcode {
    pub const RC_SEND_FIRST: Self = Self(0x00);
    pub const RC_SEND_MIDDLE: Self = Self(0x01);
    pub const RC_SEND_LAST: Self = Self(0x02);
    pub const RC_SEND_LAST_WITH_IMMEDIATE: Self = Self(0x03);
    pub const RC_SEND_ONLY: Self = Self(0x04);
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x05);
    pub const RC_RDMA_WRITE_FIRST: Self = Self(0x06);
    pub const RC_RDMA_WRITE_MIDDLE: Self = Self(0x07);
    pub const RC_RDMA_WRITE_LAST: Self = Self(0x08);
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Self = Self(0x09);
    pub const RC_RDMA_WRITE_ONLY: Self = Self(0x0a);
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Self = Self(0x0b);
    pub const RC_RDMA_READ_REQUEST: Self = Self(0x0c);
    pub const RC_RDMA_READ_RESPONSE_FIRST: Self = Self(0x0d);
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: Self = Self(0x0e);
    pub const RC_RDMA_READ_RESPONSE_LAST: Self = Self(0x0f);
    pub const RC_RDMA_READ_RESPONSE_ONLY: Self = Self(0x10);
    pub const RC_ACKNOWLEDGE: Self = Self(0x11);
    pub const RC_ATOMIC_ACKNOWLEDGE: Self = Self(0x12);
    pub const RC_COMPARE_SWAP: Self = Self(0x13);
    pub const RC_FETCH_ADD: Self = Self(0x14);
    pub const RC_SEND_LAST_WITH_INVALIDATE: Self = Self(0x16);
    pub const RC_SEND_ONLY_WITH_INVALIDATE: Self = Self(0x17);
    pub const RC_FLUSH: Self = Self(0x1c);
    pub const RC_ATOMIC_WRITE: Self = Self(0x1d);
    pub const UC_SEND_ONLY: Self = Self(0x24);
    pub const UC_RDMA_WRITE_ONLY: Self = Self(0x2a);
    pub const UD_SEND_ONLY: Self = Self(0x64);
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: Self = Self(0x65);
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

/// Full opcode names indexed by code; `""` where the code is unknown. A const
/// fn cannot concatenate strings, so they are spelled out; the tests check
/// them against the transport and operation of each entry.
const NAMES: [&str; 256] = {
    let mut n = [""; 256];
    let rc = [
        "RC_SEND_FIRST",
        "RC_SEND_MIDDLE",
        "RC_SEND_LAST",
        "RC_SEND_LAST_WITH_IMMEDIATE",
        "RC_SEND_ONLY",
        "RC_SEND_ONLY_WITH_IMMEDIATE",
        "RC_RDMA_WRITE_FIRST",
        "RC_RDMA_WRITE_MIDDLE",
        "RC_RDMA_WRITE_LAST",
        "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "RC_RDMA_WRITE_ONLY",
        "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "RC_RDMA_READ_REQUEST",
        "RC_RDMA_READ_RESPONSE_FIRST",
        "RC_RDMA_READ_RESPONSE_MIDDLE",
        "RC_RDMA_READ_RESPONSE_LAST",
        "RC_RDMA_READ_RESPONSE_ONLY",
        "RC_ACKNOWLEDGE",
        "RC_ATOMIC_ACKNOWLEDGE",
        "RC_COMPARE_SWAP",
        "RC_FETCH_ADD",
        "",
        "RC_SEND_LAST_WITH_INVALIDATE",
        "RC_SEND_ONLY_WITH_INVALIDATE",
        "",
        "",
        "",
        "",
        "RC_FLUSH",
        "RC_ATOMIC_WRITE",
    ];
    let uc = [
        "UC_SEND_FIRST",
        "UC_SEND_MIDDLE",
        "UC_SEND_LAST",
        "UC_SEND_LAST_WITH_IMMEDIATE",
        "UC_SEND_ONLY",
        "UC_SEND_ONLY_WITH_IMMEDIATE",
        "UC_RDMA_WRITE_FIRST",
        "UC_RDMA_WRITE_MIDDLE",
        "UC_RDMA_WRITE_LAST",
        "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "UC_RDMA_WRITE_ONLY",
        "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    ];
    let rd = [
        "RD_SEND_FIRST",
        "RD_SEND_MIDDLE",
        "RD_SEND_LAST",
        "RD_SEND_LAST_WITH_IMMEDIATE",
        "RD_SEND_ONLY",
        "RD_SEND_ONLY_WITH_IMMEDIATE",
        "RD_RDMA_WRITE_FIRST",
        "RD_RDMA_WRITE_MIDDLE",
        "RD_RDMA_WRITE_LAST",
        "RD_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "RD_RDMA_WRITE_ONLY",
        "RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "RD_RDMA_READ_REQUEST",
        "RD_RDMA_READ_RESPONSE_FIRST",
        "RD_RDMA_READ_RESPONSE_MIDDLE",
        "RD_RDMA_READ_RESPONSE_LAST",
        "RD_RDMA_READ_RESPONSE_ONLY",
        "RD_ACKNOWLEDGE",
        "RD_ATOMIC_ACKNOWLEDGE",
        "RD_COMPARE_SWAP",
        "RD_FETCH_ADD",
        "RD_RESYNC",
    ];
    let xrc = [
        "XRC_SEND_FIRST",
        "XRC_SEND_MIDDLE",
        "XRC_SEND_LAST",
        "XRC_SEND_LAST_WITH_IMMEDIATE",
        "XRC_SEND_ONLY",
        "XRC_SEND_ONLY_WITH_IMMEDIATE",
        "XRC_RDMA_WRITE_FIRST",
        "XRC_RDMA_WRITE_MIDDLE",
        "XRC_RDMA_WRITE_LAST",
        "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "XRC_RDMA_WRITE_ONLY",
        "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "XRC_RDMA_READ_REQUEST",
        "XRC_RDMA_READ_RESPONSE_FIRST",
        "XRC_RDMA_READ_RESPONSE_MIDDLE",
        "XRC_RDMA_READ_RESPONSE_LAST",
        "XRC_RDMA_READ_RESPONSE_ONLY",
        "XRC_ACKNOWLEDGE",
        "XRC_ATOMIC_ACKNOWLEDGE",
        "XRC_COMPARE_SWAP",
        "XRC_FETCH_ADD",
        "",
        "XRC_SEND_LAST_WITH_INVALIDATE",
        "XRC_SEND_ONLY_WITH_INVALIDATE",
    ];
    let mut i = 0;
    while i < rc.len() {
        n[i] = rc[i];
        i += 1;
    }
    i = 0;
    while i < uc.len() {
        n[0x20 + i] = uc[i];
        i += 1;
    }
    i = 0;
    while i < rd.len() {
        n[0x40 + i] = rd[i];
        i += 1;
    }
    n[0x64] = "UD_SEND_ONLY";
    n[0x65] = "UD_SEND_ONLY_WITH_IMMEDIATE";
    n[0x81] = "CNP";
    i = 0;
    while i < xrc.len() {
        n[0xa0 + i] = xrc[i];
        i += 1;
    }
    n
};

#[cfg(test)]
mod tests {
    use super::*;
    use ExtHeader::*;

    /// The meaning columns against the names, read independently.
    #[test]
    fn meanings_agree_with_names() {
        for o in Opcode::all() {
            let i = o.info().unwrap();
            let n = i.operation;
            let position = if n.contains("FIRST") {
                Position::First
            } else if n.contains("MIDDLE") {
                Position::Middle
            } else if n.contains("LAST") {
                Position::Last
            } else {
                Position::Only
            };
            assert_eq!(i.position, position, "{}", i.name);
            let kind = match n {
                _ if n.starts_with("SEND") => Kind::Send,
                _ if n.starts_with("RDMA_WRITE") => Kind::Write,
                "RDMA_READ_REQUEST" => Kind::ReadRequest,
                _ if n.starts_with("RDMA_READ_RESPONSE") => Kind::ReadResponse,
                "COMPARE_SWAP" | "FETCH_ADD" => Kind::Atomic,
                "ACKNOWLEDGE" => Kind::Ack,
                "ATOMIC_ACKNOWLEDGE" => Kind::AtomicAck,
                "FLUSH" => Kind::Flush,
                "ATOMIC_WRITE" => Kind::AtomicWrite,
                "RESYNC" => Kind::Resync,
                "CNP" => Kind::Cnp,
                _ => panic!("{n}"),
            };
            assert_eq!(i.kind, kind, "{}", i.name);
            assert_eq!(i.immediate, n.contains("IMMEDIATE"), "{}", i.name);
            assert_eq!(i.invalidate, n.contains("INVALIDATE"), "{}", i.name);
            let consumes = (kind == Kind::Send && position.starts())
                || (kind == Kind::Write && n.contains("IMMEDIATE"));
            assert_eq!(i.consumes_recv, consumes, "{}", i.name);
            assert_eq!(
                i.response,
                n.contains("RESPONSE") || n.contains("ACKNOWLEDGE")
            );
        }
    }

    #[test]
    fn an_operation_moves_between_transports() {
        let uc = Opcode::RC_SEND_FIRST.in_transport(Transport::Uc);
        assert_eq!(uc.name(), Some("UC_SEND_FIRST"));
        let ud = Opcode::RC_SEND_ONLY_WITH_IMMEDIATE.in_transport(Transport::Ud);
        assert_eq!(ud, Opcode::UD_SEND_ONLY_WITH_IMMEDIATE);
        assert_eq!(
            Opcode::RC_RDMA_READ_REQUEST
                .in_transport(Transport::Uc)
                .info(),
            None
        );
    }

    #[test]
    fn names_agree_with_operations() {
        for o in Opcode::all() {
            let info = o.info().unwrap();
            assert!(!info.name.is_empty(), "{:#x}", o.0);
            assert!(
                info.name.starts_with(info.transport.name()),
                "{}",
                info.name
            );
            assert_eq!(
                info.name,
                format!("{}_{}", info.transport.name(), info.operation).replace("CNP_CNP", "CNP")
            );
        }
        for c in 0..=255u8 {
            assert_eq!(
                NAMES[c as usize].is_empty(),
                Opcode(c).info().is_none(),
                "{c:#x}"
            );
        }
    }

    #[test]
    fn known_layouts() {
        let h = |c: u8| Opcode(c).info().unwrap().headers;
        assert_eq!(h(0x0b), E.with(Reth).with(ImmDt));
        assert_eq!(h(0x12).offset(AtomicAckEth), Some(4));
        assert_eq!(h(0x4b).offset(Reth), Some(12));
        assert_eq!(h(0x4b).len(), 4 + 8 + 16 + 4);
        assert_eq!(h(0x51), E.with(Rdeth).with(Aeth));
        assert_eq!(h(0xaa).iter().collect::<Vec<_>>(), vec![Xrceth, Reth]);
        assert_eq!(h(0xb2), E.with(Aeth).with(AtomicAckEth));
        assert_eq!(h(0x1c).iter().collect::<Vec<_>>(), vec![Feth, Reth]);
        assert_eq!(h(0x81).len(), 16);
        for o in Opcode::all() {
            let i = o.info().unwrap();
            assert_eq!(i.headers_len, i.headers.len());
            for e in ExtHeader::ALL {
                assert_eq!(i.offset(e), i.headers.offset(e), "{o} {e:?}");
            }
        }
        assert_eq!(h(0x65).iter().collect::<Vec<_>>(), vec![Deth, ImmDt]);
    }

    #[test]
    fn unknown_opcodes() {
        for c in [
            0x15, 0x18, 0x1e, 0x1f, 0x2c, 0x30, 0x56, 0x60, 0x66, 0x80, 0xb5, 0xc0, 0xff,
        ] {
            assert!(Opcode(c).info().is_none(), "{c:#x}");
        }
        // 85 = RC 25 + UC 12 + RD 22 + UD 2 + CNP 1 + XRC 23 (0xb5 reserved).
        assert_eq!(Opcode::all().count(), 25 + 12 + 22 + 2 + 1 + 23);
    }
}
