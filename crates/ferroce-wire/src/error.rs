//! The one error type of the wire layer.
//!
//! Every way a packet can be malformed has its own variant, and each names the
//! header or field at fault, so that a dropped packet can be counted and
//! reported precisely. No variant allocates.

use core::fmt;

/// A header or trailer of a RoCE / InfiniBand packet, as named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    Ethernet,
    Vlan,
    Ipv4,
    Ipv6,
    Udp,
    Lrh,
    Grh,
    Bth,
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
    Icrc,
    Vcrc,
    Mad,
}

impl Header {
    /// The short lower-case name used in messages and JSON (`"reth"`, `"atomiceth"` ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ethernet => "ethernet",
            Self::Vlan => "vlan",
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
            Self::Udp => "udp",
            Self::Lrh => "lrh",
            Self::Grh => "grh",
            Self::Bth => "bth",
            Self::Rdeth => "rdeth",
            Self::Deth => "deth",
            Self::Xrceth => "xrceth",
            Self::Feth => "feth",
            Self::Reth => "reth",
            Self::AtomicEth => "atomiceth",
            Self::Aeth => "aeth",
            Self::AtomicAckEth => "atomicacketh",
            Self::ImmDt => "immdt",
            Self::Ieth => "ieth",
            Self::CnpReserved => "cnp_reserved",
            Self::Icrc => "icrc",
            Self::Vcrc => "vcrc",
            Self::Mad => "mad",
        }
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a packet was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Fewer bytes than `header` needs.
    Truncated {
        header: Header,
        needed: usize,
        available: usize,
    },
    /// A length field disagrees with the bytes present (`field` names it).
    BadLength {
        field: &'static str,
        claimed: usize,
        actual: usize,
    },
    /// A version field holds a value this layer does not speak.
    BadVersion { field: &'static str, value: u8 },
    /// The GRH next-header field is not 0x1B (IBA transport).
    BadNextHeader { value: u8 },
    /// The BTH opcode is reserved, manufacturer specific or otherwise unknown.
    UnknownOpcode { opcode: u8 },
    /// BTH PadCnt is larger than the bytes left after the headers.
    PadExceedsPayload { pad: u8, available: usize },
    /// The opcode carries no payload but bytes follow its headers.
    UnexpectedPayload { opcode: u8, len: usize },
    /// The invariant CRC does not match the packet.
    BadIcrc { computed: u32, received: u32 },
    /// The variant CRC (native InfiniBand only) does not match the packet.
    BadVcrc { computed: u16, received: u16 },
    /// The IPv4 packet is a fragment; RoCE is never fragmented.
    Fragmented,
    /// The capture holds fewer bytes than were on the wire.
    CaptureTruncated { captured: usize, on_wire: usize },
    /// A value given to an emitter does not fit its field.
    FieldOverflow { field: &'static str, value: u64 },
    /// An emitter was given extension headers that the opcode does not carry,
    /// or was missing one it does.
    LayoutMismatch { opcode: u8, header: Header },
    /// The emit buffer is too small.
    BufferTooSmall { needed: usize, available: usize },
    /// A MAD field holds a value this decoder does not accept.
    BadMad { field: &'static str, value: u32 },
}

impl Error {
    /// A short stable code, the same words `peercheck` uses where it has one
    /// (`truncated_ext_header:reth`, `pad_exceeds_payload`, ...).
    pub fn code(&self) -> String {
        match *self {
            Self::Truncated { header, .. } => match header {
                Header::Bth => "truncated_bth".into(),
                Header::Icrc => "truncated_no_icrc".into(),
                Header::Grh => "truncated_grh".into(),
                Header::Ipv4 | Header::Ipv6 => "ip_truncated".into(),
                Header::Rdeth
                | Header::Deth
                | Header::Xrceth
                | Header::Feth
                | Header::Reth
                | Header::AtomicEth
                | Header::Aeth
                | Header::AtomicAckEth
                | Header::ImmDt
                | Header::Ieth
                | Header::CnpReserved => format!("truncated_ext_header:{}", header.name()),
                other => format!("truncated_{}", other.name()),
            },
            Self::BadLength { field, .. } => match field {
                "udp.length" => "udp_length_mismatch".into(),
                "grh.paylen" => "grh_paylen_mismatch".into(),
                other => format!("bad_length:{other}"),
            },
            Self::BadVersion { field, .. } => match field {
                "bth.tver" => "bad_tver".into(),
                "grh.ipver" => "grh_bad_ipver".into(),
                other => format!("bad_version:{other}"),
            },
            Self::BadNextHeader { .. } => "grh_bad_next_header".into(),
            Self::UnknownOpcode { .. } => "unknown_opcode".into(),
            Self::PadExceedsPayload { .. } => "pad_exceeds_payload".into(),
            Self::UnexpectedPayload { .. } => "unexpected_payload".into(),
            Self::BadIcrc { .. } => "bad_icrc".into(),
            Self::BadVcrc { .. } => "bad_vcrc".into(),
            Self::Fragmented => "ip_fragment".into(),
            Self::CaptureTruncated { .. } => "truncated_capture".into(),
            Self::FieldOverflow { .. } => "field_overflow".into(),
            Self::LayoutMismatch { .. } => "layout_mismatch".into(),
            Self::BufferTooSmall { .. } => "buffer_too_small".into(),
            Self::BadMad { .. } => "bad_mad".into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated {
                header,
                needed,
                available,
            } => write!(
                f,
                "{header} truncated: needs {needed} bytes, {available} present"
            ),
            Self::BadLength {
                field,
                claimed,
                actual,
            } => write!(f, "bad {field}: says {claimed}, {actual} present"),
            Self::BadVersion { field, value } => write!(f, "bad {field}: {value}"),
            Self::BadNextHeader { value } => {
                write!(
                    f,
                    "GRH next header is {value:#04x}, not 0x1b (IBA transport)"
                )
            }
            Self::UnknownOpcode { opcode } => write!(f, "unknown BTH opcode {opcode:#04x}"),
            Self::PadExceedsPayload { pad, available } => write!(
                f,
                "BTH pad count {pad} exceeds the {available} bytes after the headers"
            ),
            Self::UnexpectedPayload { opcode, len } => write!(
                f,
                "opcode {opcode:#04x} carries no payload but {len} bytes follow its headers"
            ),
            Self::BadIcrc { computed, received } => write!(
                f,
                "bad ICRC: packet carries {received:08x}, computed {computed:08x} (wire byte order)"
            ),
            Self::BadVcrc { computed, received } => write!(
                f,
                "bad VCRC: packet carries {received:04x}, computed {computed:04x}"
            ),
            Self::Fragmented => f.write_str("IPv4 fragment (RoCE v2 is never fragmented)"),
            Self::CaptureTruncated { captured, on_wire } => write!(
                f,
                "capture truncated: {captured} of {on_wire} bytes captured"
            ),
            Self::FieldOverflow { field, value } => {
                write!(f, "value {value:#x} does not fit {field}")
            }
            Self::LayoutMismatch { opcode, header } => write!(
                f,
                "opcode {opcode:#04x} and the {header} given (or missing) disagree"
            ),
            Self::BufferTooSmall { needed, available } => write!(
                f,
                "buffer too small: needs {needed} bytes, {available} given"
            ),
            Self::BadMad { field, value } => write!(f, "bad MAD {field}: {value:#x}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of the wire layer.
pub type Result<T> = core::result::Result<T, Error>;
