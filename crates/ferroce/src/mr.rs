//! Registered memory regions, and the application's access to their
//! bytes.

use std::sync::Arc;

use crate::driver::Shared;
use crate::{MrInfo, Result, Sge, VerbsError};

/// A registered memory region.
#[derive(Debug)]
pub struct MemoryRegion {
    pub(crate) shared: Arc<Shared>,
    pub(crate) info: MrInfo,
}

impl MemoryRegion {
    /// The key local work requests name the region by ([`Sge::lkey`]).
    pub fn lkey(&self) -> u32 {
        self.info.lkey
    }
    /// The key a peer names the region by (in [`MemoryRegion::remote`]).
    pub fn rkey(&self) -> u32 {
        self.info.rkey
    }
    /// The address a peer puts in RDMA requests for byte 0 of the region.
    pub fn addr(&self) -> u64 {
        self.info.addr
    }
    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.info.len
    }
    /// Whether the region holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.info.len == 0
    }

    /// A scatter/gather element for `len` bytes at `offset`.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            lkey: self.info.lkey,
            offset,
            len,
        }
    }

    /// Runs `f` on the region's bytes, with remote access held off meanwhile.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let mut ep = self.shared.engine();
        Ok(f(ep.mr_bytes_mut(self.info.lkey)?))
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.with_bytes(|b| {
            let dst = b
                .get_mut(offset..offset + data.len())
                .ok_or(VerbsError::BadValue {
                    what: "write past the end of the region",
                    value: (offset + data.len()) as u64,
                })?;
            dst.copy_from_slice(data);
            Ok(())
        })?
    }

    /// Copies `out.len()` bytes from the region at `offset`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.with_bytes(|b| {
            let src = b
                .get(offset..offset + out.len())
                .ok_or(VerbsError::BadValue {
                    what: "read past the end of the region",
                    value: (offset + out.len()) as u64,
                })?;
            out.copy_from_slice(src);
            Ok(())
        })?
    }

    /// The region as its peer addresses it (address, R_Key, length): send
    /// it out of band ([`RemoteRegion::to_bytes`](crate::RemoteRegion::to_bytes))
    /// and the peer's WRITEs, READs and atomics take slices of it.
    pub fn remote(&self) -> crate::RemoteRegion {
        crate::RemoteRegion::registered(self.addr(), self.rkey(), self.len() as u64)
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let _ = self.shared.engine().dereg_mr(self.info.lkey);
    }
}
