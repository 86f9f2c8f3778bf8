//! The host's network interfaces, as the RDMA device attributes need them:
//! addresses and flags from `getifaddrs(3)`, MTU, MAC and link speed from
//! `/sys/class/net/<name>/{mtu,address,speed}`.
//!
//! Query only: nothing here opens a socket or needs privileges.

use std::fs;
use std::io;
use std::net::IpAddr;
use std::path::Path;

use crate::sys;

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The kernel's name (`eth0`, `lo`).
    pub name: String,
    /// The 6-byte hardware address, `None` when the interface has none (or
    /// an all-zero one, as `lo` has, or one of another length).
    pub mac: Option<[u8; 6]>,
    /// The IP MTU in bytes; 0 when `/sys` does not say.
    pub mtu: u32,
    /// IPv4 then IPv6 addresses, in the kernel's order (IPv6 ones sorted by
    /// the kernel, wider scope first). IPv4 addresses of labelled aliases
    /// (`eth0:1`) are listed under their interface.
    pub addrs: Vec<IpAddr>,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Carrier present and operational (`IFF_RUNNING`): what makes an RDMA
    /// port over this interface ACTIVE.
    pub running: bool,
    /// The loopback interface (`IFF_LOOPBACK`).
    pub loopback: bool,
    /// Link speed in Mbit/s, `None` when the driver does not report one
    /// (virtual and loopback interfaces, links that are down).
    pub speed_mbps: Option<u32>,
}

/// Every interface of the host (of this network namespace), in the order
/// the kernel lists them (by index).
pub fn interfaces() -> io::Result<Vec<Interface>> {
    let entries = sys::interface_addrs()?;
    let sysfs = Path::new("/sys/class/net");
    Ok(group(&entries, |name| read_sysfs(&sysfs.join(name))))
}

/// The interface that has `addr` assigned to it, if any. An IPv4-mapped
/// IPv6 address (`::ffff:a.b.c.d`) names the IPv4 address. Any address of
/// 127.0.0.0/8, which Linux treats as local as a whole (a socket can bind
/// 127.0.0.2 though `lo` lists only 127.0.0.1/8), names the loopback
/// interface.
pub fn interface_of(addr: IpAddr) -> io::Result<Option<Interface>> {
    Ok(find_owner(interfaces()?, addr))
}

fn find_owner(mut ifs: Vec<Interface>, addr: IpAddr) -> Option<Interface> {
    let addr = addr.to_canonical();
    let i = ifs
        .iter()
        .position(|i| i.addrs.contains(&addr))
        .or_else(|| {
            if addr.is_loopback() {
                ifs.iter().position(|i| i.loopback)
            } else {
                None
            }
        })?;
    Some(ifs.swap_remove(i))
}

/// What `/sys/class/net/<name>` tells about one interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SysInfo {
    mtu: u32,
    mac: Option<[u8; 6]>,
    speed_mbps: Option<u32>,
}

fn read_sysfs(dir: &Path) -> SysInfo {
    let read = |file: &str| fs::read_to_string(dir.join(file)).ok();
    SysInfo {
        mtu: read("mtu").and_then(|s| s.trim().parse().ok()).unwrap_or(0),
        mac: read("address").and_then(|s| parse_mac(s.trim())),
        // "-1" (SPEED_UNKNOWN) or EINVAL (no link settings, link down).
        speed_mbps: read("speed")
            .and_then(|s| s.trim().parse::<i64>().ok())
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&v| v > 0),
    }
}

/// `aa:bb:cc:dd:ee:ff` to bytes; `None` for any other length or all zeros.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    if parts.next().is_some() || mac == [0; 6] {
        return None;
    }
    Some(mac)
}

/// Builds the interface list from `getifaddrs` entries, asking `sysinfo`
/// for each interface's `/sys` facts. Interfaces keep the order of their
/// first entry; an IPv4 label `base:alias` joins `base` when that exists.
fn group(entries: &[sys::IfAddrEntry], sysinfo: impl Fn(&str) -> SysInfo) -> Vec<Interface> {
    let mut out: Vec<Interface> = Vec::new();
    let base_of = |name: &str| -> String {
        match name.split_once(':') {
            Some((base, _)) if entries.iter().any(|e| e.name == base) => base.to_owned(),
            _ => name.to_owned(),
        }
    };
    for e in entries {
        let name = base_of(&e.name);
        let i = match out.iter().position(|i| i.name == name) {
            Some(i) => i,
            None => {
                let s = sysinfo(&name);
                out.push(Interface {
                    name,
                    mac: s.mac,
                    mtu: s.mtu,
                    addrs: Vec::new(),
                    up: false,
                    running: false,
                    loopback: false,
                    speed_mbps: s.speed_mbps,
                });
                out.len() - 1
            }
        };
        let iface = &mut out[i];
        let flags = e.flags;
        iface.up |= flags & libc::IFF_UP as u32 != 0;
        iface.running |= flags & libc::IFF_RUNNING as u32 != 0;
        iface.loopback |= flags & libc::IFF_LOOPBACK as u32 != 0;
        if let Some(a) = e.addr
            && !iface.addrs.contains(&a)
        {
            iface.addrs.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, flags: i32, addr: Option<&str>) -> sys::IfAddrEntry {
        sys::IfAddrEntry {
            name: name.into(),
            flags: flags as u32,
            addr: addr.map(|a| a.parse().unwrap()),
        }
    }

    #[test]
    fn mac_parsing() {
        assert_eq!(
            parse_mac("52:54:00:52:00:0a"),
            Some([0x52, 0x54, 0x00, 0x52, 0x00, 0x0a])
        );
        assert_eq!(parse_mac("00:00:00:00:00:00"), None);
        assert_eq!(parse_mac(""), None);
        assert_eq!(parse_mac("52:54:00:52:00"), None);
        assert_eq!(parse_mac("52:54:00:52:00:0a:01"), None);
        // IPoIB-style 20-byte hardware addresses are not MACs.
        assert_eq!(
            parse_mac("00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0b:1a:b1"),
            None
        );
        assert_eq!(parse_mac("52:54:00:52:00:zz"), None);
    }

    #[test]
    fn grouping_flags_aliases_and_order() {
        let up = libc::IFF_UP | libc::IFF_RUNNING;
        let lo = up | libc::IFF_LOOPBACK;
        let entries = [
            entry("lo", lo, None),
            entry("eth0", up, None),
            entry("eth1", libc::IFF_UP, None),
            entry("lo", lo, Some("127.0.0.1")),
            entry("eth0", up, Some("198.18.0.11")),
            entry("eth0:1", up, Some("198.18.0.99")),
            entry("lo", lo, Some("::1")),
            entry("eth0", up, Some("fd52:6f43:4500::11")),
            entry("eth0", up, Some("fe80::5054:ff:fe52:a")),
        ];
        let ifs = group(&entries, |name| SysInfo {
            mtu: if name == "lo" { 65536 } else { 1500 },
            mac: (name == "eth0").then_some([0x52, 0x54, 0, 0x52, 0, 0x0a]),
            speed_mbps: None,
        });
        let names: Vec<_> = ifs.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["lo", "eth0", "eth1"]);
        assert!(ifs[0].loopback && ifs[0].up && ifs[0].running);
        assert_eq!(ifs[0].mtu, 65536);
        assert_eq!(ifs[0].mac, None);
        let eth0 = &ifs[1];
        assert!(!eth0.loopback && eth0.up && eth0.running);
        let addrs: Vec<String> = eth0.addrs.iter().map(ToString::to_string).collect();
        assert_eq!(
            addrs,
            [
                "198.18.0.11",
                "198.18.0.99",
                "fd52:6f43:4500::11",
                "fe80::5054:ff:fe52:a"
            ]
        );
        assert!(ifs[2].up && !ifs[2].running && ifs[2].addrs.is_empty());
    }

    #[test]
    fn this_host_has_loopback() {
        let ifs = interfaces().unwrap();
        let lo = ifs
            .iter()
            .find(|i| i.loopback)
            .expect("a loopback interface");
        assert!(lo.mtu > 0, "{lo:?}");
        let found = interface_of("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(found.map(|i| i.loopback), Some(true));
        let mapped = interface_of("::ffff:127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(mapped.map(|i| i.loopback), Some(true));
        // The rest of 127.0.0.0/8 is local too, on lo.
        let other = interface_of("127.0.0.21".parse().unwrap()).unwrap();
        assert_eq!(other.map(|i| i.loopback), Some(true));
        // The unspecified address is never assigned.
        assert_eq!(interface_of("0.0.0.0".parse().unwrap()).unwrap(), None);
    }
}
