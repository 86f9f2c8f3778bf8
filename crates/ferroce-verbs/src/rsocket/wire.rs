//! What rsockets put on the wire, as rdma-core 44's librdmacm does:
//!
//! * the connection's private data ([`ConnData`], 40 bytes: version 1,
//!   flags, receive credits, the target SGL array and the first half of
//!   the receive buffer, both as [`Sge`]s in network order);
//! * the 32-bit immediate of every RDMA WRITE with immediate ([`Msg`]):
//!   an op in bits 31..29 and its data (a length, a sequence number, an
//!   index or a control code) in bits 28..0;
//! * the 16-byte [`Sge`] a credit update writes into the peer's target SGL
//!   array and the 24-byte [`IoMapEntry`] an `riomap` writes into its
//!   iomap table, both in the writer's byte order (little-endian here; a
//!   peer that says it is big-endian gets them swapped).

/// Mask of a message's data bits.
const DATA_MASK: u32 = (1 << 29) - 1;

/// The op of a message (bits 31..29 of the immediate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Stream data: the data is its length in bytes.
    Data,
    /// A direct `riowrite`: local accounting only, never sent as an immediate.
    Write,
    /// A credit update: the data is the sequence number the peer may send up to.
    Sgl,
    /// An iomap entry was written: the data is its index.
    IoMapSgl,
    /// A control message: the data is a [`Ctrl`] code.
    Ctrl,
    /// Any other op (reserved): ignored.
    Reserved(u8),
}

impl Op {
    fn code(self) -> u32 {
        match self {
            Self::Data => 0,
            Self::Write => 2,
            Self::Sgl => 4,
            Self::IoMapSgl => 6,
            Self::Ctrl => 7,
            Self::Reserved(c) => u32::from(c & 7),
        }
    }

    fn from_code(c: u32) -> Self {
        match c {
            0 => Self::Data,
            2 => Self::Write,
            4 => Self::Sgl,
            6 => Self::IoMapSgl,
            7 => Self::Ctrl,
            other => Self::Reserved(other as u8),
        }
    }
}

/// Control codes (`Op::Ctrl`'s data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctrl {
    /// The sender closed both directions.
    Disconnect,
    /// The sender is alive (sent while SO_KEEPALIVE is on).
    Keepalive,
    /// The sender closed its sending direction.
    Shutdown,
}

impl Ctrl {
    /// Its code in a message.
    pub fn code(self) -> u32 {
        match self {
            Self::Disconnect => 0,
            Self::Keepalive => 1,
            Self::Shutdown => 2,
        }
    }

    /// The code's meaning, if it has one.
    pub fn from_code(c: u32) -> Option<Self> {
        match c {
            0 => Some(Self::Disconnect),
            1 => Some(Self::Keepalive),
            2 => Some(Self::Shutdown),
            _ => None,
        }
    }
}

/// One message: the immediate of a WRITE, also a send's `wr_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub op: Op,
    pub data: u32,
}

impl Msg {
    pub fn new(op: Op, data: u32) -> Self {
        Self {
            op,
            data: data & DATA_MASK,
        }
    }

    /// The immediate in host order (the C ABI's `imm_data` is its
    /// big-endian form).
    pub fn encode(self) -> u32 {
        (self.op.code() << 29) | (self.data & DATA_MASK)
    }

    pub fn decode(imm: u32) -> Self {
        Self {
            op: Op::from_code(imm >> 29),
            data: imm & DATA_MASK,
        }
    }
}

/// `struct rs_sge`: a remote buffer (address, rkey, length).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub key: u32,
    pub length: u32,
}

impl Sge {
    pub const LEN: usize = 16;

    /// In memory as the writer lays it out (`swap`: the reader's byte order
    /// differs, so the fields go big-endian).
    pub fn to_bytes(self, swap: bool) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        if swap {
            b[..8].copy_from_slice(&self.addr.to_be_bytes());
            b[8..12].copy_from_slice(&self.key.to_be_bytes());
            b[12..].copy_from_slice(&self.length.to_be_bytes());
        } else {
            b[..8].copy_from_slice(&self.addr.to_le_bytes());
            b[8..12].copy_from_slice(&self.key.to_le_bytes());
            b[12..].copy_from_slice(&self.length.to_le_bytes());
        }
        b
    }

    /// As a little-endian host reads what a peer wrote in its own order.
    pub fn from_bytes(b: &[u8; Self::LEN]) -> Self {
        Self {
            addr: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            key: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
            length: u32::from_le_bytes(b[12..].try_into().expect("4 bytes")),
        }
    }

    fn to_be(self) -> [u8; Self::LEN] {
        self.to_bytes(true)
    }

    fn from_be(b: &[u8]) -> Self {
        Self {
            addr: u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            key: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            length: u32::from_be_bytes(b[12..16].try_into().expect("4 bytes")),
        }
    }
}

/// `struct rs_iomap`: a mapping of the peer's `riomap`, at `offset` in
/// its iomap space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoMapEntry {
    pub offset: u64,
    pub sge: Sge,
}

impl IoMapEntry {
    pub const LEN: usize = 24;

    pub fn to_bytes(self, swap: bool) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        let off = if swap {
            self.offset.to_be_bytes()
        } else {
            self.offset.to_le_bytes()
        };
        b[..8].copy_from_slice(&off);
        b[8..].copy_from_slice(&self.sge.to_bytes(swap));
        b
    }

    pub fn from_bytes(b: &[u8; Self::LEN]) -> Self {
        Self {
            offset: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            sge: Sge::from_bytes(b[8..].try_into().expect("16 bytes")),
        }
    }
}

/// The private data's flag: the sender's host order is network order.
pub const CONN_FLAG_NET: u8 = 1 << 0;
/// The private data's flag: the sender has an iomap table after its SGL.
pub const CONN_FLAG_IOMAP: u8 = 1 << 1;
/// The only version there is.
pub const CONN_VERSION: u8 = 1;

/// `struct rs_conn_data`, the connect request's and reply's private data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnData {
    pub version: u8,
    pub flags: u8,
    /// Receive credits (the sender's receive queue depth).
    pub credits: u16,
    /// The iomap table's size, scaled ([`value_to_scale`]).
    pub target_iomap_size: u8,
    /// The target SGL array (`length` is its entry count).
    pub target_sgl: Sge,
    /// The first half of the receive buffer.
    pub data_buf: Sge,
}

impl ConnData {
    pub const LEN: usize = 40;

    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        b[0] = self.version;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.credits.to_be_bytes());
        b[7] = self.target_iomap_size;
        b[8..24].copy_from_slice(&self.target_sgl.to_be());
        b[24..40].copy_from_slice(&self.data_buf.to_be());
        b
    }

    /// None if too short or not version 1 (the peer is no rsocket).
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < Self::LEN || b[0] != CONN_VERSION {
            return None;
        }
        Some(Self {
            version: b[0],
            flags: b[1],
            credits: u16::from_be_bytes([b[2], b[3]]),
            target_iomap_size: b[7],
            target_sgl: Sge::from_be(&b[8..24]),
            data_buf: Sge::from_be(&b[24..40]),
        })
    }

    /// Whether the peer's SGL and iomap entries reach us byte-swapped.
    pub fn peer_swapped(&self) -> bool {
        (self.flags & CONN_FLAG_NET != 0) != cfg!(target_endian = "big")
    }
}

/// A size in `bits` bits: small values as they are, larger ones as a flag
/// bit and the value shifted right by `bits` (rdma-core's coarse scale).
pub fn value_to_scale(value: u32, bits: u32) -> u32 {
    let half = 1 << (bits - 1);
    if value <= half {
        value
    } else {
        half | (value >> bits)
    }
}

/// The inverse of [`value_to_scale`].
pub fn scale_to_value(value: u32, bits: u32) -> u32 {
    let half = 1 << (bits - 1);
    if value <= half {
        value
    } else {
        (value & !half) << bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_put_the_op_in_the_top_three_bits() {
        assert_eq!(Msg::new(Op::Data, 4096).encode(), 4096);
        assert_eq!(Msg::new(Op::Sgl, 400).encode(), 0x8000_0190);
        assert_eq!(Msg::new(Op::IoMapSgl, 3).encode(), 0xC000_0003);
        assert_eq!(
            Msg::new(Op::Ctrl, Ctrl::Shutdown.code()).encode(),
            0xE000_0002
        );
        for imm in [0, 5, 0x8000_0190, 0xC000_0003, 0xE000_0000, 0x2000_0001] {
            assert_eq!(Msg::decode(imm).encode(), imm);
        }
        assert_eq!(Msg::decode(0x2000_0001).op, Op::Reserved(1));
        assert_eq!(Ctrl::from_code(9), None);
    }

    #[test]
    fn conn_data_is_forty_big_endian_bytes() {
        let c = ConnData {
            version: CONN_VERSION,
            flags: CONN_FLAG_IOMAP,
            credits: 384,
            target_iomap_size: 0,
            target_sgl: Sge {
                addr: 0x1122_3344_5566_7788,
                key: 0xAABB_CCDD,
                length: 2,
            },
            data_buf: Sge {
                addr: 0x7f00_0000_1000,
                key: 7,
                length: 65536,
            },
        };
        let b = c.encode();
        assert_eq!(&b[..8], &[1, 2, 1, 0x80, 0, 0, 0, 0]);
        assert_eq!(&b[8..16], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(&b[16..20], &[0xAA, 0xBB, 0xCC, 0xDD]);
        assert_eq!(&b[20..24], &[0, 0, 0, 2]);
        assert_eq!(&b[36..40], &65536u32.to_be_bytes());
        assert_eq!(ConnData::decode(&b), Some(c));
        assert!(!c.peer_swapped());
        assert_eq!(ConnData::decode(&b[..39]), None);
        let mut v2 = b;
        v2[0] = 2;
        assert_eq!(ConnData::decode(&v2), None);
    }

    #[test]
    fn sgl_and_iomap_entries_are_in_the_writers_order() {
        let s = Sge {
            addr: 0x1000,
            key: 0x22,
            length: 0x3000,
        };
        let b = s.to_bytes(false);
        assert_eq!(&b[..8], &0x1000u64.to_le_bytes());
        assert_eq!(&b[8..12], &0x22u32.to_le_bytes());
        assert_eq!(Sge::from_bytes(&b), s);
        assert_eq!(&s.to_bytes(true)[12..], &0x3000u32.to_be_bytes());
        let e = IoMapEntry { offset: 0, sge: s };
        assert_eq!(IoMapEntry::from_bytes(&e.to_bytes(false)), e);
    }

    #[test]
    fn the_scale_is_exact_for_small_values_and_round_trips_large_ones() {
        for v in 0..=128 {
            assert_eq!(value_to_scale(v, 8), v);
            assert_eq!(scale_to_value(v, 8), v);
        }
        assert_eq!(value_to_scale(512, 8), 0x82);
        assert_eq!(scale_to_value(0x82, 8), 512);
    }
}
