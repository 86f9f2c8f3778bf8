//! UD multicast (IBA 10.5.2.2 and 11.2.7: attach and detach; RoCE v2
//! carries a group as an IP multicast address).
//!
//! Contract:
//! * [`Endpoint::attach_mcast`] / [`Endpoint::detach_mcast`] as
//!   `ibv_attach_mcast` / `ibv_detach_mcast`: UD QPs only, multicast GIDs
//!   only, attaching twice or detaching what is not attached is an error
//!   naming the cause. Each says whether the endpoint's set of groups
//!   changed, which is when the I/O layer joins or leaves the IP group
//!   ([`Endpoint::mcast_groups`] is the whole set). Destroying a QP
//!   detaches it from its groups.
//! * A packet with DQPN [`MULTICAST_QPN`] sent to a group
//!   ([`Endpoint::handle_multicast`], or a RoCE v1 packet whose GRH names
//!   one) is handed to every QP of the endpoint attached to it, in the
//!   order they attached; each checks its own state, P_Key and Q_Key and
//!   takes its own receive (no receive posted: dropped and counted, as UD
//!   drops). Nobody attached: dropped, [`crate::Stats::rx_mcast_unattached`].
//!   DQPN 0xFFFFFF to a unicast GID, another DQPN to a group, or anything
//!   but a UD SEND to a group: [`crate::Stats::rx_mcast_misaddressed`].
//! * Sending: a UD SEND whose address names a multicast GID goes out with
//!   DQPN 0xFFFFFF whatever remote QPN it was posted with (IBA 10.5.2.2:
//!   multicast packets carry the multicast QPN; rdma_cm hands out
//!   0xFFFFFF as the remote QPN anyway).
//! * Loopback is the I/O layer's, as a NIC's: the engine does not hand its
//!   own sends to its own QPs. A packet the I/O layer loops back (the UDP
//!   backend's kernel does, IP_MULTICAST_LOOP) reaches every attached QP,
//!   the sender's own too, as mlx5 does, unless the sender blocked it
//!   ([`Endpoint::block_self_mcast_loopback`], mlx5's
//!   `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`): the I/O layer says which
//!   packets are the device's own ([`Endpoint::handle_own_multicast`]),
//!   and such a packet skips the QP whose number is its DETH's source QP.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ferroce_wire::{Transport, TransportPacket};

use super::{Endpoint, Grh};
use crate::qp::responder;
use crate::tables::Tables;
use crate::time::Instant;
use crate::verbs::{McastRefusal, QpType, VerbsError};

/// The destination QPN of every multicast packet (IBA 10.5.2.2).
pub const MULTICAST_QPN: u32 = 0xFF_FFFF;

/// Groups an endpoint may have (rxe's max_mcast_grp).
pub const MAX_MCAST_GROUPS: usize = 8192;

/// QPs one group may have attached (rxe's max_mcast_qp_attach).
pub const MAX_MCAST_QP_ATTACH: usize = 56;

/// The multicast group a GID names, or `None` for a unicast GID: IPv4
/// 224.0.0.0/4 (IPv4-mapped GIDs are taken as their IPv4 address), IPv6
/// ff00::/8.
pub fn multicast_group(gid: IpAddr) -> Option<IpAddr> {
    let gid = match gid {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(gid, IpAddr::V4),
        v4 => v4,
    };
    gid.is_multicast().then_some(gid)
}

/// The destination GID of a RoCE v1 GRH, as an address (IPv4-mapped GIDs
/// as IPv4).
fn grh_dest(grh: &Grh) -> IpAddr {
    let mut dgid = [0u8; 16];
    dgid.copy_from_slice(&grh[24..40]);
    let a = std::net::Ipv6Addr::from(dgid);
    a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4)
}

/// The attached QPs of each group, in the order they attached.
pub(super) type Groups = BTreeMap<IpAddr, Vec<u32>>;

impl Endpoint {
    /// `ibv_attach_mcast`: QP `qpn` (UD) receives what is sent to `gid`
    /// from now on. Returns whether the group is new to the endpoint (the
    /// I/O layer then joins it).
    pub fn attach_mcast(&mut self, qpn: u32, gid: IpAddr) -> Result<bool, VerbsError> {
        let group = self.mcast_target(qpn, gid)?;
        let refuse = |why| VerbsError::Mcast { qpn, group, why };
        let new = !self.groups.contains_key(&group);
        if new && self.groups.len() >= MAX_MCAST_GROUPS {
            return Err(refuse(McastRefusal::Full));
        }
        let members = self.groups.entry(group).or_default();
        if members.contains(&qpn) {
            return Err(refuse(McastRefusal::AlreadyAttached));
        }
        if members.len() >= MAX_MCAST_QP_ATTACH {
            return Err(refuse(McastRefusal::Full));
        }
        members.push(qpn);
        Ok(new)
    }

    /// `ibv_detach_mcast`. Returns whether the group has no QP left (the
    /// I/O layer then leaves it).
    pub fn detach_mcast(&mut self, qpn: u32, gid: IpAddr) -> Result<bool, VerbsError> {
        let group = self.mcast_target(qpn, gid)?;
        let members = self.groups.get_mut(&group);
        let Some(members) = members.filter(|m| m.contains(&qpn)) else {
            return Err(VerbsError::Mcast {
                qpn,
                group,
                why: McastRefusal::NotAttached,
            });
        };
        members.retain(|&n| n != qpn);
        let last = members.is_empty();
        if last {
            self.groups.remove(&group);
        }
        Ok(last)
    }

    /// The groups at least one QP is attached to.
    pub fn mcast_groups(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.groups.keys().copied()
    }

    /// The groups QP `qpn` is attached to.
    pub fn mcast_groups_of(&self, qpn: u32) -> Vec<IpAddr> {
        self.groups
            .iter()
            .filter(|(_, m)| m.contains(&qpn))
            .map(|(g, _)| *g)
            .collect()
    }

    /// Whether some QP is attached to `group` (a cheap filter for the I/O
    /// layer, as [`Self::accepts`]).
    pub fn accepts_group(&self, group: IpAddr) -> bool {
        multicast_group(group).is_some_and(|g| self.groups.contains_key(&g))
    }

    /// A received RoCE v2 packet sent to `group` (the IP destination of a
    /// datagram that came to a multicast address): as
    /// [`Self::handle_datagram_ecn`], delivered as the module docs say.
    pub fn handle_multicast(
        &mut self,
        now: Instant,
        from: IpAddr,
        group: IpAddr,
        ecn: super::Ecn,
        data: &[u8],
    ) {
        self.handle_packet(now, from, Some(group), None, ecn, data, false);
    }

    /// As [`Self::handle_multicast`] for a multicast packet this device
    /// sent, looped back to it (`from` is its own address; `grh` a RoCE
    /// v1 packet's): a QP that blocks its own loopback does not get it.
    pub fn handle_own_multicast(
        &mut self,
        now: Instant,
        from: IpAddr,
        group: IpAddr,
        grh: Option<&Grh>,
        ecn: super::Ecn,
        data: &[u8],
    ) {
        self.handle_packet(now, from, Some(group), grh, ecn, data, true);
    }

    /// Keeps QP `qpn`'s own multicast sends from being delivered back to
    /// it (`IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`); other QPs of the device
    /// still get them.
    pub fn block_self_mcast_loopback(&mut self, qpn: u32, block: bool) -> Result<(), VerbsError> {
        let q = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        q.block_self_mcast = block;
        Ok(())
    }

    /// Checks that `qpn` is a UD QP and `gid` a multicast GID.
    fn mcast_target(&self, qpn: u32, gid: IpAddr) -> Result<IpAddr, VerbsError> {
        let q = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let refuse = |why| VerbsError::Mcast {
            qpn,
            group: gid,
            why,
        };
        if q.init.qp_type != QpType::Ud {
            return Err(refuse(McastRefusal::NotUd(q.init.qp_type)));
        }
        multicast_group(gid).ok_or(refuse(McastRefusal::NotMulticast))
    }

    /// Forgets QP `qpn`'s attachments (it is being destroyed).
    pub(super) fn forget_mcast(&mut self, qpn: u32) {
        self.groups.retain(|_, m| {
            m.retain(|&n| n != qpn);
            !m.is_empty()
        });
    }

    /// Takes the packet if multicast addressing concerns it (DQPN
    /// 0xFFFFFF, or a multicast destination): delivered, or dropped and
    /// counted. `false`: a unicast packet, for the unicast path.
    pub(super) fn take_multicast(
        &mut self,
        from: IpAddr,
        to: Option<IpAddr>,
        grh: Option<&Grh>,
        data: &[u8],
        own: bool,
    ) -> bool {
        // The common case first, on the BTH alone: a unicast packet to us.
        let unicast = |dqpn| dqpn != MULTICAST_QPN && to.is_none() && grh.is_none();
        if ferroce_wire::bth::Bth::new_checked(data).is_ok_and(|b| unicast(b.dest_qp())) {
            return false;
        }
        let Ok(pkt) = TransportPacket::new_checked(data) else {
            return false; // counted as malformed by the unicast path
        };
        let to = to.or_else(|| grh.map(grh_dest));
        let group = to.and_then(multicast_group);
        let to_mcast_qpn = pkt.bth().dest_qp() == MULTICAST_QPN;
        let group = match (to_mcast_qpn, group) {
            (false, None) => return false,
            (true, Some(g)) => g,
            _ => {
                self.stats.rx_mcast_misaddressed += 1;
                return true;
            }
        };
        let info = pkt.info();
        if info.transport != Transport::Ud || info.response || pkt.deth().is_none() {
            self.stats.rx_mcast_misaddressed += 1;
            return true;
        }
        let Some(members) = self.groups.get(&group).cloned() else {
            self.stats.rx_mcast_unattached += 1;
            return true;
        };
        let sender = pkt.deth().map(|d| d.src_qp()).filter(|_| own);
        for qpn in members {
            if sender == Some(qpn) && self.qps.get(&qpn).is_some_and(|q| q.block_self_mcast) {
                continue; // its own send, which it asked not to get back
            }
            self.deliver_copy(qpn, &pkt, from, grh, group);
        }
        true
    }

    /// One attached QP's copy of a multicast packet.
    fn deliver_copy(
        &mut self,
        qpn: u32,
        pkt: &TransportPacket<&[u8]>,
        from: IpAddr,
        grh: Option<&Grh>,
        group: IpAddr,
    ) {
        let Some(q) = self.qps.get_mut(&qpn) else {
            return;
        };
        if !q.receiving() {
            self.stats.rx_wrong_state += 1;
            return;
        }
        if !crate::qp::pkey_matches(pkt.bth().pkey(), q.pkey()) {
            self.stats.rx_bad_pkey += 1;
            return;
        }
        let mut tables = Tables {
            mrs: &mut self.mrs,
            cqs: &mut self.cqs,
            srqs: &mut self.srqs,
            stats: &mut self.stats,
        };
        responder::on_multicast(q, pkt, from, grh, group, &mut tables);
        self.stats.rx_mcast_delivered += 1;
        self.touched(qpn);
        self.raise_events(qpn);
    }
}
