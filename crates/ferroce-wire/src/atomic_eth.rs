//! Atomic Extended Transport Header (IBA vol. 1 §9.3.4), 28 bytes, on
//! COMPARE SWAP and FETCH ADD requests; and the ATOMIC ACK ETH (§9.3.6),
//! 8 bytes, carrying the original remote data back.

use crate::field::{Field, read_u32, read_u64, write_u32, write_u64};
use crate::view::header_view;
use crate::{Header, Result};

const VA: Field = 0..8;
const RKEY: Field = 8..12;
const SWAP_ADD: Field = 12..20;
const COMPARE: Field = 20..28;
const ORIG: Field = 0..8;

header_view!(
    /// A view over an AtomicETH.
    AtomicEth,
    Header::AtomicEth,
    28
);

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// AtomicETH's VA: the remote virtual address, 8-byte aligned.
    pub fn va(&self) -> u64 {
        read_u64(self.buffer.as_ref(), VA)
    }
    /// AtomicETH's R_Key: the remote key of the memory region.
    pub fn rkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), RKEY)
    }
    /// The swap value (COMPARE SWAP) or the addend (FETCH ADD).
    /// AtomicETH's Swap (Or Add) Data: the value to swap in, or to add.
    pub fn swap_add(&self) -> u64 {
        read_u64(self.buffer.as_ref(), SWAP_ADD)
    }
    /// The compare value (COMPARE SWAP only).
    /// AtomicETH's Compare Data (COMPARE SWAP only).
    pub fn compare(&self) -> u64 {
        read_u64(self.buffer.as_ref(), COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicEth<T> {
    /// Sets the VA.
    pub fn set_va(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), VA, v);
    }
    /// Sets the R_Key.
    pub fn set_rkey(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), RKEY, v);
    }
    /// Sets the Swap (Or Add) Data.
    pub fn set_swap_add(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), SWAP_ADD, v);
    }
    /// Sets the Compare Data.
    pub fn set_compare(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), COMPARE, v);
    }
}

/// The content of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicEthRepr {
    /// VA: remote virtual address.
    pub va: u64,
    /// R_Key: remote key.
    pub rkey: u32,
    /// Swap (Or Add) Data.
    pub swap_add: u64,
    /// Compare Data.
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Reads an AtomicETH; fails only if the buffer is shorter than 28 bytes.
    pub fn parse<T: AsRef<[u8]>>(v: &AtomicEth<T>) -> Result<Self> {
        v.check_len()?;
        Ok(Self {
            va: v.va(),
            rkey: v.rkey(),
            swap_add: v.swap_add(),
            compare: v.compare(),
        })
    }
    /// Writes the AtomicETH; fails only if the buffer is shorter than 28 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut AtomicEth<T>) -> Result<()> {
        v.check_len()?;
        v.set_va(self.va);
        v.set_rkey(self.rkey);
        v.set_swap_add(self.swap_add);
        v.set_compare(self.compare);
        Ok(())
    }
}

header_view!(
    /// A view over an AtomicAckETH.
    AtomicAckEth,
    Header::AtomicAckEth,
    8
);

impl<T: AsRef<[u8]>> AtomicAckEth<T> {
    /// The remote data as it was before the atomic operation.
    pub fn orig(&self) -> u64 {
        read_u64(self.buffer.as_ref(), ORIG)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicAckEth<T> {
    /// Sets the original remote data.
    pub fn set_orig(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), ORIG, v);
    }
}
