//! The verbs on memory windows: allocate, deallocate, bind a type 1 window
//! (`ibv_bind_mw`), and the checks a BIND_MW or LOCAL_INV gets at post.
//! The binding itself happens when the QP reaches the request
//! (`qp::local_ops`); the rules are in `mr::window`.

use rand_core::RngCore;

use super::Endpoint;
use crate::mr::MrTable;
use crate::verbs::{LocalErrors, MwBind, MwInfo, MwType, SendOp, SendWr, VerbsError, inc_rkey};

/// Index bits of an R_Key (its upper 24).
const INDEX_BITS: u32 = 24;

/// Memory windows an endpoint holds at most (`max_mw`): few enough of the
/// 2^24 key indexes that a random one is almost always free.
pub const MAX_MW: u32 = 1 << 16;

impl Endpoint {
    /// `ibv_alloc_mw`: a window in `pd`, bound to nothing yet.
    pub fn alloc_mw(&mut self, pd: u32, kind: MwType) -> Result<MwInfo, VerbsError> {
        if !self.pds.contains(&pd) {
            return Err(VerbsError::NoSuchPd(pd));
        }
        if self.mrs.window_count() >= MAX_MW as usize {
            return Err(VerbsError::BadValue {
                what: "memory windows (the device's max_mw are allocated; deallocate some)",
                value: u64::from(MAX_MW),
            });
        }
        let index = loop {
            let i = self.rng.next_u32() >> (32 - INDEX_BITS);
            if self.mrs.index_free(i) {
                break i;
            }
        };
        let key = self.rng.next_u32() & 0xff;
        let info = MwInfo {
            rkey: index << 8 | key,
            kind,
            pd,
        };
        self.mrs.insert_mw(info);
        Ok(info)
    }

    /// `ibv_dealloc_mw`: the window (named by any R_Key it has had) is
    /// gone; peers holding its R_Key are refused.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), VerbsError> {
        self.mrs
            .remove_mw(rkey)
            .map(|_| ())
            .ok_or(VerbsError::NoSuchMw(rkey))
    }

    /// Windows bound onto the region `lkey` now ([`Self::dereg_mr`] refuses
    /// to deregister it while there are any).
    pub fn windows_on(&self, lkey: u32) -> usize {
        self.mrs.windows_on(lkey)
    }

    /// Deregisters the region `lkey`, first unbinding the windows bound
    /// onto it (peers holding their R_Keys are refused from then on): for
    /// a handle that is dropped and cannot fail.
    pub fn dereg_mr_unbinding(&mut self, lkey: u32) -> Result<(), VerbsError> {
        self.mrs.unbind_windows_on(lkey);
        self.dereg_mr(lkey)
    }

    /// The window named by any R_Key it has had, as it is now.
    pub fn query_mw(&self, rkey: u32) -> Result<MwInfo, VerbsError> {
        self.mrs
            .mw(rkey)
            .map(|w| w.info)
            .ok_or(VerbsError::NoSuchMw(rkey))
    }

    /// Posts a BIND_MW of the window `mw` on `qpn` with the next key byte
    /// (`ibv_bind_mw` for a type 1 window; for a type 2 window what
    /// applications post with `ibv_post_send`), and returns the R_Key it
    /// will have once the QP carries it out (its completion says whether it
    /// did). Binds posted one after another get keys one after another.
    pub fn bind_mw(
        &mut self,
        qpn: u32,
        mw: u32,
        bind: MwBind,
        wr_id: u64,
        signaled: bool,
    ) -> Result<u32, VerbsError> {
        let posted = self
            .mrs
            .mw(mw)
            .map(|w| w.posted)
            .ok_or(VerbsError::NoSuchMw(mw))?;
        let rkey = inc_rkey(posted);
        let mut wr = SendWr::bind_mw(wr_id, mw, rkey, bind);
        wr.signaled = signaled;
        self.post_send(qpn, wr)?;
        Ok(rkey)
    }
}

/// The checks of a BIND_MW or LOCAL_INV at post: no data, and, when the QP
/// reports errors at the call, what the state of the table at post already
/// decides (whether a type 2 window is free can change before the QP
/// reaches the request: a LOCAL_INV posted just before frees it).
pub(super) fn check_local_op(
    mrs: &MrTable,
    pd: u32,
    errors: LocalErrors,
    wr: &SendWr<'_>,
    len: u64,
) -> Result<(), VerbsError> {
    if len != 0 || wr.inline.is_some() {
        return Err(VerbsError::BadValue {
            what: "data on a BIND_MW or LOCAL_INV (they carry none: post them with no \
                   scatter list)",
            value: len,
        });
    }
    if errors != LocalErrors::Immediate {
        return Ok(()); // reported in the completion, as rxe does
    }
    match wr.op {
        SendOp::BindMw { mw, bind, .. } => {
            mrs.mw(mw).ok_or(VerbsError::NoSuchMw(mw))?;
            mrs.check_bind(pd, mw, &bind, false)
                .map_err(|why| VerbsError::BadMwBind { why })
        }
        SendOp::LocalInv(rkey) if !mrs.contains_key(rkey) => Err(VerbsError::NoSuchMw(rkey)),
        _ => Ok(()),
    }
}
