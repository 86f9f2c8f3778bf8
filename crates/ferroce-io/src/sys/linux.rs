//! Socket options and the batched UDP send and receive (`sendmmsg`,
//! `recvmmsg` and their control messages). Every `unsafe` block says why it
//! is sound.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;

/// `UDP_NO_CHECK6_TX` / `UDP_NO_CHECK6_RX` (linux/udp.h): send IPv6 UDP
/// with checksum 0, and accept such datagrams, as RoCE v2 peers send them.
const UDP_NO_CHECK6_TX: libc::c_int = 101;
const UDP_NO_CHECK6_RX: libc::c_int = 102;

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and the length passed is its size;
    // the kernel only reads that many bytes. `fd` is a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals; the kernel writes at most
    // `len` bytes (the size of a c_int) into `value` and the length it
    // wrote into `len`. `fd` is a socket the caller owns.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &raw mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<libc::c_int>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("getsockopt({level}, {name}) returned {len} bytes, not an int"),
        ));
    }
    Ok(value)
}

/// The path MTU the kernel holds for a connected socket's route
/// (`IP_MTU` / `IPV6_MTU`): the route's `mtu` metric (locked or not) or an
/// MTU learned from ICMP, else the MTU of the route's interface. Fails with
/// ENOTCONN on a socket that is not connected.
pub(crate) fn path_mtu(fd: RawFd, ipv6: bool) -> io::Result<u32> {
    let v = if ipv6 {
        getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)?
    } else {
        getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU)?
    };
    u32::try_from(v)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("negative path MTU {v}")))
}

/// Sets DF and never fragments (IP_PMTUDISC_DO). On an unconnected socket
/// Linux then sends IPv4 Identification 0, which makes the IPv4 header, and
/// so the ICRC, predictable.
pub(crate) fn set_dont_fragment(fd: RawFd) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
}

/// IPv6: do not fragment either.
pub(crate) fn set_dont_fragment_v6(fd: RawFd) -> io::Result<()> {
    setsockopt_int(
        fd,
        libc::IPPROTO_IPV6,
        libc::IPV6_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
}

/// Socket buffer sizes past `net.core.rmem_max`/`wmem_max`, which a
/// privileged process may set (SO_RCVBUFFORCE / SO_SNDBUFFORCE).
pub(crate) fn force_buffers(fd: RawFd, bytes: libc::c_int) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes)?;
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes)
}

/// IPv6: send and accept UDP checksum 0.
pub(crate) fn set_udp_no_check6(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)?;
    setsockopt_int(fd, libc::IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
}

/// A socket address in the C layout.
fn to_storage(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in>().write(sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { (&raw mut storage).cast::<libc::sockaddr_in6>().write(sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn from_storage(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(&raw const *s).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(&raw const *s).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(
                IpAddr::V6(ip),
                u16::from_be(sin6.sin6_port),
            ))
        }
        _ => None,
    }
}

/// `UDP_SEGMENT` and `UDP_GRO` (linux/udp.h), at level `SOL_UDP`.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Have each received datagram carry its IP header's TOS (IPv4,
/// `IP_RECVTOS`) or traffic class (IPv6, `IPV6_RECVTCLASS`) as a control
/// message, for its ECN field.
pub(crate) fn set_recv_tos(fd: RawFd, ipv6: bool) -> io::Result<()> {
    if ipv6 {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)
    } else {
        setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)
    }
}

/// Receive coalesced trains of equal-size datagrams (UDP GRO): one buffer
/// then holds several, and [`Received::segment`] gives their size.
pub(crate) fn set_udp_gro(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_UDP, UDP_GRO, 1)
}

/// One message of [`send_batch`]: `parts` (indexes into the part list) are
/// gathered into one datagram, or, when `segment` is not zero, into a train
/// the kernel cuts into datagrams of `segment` bytes, the last one possibly
/// shorter (UDP GSO). Every datagram of it leaves with `tos` in the IPv4
/// TOS or IPv6 traffic class byte.
#[derive(Debug, Clone)]
pub(crate) struct OutMsg {
    pub(crate) to: SocketAddr,
    pub(crate) parts: std::ops::Range<usize>,
    pub(crate) segment: u16,
    /// DSCP (high 6 bits) and ECN (low 2). 0 sends no control message: the
    /// sockets are never given a TOS of their own, so 0 is their default.
    pub(crate) tos: u8,
}

/// Room for the control messages of one send, aligned for `cmsghdr`: a
/// `UDP_SEGMENT` (2 data bytes) and an `IP_TOS` or `IPV6_TCLASS` (an int),
/// `CMSG_SPACE(2) + CMSG_SPACE(4)` = 48 bytes on 64-bit Linux.
type SendControl = [u64; 8];

/// Room for the control messages a receive can carry: `UDP_GRO`'s segment
/// size and the TOS / traffic class, an int each (32 bytes on 64-bit
/// Linux).
type RecvControl = [u64; 8];

/// The C structures of the batched calls, allocated once and filled in
/// again by every call (a poll round that finds nothing to receive used
/// to allocate and free them each time).
#[derive(Default)]
pub(crate) struct Scratch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<(libc::sockaddr_storage, libc::socklen_t)>,
    send_controls: Vec<SendControl>,
    recv_controls: Vec<RecvControl>,
}

// SAFETY: the raw pointers inside (in `hdrs` and `iovs`) are written by a
// call and used only during it, to reach that call's own buffers; between
// calls nothing reads them, so moving the scratch to another thread
// cannot make anything dangle or alias.
unsafe impl Send for Scratch {}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("capacity", &self.hdrs.capacity())
            .finish()
    }
}

fn zeroed_hdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain data; all-zero is a valid value.
    unsafe { zeroed() }
}

fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    unsafe { zeroed() }
}

/// Points `h` at `control` and writes into it the control messages `m`
/// needs: `UDP_SEGMENT` for a train, `IP_TOS` / `IPV6_TCLASS` for a TOS
/// other than 0. Writes nothing (and leaves `h` without control) when it
/// needs neither.
fn write_send_control(h: &mut libc::msghdr, control: &mut SendControl, m: &OutMsg) {
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let (seg_space, tos_space) = unsafe {
        (
            libc::CMSG_SPACE(size_of::<u16>() as u32) as usize,
            libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize,
        )
    };
    let len = usize::from(m.segment != 0) * seg_space + usize::from(m.tos != 0) * tos_space;
    if len == 0 {
        return;
    }
    debug_assert!(seg_space + tos_space <= size_of::<SendControl>());
    debug_assert!(control.iter().all(|&w| w == 0), "control not zeroed");
    h.msg_control = control.as_mut_ptr().cast();
    h.msg_controllen = len;
    let (level, kind) = match m.to {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
    };
    // SAFETY: `h` points at `control`, which is aligned for cmsghdr,
    // zeroed by the caller, and `msg_controllen` bytes long: room for
    // exactly the messages written below. CMSG_FIRSTHDR/CMSG_NXTHDR return
    // a header inside it with room for its data after it, or null when
    // there is none, which is checked before each write.
    unsafe {
        let mut cm = libc::CMSG_FIRSTHDR(h);
        if cm.is_null() {
            return;
        }
        if m.segment != 0 {
            (*cm).cmsg_level = libc::SOL_UDP;
            (*cm).cmsg_type = UDP_SEGMENT;
            (*cm).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
            libc::CMSG_DATA(cm).cast::<u16>().write_unaligned(m.segment);
            cm = libc::CMSG_NXTHDR(h, cm);
        }
        if m.tos != 0 && !cm.is_null() {
            (*cm).cmsg_level = level;
            (*cm).cmsg_type = kind;
            (*cm).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
            libc::CMSG_DATA(cm)
                .cast::<libc::c_int>()
                .write_unaligned(libc::c_int::from(m.tos));
        }
    }
}

/// Sends `msgs` with one `sendmmsg` per 64; returns how many messages were
/// sent (a full socket buffer stops early, not an error). An error on the
/// first message of a call is returned as is (for instance EIO or EINVAL
/// when this path cannot do GSO).
pub(crate) fn send_batch<'a>(
    fd: RawFd,
    msgs: &[OutMsg],
    parts: impl IntoIterator<Item = &'a [u8]>,
    scratch: &mut Scratch,
) -> io::Result<usize> {
    const CHUNK: usize = 64;
    let Scratch {
        hdrs,
        iovs,
        addrs,
        send_controls: controls,
        ..
    } = scratch;
    iovs.clear();
    iovs.extend(parts.into_iter().map(|b| libc::iovec {
        iov_base: b.as_ptr() as *mut libc::c_void,
        iov_len: b.len(),
    }));
    let mut sent = 0;
    for chunk in msgs.chunks(CHUNK) {
        addrs.clear();
        addrs.extend(chunk.iter().map(|m| to_storage(&m.to)));
        controls.clear();
        controls.resize(chunk.len(), [0; 8]);
        hdrs.clear();
        for (i, m) in chunk.iter().enumerate() {
            let mut h = zeroed_hdr();
            h.msg_hdr.msg_name = (&raw mut addrs[i].0).cast();
            h.msg_hdr.msg_namelen = addrs[i].1;
            // The kernel only reads the iovecs; the cast to *mut is what
            // the C declaration asks for.
            h.msg_hdr.msg_iov = iovs[m.parts.clone()].as_ptr().cast_mut();
            h.msg_hdr.msg_iovlen = m.parts.len();
            write_send_control(&mut h.msg_hdr, &mut controls[i], m);
            hdrs.push(h);
        }
        // SAFETY: every header points into `addrs`, `controls` and `iovs`,
        // which are not touched until after the call; the iovecs point into
        // the caller's slices, which the kernel only reads.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                hdrs.as_mut_ptr(),
                hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(sent);
            }
            if sent > 0 {
                return Ok(sent);
            }
            return Err(e);
        }
        sent += n as usize;
        if (n as usize) < chunk.len() {
            break;
        }
    }
    Ok(sent)
}

/// One received datagram, or with GRO a train of them: its source and
/// length in its buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Which buffer holds it.
    pub(crate) index: usize,
    pub(crate) from: SocketAddr,
    pub(crate) len: usize,
    /// With GRO: the size of each coalesced datagram (the last may be
    /// shorter); 0 for a single datagram.
    pub(crate) segment: usize,
    /// The datagram did not fit its buffer.
    pub(crate) truncated: bool,
    /// Its IP header's TOS / traffic class byte (0 when the socket was not
    /// asked for it): with GRO, every datagram of a train has the same, as
    /// the kernel coalesces only datagrams whose TOS matches.
    pub(crate) tos: u8,
}

/// Receives up to `bufs.len()` datagrams with one non-blocking `recvmmsg`.
pub(crate) fn recv_batch(
    fd: RawFd,
    bufs: &mut [Vec<u8>],
    out: &mut Vec<Received>,
    scratch: &mut Scratch,
) -> io::Result<usize> {
    out.clear();
    let n = bufs.len();
    let Scratch {
        hdrs,
        iovs,
        addrs,
        recv_controls: controls,
        ..
    } = scratch;
    // The kernel writes the addresses and control messages it returns (and
    // says how much); their old contents are never read, so they are not
    // cleared between calls. Each is sized on its own: sends reuse `addrs`
    // (with their own length) but not `controls`.
    addrs.resize(n, (zeroed_storage(), 0));
    controls.resize(n, [0; 8]);
    iovs.clear();
    iovs.extend(bufs.iter_mut().map(|b| libc::iovec {
        iov_base: b.as_mut_ptr().cast(),
        iov_len: b.len(),
    }));
    hdrs.clear();
    for i in 0..n {
        let mut h = zeroed_hdr();
        h.msg_hdr.msg_name = (&raw mut addrs[i].0).cast();
        h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_hdr.msg_iov = &raw mut iovs[i];
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = controls[i].as_mut_ptr().cast();
        h.msg_hdr.msg_controllen = size_of::<RecvControl>();
        hdrs.push(h);
    }
    // SAFETY: the headers point into `addrs`, `controls`, `iovs` and the
    // caller's buffers, all alive and not otherwise touched during the
    // call; the kernel writes at most `iov_len` bytes into each buffer, at
    // most `msg_namelen` into each address and `msg_controllen` into each
    // control buffer.
    let got = unsafe {
        libc::recvmmsg(
            fd,
            hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(0);
        }
        return Err(e);
    }
    for (i, h) in hdrs.iter().take(got as usize).enumerate() {
        // The kernel wrote `msg_namelen` bytes of address (a UDP receive
        // always has one).
        if (h.msg_hdr.msg_namelen as usize) < size_of::<libc::sa_family_t>() {
            continue;
        }
        if let Some(from) = from_storage(&addrs[i].0) {
            let (segment, tos) = recv_control(&h.msg_hdr);
            out.push(Received {
                index: i,
                from,
                len: h.msg_len as usize,
                segment,
                truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                tos,
            });
        }
    }
    Ok(got as usize)
}

/// The `UDP_GRO` segment size (0 if none) and the TOS / traffic class
/// (0 if none) among a received message's control messages.
fn recv_control(h: &libc::msghdr) -> (usize, u8) {
    let (mut segment, mut tos) = (0, 0);
    // SAFETY: `h` is a header recvmmsg filled: msg_control points at our
    // control buffer and msg_controllen says how much of it the kernel
    // wrote, which is all CMSG_FIRSTHDR/CMSG_NXTHDR walk; each cmsghdr they
    // return lies inside it. A header's data is read only if its cmsg_len
    // covers it: an int after UDP_GRO and IPV6_TCLASS, a byte after IP_TOS
    // (Linux delivers the IPv4 TOS as one byte).
    unsafe {
        let mut cm = libc::CMSG_FIRSTHDR(h);
        while !cm.is_null() {
            let (level, kind, len) = ((*cm).cmsg_level, (*cm).cmsg_type, (*cm).cmsg_len);
            let int_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
            let byte_len = libc::CMSG_LEN(1) as usize;
            let data = libc::CMSG_DATA(cm);
            match (level, kind) {
                (libc::SOL_UDP, UDP_GRO) if len >= int_len => {
                    let size = data.cast::<libc::c_int>().read_unaligned();
                    segment = usize::try_from(size).unwrap_or(0);
                }
                (libc::IPPROTO_IP, libc::IP_TOS) if len >= byte_len => tos = data.read(),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if len >= int_len => {
                    tos = data.cast::<libc::c_int>().read_unaligned() as u8;
                }
                _ => {}
            }
            cm = libc::CMSG_NXTHDR(h, cm);
        }
    }
    (segment, tos)
}
