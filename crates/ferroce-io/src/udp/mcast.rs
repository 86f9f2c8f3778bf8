//! Multicast groups on the UDP backend (RoCE v2 UD multicast).
//!
//! The receive socket is bound to the device's unicast address, and Linux
//! hands a socket bound to a unicast address no multicast datagram. So
//! each group the device joins gets a socket of its own, bound to
//! `group:port` with `SO_REUSEADDR` (several devices, or processes, of
//! one host may be in one group), which joins the IP group on the
//! interface of the device's address (`IP_ADD_MEMBERSHIP` /
//! `IPV6_JOIN_GROUP`: the kernel sends the IGMP or MLD report, as
//! rdma_cm's `cma_igmp_send` makes it for RoCE v2). Closing the socket
//! leaves the group. Datagrams it receives go through the same checks
//! as unicast ones, the ICRC computed for the group as destination, and
//! reach [`Receiver::deliver_multicast`].
//!
//! Sending to a group needs nothing of its own: every socket sends
//! multicast from the device's interface (`IP_MULTICAST_IF`,
//! `IPV6_MULTICAST_IF`) with a hop limit of 64 (rdma_cm's for RoCE v2 groups) and the kernel's multicast
//! loop on, so other devices of the host and the sender's own attached
//! QPs get a copy (as a NIC loops multicast back to its own QPs).
//!
//! The driver sleeps on [`UdpBackend::wake_fd`], an epoll instance
//! holding the receive socket and every group socket.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use rustix::event::epoll;
use rustix::net::{AddressFamily, SocketType};

use socket2::Socket;

use super::{Receiver, UdpBackend, new_socket};
use crate::sys;

/// One group the backend has joined, and its socket.
#[derive(Debug)]
pub(super) struct Group {
    pub(super) addr: IpAddr,
    pub(super) sock: Socket,
}

impl UdpBackend {
    /// Joins IP multicast group `group` on the interface of the local
    /// address and receives what is sent to it from now on. Joining a
    /// group twice is a no-op.
    pub fn join(&mut self, group: IpAddr) -> io::Result<()> {
        let group = group.to_canonical();
        if self.groups.iter().any(|g| g.addr == group) {
            return Ok(());
        }
        if !group.is_multicast() || group.is_ipv4() != self.cfg.local.is_ipv4() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot join {group} on a device at {}: take a multicast address of \
                     the device's address family (224.0.0.0/4 or ff00::/8)",
                    self.cfg.local
                ),
            ));
        }
        let sock = new_socket(self.cfg.local, self.mc_if)?;
        sock.set_reuse_address(true)?;
        sock.bind(&SocketAddr::new(group, self.cfg.port).into())?;
        match (group, self.cfg.local) {
            (IpAddr::V4(g), IpAddr::V4(l)) => sock.join_multicast_v4(&g, &l)?,
            (IpAddr::V6(g), l) => {
                let index = match self.mc_if {
                    Some(i) => i,
                    None => interface_index(l)?,
                };
                sock.join_multicast_v6(&g, index)?
            }
            _ => unreachable!("families checked above"),
        }
        sys::set_recv_tos(sock.as_raw_fd(), group.is_ipv6())?;
        super::watch(&self.wake, &sock)?;
        tracing::debug!(%group, local = %self.cfg.local, "joined multicast group");
        self.groups.push(Group { addr: group, sock });
        Ok(())
    }

    /// Leaves `group` (closes its socket: the kernel drops the membership
    /// and reports it). Leaving a group not joined is a no-op.
    pub fn leave(&mut self, group: IpAddr) {
        let group = group.to_canonical();
        if let Some(i) = self.groups.iter().position(|g| g.addr == group) {
            let g = self.groups.swap_remove(i);
            let _ = epoll::delete(&self.wake, &g.sock);
            tracing::debug!(%group, "left multicast group");
        }
    }

    /// The groups joined.
    pub fn groups(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.groups.iter().map(|g| g.addr)
    }

    /// A descriptor that turns readable when the receive socket or any
    /// group socket has a datagram: what a sleeping driver waits on.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// [`wake_fd`](Self::wake_fd) borrowed, for
    /// [`crate::Sleeper::sleep_on`] (or a duplicate of one's own, with
    /// `try_clone_to_owned`).
    pub fn wait_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Receives what waits on every group socket (one `recvmmsg` each).
    pub(super) fn recv_groups(&mut self, rx: &mut impl Receiver) -> io::Result<usize> {
        let mut n = 0;
        for i in 0..self.groups.len() {
            let (fd, addr) = (self.groups[i].sock.as_raw_fd(), self.groups[i].addr);
            match self.drain(fd, Some(addr), rx) {
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}

/// The index of the interface that has `local` (IPv6 groups are joined by
/// interface index).
pub(super) fn interface_index(local: IpAddr) -> io::Result<u32> {
    let iface = crate::netif::interface_of(local)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface has {local}: cannot join an IPv6 group there"),
        )
    })?;
    // The ioctl behind if_nametoindex wants a socket, any socket.
    let probe = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None)?;
    Ok(rustix::net::netdevice::name_to_index(&probe, &iface.name)?)
}
