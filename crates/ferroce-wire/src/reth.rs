//! RDMA Extended Transport Header (IBA vol. 1 §9.3.3), 16 bytes: virtual
//! address, R_Key and DMA length of an RDMA WRITE, READ or FLUSH.

use crate::field::{Field, read_u32, read_u64, write_u32, write_u64};
use crate::view::header_view;
use crate::{Header, Result};

const VA: Field = 0..8;
const RKEY: Field = 8..12;
const DMA_LEN: Field = 12..16;

header_view!(
    /// A view over a RETH.
    Reth,
    Header::Reth,
    16
);

impl<T: AsRef<[u8]>> Reth<T> {
    /// RETH's VA: the remote virtual address of the transfer.
    pub fn va(&self) -> u64 {
        read_u64(self.buffer.as_ref(), VA)
    }
    /// RETH's R_Key: the remote key of the memory region.
    pub fn rkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), RKEY)
    }
    /// RETH's DMA Length: the bytes of the whole RDMA message, 0 to 2^31.
    pub fn dma_len(&self) -> u32 {
        read_u32(self.buffer.as_ref(), DMA_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Reth<T> {
    /// Sets the VA.
    pub fn set_va(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), VA, v);
    }
    /// Sets the R_Key.
    pub fn set_rkey(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), RKEY, v);
    }
    /// Sets the DMA Length.
    pub fn set_dma_len(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), DMA_LEN, v);
    }
}

/// The content of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RethRepr {
    /// VA: remote virtual address.
    pub va: u64,
    /// R_Key: remote key.
    pub rkey: u32,
    /// DMA Length: bytes of the whole message.
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads a RETH; fails only if the buffer is shorter than 16 bytes.
    pub fn parse<T: AsRef<[u8]>>(v: &Reth<T>) -> Result<Self> {
        v.check_len()?;
        Ok(Self {
            va: v.va(),
            rkey: v.rkey(),
            dma_len: v.dma_len(),
        })
    }
    /// Writes the RETH; fails only if the buffer is shorter than 16 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Reth<T>) -> Result<()> {
        v.check_len()?;
        v.set_va(self.va);
        v.set_rkey(self.rkey);
        v.set_dma_len(self.dma_len);
        Ok(())
    }
}
