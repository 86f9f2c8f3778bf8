//! The verbs on an endpoint's memory objects: protection domains, memory
//! regions, completion queues and shared receive queues.

use std::sync::Arc;

use ferroce_mem::Backing;
use rand_core::RngCore;

use super::Endpoint;
use crate::cq::{Cq, CqReader};
use crate::mr::{Mr, MrInfo, Region};
use crate::qp::posts::SrqPosts;
use crate::srq::{MAX_SRQ_WR, Srq};
use crate::verbs::{
    Access, AsyncEvent, LocalErrors, QueuedRecv, RecvWr, SrqAttr, SrqInfo, VerbsError,
    WorkCompletion,
};

impl Endpoint {
    /// `ibv_alloc_pd`: a new protection domain; returns its handle.
    pub fn alloc_pd(&mut self) -> u32 {
        let h = self.handle();
        self.pds.insert(h);
        h
    }

    /// `ibv_dealloc_pd`. Refused with [`VerbsError::Busy`] while regions,
    /// windows, QPs or SRQs of the domain exist.
    pub fn dealloc_pd(&mut self, pd: u32) -> Result<(), VerbsError> {
        if !self.pds.contains(&pd) {
            return Err(VerbsError::NoSuchPd(pd));
        }
        if let Some(what) = self.mrs.pd_in_use(pd) {
            return Err(VerbsError::Busy(what));
        }
        // A target's PD is only that of the SRQ its last request named.
        let holds = |q: &crate::qp::Qp| q.init.qp_type != crate::verbs::QpType::XrcTgt;
        if self.qps.values().any(|q| holds(q) && q.init.pd == pd) {
            return Err(VerbsError::Busy("queue pairs created in this PD"));
        }
        if self.srqs.values().any(|s| s.pd == pd) {
            return Err(VerbsError::Busy("shared receive queues created in this PD"));
        }
        self.pds.remove(&pd);
        Ok(())
    }

    /// Registers a zeroed region of `len` bytes.
    pub fn reg_mr(&mut self, pd: u32, len: usize, access: Access) -> Result<MrInfo, VerbsError> {
        // Checked before the allocation, so that a refusal allocates nothing.
        self.check_reg(pd, access)?;
        // An impossible size is an error, not an abort in the allocator
        // (a peer's request can size a region; ibv_reg_mr fails with
        // ENOMEM). The probe is freed and the region allocated zeroed, which
        // leaves its pages untouched until used.
        if Vec::<u8>::new().try_reserve_exact(len).is_err() {
            return Err(VerbsError::BadValue {
                what: "MR length (no memory for that many bytes)",
                value: len as u64,
            });
        }
        let backing = Backing::from(vec![0u8; len]);
        self.reg_mr_with(pd, backing, access).map(|(info, _)| info)
    }

    /// Registers `backing` as it is (no copy): the bytes stay where they
    /// are, shared by the endpoint and the returned [`Region`]. A refused
    /// registration drops `backing` (a raw one is simply forgotten).
    pub fn reg_mr_with(
        &mut self,
        pd: u32,
        backing: Backing,
        access: Access,
    ) -> Result<(MrInfo, Arc<Region>), VerbsError> {
        self.check_reg(pd, access)?;
        let (lkey, rkey) = self.new_keys();
        // A page-aligned address unique to the region, as a real one would be.
        let addr = (u64::from(self.rng.next_u32()) << 16) & !0xfff;
        self.reg_mr_at(pd, backing, access, addr, (lkey, rkey))
    }

    /// [`Self::reg_mr_with`] at the I/O virtual address `iova` that peers
    /// (and, in ibverbs, local scatter lists) name the region's first byte
    /// by: `ibv_reg_mr` registers a buffer at its own address, which its
    /// peers then put in their RETHs.
    pub fn reg_mr_with_iova(
        &mut self,
        pd: u32,
        backing: Backing,
        access: Access,
        iova: u64,
    ) -> Result<(MrInfo, Arc<Region>), VerbsError> {
        self.check_reg(pd, access)?;
        if iova.checked_add(backing.len() as u64).is_none() {
            return Err(VerbsError::BadValue {
                what: "MR iova (the region would end past 2^64)",
                value: iova,
            });
        }
        let keys = self.new_keys();
        self.reg_mr_at(pd, backing, access, iova, keys)
    }

    fn new_keys(&mut self) -> (u32, u32) {
        loop {
            let l = self.rng.next_u32();
            let r = self.rng.next_u32();
            if l != r && !self.mrs.contains_key(l) && !self.mrs.contains_key(r) {
                return (l, r);
            }
        }
    }

    fn reg_mr_at(
        &mut self,
        pd: u32,
        backing: Backing,
        access: Access,
        addr: u64,
        (lkey, rkey): (u32, u32),
    ) -> Result<(MrInfo, Arc<Region>), VerbsError> {
        let region = Arc::new(Region::new(backing));
        let info = self.mrs.insert(Mr {
            pd,
            access,
            addr,
            lkey,
            rkey,
            region: region.clone(),
            invalid: false,
        });
        Ok((info, region))
    }

    fn check_reg(&self, pd: u32, access: Access) -> Result<(), VerbsError> {
        if !self.pds.contains(&pd) {
            return Err(VerbsError::NoSuchPd(pd));
        }
        let remote = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        if access.bits() & remote.bits() != 0 && !access.contains(Access::LOCAL_WRITE) {
            // ibv_reg_mr: remote write or atomic needs local write too.
            return Err(VerbsError::BadValue {
                what: "access (REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE)",
                value: access.bits().into(),
            });
        }
        if access.contains(Access::FLUSH_PERSISTENT) {
            // rxe refuses it unless the pages are persistent memory.
            return Err(VerbsError::BadValue {
                what: "access (FLUSH_PERSISTENT needs persistent memory, which ferroce's \
                       regions are not; FLUSH_GLOBAL is allowed)",
                value: access.bits().into(),
            });
        }
        Ok(())
    }

    /// `ibv_rereg_mr` without a new translation (as rxe): the region `lkey`
    /// moves to protection domain `pd` and/or takes `access`; its keys and
    /// bytes stay. Refused while memory windows are bound to it.
    pub fn rereg_mr(
        &mut self,
        lkey: u32,
        pd: Option<u32>,
        access: Option<Access>,
    ) -> Result<(), VerbsError> {
        let (old_pd, old_access) = self
            .mrs
            .pd_and_access(lkey)
            .ok_or(VerbsError::NoSuchMr(lkey))?;
        let (pd, access) = (pd.unwrap_or(old_pd), access.unwrap_or(old_access));
        self.check_reg(pd, access)?;
        if self.mrs.windows_on(lkey) > 0 {
            return Err(VerbsError::Busy(
                "memory windows are bound to this region: invalidate, unbind or deallocate \
                 them first",
            ));
        }
        self.mrs.set_pd_and_access(lkey, pd, access);
        Ok(())
    }

    /// Deregisters a region. Its bytes live on in any [`Region`] handle
    /// still held; the engine no longer touches them.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        if self.mrs.windows_on(lkey) > 0 {
            return Err(VerbsError::Busy(
                "memory windows are bound to this region: invalidate, unbind or deallocate                  them first",
            ));
        }
        self.mrs
            .remove(lkey)
            .map(|_| ())
            .ok_or(VerbsError::NoSuchMr(lkey))
    }

    /// The bytes of the region with this lkey, shared with the engine.
    pub fn region(&self, lkey: u32) -> Result<Arc<Region>, VerbsError> {
        self.mrs
            .region(lkey)
            .cloned()
            .ok_or(VerbsError::NoSuchMr(lkey))
    }

    /// A copy of a region's bytes (tests).
    #[cfg(test)]
    pub(crate) fn mr_bytes(&self, lkey: u32) -> Result<Vec<u8>, VerbsError> {
        let region = self.region(lkey)?;
        let mut bytes = vec![0u8; region.len()];
        region.read(0, &mut bytes).expect("the whole region");
        Ok(bytes)
    }

    /// Runs `f` on a copy of a region's bytes and writes the copy back
    /// (tests).
    #[cfg(test)]
    pub(crate) fn write_mr(&self, lkey: u32, f: impl FnOnce(&mut [u8])) {
        let mut bytes = self.mr_bytes(lkey).unwrap();
        f(&mut bytes);
        self.region(lkey).unwrap().write(0, &bytes).unwrap();
    }

    /// `ibv_create_cq`: a completion queue holding up to `depth`
    /// completions (1 to [`crate::MAX_CQE`]); returns its handle. Past
    /// `depth`, completions are lost and [`AsyncEvent::CqOverflow`] raised.
    pub fn create_cq(&mut self, depth: u32) -> Result<u32, VerbsError> {
        check_cq_depth(depth)?;
        let h = self.handle();
        self.cqs.insert(h, Cq::new(depth as usize));
        Ok(h)
    }

    /// `ibv_resize_cq`: the CQ holds up to `depth` completions from now on;
    /// refused below the completions it holds now (as rxe), which it keeps,
    /// in order. Its readers keep polling the same ring meanwhile.
    pub fn resize_cq(&mut self, cq: u32, depth: u32) -> Result<(), VerbsError> {
        check_cq_depth(depth)?;
        let c = self.cqs.get_mut(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        if (depth as usize) < c.len() {
            return Err(VerbsError::BadValue {
                what: "cq depth (below the completions it holds: poll them first)",
                value: depth.into(),
            });
        }
        c.set_depth(depth as usize);
        Ok(())
    }

    /// Takes up to `max` completions, oldest first, from the ring the CQ's
    /// [`CqReader`]s share.
    pub fn poll_cq(&mut self, cq: u32, max: usize) -> Result<Vec<WorkCompletion>, VerbsError> {
        let q = self.cqs.get(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        Ok(std::iter::from_fn(|| q.ring().pop()).take(max).collect())
    }

    /// Moves up to `out.len()` completions into `out`, oldest first, and
    /// returns how many: `ibv_poll_cq` without an allocation.
    pub fn poll_cq_into(
        &mut self,
        cq: u32,
        out: &mut [WorkCompletion],
    ) -> Result<usize, VerbsError> {
        let q = self.cqs.get(&cq).ok_or(VerbsError::NoSuchCq(cq))?;
        Ok(crate::cq::ring::poll_into(q.ring(), out))
    }

    /// A handle that takes the CQ's completions without the endpoint, from
    /// any thread ([`CqReader`]; the contract is `cq`'s module's).
    pub fn cq_reader(&self, cq: u32) -> Result<CqReader, VerbsError> {
        self.cqs
            .get(&cq)
            .map(|q| q.reader(cq))
            .ok_or(VerbsError::NoSuchCq(cq))
    }

    /// Whether the CQ overflowed (completions were lost).
    pub fn cq_overflowed(&self, cq: u32) -> Result<bool, VerbsError> {
        self.cqs
            .get(&cq)
            .map(Cq::overflowed)
            .ok_or(VerbsError::NoSuchCq(cq))
    }

    /// `ibv_create_srq`: a shared receive queue of up to `max_wr` WQEs in
    /// `pd`, its limit event armed at `srq_limit` (0: not armed), as rxe
    /// takes it from the creation attributes.
    pub fn create_srq(&mut self, pd: u32, max_wr: u32, srq_limit: u32) -> Result<u32, VerbsError> {
        if !self.pds.contains(&pd) {
            return Err(VerbsError::NoSuchPd(pd));
        }
        if max_wr == 0 || max_wr > MAX_SRQ_WR {
            return Err(VerbsError::BadValue {
                what: "srq max_wr",
                value: max_wr.into(),
            });
        }
        if srq_limit > max_wr {
            return Err(VerbsError::BadValue {
                what: "srq_limit (above max_wr)",
                value: srq_limit.into(),
            });
        }
        let h = self.handle();
        let posts = SrqPosts::new(h, pd, max_wr, &self.posts);
        self.srqs.insert(h, Srq::new(pd, max_wr, srq_limit, posts));
        Ok(h)
    }

    /// `ibv_modify_srq`: resize, and arm (or, with 0, disarm) the limit.
    /// Checked first, applied only if every attribute is valid: `max_wr`
    /// within the device limit and at least the WQEs held; the limit at
    /// most the (new) `max_wr`.
    pub fn modify_srq(&mut self, srq: u32, attr: &SrqAttr) -> Result<(), VerbsError> {
        self.absorb_posts();
        let s = self.srqs.get_mut(&srq).ok_or(VerbsError::NoSuchSrq(srq))?;
        let max_wr = attr.max_wr.unwrap_or(s.max_wr);
        if let Some(m) = attr.max_wr {
            if m == 0 || m > MAX_SRQ_WR {
                return Err(VerbsError::BadValue {
                    what: "srq max_wr",
                    value: m.into(),
                });
            }
            if m < s.posts.used() {
                return Err(VerbsError::BadValue {
                    what: "srq max_wr (below the WQEs it holds)",
                    value: m.into(),
                });
            }
        }
        let limit = attr.srq_limit.unwrap_or(s.limit);
        if limit > max_wr {
            return Err(VerbsError::BadValue {
                what: "srq_limit (above max_wr)",
                value: limit.into(),
            });
        }
        s.max_wr = max_wr;
        if attr.srq_limit.is_some() {
            s.limit = limit;
            s.limit_reached = false;
        }
        s.posts.publish(s.max_wr, s.local_errors);
        Ok(())
    }

    /// `ibv_query_srq`, with the number of WQEs waiting.
    pub fn query_srq(&self, srq: u32) -> Result<SrqInfo, VerbsError> {
        let s = self.srqs.get(&srq).ok_or(VerbsError::NoSuchSrq(srq))?;
        Ok(SrqInfo {
            max_wr: s.max_wr,
            srq_limit: s.limit,
            // Posted without the lock and not yet taken in, too.
            wqes: s.posts.used(),
        })
    }

    /// `ibv_destroy_srq`: refused while a QP uses it. The WQEs it still
    /// holds are discarded without completions, as ibverbs does.
    pub fn destroy_srq(&mut self, srq: u32) -> Result<(), VerbsError> {
        self.absorb_posts();
        let s = self.srqs.get(&srq).ok_or(VerbsError::NoSuchSrq(srq))?;
        if s.users > 0 {
            return Err(VerbsError::Busy(
                "queue pairs use this shared receive queue",
            ));
        }
        s.posts.close();
        self.srqs.remove(&srq);
        self.events
            .retain(|e| *e != AsyncEvent::SrqLimitReached { srq });
        Ok(())
    }

    /// How bad scatter/gather lists posted to SRQ `srq` are reported (see
    /// [`LocalErrors`]; [`LocalErrors::Immediate`] until set).
    pub fn set_srq_local_errors(&mut self, srq: u32, mode: LocalErrors) -> Result<(), VerbsError> {
        let s = self.srqs.get_mut(&srq).ok_or(VerbsError::NoSuchSrq(srq))?;
        s.local_errors = mode;
        s.posts.publish(s.max_wr, s.local_errors);
        Ok(())
    }

    /// `ibv_post_srq_recv`: the scatter/gather elements are checked against
    /// the SRQ's protection domain, now or when a QP takes the request (see
    /// [`Self::set_srq_local_errors`]).
    pub fn post_srq_recv(&mut self, srq: u32, wr: RecvWr<'_>) -> Result<(), VerbsError> {
        // After the posts made without the lock, in order.
        self.absorb_posts();
        let s = self.srqs.get_mut(&srq).ok_or(VerbsError::NoSuchSrq(srq))?;
        if !s.posts.reserve() {
            return Err(VerbsError::SrqFull {
                srq,
                depth: s.max_wr,
            });
        }
        if s.local_errors == LocalErrors::Immediate
            && let Err(e) = self.mrs.check_sg(s.pd, wr.sg, true)
        {
            s.posts.release();
            return Err(e);
        }
        s.wqes.push_back(QueuedRecv::from(&wr));
        Ok(())
    }
}

/// A CQ's depth: 1 to `MAX_CQE`.
fn check_cq_depth(depth: u32) -> Result<(), VerbsError> {
    if depth == 0 || depth > crate::cq::MAX_CQE {
        return Err(VerbsError::BadValue {
            what: "cq depth (1 to 1,048,576)",
            value: depth.into(),
        });
    }
    Ok(())
}
