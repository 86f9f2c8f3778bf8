//! Registered memory regions, and the application's access to their
//! bytes.
//!
//! A region's bytes are shared by the application and the engine as host
//! memory is shared by the CPUs and a NIC's DMA: no lock between them.
//! The engine places a peer's WRITE, answers its READ or does its atomic
//! the moment the packet comes, whatever the application is doing with
//! the bytes; the application reads and writes them with copies
//! ([`MemoryRegion::read`], [`MemoryRegion::write`]), atomics on 8-byte
//! words, or a zero-copy volatile view ([`MemoryRegion::volatile`]), none
//! of which forms a `&[u8]` over bytes the engine may write. Ordering is
//! the application's business, as in ibverbs: a completion (or the peer's
//! message) says when a transfer's bytes are in place.
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
    /// Bytes in the region (a `u64`, as offsets into it are).
    pub fn len(&self) -> u64 {
        self.info.len as u64
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

    /// Copies `out.len()` bytes at `offset` out of the region (volatile
    /// reads: the engine may be writing them meanwhile, and nothing waits
    /// for anything).
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        Ok(self.region.read(offset, out)?)
    }

    /// Copies `data` into the region at `offset` (volatile writes). A peer
    /// writing the same bytes meanwhile, or a posted send sending from
    /// them, sees either version, byte by byte, as with ibverbs.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        Ok(self.region.write(offset, data)?)
    }

    /// A zero-copy view of `len` bytes at `offset`: scan, checksum or fill
    /// them in place through [`VolatileSlice`]'s copies
    /// ([`VolatileSlice::copy_to`], [`VolatileSlice::copy_from`],
    /// [`VolatileSlice::subslice`], and the [`Bytes`] and
    /// [`VolatileMemory`] methods, e.g. `get_ref::<u64>(at)?.load()`). It
    /// never forms a `&[u8]` over bytes the engine may write; it holds no
    /// lock, so the engine goes on placing packets meanwhile.
    ///
    /// [`VolatileSlice`]: crate::volatile::VolatileSlice
    /// [`VolatileSlice::copy_to`]: crate::volatile::VolatileSlice::copy_to
    /// [`VolatileSlice::copy_from`]: crate::volatile::VolatileSlice::copy_from
    /// [`VolatileSlice::subslice`]: crate::volatile::VolatileSlice::subslice
    /// [`Bytes`]: crate::volatile::Bytes
    /// [`VolatileMemory`]: crate::volatile::VolatileMemory
    pub fn volatile(&self, offset: u64, len: u64) -> Result<crate::volatile::VolatileSlice<'_>> {
        Ok(self.region.volatile(offset, len)?)
    }

    /// Atomically loads the `u64` (host byte order) at `offset`, whose
    /// memory must be 8-byte aligned (as for a peer's atomics).
    pub fn read_u64(&self, offset: u64) -> Result<u64> {
        self.region
            .load_u64(offset)
            .map_err(|f| self.word_fault(offset, f))
    }

    /// Atomically stores `value` as the `u64` at `offset` (8-byte aligned
    /// memory): a peer's FETCH_ADD or CMP_SWAP on it sees all or nothing.
    pub fn write_u64(&self, offset: u64, value: u64) -> Result<()> {
        self.region
            .store_u64(offset, value)
            .map_err(|f| self.word_fault(offset, f))
    }

    /// Atomically adds `add` to the `u64` at `offset`, as a peer's
    /// FETCH_ADD does (the two never lose each other's additions); the
    /// value before.
    pub fn fetch_add_u64(&self, offset: u64, add: u64) -> Result<u64> {
        self.region
            .fetch_add(offset, add)
            .map_err(|f| self.word_fault(offset, f))
    }

    fn word_fault(&self, offset: u64, fault: ferroce_core::MemFault) -> crate::Error {
        match fault {
            ferroce_core::MemFault::Misaligned => crate::VerbsError::BadValue {
                what: "offset of a u64 whose memory is not 8-byte aligned",
                value: offset,
            }
            .into(),
            ferroce_core::MemFault::OutOfRange => crate::RangeError {
                offset,
                len: 8,
                region_len: self.info.len,
            }
            .into(),
        }
    }

    /// Runs `f` on a snapshot of `len` bytes at `offset`: they are copied
    /// out first (the engine may write the region meanwhile; `f` sees the
    /// bytes as they were at the copy).
    #[deprecated(note = "use `read` (a copy) or `volatile` (a zero-copy view)")]
    pub fn with_range<R>(&self, offset: u64, len: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let bytes = self.snapshot(offset, len)?;
        Ok(f(&bytes))
    }

    /// Runs `f` on a snapshot of `len` bytes at `offset`, then copies the
    /// snapshot back: bytes the engine wrote there meanwhile (a peer's
    /// WRITE landing) are overwritten with the snapshot's.
    #[deprecated(note = "use `write` (a copy) or `volatile` (a zero-copy view)")]
    pub fn with_range_mut<R>(
        &self,
        offset: u64,
        len: u64,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        let mut bytes = self.snapshot(offset, len)?;
        let r = f(&mut bytes);
        self.write(offset, &bytes)?;
        Ok(r)
    }

    /// [`Self::with_range_mut`] over the whole region (a snapshot copied
    /// out and back: the engine's writes meanwhile are overwritten).
    #[deprecated(note = "use `read`/`write` (copies) or `volatile` (a zero-copy view)")]
    pub fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        #[allow(deprecated)]
        self.with_range_mut(0, self.len(), f)
    }

    fn snapshot(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.region.range(offset, len)?;
        let mut bytes = vec![0u8; len as usize];
        self.read(offset, &mut bytes)?;
        Ok(bytes)
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
        crate::RemoteRegion::registered(self.addr(), self.rkey(), self.len())
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        self.deregister();
    }
}
