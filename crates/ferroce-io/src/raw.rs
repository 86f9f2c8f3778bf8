//! The raw-Ethernet backend: whole Ethernet frames on one interface through
//! AF_PACKET sockets with memory-mapped rings, for RoCE v1 (ethertype
//! 0x8915) and v2 with every header under ferroce's control (the IP
//! header's Identification, DSCP/ECN, an 802.1Q tag and its PCP), and for
//! seeing PFC frames.
//!
//! The I/O layer: ferroce's driver runs a device on it when asked
//! (`ferroce::BackendKind::Raw`; framing by RoCE version, peers' MACs and
//! the GID table are the device's, in `ferroce`), on [`crate::udp`]
//! otherwise. Needs CAP_NET_RAW.
//!
//! Contract:
//! * [`RawBackend::open`] binds a receive socket to the interface with a
//!   TPACKET_V3 ring of blocks (or V2 frames) and a kernel filter (`raw/filter.rs`: RoCE
//!   v1, RoCE v2 to UDP 4791 over IPv4 and IPv6, MAC control; the socket
//!   ignores this host's own outgoing frames), and a send socket with a
//!   TPACKET_V2 ring, optionally bypassing the qdisc layer
//!   (`PACKET_QDISC_BYPASS`: less work per frame, but no traffic shaping
//!   and tcpdump on the sending host does not see the frames; only
//!   without segmentation offload, see [`RawConfig::qdisc_bypass`]).
//! * Segmentation offload ([`vnet`], RoCE v2 only; on unless
//!   [`RawConfig::gso`] is off or the kernel refuses): both sockets carry
//!   a virtio-net header with each frame.
//!   [`queue_train`](RawBackend::queue_train) sends a train of one flow's
//!   packets as one super-frame that the kernel or the NIC cuts into
//!   frames (one slot, one pass through the stack, for up to 64 packets);
//!   a super-frame that arrives whole (a veth passes them through) is cut
//!   by [`recv`](RawBackend::recv) and each piece checked like any frame.
//! * Sending: [`queue`](RawBackend::queue) writes frames straight into free
//!   ring slots ([`frame::FrameBuilder`] builds them); [`flush`](RawBackend::flush)
//!   is the one system call that sends everything queued. A full ring is
//!   counted (`tx_ring_full`) and `queue` says so; nothing blocks.
//! * Receiving: [`recv`](RawBackend::recv) walks the blocks the kernel has
//!   filled, with no system call per frame, parses each frame
//!   ([`frame::parse_rx_with`]: every header, then the receiver's cheap
//!   [`RawReceiver::accepts`], then the ICRC in full, so that a flood of
//!   unwanted packets costs no CRC) and hands over what passed; each drop is
//!   counted by cause in [`RawStats`]. A block is handed over when full or
//!   when the kernel's block timer ([`RawConfig::rx_block_timeout_ms`], at
//!   least 1 ms) fires: at low rates that timer sets the latency (about
//!   1 ms a round trip over a veth, against about 10 µs for the UDP
//!   backend; see the `raw_veth_latency` example). With
//!   [`RawConfig::rx_frame_by_frame`] the receive ring is TPACKET_V2
//!   instead, each frame handed over as soon as it is written (about 6 µs
//!   a round trip there).
//! * Port 4791 is held: for each address in [`RawConfig::hold_port`] a UDP
//!   socket is bound to `address:4791` and never read (a filter drops all
//!   it would queue), so that the kernel does not answer the RoCE v2
//!   packets it also receives with ICMP port unreachable.
//!
//! The kernel takes a received frame's 802.1Q tag off before the filter
//! and the ring see it and reports it beside the frame; it comes back in
//! [`frame::RxPacket::vlan`]. Frames the ring had no room for are counted
//! from the kernel's `PACKET_STATISTICS` (`rx_ring_drops`).

mod block;
mod filter;
pub mod frame;
mod mcast;
pub mod pfc;
pub mod qos;
mod recv;
pub mod vnet;

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use ferroce_wire::pfc::MacControlRepr;
use ferroce_wire::udp::ROCE_V2_PORT;
use socket2::{Domain, Protocol, Socket, Type};

use crate::sys::packet::{self, RxFrameRing, RxRing, Slot, TxRing};
use frame::RxPacket;
pub use mcast::multicast_mac;
use vnet::{VNET_HDR_LEN, VnetHdr};

/// The largest super-frame sent (see [`vnet`]): the most an IPv4 header's
/// total length allows, less room for the receiving ring's slot header
/// and an 802.1Q tag, so that it fits the 64 KiB receive slot of
/// [`RawConfig::new`] (a larger one is cut by the ring and counted).
pub const MAX_SUPER_FRAME: usize = (64 << 10) - 128;

/// Backend settings.
#[derive(Debug, Clone)]
pub struct RawConfig {
    /// The interface to bind (`eth0`).
    pub interface: String,
    /// Receive ring: block size in bytes (a multiple of the page size;
    /// frames larger than a block are cut) and number of blocks.
    pub rx_block_size: u32,
    pub rx_blocks: u32,
    /// How long the kernel waits for a block to fill before handing it
    /// over, in ms (at least 1).
    pub rx_block_timeout_ms: u32,
    /// Receive frame by frame instead (a TPACKET_V2 ring of `rx_frames`
    /// slots of `rx_frame_size` bytes, a power of two of at least the page
    /// size): each frame is the process's as soon as it is written, with no
    /// block timer, at the cost of a status word per frame. The
    /// `rx_block*` settings are then unused.
    pub rx_frame_by_frame: bool,
    pub rx_frames: u32,
    pub rx_frame_size: u32,
    /// Send ring: slots, each one frame of up to `tx_frame_size` minus a
    /// 32-byte header (a power of two of at least the page size).
    pub tx_frames: u32,
    pub tx_frame_size: u32,
    /// Send without the qdisc layer (`PACKET_QDISC_BYPASS`). Only without
    /// segmentation offload: the bypass (Linux's `dev_direct_xmit`) drops
    /// a super-frame the device cannot take whole where the qdisc path
    /// segments it in software, so with virtio-net headers on the send
    /// socket the qdisc layer stays (one pass per super-frame).
    pub qdisc_bypass: bool,
    /// Addresses whose UDP port 4791 to hold (see the module docs).
    pub hold_port: Vec<IpAddr>,
    /// Segmentation offload ([`vnet`]): a virtio-net header before every
    /// frame on both rings (`PACKET_VNET_HDR`), so that trains go out as
    /// super-frames ([`RawBackend::queue_train`]) and super-frames that
    /// arrive whole (over a veth) are cut up. If the kernel refuses the
    /// header, the backend runs without (logged at debug level;
    /// [`RawBackend::gso`] says which). Slots must then hold a super-frame
    /// (64 KiB) to be of use.
    pub gso: bool,
}

impl RawConfig {
    /// 32 MiB of receive ring in 1 MiB blocks handed over after 1 ms (or,
    /// frame by frame, 512 slots of 64 KiB), 64 send slots of 64 KiB (a
    /// super-frame of [`MAX_SUPER_FRAME`] fits), qdisc bypass, segmentation
    /// offload. Send slots are few so that the ring stays in the caches:
    /// with 256 (16 MiB) every slot written was a cache miss, and a 64 KiB
    /// WRITE stream over a veth ran about 10% slower.
    pub fn new(interface: &str) -> Self {
        Self {
            interface: interface.into(),
            rx_block_size: 1 << 20,
            rx_blocks: 32,
            rx_block_timeout_ms: 1,
            rx_frame_by_frame: false,
            rx_frames: 512,
            rx_frame_size: 64 << 10,
            tx_frames: 64,
            tx_frame_size: 64 << 10,
            qdisc_bypass: true,
            hold_port: Vec::new(),
            gso: true,
        }
    }
}

/// Counters, from the backend's opening.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawStats {
    /// Frames taken from the receive ring.
    pub rx_frames: u64,
    /// RoCE packets handed over (every check passed).
    pub rx_roce: u64,
    /// MAC control frames (PFC, PAUSE) handed over.
    pub rx_mac_control: u64,
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_ring_drops: u64,
    /// Dropped: cut short by the ring (larger than a block).
    pub rx_truncated: u64,
    /// Dropped: neither RoCE nor MAC control.
    pub rx_not_roce: u64,
    /// Dropped: a header or length is wrong.
    pub rx_malformed: u64,
    /// Dropped: the ICRC did not check.
    pub rx_bad_icrc: u64,
    /// Dropped: the receiver would not take it ([`RawReceiver::accepts`]).
    pub rx_unwanted: u64,
    /// Frames queued on the send ring.
    pub tx_frames: u64,
    /// Frames [`RawBackend::queue`] could not queue: every slot was still
    /// the kernel's.
    pub tx_ring_full: u64,
    /// Frames the kernel refused to send (bad length).
    pub tx_refused: u64,
    /// Super-frames queued, and the packets they carried.
    pub tx_gso_frames: u64,
    pub tx_gso_segments: u64,
    /// Super-frames the kernel refused (segmentation is then turned off).
    pub tx_gso_refused: u64,
    /// Super-frames received whole (over a veth) and cut up, and the
    /// frames cut from them (each then checked and counted like any other).
    pub rx_gso_frames: u64,
    pub rx_gso_segments: u64,
    /// Dropped: a super-frame whose virtio-net header lies (see
    /// [`vnet::split`]).
    pub rx_bad_gso: u64,
    /// Whether trains go out as super-frames ([`RawBackend::gso`]): false
    /// when the kernel refused virtio-net headers or a super-frame, or
    /// [`RawConfig::gso`] is off.
    pub gso: bool,
}

/// Where [`RawBackend::recv`] hands what it receives.
pub trait RawReceiver {
    /// Whether a well-formed RoCE packet from `src_mac` for QP `dest_qp`
    /// could be taken at all; asked before its ICRC is computed, so it must
    /// be cheap (a table lookup). Takes everything unless overridden.
    fn accepts(&mut self, src_mac: [u8; 6], dest_qp: u32) -> bool {
        let _ = (src_mac, dest_qp);
        true
    }
    /// A RoCE packet that passed every check.
    fn deliver(&mut self, packet: &RxPacket<'_>);
    /// A PFC, PAUSE or other MAC control frame from `src`.
    fn mac_control(&mut self, src: [u8; 6], repr: MacControlRepr) {
        let _ = (src, repr);
    }
}

/// The raw backend, bound to one interface.
#[derive(Debug)]
pub struct RawBackend {
    // The rings are unmapped before their sockets close (field order).
    rx: Rx,
    tx: TxRing,
    rx_fd: OwnedFd,
    tx_fd: OwnedFd,
    holds: Vec<Socket>,
    /// Multicast groups joined, each held by a socket (see `mcast`).
    groups: Vec<(IpAddr, Socket)>,
    interface: String,
    ifindex: u32,
    mac: [u8; 6],
    mtu: u32,
    /// The next block (or frame slot) of the receive ring to look at.
    next_block: usize,
    next_slot: usize,
    stats: RawStats,
    /// Whether each socket carries virtio-net headers, and whether trains
    /// are sent as super-frames (off after the kernel refused one).
    vnet_rx: bool,
    vnet_tx: bool,
    gso: bool,
    /// Which send slots hold a super-frame (to tell a refused one).
    slot_gso: Vec<bool>,
}

/// An error of `open`, naming the interface, the step and the fix.
fn opening(interface: &str, what: &str, e: io::Error) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) => " (packet sockets need CAP_NET_RAW: run as root or grant it)",
        Some(libc::EINVAL) if what.ends_with("ring") => {
            " (RawConfig: rx_block_size a multiple of the page size and of 2048, \
             rx_frame_size (frame by frame) and tx_frame_size powers of two of at \
             least the page size, counts above 0)"
        }
        _ => "",
    };
    io::Error::new(
        e.kind(),
        format!("raw backend on {interface}: {what}: {e}{hint}"),
    )
}

impl RawBackend {
    /// Opens the sockets and rings on `cfg.interface` (see the module docs).
    pub fn open(cfg: &RawConfig) -> io::Result<Self> {
        let name = cfg.interface.as_str();
        let err = |what: &'static str| move |e| opening(name, what, e);
        let rx_fd = packet::packet_socket().map_err(err("packet socket"))?;
        let (ifindex, mac, mtu) =
            packet::interface_info(rx_fd.as_raw_fd(), name).map_err(err("no such interface"))?;
        let vnet_rx = cfg.gso && vnet_header(&rx_fd, name);
        let rx = open_rx(&rx_fd, ifindex, cfg).map_err(|(what, e)| opening(name, what, e))?;
        let tx_fd = packet::packet_socket().map_err(err("packet socket"))?;
        let vnet_tx = cfg.gso && vnet_header(&tx_fd, name);
        let tx =
            open_tx(&tx_fd, ifindex, cfg, vnet_tx).map_err(|(what, e)| opening(name, what, e))?;
        let slot_gso = vec![false; tx.frames()];
        let holds = cfg
            .hold_port
            .iter()
            .map(|&a| hold_port(a, ifindex, vnet_rx).map_err(err("hold UDP port 4791")))
            .collect::<io::Result<_>>()?;
        tracing::debug!(
            interface = name,
            ifindex,
            mtu,
            vnet_rx,
            vnet_tx,
            "raw backend open"
        );
        Ok(Self {
            rx,
            tx,
            rx_fd,
            tx_fd,
            holds,
            groups: Vec::new(),
            interface: cfg.interface.clone(),
            ifindex,
            mac,
            mtu,
            next_block: 0,
            next_slot: 0,
            stats: RawStats::default(),
            vnet_rx,
            vnet_tx,
            gso: vnet_tx,
            slot_gso,
        })
    }

    pub fn interface(&self) -> &str {
        &self.interface
    }
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
    /// The interface's MAC address (the source of the frames it sends).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }
    /// The interface's IP MTU.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }
    /// The largest frame a send slot holds.
    pub fn max_frame(&self) -> usize {
        self.tx.capacity() - self.tx_prefix()
    }
    /// Whether [`queue_train`](Self::queue_train) sends super-frames (the
    /// kernel took virtio-net headers and has not refused a super-frame).
    pub fn gso(&self) -> bool {
        self.gso
    }
    /// The largest super-frame to build for [`queue_train`](Self::queue_train).
    pub fn max_train_frame(&self) -> usize {
        self.max_frame().min(MAX_SUPER_FRAME)
    }
    fn tx_prefix(&self) -> usize {
        if self.vnet_tx { VNET_HDR_LEN } else { 0 }
    }
    /// Readable when a receive block is ready (for `poll`).
    pub fn rx_fd(&self) -> RawFd {
        self.rx_fd.as_raw_fd()
    }

    /// [`rx_fd`](Self::rx_fd) borrowed, for [`crate::Sleeper::sleep_on`]
    /// (or a duplicate of one's own, with `try_clone_to_owned`).
    pub fn wait_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.rx_fd)
    }

    /// The counters, with the kernel's ring drops read now.
    pub fn stats(&mut self) -> RawStats {
        if let Ok(d) = packet::ring_drops(self.rx_fd.as_raw_fd()) {
            self.stats.rx_ring_drops += u64::from(d);
        }
        self.stats.gso = self.gso;
        self.stats
    }

    /// Lets `write` put one frame into the next free send slot (returning
    /// its length); `false` if the ring is full or the frame did not fit
    /// (`write` returned 0 or more than [`max_frame`](Self::max_frame)).
    /// Nothing leaves before [`flush`](Self::flush).
    pub fn queue(&mut self, write: impl FnOnce(&mut [u8]) -> usize) -> bool {
        self.queue_slot(|slot| (write(slot), VnetHdr::default()))
    }

    /// Lets `write` put one super-frame of `segments` packets into the next
    /// free send slot (returning its length and header, as
    /// [`frame::FrameBuilder::build_train`] does, or `None`); the kernel
    /// cuts it into `segments` frames. `false` as for [`queue`](Self::queue),
    /// and whenever [`gso`](Self::gso) is off.
    pub fn queue_train(
        &mut self,
        segments: usize,
        write: impl FnOnce(&mut [u8]) -> Option<(usize, VnetHdr)>,
    ) -> bool {
        if !self.gso {
            return false;
        }
        let queued = self.queue_slot(|slot| write(slot).unwrap_or_default());
        if queued {
            self.stats.tx_gso_frames += 1;
            self.stats.tx_gso_segments += segments as u64;
        }
        queued
    }

    fn queue_slot(&mut self, write: impl FnOnce(&mut [u8]) -> (usize, VnetHdr)) -> bool {
        let prefix = self.tx_prefix();
        let mut gso = false;
        let slot = self.tx.fill(self.next_slot, |slot| {
            let Some((head, frame)) = slot.split_at_mut_checked(prefix) else {
                return 0;
            };
            let (len, hdr) = write(frame);
            if let Ok(head) = <&mut [u8; VNET_HDR_LEN]>::try_from(head) {
                hdr.emit(head);
            }
            gso = hdr.is_gso();
            if len == 0 { 0 } else { len + prefix }
        });
        match slot {
            Slot::Queued { refused } => {
                self.stats.tx_frames += 1;
                self.stats.tx_refused += u64::from(refused);
                let was_gso = std::mem::replace(&mut self.slot_gso[self.next_slot], gso);
                if refused && was_gso {
                    self.gso_refused();
                }
                self.next_slot = (self.next_slot + 1) % self.tx.frames();
                true
            }
            Slot::Busy => {
                self.stats.tx_ring_full += 1;
                false
            }
            Slot::TooLarge => false,
        }
    }

    /// Queues a copy of `frame`.
    pub fn queue_frame(&mut self, frame: &[u8]) -> bool {
        self.queue(|slot| match slot.get_mut(..frame.len()) {
            Some(d) => {
                d.copy_from_slice(frame);
                frame.len()
            }
            None => 0,
        })
    }

    /// The kernel refused a super-frame: trains go frame by frame from now
    /// on (the refused one is lost; RC retransmits it).
    fn gso_refused(&mut self) {
        self.stats.tx_gso_refused += 1;
        if std::mem::replace(&mut self.gso, false) {
            tracing::debug!(
                interface = %self.interface,
                "the kernel refused a RoCE v2 super-frame: sending frame by frame"
            );
        }
    }

    /// Sends everything queued: one system call.
    pub fn flush(&mut self) -> io::Result<()> {
        self.tx.kick()
    }

    /// The UDP sockets holding port 4791 (see the module docs).
    pub fn held_ports(&self) -> usize {
        self.holds.len()
    }

    /// The send socket (for diagnostics; frames go through the ring).
    pub fn tx_fd(&self) -> RawFd {
        self.tx_fd.as_raw_fd()
    }
}

/// Asks for virtio-net headers on a packet socket (before its ring is set
/// up); false, logged at debug level, if the kernel refuses.
fn vnet_header(fd: &OwnedFd, interface: &str) -> bool {
    match packet::set_packet_option(fd.as_raw_fd(), libc::PACKET_VNET_HDR, 1) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(interface, error = %e, "PACKET_VNET_HDR refused: no segmentation offload");
            false
        }
    }
}

/// The receive ring: blocks (TPACKET_V3) or frames (TPACKET_V2).
#[derive(Debug)]
enum Rx {
    Blocks(RxRing),
    Frames(RxFrameRing),
}

type Step<T> = Result<T, (&'static str, io::Error)>;

/// Filter, options and ring of the receive socket, then its binding.
fn open_rx(fd: &OwnedFd, ifindex: u32, cfg: &RawConfig) -> Step<Rx> {
    let fd = fd.as_raw_fd();
    let step = |what| move |e| (what, e);
    packet::attach_filter(fd, &filter::program()).map_err(step("attach the filter"))?;
    packet::set_packet_option(fd, libc::PACKET_IGNORE_OUTGOING, 1)
        .map_err(step("PACKET_IGNORE_OUTGOING"))?;
    let rx = if cfg.rx_frame_by_frame {
        let ring = RxFrameRing::setup(fd, cfg.rx_frame_size, cfg.rx_frames);
        Rx::Frames(ring.map_err(step("receive ring"))?)
    } else {
        let timeout = cfg.rx_block_timeout_ms.max(1);
        let ring = RxRing::setup(fd, cfg.rx_block_size, cfg.rx_blocks, timeout);
        Rx::Blocks(ring.map_err(step("receive ring"))?)
    };
    packet::bind(fd, ifindex, true).map_err(step("bind the receive socket"))?;
    Ok(rx)
}

/// Options and ring of the send socket, then its binding (for no
/// protocol: it receives nothing).
fn open_tx(fd: &OwnedFd, ifindex: u32, cfg: &RawConfig, vnet: bool) -> Step<TxRing> {
    let fd = fd.as_raw_fd();
    let step = |what| move |e| (what, e);
    // A frame the kernel refuses is skipped (marked), not a stalled ring.
    packet::set_packet_option(fd, libc::PACKET_LOSS, 1).map_err(step("PACKET_LOSS"))?;
    if cfg.qdisc_bypass && !vnet {
        packet::set_packet_option(fd, libc::PACKET_QDISC_BYPASS, 1)
            .map_err(step("PACKET_QDISC_BYPASS"))?;
    }
    let tx = TxRing::setup(fd, cfg.tx_frame_size, cfg.tx_frames).map_err(step("send ring"))?;
    packet::bind(fd, ifindex, false).map_err(step("bind the send socket"))?;
    Ok(tx)
}

/// A UDP socket on `addr:4791` that never queues anything. A link-local
/// IPv6 address is bound on the backend's interface (its scope). With
/// `gro` (when the receive ring takes virtio-net headers) it accepts UDP
/// super-frames whole: without it, Linux cuts each one in software for
/// this socket, only for its filter to drop every piece (a third of the
/// raw backend's throughput over a veth went there). It also lets the
/// kernel merge received trains (GRO), which the ring then hands over as
/// super-frames, cut by [`vnet::split`].
fn hold_port(addr: IpAddr, ifindex: u32, gro: bool) -> io::Result<Socket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    packet::attach_filter(s.as_raw_fd(), &filter::reject_all())?;
    if gro {
        crate::sys::set_udp_gro(s.as_raw_fd())?;
    }
    let at = match addr {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => {
            SocketAddr::V6(SocketAddrV6::new(v6, ROCE_V2_PORT, 0, ifindex))
        }
        _ => SocketAddr::new(addr, ROCE_V2_PORT),
    };
    s.bind(&at.into())?;
    Ok(s)
}

#[cfg(test)]
mod tests;
