//! The one error type of the wire layer.
//!
//! Every way a packet can be malformed has its own variant, and each names the
//! header or field at fault, so that a dropped packet can be counted and
//! reported precisely. No variant allocates.

use core::fmt;

/// A header or trailer of a RoCE / InfiniBand packet, as named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// The Ethernet II header (IEEE 802.3).
    Ethernet,
    /// An 802.1Q VLAN tag.
    Vlan,
    /// The IPv4 header of a RoCE v2 packet.
    Ipv4,
    /// The IPv6 header of a RoCE v2 packet.
    Ipv6,
    /// The UDP header of a RoCE v2 packet (destination port 4791).
    Udp,
    /// The Local Route Header of native InfiniBand (IBA 7.7).
    Lrh,
    /// The Global Route Header of RoCE v1 and routed IB (IBA 8.3).
    Grh,
    /// The Base Transport Header (IBA 9.2).
    Bth,
    /// The Reliable Datagram Extended Transport Header (IBA 9.3.1).
    Rdeth,
    /// The Datagram Extended Transport Header (IBA 9.3.2).
    Deth,
    /// The XRC Extended Transport Header (Annex A14).
    Xrceth,
    /// The Flush Extended Transport Header of FLUSH (IBA 1.5).
    Feth,
    /// The RDMA Extended Transport Header (IBA 9.3.3).
    Reth,
    /// The Atomic Extended Transport Header (IBA 9.3.4).
    AtomicEth,
    /// The ACK Extended Transport Header (IBA 9.3.5).
    Aeth,
    /// The Atomic ACK Extended Transport Header (IBA 9.3.6).
    AtomicAckEth,
    /// The Immediate Data header (ImmDt).
    ImmDt,
    /// The Invalidate Extended Transport Header (IETH).
    Ieth,
    /// The 16 reserved bytes after the BTH of a RoCE v2 CNP (Annex A17.9.3).
    CnpReserved,
    /// The 4-byte Invariant CRC trailer (IBA 7.8.1).
    Icrc,
    /// The 2-byte Variant CRC trailer of native IB (IBA 7.8.2).
    Vcrc,
    /// A management datagram (IBA 13.4).
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
        /// The header (or trailer) that does not fit.
        header: Header,
        /// Bytes it needs, counted from where it starts.
        needed: usize,
        /// Bytes present from where it starts.
        available: usize,
    },
    /// A length field disagrees with the bytes present (`field` names it).
    BadLength {
        /// The length field, e.g. `"udp.length"`.
        field: &'static str,
        /// The length the field states, in bytes.
        claimed: usize,
        /// The length the bytes present allow, in bytes.
        actual: usize,
    },
    /// A version field holds a value this layer does not speak.
    BadVersion {
        /// The version field, e.g. `"bth.tver"`.
        field: &'static str,
        /// The value found.
        value: u8,
    },
    /// The GRH next-header field is not 0x1B (IBA transport).
    BadNextHeader {
        /// The NxtHdr value found.
        value: u8,
    },
    /// The BTH opcode is reserved, manufacturer specific or otherwise unknown.
    UnknownOpcode {
        /// The BTH OpCode byte.
        opcode: u8,
    },
    /// BTH PadCnt is larger than the bytes left after the headers.
    PadExceedsPayload {
        /// The BTH PadCnt (0-3).
        pad: u8,
        /// Bytes between the last extension header and the ICRC.
        available: usize,
    },
    /// The opcode carries no payload but bytes follow its headers.
    UnexpectedPayload {
        /// The BTH OpCode byte.
        opcode: u8,
        /// Bytes found after the headers.
        len: usize,
    },
    /// The invariant CRC does not match the packet.
    BadIcrc {
        /// The ICRC computed over the packet's invariant fields.
        computed: u32,
        /// The ICRC in the packet's trailer.
        received: u32,
    },
    /// The variant CRC (native InfiniBand only) does not match the packet.
    BadVcrc {
        /// The VCRC computed over the packet.
        computed: u16,
        /// The VCRC in the packet's trailer.
        received: u16,
    },
    /// The IPv4 packet is a fragment; RoCE is never fragmented.
    Fragmented,
    /// The capture holds fewer bytes than were on the wire.
    CaptureTruncated {
        /// Bytes in the capture.
        captured: usize,
        /// Bytes the headers say were sent.
        on_wire: usize,
    },
    /// A value given to an emitter does not fit its field.
    FieldOverflow {
        /// The field, e.g. `"bth.dest_qp"`.
        field: &'static str,
        /// The value that does not fit.
        value: u64,
    },
    /// An emitter was given extension headers that the opcode does not carry,
    /// or was missing one it does.
    LayoutMismatch {
        /// The BTH OpCode byte.
        opcode: u8,
        /// The extension header given without need, or needed and missing.
        header: Header,
    },
    /// The emit buffer is too small.
    BufferTooSmall {
        /// Bytes the emitted packet needs.
        needed: usize,
        /// Bytes in the buffer.
        available: usize,
    },
    /// A MAD field holds a value this decoder does not accept.
    BadMad {
        /// The MAD field, e.g. `"mad.base_version"`.
        field: &'static str,
        /// The value found.
        value: u32,
    },
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
