//! UD multicast on a device: [`QueuePair::attach_mcast`] and
//! [`QueuePair::detach_mcast`] (`ibv_attach_mcast` / `ibv_detach_mcast`).
//!
//! The engine keeps which QPs are in which group and delivers to them
//! (see `ferroce_core`'s `endpoint::mcast`); the backend joins the IP group
//! when the first QP of the device attaches and leaves it when the last
//! detaches (or is destroyed): on the UDP backend a socket bound to the
//! group, on the raw backend a membership of the interface, either way
//! with the kernel's IGMP/MLD report. A device receives its own
//! multicast sends on its attached QPs, the sender's included (the
//! kernel's multicast loop on UDP, the device's own loop on the raw
//! backend), as a NIC does; a QP can refuse its own
//! ([`QueuePair::block_self_mcast_loopback`], mlx5's
//! `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`).

use std::net::IpAddr;

use crate::driver::Shared;
use crate::{Error, QueuePair, Result};

impl QueuePair {
    /// `ibv_attach_mcast`: this UD QP receives what is sent to multicast
    /// `gid` (IPv4 224.0.0.0/4, as such or IPv4-mapped, or IPv6 ff00::/8)
    /// from now on. Refused, naming the cause, for a QP that is not UD, a
    /// GID that is not multicast, a QP already attached, or a group the
    /// backend cannot join (the error names the group and the interface).
    pub fn attach_mcast(&self, gid: IpAddr) -> Result<()> {
        self.shared.attach(self.qpn, gid)
    }

    /// `ibv_detach_mcast`: refused for a QP not attached to `gid`.
    pub fn detach_mcast(&self, gid: IpAddr) -> Result<()> {
        self.shared.detach(self.qpn, gid)
    }

    /// Keeps this QP's own multicast sends from coming back to it (mlx5's
    /// `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`); other QPs of the device, and
    /// other devices, still get them. Off until set.
    pub fn block_self_mcast_loopback(&self, block: bool) -> Result<()> {
        Ok(self
            .shared
            .engine()
            .block_self_mcast_loopback(self.qpn, block)?)
    }

    /// The groups this QP is attached to (IPv4-mapped GIDs as IPv4). A
    /// QP dropped while attached leaves them (the kernel refuses
    /// `ibv_destroy_qp` with EBUSY instead, which the C library follows).
    pub fn mcast_groups(&self) -> Vec<IpAddr> {
        self.shared.engine().mcast_groups_of(self.qpn)
    }
}

impl Shared {
    pub(crate) fn attach(&self, qpn: u32, gid: IpAddr) -> Result<()> {
        let _device = self.span.enter();
        // The I/O lock first, as a round of progress takes them, so that
        // the engine's groups and the backend's memberships change together.
        let mut io = self.io();
        let new = self.engine().attach_mcast(qpn, gid)?;
        if new
            && let Some(group) = ferroce_core::multicast_group(gid)
            && let Err(e) = io.backend.join(group)
        {
            let _ = self.engine().detach_mcast(qpn, gid);
            return Err(Error::Io(e));
        }
        Ok(())
    }

    pub(crate) fn detach(&self, qpn: u32, gid: IpAddr) -> Result<()> {
        let _device = self.span.enter();
        let mut io = self.io();
        let last = self.engine().detach_mcast(qpn, gid)?;
        if last && let Some(group) = ferroce_core::multicast_group(gid) {
            io.backend.leave(group);
        }
        Ok(())
    }

    /// Leaves the groups no QP is attached to any more (after a QP that
    /// was attached is destroyed).
    pub(crate) fn leave_unused_groups(&self, groups: Vec<IpAddr>) {
        if groups.is_empty() {
            return;
        }
        let mut io = self.io();
        let engine = self.engine();
        for g in groups {
            if !engine.accepts_group(g) {
                io.backend.leave(g);
            }
        }
    }
}
