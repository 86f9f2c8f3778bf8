//! Memory regions. In this engine the core owns the registered memory (a
//! boxed slice per region), so remote peers' writes and reads are plain
//! slice copies and need no `unsafe`. Each region has an I/O virtual address
//! (`addr`) that peers use in RETH and AtomicETH, and unguessable keys.

use rustc_hash::FxHashMap as HashMap;

use crate::verbs::{Access, Sge, VerbsError};

/// A registered region.
#[derive(Debug)]
pub(crate) struct Mr {
    pub(crate) pd: u32,
    pub(crate) access: Access,
    pub(crate) addr: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) buf: Box<[u8]>,
    /// Invalidated by a SEND with invalidate: remote access refused.
    pub(crate) invalid: bool,
}

/// What the user learns about a region (as `ibv_mr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrInfo {
    pub lkey: u32,
    pub rkey: u32,
    /// The address peers use for this region's first byte.
    pub addr: u64,
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
}

impl MrTable {
    pub(crate) fn insert(&mut self, mr: Mr) -> MrInfo {
        let info = MrInfo {
            lkey: mr.lkey,
            rkey: mr.rkey,
            addr: mr.addr,
            len: mr.buf.len(),
        };
        self.rkey_to_lkey.insert(mr.rkey, mr.lkey);
        self.by_lkey.insert(mr.lkey, mr);
        info
    }

    pub(crate) fn contains_key(&self, key: u32) -> bool {
        self.by_lkey.contains_key(&key) || self.rkey_to_lkey.contains_key(&key)
    }

    pub(crate) fn remove(&mut self, lkey: u32) -> Option<Mr> {
        let mr = self.by_lkey.remove(&lkey)?;
        self.rkey_to_lkey.remove(&mr.rkey);
        Some(mr)
    }

    pub(crate) fn get(&self, lkey: u32) -> Option<&Mr> {
        self.by_lkey.get(&lkey)
    }

    pub(crate) fn get_mut(&mut self, lkey: u32) -> Option<&mut Mr> {
        self.by_lkey.get_mut(&lkey)
    }

    pub(crate) fn pd_in_use(&self, pd: u32) -> bool {
        self.by_lkey.values().any(|m| m.pd == pd)
    }

    /// Checks a local scatter/gather element against its region and PD.
    pub(crate) fn check_sge(&self, pd: u32, sge: &Sge, write: bool) -> Result<(), VerbsError> {
        // Each refusal says why: one message for all of them used to call a
        // region in another PD or without LOCAL_WRITE "outside the region".
        let bad = |why| VerbsError::BadSge {
            lkey: sge.lkey,
            offset: sge.offset,
            len: sge.len,
            why,
        };
        let mr = self.by_lkey.get(&sge.lkey).ok_or(bad("no such region"))?;
        if mr.pd != pd {
            return Err(bad("region in another protection domain"));
        }
        let end = sge.offset.checked_add(u64::from(sge.len));
        if end.is_none_or(|end| end > mr.buf.len() as u64) {
            return Err(bad("outside the region"));
        }
        if write && !mr.access.contains(Access::LOCAL_WRITE) {
            return Err(bad("region without LOCAL_WRITE"));
        }
        Ok(())
    }

    /// Resolves a remote access: the region's lkey and the byte offset.
    pub(crate) fn remote(
        &self,
        pd: u32,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<(u32, usize), RemoteAccess> {
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
        let off = va.checked_sub(mr.addr).ok_or(RemoteAccess::OutOfBounds)?;
        let end = off.checked_add(len).ok_or(RemoteAccess::OutOfBounds)?;
        if end > mr.buf.len() as u64 {
            return Err(RemoteAccess::OutOfBounds);
        }
        Ok((lkey, off as usize))
    }

    /// Invalidates the region with this rkey (SEND with invalidate).
    pub(crate) fn invalidate(&mut self, pd: u32, rkey: u32) -> bool {
        let Some(&lkey) = self.rkey_to_lkey.get(&rkey) else {
            return false;
        };
        match self.by_lkey.get_mut(&lkey) {
            Some(mr) if mr.pd == pd => {
                mr.invalid = true;
                true
            }
            _ => false,
        }
    }

    /// Copies `data` into the local elements `sg`, starting `skip` bytes in;
    /// returns false (copying nothing more) if they are too small.
    pub(crate) fn scatter(&mut self, sg: &[Sge], mut skip: u64, mut data: &[u8]) -> bool {
        for sge in sg {
            if data.is_empty() {
                return true;
            }
            let len = u64::from(sge.len);
            if skip >= len {
                skip -= len;
                continue;
            }
            let Some(mr) = self.by_lkey.get_mut(&sge.lkey) else {
                return false;
            };
            let start = (sge.offset + skip) as usize;
            let n = ((len - skip) as usize).min(data.len());
            let Some(dst) = mr.buf.get_mut(start..start + n) else {
                return false;
            };
            dst.copy_from_slice(&data[..n]);
            data = &data[n..];
            skip = 0;
        }
        data.is_empty()
    }

    /// Copies `out.len()` bytes from the local elements `sg`, starting
    /// `skip` bytes in. Returns false if the elements are too short.
    pub(crate) fn gather(&self, sg: &[Sge], mut skip: u64, out: &mut [u8]) -> bool {
        let mut filled = 0;
        for sge in sg {
            if filled == out.len() {
                return true;
            }
            let len = u64::from(sge.len);
            if skip >= len {
                skip -= len;
                continue;
            }
            let Some(mr) = self.by_lkey.get(&sge.lkey) else {
                return false;
            };
            let start = (sge.offset + skip) as usize;
            let n = ((len - skip) as usize).min(out.len() - filled);
            let Some(src) = mr.buf.get(start..start + n) else {
                return false;
            };
            out[filled..filled + n].copy_from_slice(src);
            filled += n;
            skip = 0;
        }
        filled == out.len()
    }
}

/// Total length of a scatter/gather list.
pub(crate) fn sg_len(sg: &[Sge]) -> u64 {
    sg.iter().map(|s| u64::from(s.len)).sum()
}
