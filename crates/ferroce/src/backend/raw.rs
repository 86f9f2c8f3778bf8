//! A device on the raw-Ethernet backend: the engine's packets framed as
//! RoCE v1 (a GRH) or RoCE v2 (IPv4/IPv6 and UDP to 4791) by their path's
//! [`RoceMode`], to the peer's MAC address from the kernel's neighbour
//! table; received frames (checked in full, ICRC included, by
//! `ferroce_io::raw`) handed to the engine with their GRH for v1.
//!
//! Contract:
//! * The device sends from its own address only: the v1 SGID is that
//!   address's GID (`::ffff:a.b.c.d` for IPv4), the v2 source address the
//!   address itself. Frames to another address or GID of this interface
//!   are dropped and counted (`rx_not_ours`): several devices may share an
//!   interface.
//! * Peers' MAC addresses come from a [`NeighCache`] shared with the API,
//!   which resolves a connected QP's peer when its path is set (an
//!   unresolvable peer fails `modify_qp`, as rdma-core's does when the
//!   kernel cannot resolve the destination MAC). The driver never talks
//!   to the kernel for a peer: a packet to an unknown peer (a MAD to a new
//!   CM peer, say) is parked while the cache's thread has the kernel
//!   resolve it (asked every [`neigh_cache::RETRY_RESOLVE`]), sent in the
//!   round the thread's wake-up brings once the peer is known, and
//!   dropped and counted (`tx_unresolved`) after [`PARK_FOR`] or past
//!   [`MAX_PARKED`]. The cache refreshes the entries in use and forgets
//!   idle ones off the driver thread too (see [`neigh_cache`]).
//! * v1 packets carry flow label 0 and the path's traffic class and hop
//!   limit; v2 ones the path's traffic class as DSCP/ECN and its hop limit
//!   as TTL, with UDP checksum 0 (as rxe).
//! * Priorities and PFC ([`pfc`]): frames carry the 802.1Q tag of their
//!   traffic class ([`crate::config_raw`]); with PFC on, a paused
//!   priority's packets are held (never dropped), received PFC frames
//!   pause and resume priorities, and after each receive the ring's
//!   backlog per priority may send XOFF or XON.
//! * Runs of one path's v2 packets in a send batch (a long message's
//!   packets) go out as super-frames the kernel cuts into frames
//!   (`ferroce_io::raw::vnet`; those segments carry a real UDP checksum,
//!   which the ICRC masks); v1 packets, and every packet under injected
//!   loss, go one frame each.
//! * Fault injection for tests on a real link (no netem in every kernel):
//!   with `FERROCE_RAW_DROP_ONE_IN=N` in the environment (read by
//!   [`crate::env`] into `RawOptions::test_drop_one_in`), each frame the
//!   device would send is dropped with probability 1/N instead and counted
//!   (`tx_injected_drops`), so that RC's retransmission is exercised over
//!   real frames. The drops are drawn from a xorshift stream, not every
//!   Nth frame: a go-back-N resend of a multiple of N frames then lost its
//!   first frame every time, until the retry count ran out.

mod neigh_cache;

use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant as StdInstant};

use ferroce_core::verbs::RoceMode;
use ferroce_core::{Endpoint, Instant, Transmit};
use ferroce_io::raw::frame::{FrameBuilder, FrameSpec, L3, RxPacket};
use ferroce_io::raw::vnet::MAX_SEGMENTS;
use ferroce_io::raw::{RawBackend, RawConfig, RawReceiver, RawStats};
use ferroce_wire::Network;
use ferroce_wire::pfc::MacControlRepr;
use tracing::debug;

use crate::config_raw::{PfcStats, RawOptions};
pub(crate) use neigh_cache::NeighCache;
pub use neigh_cache::NeighStats;

mod pfc;

/// Packets to peers being resolved, kept at most this many and this long
/// (then dropped and counted).
const MAX_PARKED: usize = 64;
const PARK_FOR: Duration = Duration::from_secs(1);

/// How long the API waits for the kernel to resolve a peer (ARP or
/// neighbour discovery) when a path is set.
pub(crate) const RESOLVE_WAIT: Duration = Duration::from_secs(3);

/// The raw device's counters: the backend's, and the device's own drops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawDeviceStats {
    /// The frame layer's: frames in and out, drops by cause.
    pub backend: RawStats,
    /// Packets not sent: the peer's MAC address is not known (yet), or a
    /// RoCE v2 path's addresses are of two families (a UD destination;
    /// `modify_qp` refuses such a path).
    pub tx_unresolved: u64,
    /// Packets not sent: larger than a send slot.
    pub tx_too_large: u64,
    /// Received RoCE packets for another address or GID of the interface.
    pub rx_not_ours: u64,
    /// Frames dropped on purpose (`FERROCE_RAW_DROP_ONE_IN`).
    pub tx_injected_drops: u64,
    /// The neighbour cache's refreshes, MAC changes and dropped entries.
    pub neigh: NeighStats,
    /// Packets that waited before they went out, with PFC on: for their
    /// priority's pause to end, or for the sends' pacing at the link speed.
    pub tx_held: u64,
    /// PFC frames not sent: the send ring was full.
    pub tx_pfc_lost: u64,
    /// PFC per priority: pause frames received and sent, time paused.
    pub pfc: PfcStats,
}

/// The GID of an address: IPv4 mapped, IPv6 as it is.
pub(crate) fn gid_of(addr: IpAddr) -> Ipv6Addr {
    match addr.to_canonical() {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

#[derive(Debug)]
pub(crate) struct RawDevice {
    backend: RawBackend,
    frames: FrameBuilder,
    local: IpAddr,
    neigh: std::sync::Arc<NeighCache>,
    stats: RawDeviceStats,
    /// Drop one frame in this many, at random (0: none; see the module
    /// docs).
    drop_one_in: u64,
    /// Packets to peers whose MAC the kernel is resolving, oldest first,
    /// with when they were parked.
    parked: std::collections::VecDeque<(StdInstant, Transmit)>,
    /// The xorshift64 state that draws the drops of `drop_one_in`.
    loss_draw: u64,
    /// Tags, held packets and PFC state.
    qos: pfc::Qos,
    /// Whether runs of packets go out as super-frames (see `train_len`).
    trains: bool,
    /// Copies of the multicast packets sent, for the engine's own QPs
    /// (the ring ignores outgoing frames; a NIC loops multicast back to
    /// its own QPs): handed over at the next receive.
    looped: Vec<Transmit>,
}

impl RawDevice {
    /// The next number of the loss stream (xorshift64).
    fn draw_loss(&mut self) -> u64 {
        let mut x = self.loss_draw;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.loss_draw = x;
        x
    }

    /// Opens the raw backend on `interface` for a device on `local`,
    /// holding `local`'s UDP port 4791; CNPs leave on priority `cnp_prio`
    /// when frames are tagged.
    pub(crate) fn open(
        interface: &str,
        local: IpAddr,
        neigh: std::sync::Arc<NeighCache>,
        seed: u64,
        opts: &RawOptions,
        cnp_prio: u8,
    ) -> io::Result<Self> {
        opts.check()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut cfg = RawConfig::new(interface);
        cfg.rx_frames = opts.rx_frames;
        cfg.gso = opts.gso;
        // Frame by frame: the block ring hands frames over only when a
        // block fills or its 1 ms timer fires, 1 ms in every round trip.
        cfg.rx_frame_by_frame = true;
        cfg.hold_port = vec![local];
        let backend = RawBackend::open(&cfg)?;
        Ok(Self {
            backend,
            frames: FrameBuilder::new(seed as u16),
            local: local.to_canonical(),
            neigh,
            stats: RawDeviceStats::default(),
            drop_one_in: opts.test_drop_one_in.into(),
            // Any non-zero state will do; xorshift never leaves zero.
            loss_draw: seed | 1,
            parked: std::collections::VecDeque::new(),
            qos: pfc::Qos::new(opts, interface, cnp_prio),
            trains: true,
            looped: Vec::new(),
        })
    }

    /// Joins multicast `group` on the interface.
    pub(crate) fn join(&mut self, group: IpAddr) -> io::Result<()> {
        self.backend.join(group)
    }

    /// Leaves multicast `group`.
    pub(crate) fn leave(&mut self, group: IpAddr) {
        self.backend.leave(group);
    }

    /// The MAC address of `t`'s destination: the group's for a multicast
    /// packet (a copy is kept for the loop back), else the peer's from the
    /// neighbour cache (`None`: not resolved yet).
    fn dest_mac(&mut self, t: &Transmit) -> Option<[u8; 6]> {
        if ferroce_core::multicast_group(t.path.remote).is_some() {
            if self.looped.len() < MAX_LOOPED {
                self.looped.push(t.clone());
            }
            let v1 = t.path.roce == RoceMode::V1;
            return Some(ferroce_io::raw::multicast_mac(t.path.remote, v1));
        }
        self.neigh.lookup(t.path.remote)
    }

    pub(crate) fn wait_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.backend.wait_fd()
    }

    pub(crate) fn stats(&mut self) -> RawDeviceStats {
        RawDeviceStats {
            backend: self.backend.stats(),
            neigh: self.neigh.stats(),
            tx_held: self.qos.tx_held,
            tx_pfc_lost: self.qos.tx_pfc_lost,
            pfc: self.qos.stats(),
            ..self.stats
        }
    }

    /// The frame around `t` to `dst_mac`, or `None` if the path's address
    /// family is not the device's (a v2 path from IPv4 to IPv6).
    fn spec(&self, t: &Transmit, dst_mac: [u8; 6]) -> Option<FrameSpec> {
        let p = &t.path;
        let remote = p.remote.to_canonical();
        let l3 = match (p.roce, self.local, remote) {
            (RoceMode::V1, local, remote) => L3::V1 {
                sgid: gid_of(local),
                dgid: gid_of(remote),
                traffic_class: t.tos(),
                flow_label: 0,
                hop_limit: p.hop_limit,
            },
            (RoceMode::V2, IpAddr::V4(src), IpAddr::V4(dst)) => L3::V2Ipv4 {
                src,
                dst,
                tos: t.tos(),
                ttl: p.hop_limit,
                src_port: p.udp_src_port,
            },
            (RoceMode::V2, IpAddr::V6(src), IpAddr::V6(dst)) => L3::V2Ipv6 {
                src,
                dst,
                traffic_class: t.tos(),
                flow_label: 0,
                hop_limit: p.hop_limit,
                src_port: p.udp_src_port,
            },
            (RoceMode::V2, ..) => return None,
        };
        Some(FrameSpec {
            dst_mac,
            src_mac: self.backend.mac(),
            vlan: self.qos.tag(t),
            l3,
        })
    }

    /// Frames and queues what it can of `out`, then sends it all with one
    /// system call; returns how many packets it took (see the module docs
    /// of [`crate::backend`]). A packet to a peer not resolved yet is
    /// parked (a copy) until the kernel knows the peer, at most
    /// [`PARK_FOR`]; packets parked earlier go first.
    pub(crate) fn send(&mut self, out: &mut [Transmit], failed: &mut bool) -> usize {
        self.send_parked();
        let mut taken = 0;
        while let Some(t) = out.get(taken) {
            let Some(mac) = self.dest_mac(t) else {
                if self.parked.len() < MAX_PARKED {
                    self.parked.push_back((StdInstant::now(), t.clone()));
                } else {
                    self.stats.tx_unresolved += 1;
                }
                taken += 1;
                continue;
            };
            if self.qos.must_hold(t) {
                if !self.qos.hold(mac, t) {
                    break; // its priority's queue is full: back-pressure
                }
                taken += 1;
                continue;
            }
            let train = self.train_len(&out[taken..], mac);
            let queued = if train > 1 {
                self.queue_train(&out[taken..taken + train], mac)
            } else {
                self.queue(t, mac)
            };
            if !queued {
                break; // the ring is full: the rest wait for the next round
            }
            let bytes = out[taken..taken + train].iter().map(|t| t.data.len());
            self.qos.sent(bytes.sum());
            taken += train;
        }
        self.flush(failed);
        taken
    }

    /// How many packets from the start of `out` go out as one super-frame
    /// (see `ferroce_io::raw::vnet`): RoCE v2 packets of one path and
    /// class, all as long as the first but the last (which may be
    /// shorter), as many as fit a super-frame. 1 when the backend has no
    /// segmentation offload, for RoCE v1 (no UDP header to cut by), and
    /// under injected loss (which drops single frames).
    fn train_len(&self, out: &[Transmit], mac: [u8; 6]) -> usize {
        let Some(head) = out.first() else { return 0 };
        if !self.trains
            || !self.backend.gso()
            || self.drop_one_in > 0
            || head.path.roce != RoceMode::V2
        {
            return 1;
        }
        let Some(spec) = self.spec(head, mac) else {
            return 1;
        };
        let room = self.backend.max_train_frame() - FrameBuilder::header_len(&spec);
        let size = head.data.len();
        let (mut n, mut bytes) = (1, size);
        for t in &out[1..out.len().min(MAX_SEGMENTS)] {
            let len = t.data.len();
            if t.path != head.path || t.tos() != head.tos() || len > size || bytes + len > room {
                break;
            }
            (n, bytes) = (n + 1, bytes + len);
            if len < size {
                break; // a shorter packet ends a train
            }
        }
        n
    }

    /// Queues `train` (see [`train_len`](Self::train_len)) to `mac` as one
    /// super-frame; false if the ring is full.
    fn queue_train(&mut self, train: &[Transmit], mac: [u8; 6]) -> bool {
        let Some(spec) = train.first().and_then(|t| self.spec(t, mac)) else {
            return false;
        };
        let frames = &mut self.frames;
        let packets = train.iter().map(|t| t.data.as_slice());
        let mut refused = None;
        let queued = self.backend.queue_train(train.len(), |slot| {
            frames
                .build_train(&spec, packets, slot)
                .map_err(|e| refused = Some(e))
                .ok()
        });
        if let Some(e) = refused {
            // `train_len` admits only trains the builder takes: a bug. The
            // packets stay in `out` and go frame by frame next round.
            tracing::warn!(error = %e, "super-frame not built: sending frame by frame");
            self.trains = false;
        }
        queued
    }

    /// Sends the parked packets whose peer is known now, drops those
    /// parked too long; every driver round calls it.
    pub(crate) fn send_parked(&mut self) {
        self.qos.refill();
        let mut queued = self.release_held();
        let mut keep = std::collections::VecDeque::new();
        while let Some((since, t)) = self.parked.pop_front() {
            match self.neigh.lookup(t.path.remote) {
                Some(mac) if self.queue(&t, mac) => queued = true,
                Some(_) => keep.push_back((since, t)), // ring full
                None if since.elapsed() >= PARK_FOR => self.stats.tx_unresolved += 1,
                None => keep.push_back((since, t)),
            }
        }
        self.parked = keep;
        if queued {
            self.flush(&mut false);
        }
    }

    /// Queues the packets PFC held whose priority may send again (until
    /// the ring is full); returns whether it queued any.
    fn release_held(&mut self) -> bool {
        let mut unsent = Vec::new();
        let mut queued = false;
        for (mac, t) in self.qos.take_ready() {
            if unsent.is_empty() && self.queue(&t, mac) {
                self.qos.sent(t.data.len());
                queued = true;
            } else {
                unsent.push((mac, t));
            }
        }
        self.qos.put_back(unsent);
        queued
    }

    /// How long until a PFC pause ends while packets wait for it: the
    /// driver sleeps no longer than that.
    pub(crate) fn wake_in(&self) -> Option<Duration> {
        self.qos.wake_in()
    }

    /// Queues the frame of `t` to `mac`; false if the ring is full (a
    /// packet that cannot be framed is dropped, counted, and taken).
    fn queue(&mut self, t: &Transmit, mac: [u8; 6]) -> bool {
        let Some(spec) = self.spec(t, mac) else {
            self.stats.tx_unresolved += 1;
            return true;
        };
        if FrameBuilder::header_len(&spec) + t.data.len() > self.backend.max_frame() {
            self.stats.tx_too_large += 1;
            return true;
        }
        if self.drop_one_in > 0 && self.draw_loss().is_multiple_of(self.drop_one_in) {
            self.stats.tx_injected_drops += 1;
            return true;
        }
        let frames = &mut self.frames;
        self.backend.queue(|slot| {
            frames.build(&spec, &t.data, slot).unwrap_or_else(|e| {
                debug!(error = %e, "frame not built");
                0
            })
        })
    }

    fn flush(&mut self, failed: &mut bool) {
        if let Err(e) = self.backend.flush()
            && !std::mem::replace(failed, true)
        {
            tracing::warn!(error = %e, "raw send failed; the frames are lost (RC retransmits them)");
        }
    }

    /// Hands what the receive ring holds to `ep`. With PFC on, then looks
    /// at the ring's backlog and sends the PFC frame it calls for.
    pub(crate) fn recv(&mut self, ep: &mut Endpoint, now: Instant) -> super::Delivered {
        for t in self.looped.drain(..) {
            loop_back(ep, now, self.local, &t);
        }
        let mut rx = EngineRawRx {
            ep,
            now,
            local: self.local,
            local_gid: gid_of(self.local),
            not_ours: 0,
            mac_control: Vec::new(),
            messages: 0,
        };
        let (budget, slow) = self.qos.rx_budget();
        let n = self.backend.recv_at_most(budget, &mut rx);
        self.stats.rx_not_ours += rx.not_ours;
        for repr in &rx.mac_control {
            self.qos.on_mac_control(repr);
        }
        self.watch_backlog();
        if let Some(d) = slow.filter(|_| n > 0) {
            let backend = &mut self.backend;
            self.qos.slow_rx_wait(d, |q| {
                let backlog = backend.rx_backlog(usize::MAX);
                if let Some(repr) = q.on_backlog(&backlog) {
                    send_pfc(backend, &mut q.tx_pfc_lost, &repr);
                }
            });
        }
        super::Delivered {
            packets: n,
            messages: rx.messages,
        }
    }

    /// With PFC on, sends the PFC frame the receive ring's backlog calls
    /// for, if any.
    fn watch_backlog(&mut self) {
        if self.qos.pfc_on() {
            let backlog = self.backend.rx_backlog(usize::MAX);
            if let Some(repr) = self.qos.on_backlog(&backlog) {
                send_pfc(&mut self.backend, &mut self.qos.tx_pfc_lost, &repr);
            }
        }
    }
}

/// Loops multicast packets sent per device at most this many per round
/// (a round sends at most a batch).
const MAX_LOOPED: usize = 256;

/// Hands our own multicast packet `t` to the engine, as if received.
fn loop_back(ep: &mut Endpoint, now: Instant, local: IpAddr, t: &Transmit) {
    let group = t.path.remote.to_canonical();
    if !ep.accepts_group(group) {
        return; // no QP of ours is in the group: nothing to loop
    }
    if t.path.roce == RoceMode::V1 {
        let grh = ferroce_wire::ipv6::Ipv6Repr {
            traffic_class: t.tos(),
            flow_label: 0,
            payload_len: t.data.len() as u16,
            next_header: ferroce_wire::ipv6::NEXT_HEADER_IBA,
            hop_limit: t.path.hop_limit,
            src: gid_of(local),
            dst: gid_of(group),
        };
        let mut bytes = [0; 40];
        if grh.emit(&mut bytes).is_ok() {
            ep.handle_own_multicast(now, local, group, Some(&bytes), t.ecn, &t.data);
        }
    } else {
        ep.handle_own_multicast(now, local, group, None, t.ecn, &t.data);
    }
}

/// Sends a PFC frame now (MAC control is never paused itself); counts it
/// in `lost` if the send ring is full.
fn send_pfc(backend: &mut RawBackend, lost: &mut u64, repr: &MacControlRepr) {
    let frame = ferroce_wire::pfc::frame(backend.mac(), repr);
    if !backend.queue_frame(&frame) {
        *lost += 1;
    } else if let Err(e) = backend.flush() {
        debug!(error = %e, "PFC frame not sent");
        *lost += 1;
    }
}

/// The engine as the raw backend's receiver.
struct EngineRawRx<'a> {
    ep: &'a mut Endpoint,
    now: Instant,
    local: IpAddr,
    local_gid: Ipv6Addr,
    not_ours: u64,
    /// MAC control frames received (PFC), for the device to act on.
    mac_control: Vec<MacControlRepr>,
    /// Packets that completed a receive ([`super::completes_receive`]).
    messages: usize,
}

impl RawReceiver for EngineRawRx<'_> {
    /// Before the ICRC: a flood for QPs that do not exist costs no CRC.
    fn accepts(&mut self, _src_mac: [u8; 6], dest_qp: u32) -> bool {
        self.ep.accepts_qp(dest_qp)
            || (dest_qp == ferroce_core::MULTICAST_QPN && self.ep.mcast_groups().next().is_some())
    }

    fn deliver(&mut self, p: &RxPacket<'_>) {
        self.messages += usize::from(super::completes_receive(p.transport));
        let ecn = ferroce_core::Ecn::from_traffic_class(p.ecn());
        match p.network {
            Network::V1 { grh } if ferroce_core::multicast_group(IpAddr::V6(grh.dst)).is_some() => {
                let mut bytes = [0; 40];
                if grh.emit(&mut bytes).is_ok() {
                    let from = IpAddr::V6(grh.src).to_canonical();
                    self.ep
                        .handle_v1_packet(self.now, from, &bytes, p.transport);
                }
            }
            Network::V2Ipv4 { ip, .. } if ip.dst.is_multicast() => {
                let (from, group) = (IpAddr::V4(ip.src), IpAddr::V4(ip.dst));
                self.ep
                    .handle_multicast(self.now, from, group, ecn, p.transport);
            }
            Network::V2Ipv6 { ip, .. } if ip.dst.is_multicast() => {
                let (from, group) = (IpAddr::V6(ip.src), IpAddr::V6(ip.dst));
                self.ep
                    .handle_multicast(self.now, from, group, ecn, p.transport);
            }
            Network::V1 { grh } if grh.dst == self.local_gid => {
                let mut bytes = [0; 40];
                if grh.emit(&mut bytes).is_ok() {
                    let from = IpAddr::V6(grh.src).to_canonical();
                    self.ep
                        .handle_v1_packet(self.now, from, &bytes, p.transport);
                }
            }
            Network::V2Ipv4 { ip, .. } if IpAddr::V4(ip.dst) == self.local => {
                let ecn = ferroce_core::Ecn::from_traffic_class(p.ecn());
                let from = IpAddr::V4(ip.src);
                self.ep
                    .handle_datagram_ecn(self.now, from, ecn, p.transport);
            }
            Network::V2Ipv6 { ip, .. } if IpAddr::V6(ip.dst) == self.local => {
                let ecn = ferroce_core::Ecn::from_traffic_class(p.ecn());
                let from = IpAddr::V6(ip.src);
                self.ep
                    .handle_datagram_ecn(self.now, from, ecn, p.transport);
            }
            _ => self.not_ours += 1,
        }
    }

    fn mac_control(&mut self, _src: [u8; 6], repr: MacControlRepr) {
        // Bounded by the frames one receive takes from the ring.
        self.mac_control.push(repr);
    }
}
