//! Memory regions. Each region's bytes are a [`Region`]: a
//! [`ferroce_mem::Backing`] (owned, or the application's raw memory)
//! shared by the engine's table and the application's handle with no lock
//! between them, as host memory is shared by a NIC's DMA and the CPUs.
//! The engine copies packets in and out, and does the 8-byte atomics, the
//! moment a packet asks; the application reads and writes the same bytes
//! whenever it likes. Neither waits for the other; which bytes a racing
//! read sees is the application's business (as in ibverbs, it learns that
//! a peer's WRITE landed from a completion or a message). Every access,
//! the engine's and the application's, goes through the few methods of
//! [`Region`] (volatile copies and atomics, see `ferroce_mem`).
//!
//! Each region has an I/O virtual address (`addr`) that peers use in RETH
//! and AtomicETH, and unguessable keys. Memory windows (`window`) share the
//! table, and the R_Key space, with the regions.

mod window;

use std::fmt;
use std::sync::Arc;

use ferroce_mem::{Backing, Fault, VolatileSlice};
use rustc_hash::FxHashMap as HashMap;

use crate::verbs::{Access, Sge, VerbsError};

/// The bytes of a registered region, shared by the engine and the
/// application's handle without a lock (see the module docs).
#[derive(Debug)]
pub struct Region {
    bytes: Backing,
}

/// A range outside its region: which, and the region's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeError {
    /// The range's first byte.
    pub offset: u64,
    /// The range's length.
    pub len: u64,
    /// The region's size.
    pub region_len: usize,
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes at offset {} are outside the region of {} bytes (ranges must end at or before its length)",
            self.len, self.offset, self.region_len
        )
    }
}

impl std::error::Error for RangeError {}

impl Region {
    pub(crate) fn new(backing: Backing) -> Self {
        Self { bytes: backing }
    }

    /// The region's size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The byte range `offset..offset + len`, checked against the region.
    pub fn range(&self, offset: u64, len: u64) -> Result<std::ops::Range<usize>, RangeError> {
        let err = RangeError {
            offset,
            len,
            region_len: self.len(),
        };
        let end = offset.checked_add(len).ok_or(err)?;
        if end > self.len() as u64 {
            return Err(err);
        }
        Ok(offset as usize..end as usize)
    }

    /// A volatile view of `len` bytes at `offset`: read, written or
    /// scanned in place, with no copy and no lock (the engine may write
    /// them meanwhile).
    pub fn volatile(&self, offset: u64, len: u64) -> Result<VolatileSlice<'_>, RangeError> {
        let r = self.range(offset, len)?;
        self.bytes
            .slice(r.start, r.len())
            .map_err(|_| self.range_error(offset, len))
    }

    /// Copies `out.len()` bytes at `offset` out of the region.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), RangeError> {
        self.volatile(offset, out.len() as u64)?.copy_to(out);
        Ok(())
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), RangeError> {
        self.volatile(offset, data.len() as u64)?.copy_from(data);
        Ok(())
    }

    /// Atomically adds `add` to the host-order `u64` at `offset` (which
    /// must be a multiple of 8 in memory); the value before.
    pub fn fetch_add(&self, offset: u64, add: u64) -> Result<u64, Fault> {
        self.bytes.fetch_add(Self::index(offset)?, add)
    }

    /// Atomically replaces the `u64` at `offset` by `swap` if it equals
    /// `compare`; the value before, either way.
    pub fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> Result<u64, Fault> {
        self.bytes.compare_swap(Self::index(offset)?, compare, swap)
    }

    /// Atomically loads the `u64` at `offset`.
    pub fn load_u64(&self, offset: u64) -> Result<u64, Fault> {
        self.bytes.load_u64(Self::index(offset)?)
    }

    /// Atomically stores `value` as the `u64` at `offset`.
    pub fn store_u64(&self, offset: u64, value: u64) -> Result<(), Fault> {
        self.bytes.store_u64(Self::index(offset)?, value)
    }

    /// The backing back, once no one else shares the region.
    pub fn into_backing(self: Arc<Self>) -> Result<Backing, Arc<Self>> {
        Ok(Arc::try_unwrap(self)?.bytes)
    }

    fn index(offset: u64) -> Result<usize, Fault> {
        usize::try_from(offset).map_err(|_| Fault::OutOfRange)
    }

    fn range_error(&self, offset: u64, len: u64) -> RangeError {
        RangeError {
            offset,
            len,
            region_len: self.len(),
        }
    }
}

/// Why the engine could not copy to or from local memory: the elements
/// are too short, or a region is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopyFault;

/// What a scatter/gather element's check needs of its region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SgeFacts {
    pub(crate) pd: u32,
    pub(crate) len: u64,
    pub(crate) local_write: bool,
}

/// Checks one scatter/gather element against its region (`None`: no
/// region has its lkey): the one check of a post, locked or not
/// (`qp::posts`), and of a request as it executes.
pub(crate) fn check_sge(
    mr: Option<SgeFacts>,
    pd: u32,
    sge: &Sge,
    write: bool,
) -> Result<(), VerbsError> {
    // Each refusal says why: one message for all of them used to call a
    // region in another PD or without LOCAL_WRITE "outside the region".
    let bad = |why| VerbsError::BadSge {
        lkey: sge.lkey,
        offset: sge.offset,
        len: sge.len,
        why,
    };
    let mr = mr.ok_or(bad("no such region"))?;
    if mr.pd != pd {
        return Err(bad("region in another protection domain"));
    }
    let end = sge.offset.checked_add(u64::from(sge.len));
    if end.is_none_or(|end| end > mr.len) {
        return Err(bad("outside the region"));
    }
    if write && !mr.local_write {
        return Err(bad("region without LOCAL_WRITE"));
    }
    Ok(())
}

/// A registered region.
#[derive(Debug)]
pub(crate) struct Mr {
    pub(crate) pd: u32,
    pub(crate) access: Access,
    pub(crate) addr: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) region: Arc<Region>,
    /// Invalidated by a SEND with invalidate: remote access refused.
    pub(crate) invalid: bool,
}

impl Mr {
    fn facts(&self) -> SgeFacts {
        SgeFacts {
            pd: self.pd,
            len: self.region.len() as u64,
            local_write: self.access.contains(Access::LOCAL_WRITE),
        }
    }
}

/// What the user learns about a region (as `ibv_mr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrInfo {
    /// The L_Key local work requests name the region by (`ibv_mr::lkey`).
    pub lkey: u32,
    /// The R_Key peers name it by (`ibv_mr::rkey`).
    pub rkey: u32,
    /// The address peers use for this region's first byte.
    pub addr: u64,
    /// The region's size in bytes (`ibv_mr::length`).
    pub len: usize,
}

/// Why a remote access was refused (all are NAK remote access error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteAccess {
    BadKey,
    WrongPd,
    NotPermitted,
    OutOfBounds,
}

#[derive(Debug, Default)]
pub(crate) struct MrTable {
    by_lkey: HashMap<u32, Mr>,
    rkey_to_lkey: HashMap<u32, u32>,
    /// Memory windows, by their R_Key's index (`window::key_index`).
    mws: HashMap<u32, window::Mw>,
    /// The regions' lkeys as posters check them (`qp::posts`).
    pub(crate) lkeys: Arc<crate::qp::posts::LkeyTable>,
}

impl MrTable {
    pub(crate) fn insert(&mut self, mr: Mr) -> MrInfo {
        let info = MrInfo {
            lkey: mr.lkey,
            rkey: mr.rkey,
            addr: mr.addr,
            len: mr.region.len(),
        };
        self.rkey_to_lkey.insert(mr.rkey, mr.lkey);
        self.lkeys.set(mr.lkey, mr.facts());
        self.by_lkey.insert(mr.lkey, mr);
        info
    }

    /// Whether a region has this key, or a window its index.
    pub(crate) fn contains_key(&self, key: u32) -> bool {
        self.by_lkey.contains_key(&key)
            || self.rkey_to_lkey.contains_key(&key)
            || self.mws.contains_key(&window::key_index(key))
    }

    pub(crate) fn remove(&mut self, lkey: u32) -> Option<Mr> {
        let mr = self.by_lkey.remove(&lkey)?;
        self.lkeys.remove(lkey);
        self.rkey_to_lkey.remove(&mr.rkey);
        Some(mr)
    }

    /// Whether a region or a window of `pd` exists, and what.
    pub(crate) fn pd_in_use(&self, pd: u32) -> Option<&'static str> {
        if self.by_lkey.values().any(|m| m.pd == pd) {
            Some("memory regions registered in this PD")
        } else if self.pd_has_windows(pd) {
            Some("memory windows allocated in this PD")
        } else {
            None
        }
    }

    /// Checks a local scatter/gather element against its region and PD.
    pub(crate) fn check_sge(&self, pd: u32, sge: &Sge, write: bool) -> Result<(), VerbsError> {
        check_sge(self.by_lkey.get(&sge.lkey).map(Mr::facts), pd, sge, write)
    }

    /// Checks every element of a scatter/gather list ([`Self::check_sge`]):
    /// at post, and again when the request executes, since a region may be
    /// deregistered in between.
    pub(crate) fn check_sg(&self, pd: u32, sg: &[Sge], write: bool) -> Result<(), VerbsError> {
        sg.iter().try_for_each(|sge| self.check_sge(pd, sge, write))
    }

    /// Resolves a remote access by QP `qpn` of `pd` under `rkey`, a
    /// region's or a window's: the region's lkey and the byte offset.
    pub(crate) fn remote(
        &self,
        (pd, qpn): (u32, u32),
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<(u32, usize), RemoteAccess> {
        if !self.rkey_to_lkey.contains_key(&rkey) {
            let (lkey, off) = self.remote_window((pd, qpn), rkey, va, len, need)?;
            return Ok((lkey, off as usize));
        }
        let (lkey, mr) = self.remote_mr(pd, rkey, need)?;
        let off = va.checked_sub(mr.addr).ok_or(RemoteAccess::OutOfBounds)?;
        let end = off.checked_add(len).ok_or(RemoteAccess::OutOfBounds)?;
        if end > mr.region.len() as u64 {
            return Err(RemoteAccess::OutOfBounds);
        }
        Ok((lkey, off as usize))
    }

    /// [`Self::remote`] for a whole region (a FLUSH of selectivity
    /// "memory region"): its lkey, with the same key, PD and access checks
    /// and no range. Through a window, the window's region.
    pub(crate) fn remote_region(
        &self,
        (pd, qpn): (u32, u32),
        rkey: u32,
        need: Access,
    ) -> Result<u32, RemoteAccess> {
        if !self.rkey_to_lkey.contains_key(&rkey) {
            return self.window_region((pd, qpn), rkey, need);
        }
        self.remote_mr(pd, rkey, need).map(|(lkey, _)| lkey)
    }

    /// The valid region of `rkey` in `pd` that allows `need`, and its lkey.
    fn remote_mr(&self, pd: u32, rkey: u32, need: Access) -> Result<(u32, &Mr), RemoteAccess> {
        let lkey = *self.rkey_to_lkey.get(&rkey).ok_or(RemoteAccess::BadKey)?;
        let mr = self.by_lkey.get(&lkey).ok_or(RemoteAccess::BadKey)?;
        if mr.invalid {
            return Err(RemoteAccess::BadKey);
        }
        if mr.pd != pd {
            return Err(RemoteAccess::WrongPd);
        }
        if !mr.access.contains(need) {
            return Err(RemoteAccess::NotPermitted);
        }
        Ok((lkey, mr))
    }

    /// Invalidates the region or type 2 window with this R_Key, for a QP
    /// of `pd`: LOCAL_INV, or a SEND with invalidate arriving on QP `via`.
    /// `Err` says why not.
    pub(crate) fn invalidate(
        &mut self,
        pd: u32,
        rkey: u32,
        via: Option<u32>,
    ) -> Result<(), &'static str> {
        let Some(&lkey) = self.rkey_to_lkey.get(&rkey) else {
            return self.invalidate_mw(pd, rkey, via);
        };
        if self.windows_on(lkey) > 0 {
            // As rxe: its windows would go on pointing into it.
            return Err("the region has memory windows bound");
        }
        match self.by_lkey.get_mut(&lkey) {
            Some(mr) if mr.pd == pd => {
                mr.invalid = true;
                Ok(())
            }
            _ => Err("the region is in another protection domain than the QP"),
        }
    }

    /// The protection domain and access of the region `lkey`.
    pub(crate) fn pd_and_access(&self, lkey: u32) -> Option<(u32, Access)> {
        self.by_lkey.get(&lkey).map(|m| (m.pd, m.access))
    }

    pub(crate) fn set_pd_and_access(&mut self, lkey: u32, pd: u32, access: Access) {
        if let Some(m) = self.by_lkey.get_mut(&lkey) {
            (m.pd, m.access) = (pd, access);
            self.lkeys.set(lkey, m.facts());
        }
    }

    /// The region with this lkey.
    pub(crate) fn region(&self, lkey: u32) -> Option<&Arc<Region>> {
        self.by_lkey.get(&lkey).map(|m| &m.region)
    }

    /// Copies `data` into the local elements `sg`, starting `skip` bytes in.
    /// On a fault part may have been copied; the caller must not count it
    /// as done.
    pub(crate) fn scatter(
        &self,
        sg: &[Sge],
        mut skip: u64,
        mut data: &[u8],
    ) -> Result<(), CopyFault> {
        for sge in sg {
            if data.is_empty() {
                return Ok(());
            }
            let len = u64::from(sge.len);
            if skip >= len {
                skip -= len;
                continue;
            }
            let mr = self.by_lkey.get(&sge.lkey).ok_or(CopyFault)?;
            let n = ((len - skip) as usize).min(data.len());
            mr.region
                .write(sge.offset + skip, &data[..n])
                .map_err(|_| CopyFault)?;
            data = &data[n..];
            skip = 0;
        }
        if data.is_empty() {
            Ok(())
        } else {
            Err(CopyFault)
        }
    }

    /// Copies `out.len()` bytes from the local elements `sg`, starting
    /// `skip` bytes in.
    pub(crate) fn gather(
        &self,
        sg: &[Sge],
        mut skip: u64,
        out: &mut [u8],
    ) -> Result<(), CopyFault> {
        let mut filled = 0;
        for sge in sg {
            if filled == out.len() {
                return Ok(());
            }
            let len = u64::from(sge.len);
            if skip >= len {
                skip -= len;
                continue;
            }
            let mr = self.by_lkey.get(&sge.lkey).ok_or(CopyFault)?;
            let n = ((len - skip) as usize).min(out.len() - filled);
            mr.region
                .read(sge.offset + skip, &mut out[filled..filled + n])
                .map_err(|_| CopyFault)?;
            filled += n;
            skip = 0;
        }
        if filled == out.len() {
            Ok(())
        } else {
            Err(CopyFault)
        }
    }
}

/// Total length of a scatter/gather list.
pub(crate) fn sg_len(sg: &[Sge]) -> u64 {
    sg.iter().map(|s| u64::from(s.len)).sum()
}
