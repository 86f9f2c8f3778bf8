//! Memory windows in the key table (IBA 10.6.7): the rules of binding,
//! invalidating and reaching memory through a window.
//!
//! A window lives beside the regions in [`MrTable`], since R_Keys of both
//! share one space: a window is found by its R_Key's upper 24 bits (its
//! index, never reused by a region's key while the window lives), and the
//! key byte must match the one its last bind gave it. The checks follow
//! IBA's compliance statements as rxe (`rxe_mw.c`) cites them; where ferroce
//! checks more than rxe, the README's table of differences says so.

use super::{MrTable, RemoteAccess};
use crate::verbs::{Access, MwBind, MwInfo, MwType};

/// Remote rights a bind may give a window, besides [`Access::ZERO_BASED`].
const WINDOW_RIGHTS: u32 = Access::REMOTE_READ.bits()
    | Access::REMOTE_WRITE.bits()
    | Access::REMOTE_ATOMIC.bits()
    | Access::FLUSH_GLOBAL.bits();

/// An allocated window.
#[derive(Debug)]
pub(crate) struct Mw {
    pub(crate) info: MwInfo,
    /// The R_Key the last bind posted gives it (binds run later, in their
    /// QP's order): the next bind moves on from this one.
    pub(crate) posted: u32,
    /// What the last bind gave it; `None` for a type 2 window that is free
    /// (never bound, or invalidated) and a type 1 window bound with length 0.
    bound: Option<Binding>,
}

/// A window's range and rights.
#[derive(Debug, Clone, Copy)]
struct Binding {
    lkey: u32,
    addr: u64,
    len: u64,
    access: Access,
    /// Type 2B: the only QP through which the window is reached.
    qpn: Option<u32>,
}

/// The upper 24 bits of an R_Key: what names a window.
pub(crate) const fn key_index(key: u32) -> u32 {
    key >> 8
}

impl MrTable {
    /// Adds a window under `rkey`, whose index no key in the table has.
    pub(crate) fn insert_mw(&mut self, info: MwInfo) {
        let mw = Mw {
            info,
            posted: info.rkey,
            bound: None,
        };
        self.mws.insert(key_index(info.rkey), mw);
    }

    /// Whether no region key and no window has this index.
    pub(crate) fn index_free(&self, index: u32) -> bool {
        !self.mws.contains_key(&index)
            && !self
                .by_lkey
                .values()
                .any(|m| key_index(m.lkey) == index || key_index(m.rkey) == index)
    }

    /// The window an R_Key names (any key byte).
    pub(crate) fn mw(&self, rkey: u32) -> Option<&Mw> {
        self.mws.get(&key_index(rkey))
    }

    /// Records that a bind giving the window `rkey` was posted.
    pub(crate) fn set_posted_key(&mut self, rkey: u32) {
        if let Some(w) = self.mws.get_mut(&key_index(rkey)) {
            w.posted = rkey;
        }
    }

    pub(crate) fn remove_mw(&mut self, rkey: u32) -> Option<Mw> {
        self.mws.remove(&key_index(rkey))
    }

    /// Windows bound onto the region `lkey`: it cannot be deregistered
    /// while there are any (rxe refuses it too).
    pub(crate) fn windows_on(&self, lkey: u32) -> usize {
        self.mws
            .values()
            .filter(|w| w.bound.is_some_and(|b| b.lkey == lkey))
            .count()
    }

    /// Unbinds every window bound onto the region `lkey`.
    pub(crate) fn unbind_windows_on(&mut self, lkey: u32) {
        for w in self.mws.values_mut() {
            if w.bound.is_some_and(|b| b.lkey == lkey) {
                w.bound = None;
            }
        }
    }

    pub(crate) fn window_count(&self) -> usize {
        self.mws.len()
    }

    pub(crate) fn pd_has_windows(&self, pd: u32) -> bool {
        self.mws.values().any(|w| w.info.pd == pd)
    }

    /// The checks of a bind by a QP of protection domain `pd`, without
    /// binding: `Err` says which rule the bind breaks. Without `now`, the
    /// checks whose answer can change before the QP reaches the bind (is a
    /// type 2 window free?) are left out.
    pub(crate) fn check_bind(
        &self,
        pd: u32,
        mw_rkey: u32,
        bind: &MwBind,
        now: bool,
    ) -> Result<(), &'static str> {
        let mw = self.mw(mw_rkey).ok_or("no such memory window")?;
        let zero_based = bind.access.contains(Access::ZERO_BASED);
        match mw.info.kind {
            // o10-36.2.2
            MwType::One if zero_based => return Err("a type 1 window cannot be zero-based"),
            MwType::One => {}
            // o10-37.2.30
            MwType::Two if now && mw.bound.is_some() => {
                return Err("the type 2 window is bound: invalidate it before binding it again");
            }
            // o10-37.2.40
            MwType::Two if bind.len == 0 => {
                return Err(
                    "a type 2 window cannot be bound with length 0 (invalidate it instead)",
                );
            }
            MwType::Two => {}
        }
        // C10-72 (rxe checks it for type 2 only; IBA for both).
        if mw.info.pd != pd {
            return Err("the window is in another protection domain than the QP");
        }
        if bind.access.bits() & !(WINDOW_RIGHTS | Access::ZERO_BASED.bits()) != 0 {
            return Err(
                "window access flags other than remote read, write, atomic, \
                        FLUSH_GLOBAL and zero-based",
            );
        }
        if bind.len == 0 {
            return Ok(()); // a type 1 unbind names no region
        }
        let mr = self
            .by_lkey
            .get(&bind.lkey)
            .ok_or("no region with that lkey")?;
        if mr.pd != pd {
            return Err("the region is in another protection domain than the QP");
        }
        // C10-73
        if !mr.access.contains(Access::MW_BIND) {
            return Err("the region was registered without MW_BIND access");
        }
        // C10-74
        let writes = Access::REMOTE_WRITE.bits() | Access::REMOTE_ATOMIC.bits();
        if bind.access.bits() & writes != 0 && !mr.access.contains(Access::LOCAL_WRITE) {
            return Err("remote write or atomic through a window needs LOCAL_WRITE on the region");
        }
        // C10-75
        let start = bind.addr.checked_sub(mr.addr);
        let end = start.and_then(|s| s.checked_add(bind.len));
        if end.is_none_or(|e| e > mr.region.len() as u64) {
            return Err("the window's range is outside the region");
        }
        Ok(())
    }

    /// Binds the window `mw_rkey` (checked as [`Self::check_bind`]) for QP
    /// `qpn`: it takes `new_rkey`'s key byte. Returns its R_Key now.
    pub(crate) fn bind_mw(
        &mut self,
        pd: u32,
        qpn: u32,
        mw_rkey: u32,
        new_rkey: u32,
        bind: &MwBind,
    ) -> Result<u32, &'static str> {
        self.check_bind(pd, mw_rkey, bind, true)?;
        let mw = self
            .mws
            .get_mut(&key_index(mw_rkey))
            .ok_or("no such memory window")?;
        mw.info.rkey = (mw.info.rkey & !0xff) | (new_rkey & 0xff);
        mw.bound = (bind.len > 0).then_some(Binding {
            lkey: bind.lkey,
            addr: bind.addr,
            len: bind.len,
            access: bind.access,
            qpn: (mw.info.kind == MwType::Two).then_some(qpn),
        });
        Ok(mw.info.rkey)
    }

    /// Invalidates the type 2 window with exactly this R_Key (LOCAL_INV, or
    /// with `via` the QP a SEND with invalidate arrived on, which must be
    /// the window's). `Err` says why not.
    pub(crate) fn invalidate_mw(
        &mut self,
        pd: u32,
        rkey: u32,
        via: Option<u32>,
    ) -> Result<(), &'static str> {
        let mw = self
            .mws
            .get_mut(&key_index(rkey))
            .filter(|w| w.info.rkey == rkey)
            .ok_or("no memory region or window has that key")?;
        // o10-37.2.26
        if mw.info.kind == MwType::One {
            return Err("a type 1 window cannot be invalidated (bind it with length 0)");
        }
        let bound = mw.bound.ok_or("the window is not bound")?;
        if mw.info.pd != pd {
            return Err("the window is in another protection domain than the QP");
        }
        if via.is_some_and(|q| bound.qpn != Some(q)) {
            return Err("the window is bound to another QP");
        }
        mw.bound = None;
        Ok(())
    }

    /// Remote access through the window `rkey` by QP `qpn`: the region's
    /// lkey and the offset in it of `len` bytes at the peer's address `va`.
    pub(crate) fn remote_window(
        &self,
        by: (u32, u32),
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<(u32, u64), RemoteAccess> {
        let (b, mr_addr) = self.reach(by, rkey, need)?;
        // IBA bounds the access by the window; rxe only by its region.
        let into = if b.access.contains(Access::ZERO_BASED) {
            va
        } else {
            va.checked_sub(b.addr).ok_or(RemoteAccess::OutOfBounds)?
        };
        if into.checked_add(len).is_none_or(|end| end > b.len) {
            return Err(RemoteAccess::OutOfBounds);
        }
        Ok((b.lkey, b.addr - mr_addr + into))
    }

    /// The region behind the window `rkey`, with the checks of
    /// [`Self::remote_window`] but no range (a FLUSH of a whole region).
    pub(crate) fn window_region(
        &self,
        by: (u32, u32),
        rkey: u32,
        need: Access,
    ) -> Result<u32, RemoteAccess> {
        self.reach(by, rkey, need).map(|(b, _)| b.lkey)
    }

    /// The binding of the window `rkey` if QP `qpn` of `pd` may use it for
    /// `need`, and its region's address.
    fn reach(
        &self,
        (pd, qpn): (u32, u32),
        rkey: u32,
        need: Access,
    ) -> Result<(Binding, u64), RemoteAccess> {
        let mw = self
            .mw(rkey)
            .filter(|w| w.info.rkey == rkey)
            .ok_or(RemoteAccess::BadKey)?;
        let b = mw.bound.ok_or(RemoteAccess::BadKey)?;
        if b.qpn.is_some_and(|q| q != qpn) {
            return Err(RemoteAccess::BadKey);
        }
        if mw.info.pd != pd {
            return Err(RemoteAccess::WrongPd);
        }
        if !b.access.contains(need) {
            return Err(RemoteAccess::NotPermitted);
        }
        let mr = self
            .by_lkey
            .get(&b.lkey)
            .filter(|m| !m.invalid)
            .ok_or(RemoteAccess::BadKey)?;
        Ok((b, mr.addr))
    }
}
