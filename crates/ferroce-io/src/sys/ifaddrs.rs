//! The host's interface addresses (`getifaddrs(3)`). Every `unsafe` block
//! says why it is sound.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One entry of `getifaddrs`: an interface name (for IPv4, the address's
/// label, e.g. `eth0:1`), the interface's `IFF_*` flags, and the IP address
/// if the entry carries one (link-level `AF_PACKET` entries and other
/// families give `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IfAddrEntry {
    pub(crate) name: String,
    pub(crate) flags: u32,
    pub(crate) addr: Option<IpAddr>,
}

/// Frees the list `getifaddrs` returned, once, even on an early return.
struct IfAddrsList(*mut libc::ifaddrs);

impl Drop for IfAddrsList {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from a successful getifaddrs and is
            // freed only here, once; no reference into the list outlives
            // this guard (entries are copied out into owned values).
            unsafe { libc::freeifaddrs(self.0) };
        }
    }
}

/// The host's interface addresses, copied out of `getifaddrs(3)`, in the
/// order the kernel lists them (link-level entries first, then IPv4, then
/// IPv6).
pub(crate) fn interface_addrs() -> io::Result<Vec<IfAddrEntry>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid place for the list pointer; on success the
    // list is ours until freeifaddrs, which the guard below calls.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let list = IfAddrsList(head);
    let mut out = Vec::new();
    let mut cur = list.0;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs built, which stays
        // allocated until `list` is dropped at the end of this function.
        let ifa = unsafe { &*cur };
        let name = if ifa.ifa_name.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null ifa_name is a NUL-terminated string owned
            // by the list.
            unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                .to_string_lossy()
                .into_owned()
        };
        let addr = if ifa.ifa_addr.is_null() {
            None
        } else {
            // SAFETY: a non-null ifa_addr points to a sockaddr, which starts
            // with its family.
            let family = unsafe { (*ifa.ifa_addr).sa_family };
            match libc::c_int::from(family) {
                libc::AF_INET => {
                    // SAFETY: the family says this is a sockaddr_in; read
                    // unaligned, as the list gives no alignment promise for
                    // the larger type.
                    let sin = unsafe {
                        std::ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_in>())
                    };
                    Some(IpAddr::V4(Ipv4Addr::from(
                        sin.sin_addr.s_addr.to_ne_bytes(),
                    )))
                }
                libc::AF_INET6 => {
                    // SAFETY: the family says this is a sockaddr_in6; read
                    // unaligned, as above.
                    let sin6 = unsafe {
                        std::ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_in6>())
                    };
                    Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
                }
                _ => None,
            }
        };
        out.push(IfAddrEntry {
            name,
            flags: ifa.ifa_flags,
            addr,
        });
        cur = ifa.ifa_next;
    }
    drop(list);
    Ok(out)
}
