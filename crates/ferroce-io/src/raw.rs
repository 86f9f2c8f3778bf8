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
//!   and tcpdump on the sending host does not see the frames).
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
pub mod pfc;
pub mod qos;

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use ferroce_wire::pfc::MacControlRepr;
use ferroce_wire::udp::ROCE_V2_PORT;
use socket2::{Domain, Protocol, Socket, Type};

use crate::sys::packet::{self, RxFrameRing, RxRing, Slot, TxRing};
use block::{walk_block, walk_slot};
use frame::{RxDrop, RxFrame, RxPacket};

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
    /// Send without the qdisc layer (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// Addresses whose UDP port 4791 to hold (see the module docs).
    pub hold_port: Vec<IpAddr>,
}

impl RawConfig {
    /// 32 MiB of receive ring in 1 MiB blocks handed over after 1 ms (or,
    /// frame by frame, 2,048 slots of 16 KiB), 512
    /// send slots of 16 KiB (a 9000-byte jumbo frame fits), qdisc bypass.
    pub fn new(interface: &str) -> Self {
        Self {
            interface: interface.into(),
            rx_block_size: 1 << 20,
            rx_blocks: 32,
            rx_block_timeout_ms: 1,
            rx_frame_by_frame: false,
            rx_frames: 2048,
            rx_frame_size: 16 << 10,
            tx_frames: 512,
            tx_frame_size: 16 << 10,
            qdisc_bypass: true,
            hold_port: Vec::new(),
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
    interface: String,
    ifindex: u32,
    mac: [u8; 6],
    mtu: u32,
    /// The next block (or frame slot) of the receive ring to look at.
    next_block: usize,
    next_slot: usize,
    stats: RawStats,
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
        let rx = open_rx(&rx_fd, ifindex, cfg).map_err(|(what, e)| opening(name, what, e))?;
        let tx_fd = packet::packet_socket().map_err(err("packet socket"))?;
        let tx = open_tx(&tx_fd, ifindex, cfg).map_err(|(what, e)| opening(name, what, e))?;
        let holds = cfg
            .hold_port
            .iter()
            .map(|&a| hold_port(a, ifindex).map_err(err("hold UDP port 4791")))
            .collect::<io::Result<_>>()?;
        tracing::debug!(interface = name, ifindex, mtu, "raw backend open");
        Ok(Self {
            rx,
            tx,
            rx_fd,
            tx_fd,
            holds,
            interface: cfg.interface.clone(),
            ifindex,
            mac,
            mtu,
            next_block: 0,
            next_slot: 0,
            stats: RawStats::default(),
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
        self.tx.capacity()
    }
    /// Readable when a receive block is ready (for `poll` and
    /// [`crate::Sleeper::sleep`]).
    pub fn rx_fd(&self) -> RawFd {
        self.rx_fd.as_raw_fd()
    }

    /// The counters, with the kernel's ring drops read now.
    pub fn stats(&mut self) -> RawStats {
        if let Ok(d) = packet::ring_drops(self.rx_fd.as_raw_fd()) {
            self.stats.rx_ring_drops += u64::from(d);
        }
        self.stats
    }

    /// Lets `write` put one frame into the next free send slot (returning
    /// its length); `false` if the ring is full or the frame did not fit
    /// (`write` returned 0 or more than [`max_frame`](Self::max_frame)).
    /// Nothing leaves before [`flush`](Self::flush).
    pub fn queue(&mut self, write: impl FnOnce(&mut [u8]) -> usize) -> bool {
        match self.tx.fill(self.next_slot, write) {
            Slot::Queued { refused } => {
                self.stats.tx_frames += 1;
                self.stats.tx_refused += u64::from(refused);
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

    /// Sends everything queued: one system call.
    pub fn flush(&mut self) -> io::Result<()> {
        self.tx.kick()
    }

    /// Hands every frame of every filled block to `f` (frame bytes, the
    /// 802.1Q TCI the kernel took off, whether the ring cut it short), and
    /// returns the blocks to the kernel; returns the number of frames.
    pub fn recv_frames(&mut self, f: impl FnMut(&[u8], Option<u16>, bool)) -> usize {
        self.recv_frames_at_most(usize::MAX, f)
    }

    /// The number of slots (frames, or blocks of the V3 ring) in the
    /// receive ring.
    pub fn rx_slots(&self) -> usize {
        match &self.rx {
            Rx::Blocks(r) => r.blocks(),
            Rx::Frames(r) => r.frames(),
        }
    }

    /// [`recv_frames`](Self::recv_frames) from at most `max` slots (frames
    /// of the V2 ring, blocks of the V3 one); the rest stay in the ring.
    pub fn recv_frames_at_most(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], Option<u16>, bool),
    ) -> usize {
        let mut n = 0;
        let slots = self.rx_slots();
        for _ in 0..slots.min(max) {
            let at = self.next_block;
            let walked = match &mut self.rx {
                Rx::Blocks(r) => r.with_block(at, |b| walk_block(b, &mut f)),
                Rx::Frames(r) => r.with_frame(at, |s| walk_slot(s, &mut f)),
            };
            let Some(count) = walked else { break };
            n += count;
            self.next_block = (at + 1) % slots;
        }
        self.stats.rx_frames += n as u64;
        n
    }

    /// Receives what the ring holds: each frame parsed and checked, RoCE
    /// and MAC control handed to `rx`, the rest counted and dropped.
    /// Returns the number of frames taken from the ring.
    pub fn recv(&mut self, rx: &mut impl RawReceiver) -> usize {
        self.recv_at_most(usize::MAX, rx)
    }

    /// [`recv`](Self::recv) from at most `max` slots of the ring (see
    /// [`recv_frames_at_most`](Self::recv_frames_at_most)).
    pub fn recv_at_most(&mut self, max: usize, rx: &mut impl RawReceiver) -> usize {
        let mut stats = self.stats;
        let n = self.recv_frames_at_most(max, |data, tci, cut| {
            if cut {
                stats.rx_truncated += 1;
                return;
            }
            match frame::parse_rx_with(data, tci, |mac, qp| rx.accepts(mac, qp)) {
                Ok(RxFrame::Roce(p)) => {
                    stats.rx_roce += 1;
                    rx.deliver(&p);
                }
                Ok(RxFrame::MacControl { src, repr }) => {
                    stats.rx_mac_control += 1;
                    rx.mac_control(src, repr);
                }
                Err(drop) => {
                    tracing::trace!(?drop, "raw frame dropped");
                    match drop {
                        RxDrop::NotRoce => stats.rx_not_roce += 1,
                        RxDrop::Malformed(_) => stats.rx_malformed += 1,
                        RxDrop::BadIcrc => stats.rx_bad_icrc += 1,
                        RxDrop::Unwanted => stats.rx_unwanted += 1,
                    }
                }
            }
        });
        stats.rx_frames = self.stats.rx_frames;
        self.stats = stats;
        n
    }

    /// The receive backlog: frames the kernel has written to the ring and
    /// nobody has taken yet, by 802.1Q priority (untagged: 0), looking at
    /// no more than `max` slots ahead. Nothing is taken.
    pub fn rx_backlog(&self, max: usize) -> [u32; 8] {
        let mut backlog = [0u32; 8];
        let mut count = |_: &[u8], tci: Option<u16>, _: bool| {
            backlog[usize::from(qos::priority_of(tci))] += 1;
        };
        let slots = self.rx_slots();
        for k in 0..slots.min(max) {
            let at = (self.next_block + k) % slots;
            let seen = match &self.rx {
                Rx::Blocks(r) => r.peek_block(at, |b| walk_block(b, &mut count)),
                Rx::Frames(r) => r.peek_frame(at, |s| walk_slot(s, &mut count)),
            };
            if seen.is_none() {
                break;
            }
        }
        backlog
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
fn open_tx(fd: &OwnedFd, ifindex: u32, cfg: &RawConfig) -> Step<TxRing> {
    let fd = fd.as_raw_fd();
    let step = |what| move |e| (what, e);
    // A frame the kernel refuses is skipped (marked), not a stalled ring.
    packet::set_packet_option(fd, libc::PACKET_LOSS, 1).map_err(step("PACKET_LOSS"))?;
    if cfg.qdisc_bypass {
        packet::set_packet_option(fd, libc::PACKET_QDISC_BYPASS, 1)
            .map_err(step("PACKET_QDISC_BYPASS"))?;
    }
    let tx = TxRing::setup(fd, cfg.tx_frame_size, cfg.tx_frames).map_err(step("send ring"))?;
    packet::bind(fd, ifindex, false).map_err(step("bind the send socket"))?;
    Ok(tx)
}

/// A UDP socket on `addr:4791` that never queues anything. A link-local
/// IPv6 address is bound on the backend's interface (its scope).
fn hold_port(addr: IpAddr, ifindex: u32) -> io::Result<Socket> {
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
