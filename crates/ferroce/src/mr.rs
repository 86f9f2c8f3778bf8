//! Registered memory regions, and the application's access to their
//! bytes.
//!
//! Each region's bytes have a lock of their own, shared with the engine
//! and taken by nothing else: while the application reads or writes one
//! region, the engine goes on with every other region and every QP's ACKs
//! and responses. The engine never waits for the application either: a
//! packet for a region the application holds is set aside and taken once
//! the application lets go (see the crate README, "Memory").
//!
//! Offsets and lengths into a region are `u64`, as in [`Sge::offset`] and
//! the remote addresses peers use.

use std::sync::Arc;

use ferroce_core::Region;

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::{Access, MrInfo, MwBind, Result, Sge};

/// A registered memory region. Dropping it deregisters it: once the drop
/// returns the engine no longer reads or writes its bytes, and the bytes
/// are freed (a region on [`Backing::from_raw`](crate::Backing::from_raw) memory goes back to its
/// owner untouched).
#[derive(Debug)]
pub struct MemoryRegion {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) _device: Arc<DeviceHandle>,
    pub(crate) info: MrInfo,
    pub(crate) region: Arc<Region>,
    pub(crate) registered: bool,
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

    /// A memory window's bind onto `len` bytes at `offset` of this region,
    /// with `access` (remote rights, and [`Access::ZERO_BASED`]) for
    /// [`QueuePair::bind_mw`](crate::QueuePair::bind_mw). The region needs
    /// [`Access::MW_BIND`].
    pub fn window(&self, offset: u64, len: u64, access: Access) -> MwBind {
        MwBind {
            lkey: self.info.lkey,
            addr: self.info.addr.wrapping_add(offset),
            len,
            access,
        }
    }

    /// Runs `f` on `len` bytes at `offset`, read-only. The engine may read
    /// this region meanwhile (to send from it, or answer a peer's READ);
    /// its writes into this region (a peer's WRITE, SEND or atomic, a READ
    /// response landing) wait until `f` returns. Other regions are not
    /// affected.
    pub fn with_range<R>(&self, offset: u64, len: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        Ok(self.region.with_range(offset, len, f)?)
    }

    /// Runs `f` on `len` bytes at `offset`, writable. Every engine access
    /// to this region waits until `f` returns; other regions are not
    /// affected. (Writing a buffer a posted send is still sending from
    /// costs that packet a retransmission, and what the peer gets is either
    /// version, as with ibverbs.)
    pub fn with_range_mut<R>(
        &self,
        offset: u64,
        len: u64,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        Ok(self.region.with_range_mut(offset, len, f)?)
    }

    /// Runs `f` on the whole region, writable ([`Self::with_range_mut`]).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        self.with_range_mut(0, self.info.len as u64, f)
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.with_range_mut(offset, data.len() as u64, |dst| dst.copy_from_slice(data))
    }

    /// Copies `out.len()` bytes from the region at `offset`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        self.with_range(offset, out.len() as u64, |src| out.copy_from_slice(src))
    }

    /// Deregisters the region and gives its buffer back, without a copy:
    /// the `Vec`/`Box` given to [`ProtectionDomain::reg_mr_with`] (or the
    /// zeroed one of [`ProtectionDomain::reg_mr`]), with what peers wrote.
    /// `None` for a region on [`Backing::from_raw`](crate::Backing::from_raw) memory: that memory is
    /// its owner's again, as after a drop.
    ///
    /// [`ProtectionDomain::reg_mr_with`]: crate::ProtectionDomain::reg_mr_with
    /// [`ProtectionDomain::reg_mr`]: crate::ProtectionDomain::reg_mr
    pub fn into_inner(mut self) -> Option<Box<[u8]>> {
        self.deregister();
        let region = self.region.clone();
        drop(self);
        // The engine's share went with the deregistration and this handle's
        // other one with `self`: this is the last.
        region.into_backing().ok()?.into_box().ok()
    }

    /// `ibv_rereg_mr` without a new translation: the region moves to `pd`
    /// and/or takes `access`; its keys, address and bytes stay (rxe allows
    /// the same two changes). Refused while memory windows are bound to it.
    pub fn rereg(
        &self,
        pd: Option<&crate::ProtectionDomain>,
        access: Option<Access>,
    ) -> Result<()> {
        if pd.is_some_and(|p| !Arc::ptr_eq(&p.shared, &self.shared)) {
            return Err(crate::VerbsError::BadValue {
                what: "protection domain of another device (a region stays on its device)",
                value: 0,
            }
            .into());
        }
        Ok(self
            .shared
            .engine()
            .rereg_mr(self.info.lkey, pd.map(|p| p.handle), access)?)
    }

    /// Memory windows bound onto the region now. Dropping the region
    /// unbinds them (peers holding their R_Keys are refused from then on).
    pub fn windows_bound(&self) -> usize {
        self.shared.engine().windows_on(self.info.lkey)
    }

    fn deregister(&mut self) {
        if std::mem::take(&mut self.registered) {
            let _ = self.shared.engine().dereg_mr_unbinding(self.info.lkey);
        }
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
        self.deregister();
    }
}
