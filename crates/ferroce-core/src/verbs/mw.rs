//! Memory windows (IBA 10.6.7): what the application names when it
//! allocates, binds and invalidates one.
//!
//! A window grants remote access to a range of a registered region under an
//! R_Key of its own, which the owner can move or revoke without touching the
//! region. Its R_Key's upper 24 bits name the window for its whole life; a
//! bind replaces the low 8 bits (the "key" byte, `ibv_inc_rkey`), so a peer
//! still holding the previous R_Key is refused.

use core::fmt;

use super::{Access, Hex};

/// The window's type (`IBV_MW_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Type 1: bound with [`crate::Endpoint::bind_mw`] (`ibv_bind_mw`),
    /// usable from any QP of its protection domain; never invalidated, only
    /// bound again (a bind of length 0 unbinds it).
    One,
    /// Type 2B: bound by a BIND_MW work request on a QP of its protection
    /// domain and usable only through that QP; invalidated by LOCAL_INV or
    /// by a peer's SEND with invalidate. (Type 2A, usable from any QP, is not
    /// offered: rxe offers neither, NICs rarely.)
    Two,
}

impl MwType {
    /// The `ibv_mw_type` value.
    pub const fn code(self) -> u32 {
        match self {
            Self::One => 1,
            Self::Two => 2,
        }
    }
}

/// What a bind gives the window (`ibv_mw_bind_info`): a range of the region
/// `lkey` and the remote rights through it. `addr` is a virtual address of
/// the region (as its [`crate::MrInfo::addr`] plus an offset); `len` 0
/// unbinds a type 1 window.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MwBind {
    /// The region the window opens onto (its L_Key); it needs
    /// [`Access::MW_BIND`].
    pub lkey: u32,
    /// The window's first byte, as an address of the region.
    pub addr: u64,
    /// Bytes in the window.
    pub len: u64,
    /// Remote rights through the window (`REMOTE_READ`, `REMOTE_WRITE`,
    /// `REMOTE_ATOMIC`, `FLUSH_GLOBAL`), and [`Access::ZERO_BASED`] for a
    /// window whose peers address it from 0 (type 2 only).
    pub access: Access,
}

impl fmt::Debug for MwBind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MwBind")
            .field("lkey", &Hex(self.lkey))
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("access", &self.access)
            .finish()
    }
}

/// What the application learns about a window (as `ibv_mw`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MwInfo {
    /// The window's R_Key now: peers use it once a bind has given the
    /// window a range. It names the window in [`crate::Endpoint::dealloc_mw`]
    /// and in BIND_MW requests (any earlier R_Key of it does too).
    pub rkey: u32,
    /// Type 1 or type 2 (`ibv_mw::type`).
    pub kind: MwType,
    /// The protection domain's handle.
    pub pd: u32,
}

impl fmt::Debug for MwInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MwInfo")
            .field("rkey", &Hex(self.rkey))
            .field("kind", &self.kind)
            .field("pd", &self.pd)
            .finish()
    }
}

/// The R_Key with its key byte moved on by one (rdma-core's
/// `ibv_inc_rkey`): what a bind usually gives the window.
pub const fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}
