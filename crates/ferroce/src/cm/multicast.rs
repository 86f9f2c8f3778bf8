//! `rdma_join_multicast` / `rdma_leave_multicast` on a [`CmId`], as
//! rdma_cm does them on RoCE (`ferroce_cm::rdma_cm::multicast` has the
//! rules): a local join, answered at once by MULTICAST_JOIN with the
//! group's UD destination (QPN 0xFFFFFF, rdma_cm's Q_Key), the ID's QP
//! attached to the group (librdmacm attaches it when the event comes;
//! here before the event is queued) and, on RoCE v2, the IP group joined
//! on the device (IGMP), which the attachment makes the device do.
//! A send-only join attaches nothing. Leaving detaches; destroying the ID
//! leaves every group it joined.

use std::net::IpAddr;

use ferroce_cm::rdma_cm::multicast;

use super::id::{CmId, IdInner, Phase, wrong_state};
use super::{CmEventKind, CmIdError, UdInfo};
use crate::{Path, Result, RoceMode, UdDest};

/// A group an ID joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Joined {
    /// The address the application named.
    pub(crate) addr: IpAddr,
    /// The group's GID.
    pub(crate) mgid: IpAddr,
    /// The QP attached to the group for this join, if any.
    pub(crate) attached: Option<u32>,
}

/// The UDP source port of the packets to a group (rdma-core's for flow
/// label 0: the low end of the RoCE range).
const GROUP_SRC_PORT: u16 = 0xc000;

impl CmId {
    /// `rdma_join_multicast`: joins `addr` (an IPv4 group on a RoCE v2
    /// port; IPv4 or IPv6 on RoCE v1). The ID must be bound or resolved
    /// (not further) in the UDP port space. MULTICAST_JOIN follows at once.
    pub fn join_multicast(&self, addr: IpAddr) -> Result<()> {
        self.join(addr, false)
    }

    /// `rdma_join_multicast_ex` with `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`:
    /// as [`join_multicast`](Self::join_multicast), but the ID's QP is not
    /// attached and the host does not join the IP group (it only sends).
    pub fn join_multicast_send_only(&self, addr: IpAddr) -> Result<()> {
        self.join(addr, true)
    }

    fn join(&self, addr: IpAddr, send_only: bool) -> Result<()> {
        let mut st = self.inner.state();
        if !matches!(st.phase, Phase::AddrBound | Phase::AddrResolved) {
            return Err(wrong_state(
                "join_multicast",
                st.phase,
                "join on an ID that is bound or has resolved its address, not further",
            ));
        }
        let Some(ctx) = st.device.clone() else {
            return Err(wrong_state(
                "join_multicast",
                st.phase,
                "bind to a local address (not the wildcard) or resolve one first",
            ));
        };
        let addr = addr.to_canonical();
        if st.joined.iter().any(|j| j.addr == addr) {
            return Err(CmIdError::AlreadyJoined(addr).into());
        }
        let roce = st.roce;
        let j = multicast::join(addr, self.inner.port_space, roce == RoceMode::V2, send_only)
            .map_err(CmIdError::Multicast)?;
        let mgid = IpAddr::V6(j.mgid).to_canonical();
        let attach = st.qp.filter(|_| !send_only).map(|q| q.qpn);
        if let Some(qpn) = attach {
            ctx.shared.attach(qpn, mgid)?;
        }
        st.joined.push(Joined {
            addr,
            mgid,
            attached: attach,
        });
        let tos = st.tos.unwrap_or(st.default_tos);
        drop(st);
        let dest = UdDest {
            path: Path {
                remote: mgid,
                udp_src_port: GROUP_SRC_PORT,
                traffic_class: tos,
                hop_limit: j.hop_limit,
                roce,
            },
            qpn: j.qpn,
            qkey: j.qkey,
        };
        let ud = UdInfo {
            dest,
            private_data: Vec::new(),
        };
        self.inner
            .report(CmEventKind::MulticastJoin { group: addr, ud }, None);
        Ok(())
    }

    /// `rdma_leave_multicast`: leaves `addr` (its QP detached; the device
    /// leaves the IP group when no QP of it is in the group any more).
    pub fn leave_multicast(&self, addr: IpAddr) -> Result<()> {
        let addr = addr.to_canonical();
        let mut st = self.inner.state();
        let Some(i) = st.joined.iter().position(|j| j.addr == addr) else {
            return Err(CmIdError::NotJoined(addr).into());
        };
        let j = st.joined.swap_remove(i);
        let ctx = st.device.clone();
        drop(st);
        if let (Some(qpn), Some(ctx)) = (j.attached, ctx) {
            ctx.shared.detach(qpn, j.mgid)?;
        }
        Ok(())
    }
}

/// Leaves every group the ID joined (it is being destroyed).
pub(crate) fn leave_all(inner: &mut IdInner) {
    let st = inner.state.get_mut().unwrap_or_else(|p| p.into_inner());
    let Some(ctx) = st.device.clone() else { return };
    for j in st.joined.drain(..) {
        if let Some(qpn) = j.attached {
            let _ = ctx.shared.detach(qpn, j.mgid);
        }
    }
}
