//! Protection domains: what registers memory and creates QPs and SRQs.

use std::sync::Arc;

use ferroce_core::{QpInit, Region};

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::srq::SrqHandle;
use crate::{
    Access, Backing, MemoryRegion, MemoryWindow, MrInfo, MwType, QpInitAttr, QueuePair, Result,
    SharedReceiveQueue,
};

/// A protection domain.
#[derive(Debug)]
pub struct ProtectionDomain {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) device: Arc<DeviceHandle>,
    pub(crate) handle: u32,
}

impl ProtectionDomain {
    /// Registers `len` zeroed bytes with `access`.
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        let mut engine = self.shared.engine();
        let info = engine.reg_mr(self.handle, len, access)?;
        let region = engine.region(info.lkey)?;
        drop(engine);
        Ok(self.region(info, region))
    }

    /// Registers the caller's memory in place, without a copy
    /// (`ibv_reg_mr` on an existing buffer): a `Vec<u8>` or `Box<[u8]>`,
    /// which [`MemoryRegion::into_inner`] gives back, or memory the
    /// application owns, lent with the `unsafe` [`Backing::from_raw`] (its
    /// contract is `ibv_reg_mr`'s: the memory stays valid until the region
    /// is dropped, and anything else touches it meanwhile only as a device
    /// would, through volatile or atomic accesses or from C).
    ///
    /// ```no_run
    /// # fn f(pd: &ferroce::ProtectionDomain) -> ferroce::Result<()> {
    /// use ferroce::Access;
    /// let mr = pd.reg_mr_with(vec![7u8; 4096], Access::LOCAL_WRITE | Access::REMOTE_READ)?;
    /// // ... peers READ it ...
    /// let buf: Box<[u8]> = mr.into_inner().expect("an owned buffer");
    /// # Ok(()) }
    /// ```
    pub fn reg_mr_with(&self, buf: impl Into<Backing>, access: Access) -> Result<MemoryRegion> {
        let (info, region) = self
            .shared
            .engine()
            .reg_mr_with(self.handle, buf.into(), access)?;
        Ok(self.region(info, region))
    }

    /// [`Self::reg_mr_with`] at the address `iova`: peers name the
    /// region's first byte by it ([`MemoryRegion::addr`]) rather than by an
    /// address ferroce picks. What a C ABI needs, where `ibv_reg_mr`
    /// registers a buffer at its own address.
    pub fn reg_mr_with_iova(
        &self,
        buf: impl Into<Backing>,
        access: Access,
        iova: u64,
    ) -> Result<MemoryRegion> {
        let (info, region) =
            self.shared
                .engine()
                .reg_mr_with_iova(self.handle, buf.into(), access, iova)?;
        Ok(self.region(info, region))
    }

    fn region(&self, info: MrInfo, region: Arc<Region>) -> MemoryRegion {
        MemoryRegion {
            shared: self.shared.clone(),
            _device: self.device.clone(),
            info,
            region,
            registered: true,
        }
    }

    /// `ibv_alloc_mw`: a memory window of this domain, bound to nothing
    /// yet ([`QueuePair::bind_mw`] binds it).
    pub fn alloc_mw(&self, kind: MwType) -> Result<MemoryWindow> {
        let info = self.shared.engine().alloc_mw(self.handle, kind)?;
        Ok(MemoryWindow {
            shared: self.shared.clone(),
            _device: self.device.clone(),
            key: info.rkey,
            kind,
        })
    }

    /// `ibv_create_qp`: a QP in RESET, with its first PSN chosen
    /// ([`QpInitAttr::psn`]); [`QueuePair::connect`] brings it up.
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<QueuePair> {
        let qpn = self.shared.engine().create_qp(QpInit {
            pd: self.handle,
            qp_type: attr.qp_type,
            send_cq: attr.send_cq.handle,
            recv_cq: attr.recv_cq.handle,
            max_send_wr: attr.max_send_wr,
            max_recv_wr: attr.max_recv_wr,
            sq_sig_all: attr.sq_sig_all,
            srq: attr.srq.map(|s| s.inner.handle),
        })?;
        Ok(QueuePair::new(
            self.shared.clone(),
            self.device.clone(),
            qpn,
            attr,
        ))
    }

    /// An RD QP of reliable datagram domain `rdd` (`attr.qp_type` must be
    /// [`QpType::Rd`](crate::QpType::Rd)), in RESET: [`QueuePair::ready`]
    /// brings it up; its sends name EE contexts of `rdd`.
    pub fn create_rd_qp(&self, attr: &QpInitAttr<'_>, rdd: &crate::RdDomain) -> Result<QueuePair> {
        let qpn = self.shared.engine().create_rd_qp(
            QpInit {
                pd: self.handle,
                qp_type: attr.qp_type,
                send_cq: attr.send_cq.handle,
                recv_cq: attr.recv_cq.handle,
                max_send_wr: attr.max_send_wr,
                max_recv_wr: attr.max_recv_wr,
                sq_sig_all: attr.sq_sig_all,
                srq: attr.srq.map(|s| s.inner.handle),
            },
            rdd.handle(),
        )?;
        let mut qp = QueuePair::new(self.shared.clone(), self.device.clone(), qpn, attr);
        qp.rdd = Some(rdd.inner.clone());
        Ok(qp)
    }

    /// A shared receive queue of up to `max_wr` receive work requests
    /// (`ibv_create_srq`), its limit not armed. QPs created with it in
    /// [`QpInitAttr::srq`] take their receives from it.
    pub fn create_srq(&self, max_wr: u32) -> Result<SharedReceiveQueue> {
        let (handle, poster) = {
            let mut ep = self.shared.engine();
            let handle = ep.create_srq(self.handle, max_wr, 0)?;
            (handle, ep.srq_poster(handle)?)
        };
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqHandle {
                shared: self.shared.clone(),
                _device: self.device.clone(),
                handle,
                poster,
                _xrcd: None,
            }),
        })
    }
}
