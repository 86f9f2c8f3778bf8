//! Multicast groups on the raw backend: the frames' destination MAC
//! address for a group, and the interface's membership.
//!
//! The packet ring sees what the interface accepts. [`RawBackend::join`]
//! makes the kernel join the IP group on the interface: the kernel adds
//! the group's MAC address to the interface's filter and sends the IGMP
//! or MLD report a snooping switch needs, as rdma_cm's `cma_igmp_send`
//! does for RoCE v2. The membership is held by a UDP socket bound to
//! `group:4791` (`SO_REUSEADDR`) whose filter drops everything, as the
//! unicast port is held: the kernel's own stack, which gets every frame
//! too, then has a socket for the group's datagrams instead of counting
//! them as sent to no port. Dropping the socket leaves.

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::os::fd::AsRawFd;

use ferroce_wire::udp::ROCE_V2_PORT;
use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};

use super::{RawBackend, filter};
use crate::sys::packet;

/// The destination MAC address of a frame to multicast `group`: RoCE v2
/// over IPv4 01:00:5E and the group's low 23 bits (RFC 1112), over IPv6
/// 33:33 and its last 4 bytes (RFC 2464); RoCE v1 (`v1`) 33:33 and the
/// GID's last 4 bytes whatever the GID (`rdma_get_mcast_mac`).
pub fn multicast_mac(group: IpAddr, v1: bool) -> [u8; 6] {
    let gid = match group {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    match group.to_canonical() {
        IpAddr::V4(a) if !v1 => {
            let o = a.octets();
            [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
        }
        _ => [0x33, 0x33, gid[12], gid[13], gid[14], gid[15]],
    }
}

impl RawBackend {
    /// Joins IP multicast `group` on the interface (see the module docs).
    /// Joining twice is a no-op.
    pub fn join(&mut self, group: IpAddr) -> io::Result<()> {
        let group = group.to_canonical();
        if self.groups.iter().any(|(g, _)| *g == group) {
            return Ok(());
        }
        let fail = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("joining {group} on {}: {e}", self.interface),
            )
        };
        let domain = if group.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        packet::attach_filter(s.as_raw_fd(), &filter::reject_all())?;
        s.set_reuse_address(true)?;
        match group {
            IpAddr::V4(g) => {
                s.bind(&SocketAddr::new(group, ROCE_V2_PORT).into())?;
                s.join_multicast_v4_n(&g, &InterfaceIndexOrAddress::Index(self.ifindex))
                    .map_err(fail)?;
            }
            IpAddr::V6(g) => {
                s.set_only_v6(true)?;
                let at = SocketAddrV6::new(g, ROCE_V2_PORT, 0, self.ifindex);
                s.bind(&at.into())?;
                s.join_multicast_v6(&g, self.ifindex).map_err(fail)?;
            }
        }
        tracing::debug!(%group, interface = %self.interface, "joined multicast group");
        self.groups.push((group, s));
        Ok(())
    }

    /// Leaves `group` (no-op if not joined).
    pub fn leave(&mut self, group: IpAddr) {
        let group = group.to_canonical();
        self.groups.retain(|(g, _)| *g != group);
    }
}

#[cfg(test)]
mod tests {
    use super::multicast_mac;

    #[test]
    fn group_macs_as_rfc_1112_2464_and_rdma_get_mcast_mac() {
        let mac = |g: &str, v1| multicast_mac(g.parse().unwrap(), v1);
        // The 24th bit from the end is dropped: 239.129.2.3 as 239.1.2.3.
        assert_eq!(mac("239.129.2.3", false), [1, 0, 0x5e, 1, 2, 3]);
        assert_eq!(mac("::ffff:224.0.0.251", false), [1, 0, 0x5e, 0, 0, 251]);
        assert_eq!(mac("ff0e::1:2:3", false), [0x33, 0x33, 0, 2, 0, 3]);
        assert_eq!(mac("239.1.2.3", true), [0x33, 0x33, 239, 1, 2, 3]);
        assert_eq!(mac("ff0e::1:2:3", true), [0x33, 0x33, 0, 2, 0, 3]);
    }
}
