//! The GID table: GID entries, their text forms, and the table of an
//! interface in the order the kernel fills rxe's.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Interface;

/// GID table slots (rxe's `RXE_PORT_GID_TBL_LEN`). ferroce's table holds
/// the interface's addresses; more than this many are not listed.
pub const GID_TABLE_LEN: u32 = 1024;
/// How a GID is used on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidType {
    /// RoCE v1 (Ethernet, ethertype 0x8915). ferroce's UDP backend does
    /// not send it.
    RoceV1,
    /// RoCE v2 (UDP/IP, port 4791).
    RoceV2,
}

impl GidType {
    /// As `ibv_devinfo` and `/sys/class/infiniband/*/gid_attrs/types` name
    /// it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::RoceV1 => "RoCE v1",
            Self::RoceV2 => "RoCE v2",
        }
    }
}

/// One GID table entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gid {
    /// The GID in wire order (an IPv6 address; IPv4 as `::ffff:a.b.c.d`).
    pub raw: [u8; 16],
    /// RoCE v1 or v2.
    pub kind: GidType,
    /// The interface it belongs to (`/sys/.../gid_attrs/ndevs`).
    pub netdev: String,
}

impl Gid {
    /// The RoCE v2 GID of an IP address, as the kernel's `rdma_ip2gid`.
    pub fn from_ip(addr: IpAddr, netdev: &str) -> Self {
        let v6 = match addr {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        Self {
            raw: v6.octets(),
            kind: GidType::RoceV2,
            netdev: netdev.to_owned(),
        }
    }

    /// The IP address the GID stands for (IPv4 for an IPv4-mapped GID).
    pub fn ip(&self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self.raw)).to_canonical()
    }

    /// The 8 groups of 4 hex digits sysfs shows
    /// (`0000:0000:0000:0000:0000:ffff:c612:000b`), which `ibv_devinfo`
    /// prints for RoCE v1 GIDs.
    pub fn long_form(&self) -> String {
        let r = &self.raw;
        (0..8)
            .map(|i| format!("{:02x}{:02x}", r[2 * i], r[2 * i + 1]))
            .collect::<Vec<_>>()
            .join(":")
    }
}

/// As glibc's `inet_ntop(AF_INET6)`, which `ibv_devinfo` prints RoCE v2
/// GIDs with: RFC 5952 text, except that an address whose first 96 bits
/// are zero and whose next 16 are not prints its last 32 bits dotted
/// (`::1.2.3.4`), and an IPv4-mapped one as `::ffff:1.2.3.4`.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.raw;
        if r[..10] == [0; 10] {
            let v4 = Ipv4Addr::new(r[12], r[13], r[14], r[15]);
            if r[10..12] == [0xff, 0xff] {
                return write!(f, "::ffff:{v4}");
            }
            if r[10..12] == [0, 0] && (r[12] | r[13]) != 0 {
                return write!(f, "::{v4}");
            }
        }
        fmt::Display::fmt(&Ipv6Addr::from(*r), f)
    }
}
/// The GID table of a device on `iface`, as the kernel fills rxe's when the
/// device is created (`roce_gid_mgmt.c`: default GIDs, then IPv4, then
/// IPv6 addresses; an address equal to an entry already present is not
/// listed twice):
///
/// 0. the default GID `fe80::` + EUI-64 of the MAC, whether or not the
///    interface has that link-local address (it is the usual one; under
///    stable-privacy addressing the real link-local comes later with the
///    other IPv6 addresses). An interface without a MAC has no default GID;
///    ferroce lists its link-local addresses first instead;
/// 1. each IPv4 address, as `::ffff:a.b.c.d`;
/// 2. each IPv6 address, in the kernel's order.
///
/// All RoCE v2: a device on the UDP backend sends RoCE v2 only (rxe lists
/// no RoCE v1 GIDs either, see the rig README §3); a device on the raw
/// backend lists each entry in both types ([`with_both_types`]). A long-running rxe appends addresses
/// added later and reuses freed slots, so its indices can drift from this
/// order; ferroce rebuilds the table from the current addresses on every
/// query.
pub fn gid_table_for(iface: &Interface) -> Vec<Gid> {
    let mut out: Vec<Gid> = Vec::new();
    let mut push = |gid: Gid| {
        if out.len() < GID_TABLE_LEN as usize && !out.iter().any(|g| g.raw == gid.raw) {
            out.push(gid);
        }
    };
    let v6 = || {
        iface.addrs.iter().filter_map(|a| match a {
            IpAddr::V6(a) => Some(*a),
            IpAddr::V4(_) => None,
        })
    };
    match iface.mac {
        Some(mac) => {
            push(Gid {
                raw: ferroce_io::route::neigh::link_local_from_mac(mac).octets(),
                kind: GidType::RoceV2,
                netdev: iface.name.clone(),
            });
        }
        None => {
            for a in v6().filter(Ipv6Addr::is_unicast_link_local) {
                push(Gid::from_ip(IpAddr::V6(a), &iface.name));
            }
        }
    }
    for a in iface.addrs.iter().filter(|a| a.is_ipv4()) {
        push(Gid::from_ip(*a, &iface.name));
    }
    for a in v6() {
        push(Gid::from_ip(IpAddr::V6(a), &iface.name));
    }
    out
}

/// The GID table of a device on the raw-Ethernet backend, as a ConnectX
/// port shows it: each entry of `table` ([`gid_table_for`]'s order) twice,
/// RoCE v1 at index 2i and RoCE v2 at 2i + 1, the default `fe80::` GID of
/// the MAC included (mlx5 lists its default GIDs in both types first).
/// The GID index a path is set from picks the RoCE version.
pub fn with_both_types(table: Vec<Gid>) -> Vec<Gid> {
    let pairs = table.into_iter().flat_map(|g| {
        let v1 = Gid {
            kind: GidType::RoceV1,
            ..g.clone()
        };
        [v1, g]
    });
    pairs.take(GID_TABLE_LEN as usize).collect()
}

/// The index of `addr`'s GID in `table` (an IPv4 address finds its
/// IPv4-mapped GID): what `ibv_rc_pingpong -g` and perftest `-x` take.
pub fn gid_index(table: &[Gid], addr: IpAddr) -> Option<usize> {
    let raw = Gid::from_ip(addr.to_canonical(), "").raw;
    table.iter().position(|g| g.raw == raw)
}
