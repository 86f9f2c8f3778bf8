//! Memory windows: remote access to a range of a region under an R_Key of
//! its own, moved or revoked without touching the region (IBA 10.6.7).
//!
//! A window comes from [`ProtectionDomain::alloc_mw`]; a QP binds it
//! ([`QueuePair::bind_mw`]), and the bind gives it a new R_Key, so a peer
//! holding an earlier one is refused. A type 2 window is reached only
//! through the QP that bound it, and is closed by a LOCAL_INV
//! ([`SendWr::local_inv`](crate::SendWr::local_inv)) or by the peer's SEND
//! with invalidate; a type 1 window is moved by binding it again (length 0
//! unbinds it). The region needs [`Access::MW_BIND`](crate::Access::MW_BIND).
//!
//! [`ProtectionDomain::alloc_mw`]: crate::ProtectionDomain::alloc_mw
//! [`QueuePair::bind_mw`]: crate::QueuePair::bind_mw

use std::sync::Arc;

use crate::context::DeviceHandle;
use crate::driver::Shared;
use crate::{MwType, Result};

/// A memory window. Dropping it deallocates it: peers holding its R_Key
/// are refused from then on.
#[derive(Debug)]
pub struct MemoryWindow {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the device (its driver) alive while this object is.
    pub(crate) _device: Arc<DeviceHandle>,
    /// An R_Key it had: names it whatever binds happened since.
    pub(crate) key: u32,
    pub(crate) kind: MwType,
}

impl MemoryWindow {
    /// The window's R_Key now (each bind changes its low 8 bits).
    pub fn rkey(&self) -> Result<u32> {
        Ok(self.shared.engine().query_mw(self.key)?.rkey)
    }

    /// Type 1 or type 2.
    pub fn kind(&self) -> MwType {
        self.kind
    }
}

impl Drop for MemoryWindow {
    fn drop(&mut self) {
        let _ = self.shared.engine().dealloc_mw(self.key);
    }
}
