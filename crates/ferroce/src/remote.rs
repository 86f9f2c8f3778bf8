//! A peer's registered memory as a value ([`RemoteRegion`]): what the
//! peer sends of its region (address, R_Key, length), how it travels out
//! of band (a stable byte encoding, serde behind the `serde` feature), and
//! bounds-checked slices of it ([`RemoteSlice`]) that WRITE, READ and
//! atomic work requests take, so no caller computes `addr + offset`.
//!
//! Offsets and lengths into regions are `u64` throughout the API, as the
//! RETH's virtual address is and as region offsets ([`crate::Sge::offset`])
//! are; one message is at most [`crate::MAX_MSG_SIZE`] (8 MiB, as rxe; IBA
//! allows 2 GiB), so its length ([`crate::Sge::len`],
//! [`crate::WorkCompletion::byte_len`]) stays the `u32` of ibverbs.

use core::fmt;

use crate::error::check_head;
use crate::{DecodeError, RemoteSlice, Result, VerbsError};

/// A peer's memory region, as [`MemoryRegion::remote`](crate::MemoryRegion::remote)
/// describes it for the peer.
///
/// ```no_run
/// # fn f(qp: &ferroce::QueuePair, mr: &ferroce::MemoryRegion, bytes: &[u8]) -> ferroce::Result<()> {
/// use ferroce::{RemoteRegion, SendWr};
/// let peer = RemoteRegion::from_bytes(bytes)?; // what the peer sent
/// let block = peer.at(7 * 4096, 4096)?; // refused if past its end
/// qp.post_send(SendWr::write(1, &[mr.sge(0, 4096)], block))?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RemoteRegion {
    addr: u64,
    rkey: u32,
    len: u64,
}

/// First byte of an encoded region.
const REGION_KIND: u8 = b'R';
/// The encoding this build writes and reads.
const REGION_VERSION: u8 = 1;

impl RemoteRegion {
    /// The length of [`RemoteRegion::to_bytes`]'s encoding: kind,
    /// version, two reserved, address (8), R_Key (4), length (8).
    pub const ENCODED_LEN: usize = 24;

    /// A region of `len` bytes at the peer's address `addr` under `rkey`,
    /// for a description that came by other means (another tool's
    /// exchange). Its end must fit in 64 bits.
    pub fn new(addr: u64, rkey: u32, len: u64) -> Result<Self> {
        if addr.checked_add(len).is_none() {
            return Err(VerbsError::BadValue {
                what: "remote region end (address + length past 2^64)",
                value: addr,
            }
            .into());
        }
        Ok(Self { addr, rkey, len })
    }

    /// A region this device registered (the engine places regions so
    /// that their end fits in 64 bits).
    pub(crate) const fn registered(addr: u64, rkey: u32, len: u64) -> Self {
        Self { addr, rkey, len }
    }

    /// The peer's address of the region's first byte.
    pub const fn addr(&self) -> u64 {
        self.addr
    }

    /// The R_Key the peer registered it under.
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Bytes in the region.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region holds no bytes.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `len` bytes at `offset`; refused unless they lie inside the
    /// region. For an atomic, `at(offset, 8)` with `offset` a multiple of
    /// 8 (and the region's address aligned, as registered regions are).
    pub fn at(&self, offset: u64, len: u64) -> Result<RemoteSlice> {
        // Checked throughout: a region decoded by serde was not checked
        // for an end past 2^64.
        let end = offset.checked_add(len).filter(|&end| end <= self.len);
        match end.and_then(|_| self.addr.checked_add(offset)) {
            Some(addr) => Ok(RemoteSlice::new(addr, self.rkey, len)),
            None => Err(VerbsError::OutsideRemote {
                offset,
                len,
                size: self.len,
            }
            .into()),
        }
    }

    /// The whole region as one slice.
    pub const fn whole(&self) -> RemoteSlice {
        RemoteSlice::new(self.addr, self.rkey, self.len)
    }

    /// The stable encoding (version 1, 24 bytes, network byte order):
    /// `'R'`, version, 0, 0, address, R_Key, length.
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let mut b = [0; Self::ENCODED_LEN];
        b[0] = REGION_KIND;
        b[1] = REGION_VERSION;
        b[4..12].copy_from_slice(&self.addr.to_be_bytes());
        b[12..16].copy_from_slice(&self.rkey.to_be_bytes());
        b[16..24].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Reads [`RemoteRegion::to_bytes`]'s encoding; refuses another kind
    /// or version, a wrong length, a region whose end passes 2^64.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Self, DecodeError> {
        check_head(
            bytes,
            REGION_KIND,
            "remote region",
            REGION_VERSION,
            Self::ENCODED_LEN,
        )?;
        let addr = u64::from_be_bytes(bytes[4..12].try_into().unwrap());
        let rkey = u32::from_be_bytes(bytes[12..16].try_into().unwrap());
        let len = u64::from_be_bytes(bytes[16..24].try_into().unwrap());
        if addr.checked_add(len).is_none() {
            return Err(DecodeError::BadValue {
                what: "region length (address + length past 2^64)",
                value: len,
            });
        }
        Ok(Self { addr, rkey, len })
    }
}

impl fmt::Debug for RemoteRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RemoteRegion {{ addr: {:#x}, rkey: {:#x}, len: {} }}",
            self.addr, self.rkey, self.len
        )
    }
}
