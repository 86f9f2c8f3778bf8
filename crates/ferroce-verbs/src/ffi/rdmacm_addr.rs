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
/// A name that does not resolve: -1, errno ENOENT.
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
        let raw = Box::into_raw(Box::new(AddrInfoObj {
            ai: rdma_addrinfo {
                ai_flags: flags,
                ai_family: if addr.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                },
                ai_qp_type: qp_type as c_int,
                ai_port_space: ps as c_int,
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
            },
            src: Default::default(),
            dst: Default::default(),
        }));
        // SAFETY: `raw` is the Box just made; its pointers name its own
        // fields, which move no more. The hints' source is the caller's.
        unsafe {
            let ai = &mut *raw;
            if passive {
                ai.src = to_storage(addr);
                ai.ai.ai_src_len = sockaddr_len(&addr);
                ai.ai.ai_src_addr = (&raw mut ai.src).cast();
            } else {
                ai.dst = to_storage(addr);
                ai.ai.ai_dst_len = sockaddr_len(&addr);
                ai.ai.ai_dst_addr = (&raw mut ai.dst).cast();
                if let Some(src) = hints.and_then(|h| read_sockaddr(h.ai_src_addr).ok().flatten()) {
                    ai.src = to_storage(src);
                    ai.ai.ai_src_len = sockaddr_len(&src);
                    ai.ai.ai_src_addr = (&raw mut ai.src).cast();
                }
            }
        }
        // SAFETY: module contract.
        unsafe { put(res, raw.cast::<rdma_addrinfo>()) }
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
