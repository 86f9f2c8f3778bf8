//! Protection domains: what registers memory and creates QPs and SRQs.

use std::sync::Arc;

use ferroce_core::QpInit;

use crate::driver::Shared;
use crate::srq::SrqHandle;
use crate::{Access, MemoryRegion, QpInitAttr, QueuePair, Result, SharedReceiveQueue};

/// A protection domain.
#[derive(Debug)]
pub struct ProtectionDomain {
    pub(crate) shared: Arc<Shared>,
    pub(crate) handle: u32,
}

impl ProtectionDomain {
    /// Registers `len` zeroed bytes with `access`.
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        let info = self.shared.engine().reg_mr(self.handle, len, access)?;
        Ok(MemoryRegion {
            shared: self.shared.clone(),
            info,
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
        Ok(QueuePair::new(self.shared.clone(), qpn, attr))
    }

    /// A shared receive queue of up to `max_wr` receive work requests
    /// (`ibv_create_srq`), its limit not armed. QPs created with it in
    /// [`QpInitAttr::srq`] take their receives from it.
    pub fn create_srq(&self, max_wr: u32) -> Result<SharedReceiveQueue> {
        let handle = self.shared.engine().create_srq(self.handle, max_wr, 0)?;
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqHandle {
                shared: self.shared.clone(),
                handle,
            }),
        })
    }
}
