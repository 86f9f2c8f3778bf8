//! rdma_cm's entry points: `rdma_getaddrinfo` / `rdma_freeaddrinfo`.
//! Same contract as `rdmacm.rs`.

use std::ffi::{CStr, c_char, c_int};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use super::rdmacm::{guard_cm, read_sockaddr};
use super::{put, take};
use crate::abi::QPT_UD;
use crate::rdmacm::abi::{RAI_NUMERICHOST, RAI_PASSIVE, RDMA_PS_TCP, RDMA_PS_UDP, rdma_addrinfo};
use crate::rdmacm::convert::{qp_type_of, sockaddr_len, to_storage};
use crate::rdmacm::objects::AddrInfoObj;

/// A C string argument, or None for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char) -> Result<Option<&'a str>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: module contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map(Some).map_err(|_| libc::EINVAL)
}

/// `rdma_getaddrinfo`: one result for `node` (a numeric address, or a
/// name resolved by the system's resolver unless `RAI_NUMERICHOST`) and a
/// numeric `service` port; with `RAI_PASSIVE` and no node, the wildcard.
/// The port space and QP type come from the hints (TCP and RC by default).
/// A name that does not resolve: -1, errno ENOENT. As rdma-core's: with
/// neither node nor service nothing is looked up, and the result is the
/// hints' own flags, family, QP type, port space and addresses (libfabric
/// asks so for the source address it already has); an active result with
/// no source takes the hints' source. No node, service nor hints: EINVAL.
pub(super) unsafe extern "C" fn ferroce_rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    guard_cm(|| {
        // SAFETY: module contract.
        let (node, service) = unsafe { (c_str(node)?, c_str(service)?) };
        // SAFETY: module contract.
        let hints = unsafe { hints.as_ref() };
        // The hints' addresses (NULL or sockaddrs, per the contract); one
        // of a family ferroce does not have (AF_IB) is left out.
        // SAFETY: module contract.
        let hint_addr = |p| unsafe { read_sockaddr(p) }.ok().flatten();
        let hint_src = hints.and_then(|h| hint_addr(h.ai_src_addr));
        let hint_dst = hints.and_then(|h| hint_addr(h.ai_dst_addr));
        let ai = match (node, service, hints) {
            (None, None, None) => return Err(libc::EINVAL),
            (None, None, Some(h)) => Found {
                flags: h.ai_flags,
                family: h.ai_family,
                qp_type: h.ai_qp_type,
                port_space: h.ai_port_space,
                src: hint_src,
                dst: hint_dst,
            },
            _ => look_up(node, service, hints, hint_src)?,
        };
        let raw = Box::into_raw(Box::new(AddrInfoObj {
            ai: bare_addrinfo(ai.flags, ai.family, ai.qp_type, ai.port_space),
            src: Default::default(),
            dst: Default::default(),
        }));
        // SAFETY: `raw` is the Box just made; its pointers name its own
        // fields, which move no more.
        unsafe {
            let o = &mut *raw;
            if let Some(src) = ai.src {
                o.src = to_storage(src);
                o.ai.ai_src_len = sockaddr_len(&src);
                o.ai.ai_src_addr = (&raw mut o.src).cast();
            }
            if let Some(dst) = ai.dst {
                o.dst = to_storage(dst);
                o.ai.ai_dst_len = sockaddr_len(&dst);
                o.ai.ai_dst_addr = (&raw mut o.dst).cast();
            }
        }
        // SAFETY: module contract.
        unsafe { put(res, raw.cast::<rdma_addrinfo>()) }
    })
}

/// What one `rdma_addrinfo` result holds.
struct Found {
    flags: c_int,
    family: c_int,
    qp_type: c_int,
    port_space: c_int,
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
}

/// The result for a node or a service: the looked-up address is the
/// source of a passive result, the destination of an active one (whose
/// source is then the hints').
fn look_up(
    node: Option<&str>,
    service: Option<&str>,
    hints: Option<&rdma_addrinfo>,
    hint_src: Option<SocketAddr>,
) -> Result<Found, c_int> {
    let flags = hints.map_or(0, |h| h.ai_flags);
    let family = hints.map_or(0, |h| h.ai_family);
    let port: u16 = match service {
        None => 0,
        Some(s) => s.parse().map_err(|_| libc::EINVAL)?,
    };
    let passive = flags & RAI_PASSIVE != 0;
    let addr = resolve(node, port, family, passive, flags)?;
    let qp_hint = hints.map_or(0, |h| h.ai_qp_type as u32);
    let ps = match hints.map_or(0, |h| h.ai_port_space as u32) {
        0 if qp_hint == QPT_UD => RDMA_PS_UDP,
        0 => RDMA_PS_TCP,
        ps => ps,
    };
    let qp_type = if qp_hint != 0 {
        qp_hint
    } else {
        qp_type_of(ps)
    };
    let (src, dst) = if passive {
        (Some(addr), None)
    } else {
        (hint_src, Some(addr))
    };
    Ok(Found {
        flags,
        family: if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        },
        qp_type: qp_type as c_int,
        port_space: ps as c_int,
        src,
        dst,
    })
}

/// The address of `node` (see `ferroce_rdma_getaddrinfo`).
fn resolve(
    node: Option<&str>,
    port: u16,
    family: c_int,
    passive: bool,
    flags: c_int,
) -> Result<SocketAddr, c_int> {
    let v6 = family == libc::AF_INET6;
    let Some(node) = node else {
        let ip: IpAddr = match (passive, v6) {
            (true, false) => Ipv4Addr::UNSPECIFIED.into(),
            (true, true) => Ipv6Addr::UNSPECIFIED.into(),
            (false, false) => Ipv4Addr::LOCALHOST.into(),
            (false, true) => Ipv6Addr::LOCALHOST.into(),
        };
        return Ok(SocketAddr::new(ip, port));
    };
    let fits = |a: &SocketAddr| match family {
        libc::AF_INET => a.is_ipv4(),
        libc::AF_INET6 => a.is_ipv6(),
        _ => true,
    };
    if let Ok(ip) = node.parse::<IpAddr>() {
        let a = SocketAddr::new(ip, port);
        return if fits(&a) {
            Ok(a)
        } else {
            Err(libc::EAFNOSUPPORT)
        };
    }
    if flags & RAI_NUMERICHOST != 0 {
        return Err(libc::EINVAL);
    }
    (node, port)
        .to_socket_addrs()
        .map_err(|_| libc::ENOENT)?
        .find(fits)
        .ok_or(libc::ENOENT)
}

pub(super) unsafe extern "C" fn ferroce_rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    let mut p = res;
    while !p.is_null() {
        // SAFETY: a list from ferroce_rdma_getaddrinfo, each an AddrInfoObj.
        let b = unsafe { take::<AddrInfoObj, _>(p) };
        p = b.ai.ai_next;
    }
}

/// An `rdma_addrinfo` with these four fields and no addresses, names,
/// route or next entry.
fn bare_addrinfo(flags: c_int, family: c_int, qp_type: c_int, port_space: c_int) -> rdma_addrinfo {
    rdma_addrinfo {
        ai_flags: flags,
        ai_family: family,
        ai_qp_type: qp_type,
        ai_port_space: port_space,
        ai_src_len: 0,
        ai_dst_len: 0,
        ai_src_addr: std::ptr::null_mut(),
        ai_dst_addr: std::ptr::null_mut(),
        ai_src_canonname: std::ptr::null_mut(),
        ai_dst_canonname: std::ptr::null_mut(),
        ai_route_len: 0,
        ai_route: std::ptr::null_mut(),
        ai_connect_len: 0,
        ai_connect: std::ptr::null_mut(),
        ai_next: std::ptr::null_mut(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmacm::abi::sockaddr_storage;

    fn blank_hints(flags: c_int) -> rdma_addrinfo {
        bare_addrinfo(flags, libc::AF_INET, 0, RDMA_PS_TCP as c_int)
    }

    /// Calls `rdma_getaddrinfo`: the source and destination of the
    /// result, or the errno.
    fn lookup(
        node: Option<&CStr>,
        service: Option<&CStr>,
        hints: Option<&rdma_addrinfo>,
    ) -> Result<(Option<SocketAddr>, Option<SocketAddr>), c_int> {
        let mut res = std::ptr::null_mut();
        let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
        let h = hints.map_or(std::ptr::null(), std::ptr::from_ref);
        // SAFETY: valid strings, hints and result pointer.
        let rc = unsafe { ferroce_rdma_getaddrinfo(p(node), p(service), h, &mut res) };
        if rc != 0 {
            // SAFETY: the calling thread's errno.
            return Err(unsafe { *libc::__errno_location() });
        }
        // SAFETY: a result of ferroce_rdma_getaddrinfo, freed once here.
        unsafe {
            let r = &*res;
            let out = (
                read_sockaddr(r.ai_src_addr).unwrap(),
                read_sockaddr(r.ai_dst_addr).unwrap(),
            );
            ferroce_rdma_freeaddrinfo(res);
            Ok(out)
        }
    }

    #[test]
    fn nothing_to_look_up_is_einval() {
        assert_eq!(lookup(None, None, None), Err(libc::EINVAL));
    }

    #[test]
    fn no_node_nor_service_returns_the_hints_addresses() {
        let src: SocketAddr = "10.1.2.3:0".parse().unwrap();
        let mut storage: sockaddr_storage = to_storage(src);
        let mut h = blank_hints(RAI_PASSIVE);
        assert_eq!(lookup(None, None, Some(&h)), Ok((None, None)));
        h.ai_src_addr = (&raw mut storage).cast();
        h.ai_src_len = sockaddr_len(&src);
        assert_eq!(lookup(None, None, Some(&h)), Ok((Some(src), None)));
    }

    #[test]
    fn a_passive_service_alone_is_the_wildcard() {
        let h = blank_hints(RAI_PASSIVE);
        let any: SocketAddr = "0.0.0.0:7471".parse().unwrap();
        assert_eq!(lookup(None, Some(c"7471"), Some(&h)), Ok((Some(any), None)));
    }

    #[test]
    fn an_active_result_takes_the_hints_source() {
        let src: SocketAddr = "10.1.2.3:0".parse().unwrap();
        let mut storage: sockaddr_storage = to_storage(src);
        let mut h = blank_hints(0);
        h.ai_src_addr = (&raw mut storage).cast();
        h.ai_src_len = sockaddr_len(&src);
        let dst: SocketAddr = "10.9.9.9:7471".parse().unwrap();
        let got = lookup(Some(c"10.9.9.9"), Some(c"7471"), Some(&h));
        assert_eq!(got, Ok((Some(src), Some(dst))));
    }
}
