//! `rdma_join_multicast` on RoCE, as the kernel's `cma_iboe_join_multicast`
//! does it: no subnet administrator; the join is local and answered at
//! once.
//!
//! - The multicast GID comes from the IP address: an IPv6 address as it
//!   is; an IPv4 one mapped (`::ffff:a.b.c.d`) on a RoCE v2 port and as
//!   `ff0e::ffff:a.b.c.d` on a RoCE v1 port.
//! - The Q_Key is rdma_cm's ([`RDMA_UDP_QKEY`]) in the UDP port space.
//! - The hop limit is 64 for IPv4 groups on RoCE v2 (the packets are
//!   routed IP multicast), else 1.
//! - RoCE v2 with an IPv6 group is refused (the kernel: ENOTSUPP), and so
//!   is the unspecified address (EINVAL).
//! - On RoCE v2 an IPv4 full-member join joins the IP group on the
//!   interface (the kernel's `cma_igmp_send`, IGMP); a send-only join
//!   does not.
//! - The answer (`RDMA_CM_EVENT_MULTICAST_JOIN`) carries the group's
//!   address handle (destination GID the MGID, that hop limit), QPN
//!   0xFFFFFF and the Q_Key.

use core::fmt;
use std::net::{IpAddr, Ipv6Addr};

use super::{PortSpace, RDMA_UDP_QKEY};
use ferroce_core::MULTICAST_QPN;

/// What a join settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McJoin {
    /// The group's GID: the destination of its packets.
    pub mgid: Ipv6Addr,
    /// The Q_Key members use (0 outside the UDP port space).
    pub qkey: u32,
    /// The hop limit of the group's packets.
    pub hop_limit: u8,
    /// Whether the host joins the IP group (IGMP) on the interface.
    pub ip_join: bool,
    /// The destination QPN of the group's packets (0xFFFFFF).
    pub qpn: u32,
}

/// Why a join is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McJoinError {
    /// The unspecified address (the kernel: EINVAL).
    Unspecified,
    /// Not a multicast address (224.0.0.0/4, ff00::/8).
    NotMulticast(IpAddr),
    /// An IPv6 group on a RoCE v2 port (the kernel: ENOTSUPP).
    Ipv6OnRoceV2(IpAddr),
}

impl fmt::Display for McJoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unspecified => write!(f, "cannot join the unspecified address: name a group"),
            Self::NotMulticast(a) => write!(
                f,
                "{a} is not a multicast address: take one in 224.0.0.0/4 or ff00::/8"
            ),
            Self::Ipv6OnRoceV2(a) => write!(
                f,
                "{a}: rdma_cm joins no IPv6 group on a RoCE v2 port (the kernel refuses \
                 with ENOTSUPP): use an IPv4 group, or RoCE v1 (default_roce_mode)"
            ),
        }
    }
}

impl std::error::Error for McJoinError {}

/// The GID of group `addr` on a port of RoCE version 2 (`roce_v2`) or 1.
pub fn mgid(addr: IpAddr, roce_v2: bool) -> Ipv6Addr {
    match addr.to_canonical() {
        IpAddr::V6(a) => a,
        IpAddr::V4(a) if roce_v2 => a.to_ipv6_mapped(),
        IpAddr::V4(a) => {
            let [b0, b1, b2, b3] = a.octets();
            let low = |x: u8, y: u8| u16::from(x) << 8 | u16::from(y);
            Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0xffff, low(b0, b1), low(b2, b3))
        }
    }
}

/// `rdma_join_multicast` of `addr` by an ID in `ps` on a port of RoCE
/// version 2 (`roce_v2`) or 1; `send_only` for
/// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`.
pub fn join(
    addr: IpAddr,
    ps: PortSpace,
    roce_v2: bool,
    send_only: bool,
) -> Result<McJoin, McJoinError> {
    let addr = addr.to_canonical();
    if addr.is_unspecified() {
        return Err(McJoinError::Unspecified);
    }
    if !addr.is_multicast() {
        return Err(McJoinError::NotMulticast(addr));
    }
    if addr.is_ipv6() && roce_v2 {
        return Err(McJoinError::Ipv6OnRoceV2(addr));
    }
    let routed = addr.is_ipv4() && roce_v2;
    Ok(McJoin {
        mgid: mgid(addr, roce_v2),
        qkey: if ps == PortSpace::Udp {
            RDMA_UDP_QKEY
        } else {
            0
        },
        hop_limit: if routed { 64 } else { 1 },
        ip_join: routed && !send_only,
        qpn: MULTICAST_QPN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_as_cma_iboe_join_multicast() {
        let v4: IpAddr = "239.1.2.3".parse().unwrap();
        let j = join(v4, PortSpace::Udp, true, false).unwrap();
        assert_eq!(j.mgid, "::ffff:239.1.2.3".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            (j.qkey, j.hop_limit, j.ip_join, j.qpn),
            (0x0123_4567, 64, true, 0xff_ffff)
        );
        let send_only = join(v4, PortSpace::Udp, true, true).unwrap();
        assert!(!send_only.ip_join);
        let v1 = join(v4, PortSpace::Udp, false, false).unwrap();
        assert_eq!(v1.mgid, "ff0e::ffff:ef01:203".parse::<Ipv6Addr>().unwrap());
        assert_eq!((v1.hop_limit, v1.ip_join), (1, false));
        let v6: IpAddr = "ff0e::5".parse().unwrap();
        assert_eq!(
            join(v6, PortSpace::Udp, true, false),
            Err(McJoinError::Ipv6OnRoceV2(v6))
        );
        assert_eq!(
            join(v6, PortSpace::Udp, false, false).unwrap().mgid,
            "ff0e::5".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            join("0.0.0.0".parse().unwrap(), PortSpace::Udp, true, false),
            Err(McJoinError::Unspecified)
        );
        let uni: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            join(uni, PortSpace::Udp, true, false),
            Err(McJoinError::NotMulticast(uni))
        );
        assert_eq!(join(v4, PortSpace::Tcp, true, false).unwrap().qkey, 0);
    }
}
