//! RoCE v2 over the kernel's UDP sockets.
//!
//! One socket bound to `local:4791` receives (with `recvmmsg`), and one
//! per multicast group joined (see `mcast`). Sending goes
//! through one socket per UDP source port, bound to `local:port` and never
//! connected, so that every flow keeps its RoCE source port (0xC000 | flow
//! hash, for ECMP) and the kernel writes a predictable IP header (DF, IPv4
//! Identification 0), which the ICRC covers. Sends are batched per source
//! port with `sendmmsg`. See [`crate::icrc`] for what is verified on receive.
//!
//! The send sockets are at most [`UdpConfig::max_tx_sockets`]: past that, a
//! new source port is sent from one of the ports already open (the same
//! one every time, so a flow stays on one port and in order), and the
//! ICRC is computed for the port on the wire. A socket per QP would take a
//! file descriptor per QP (Linux's usual limit is 1,024 per process), and
//! opening one in the middle of traffic took up to 12 ms here: 1,000 QPs
//! starting at once stalled for tens of milliseconds.
//!
//! The kernel's cost is per datagram (see ../shared/LIMITS.md: about 3 µs
//! to send a 4 KiB one), whatever the syscall batching, so the backend
//! also uses UDP segmentation offload where it can:
//!
//! * GSO (IPv4): a run of equal-size datagrams to one destination from one
//!   source port (the MIDDLE packets of a long message) goes out as one
//!   `UDP_SEGMENT` send of up to 64 datagrams, which the kernel (or the NIC)
//!   cuts into real datagrams. Each segment gets the Identification of the
//!   train plus its index, which is 0 plus the index here, and its own
//!   total length; the ICRC of each is computed for exactly that. IPv6
//!   sockets send UDP checksum 0, which Linux refuses with GSO, so IPv6
//!   sends datagram by datagram. If the kernel refuses a GSO send, GSO is
//!   turned off for the backend and the datagrams are sent one by one.
//! * GRO: the receive socket takes coalesced trains (`UDP_GRO`) and the
//!   backend cuts them back into datagrams, each verified on its own.
//!
//! Each datagram carries its IP header's TOS (IPv4) or traffic class
//! (IPv6), DSCP and ECN, in [`OutDatagram::tos`]; a value other than 0
//! goes with the send as an `IP_TOS` / `IPV6_TCLASS` control message (the
//! sockets themselves keep 0), so one socket serves flows of several
//! classes. A GSO train shares one IP header, so trains are cut where the
//! TOS changes. On receive, the socket asks for each datagram's TOS
//! (`IP_RECVTOS` / `IPV6_RECVTCLASS`), which [`Receiver::deliver_with_tos`]
//! hands on with it, so that a congestion mark (ECN CE) reaches the engine.
//!
//! Receiving treats every datagram as hostile: the cheap checks come
//! first (length, opcode, headers against length, then the caller's
//! [`Receiver::accepts`], a QP lookup) and the ICRC last, so that a flood
//! of garbage costs a few comparisons per datagram, not a CRC; each drop is
//! counted by cause in [`UdpStats`].

use rustc_hash::FxHashMap as HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd};

use ferroce_wire::TransportPacket;
use ferroce_wire::udp::ROCE_V2_PORT;
use rustix::event::epoll;
use socket2::{Domain, Protocol, Socket, Type};

use crate::icrc::{HeaderCache, RxVerifier, Verdict};
use crate::sys;

mod mcast;
mod send;

/// Backend settings.
#[derive(Debug, Clone, Copy)]
pub struct UdpConfig {
    /// The local address (the RoCE v2 GID of this endpoint).
    pub local: IpAddr,
    /// The UDP port to receive on; 4791 unless two endpoints share an
    /// address (tests).
    pub port: u16,
    /// Datagrams per `recvmmsg`.
    pub batch: usize,
    /// Largest datagram accepted (MTU 4096 + headers fits in 4200).
    pub max_datagram: usize,
    /// Send runs of equal-size IPv4 datagrams as one UDP GSO send.
    pub gso: bool,
    /// Receive coalesced trains (UDP GRO); receive buffers are then 64 KiB.
    pub gro: bool,
    /// The most send sockets (UDP source ports) to open; at least 1.
    pub max_tx_sockets: usize,
}

impl UdpConfig {
    pub fn new(local: IpAddr) -> Self {
        Self {
            local,
            port: ROCE_V2_PORT,
            batch: 64,
            max_datagram: 4200,
            gso: true,
            gro: true,
            max_tx_sockets: 64,
        }
    }
}

/// A datagram to send: the transport bytes (BTH through ICRC; the ICRC is
/// filled in here), where to, and the IP header's TOS.
#[derive(Debug)]
pub struct OutDatagram<'a> {
    pub remote: IpAddr,
    /// The peer's RoCE port (4791).
    pub remote_port: u16,
    pub src_port: u16,
    /// The IPv4 TOS / IPv6 traffic class byte: DSCP in the high 6 bits,
    /// ECN in the low 2 (the QP's path traffic class, as rxe writes it).
    /// The ICRC masks this byte, so it never changes the ICRC.
    pub tos: u8,
    pub transport: &'a mut [u8],
}

/// Where [`UdpBackend::recv_into`] hands what it receives.
pub trait Receiver {
    /// Whether a structurally sound datagram from `from` for QP `dest_qp`
    /// could be taken at all. Asked before the ICRC is checked, so it must
    /// be cheap (a table lookup); a flood of garbage costs what this and
    /// the header checks cost, not an ICRC each.
    fn accepts(&mut self, from: IpAddr, dest_qp: u32) -> bool;
    /// A datagram that passed every check: the transport (BTH through
    /// ICRC) from `from:src_port`.
    fn deliver(&mut self, from: IpAddr, src_port: u16, transport: &[u8]);
    /// As [`Self::deliver`], with the IP header's TOS / traffic class byte
    /// (ECN in its low 2 bits). By default the byte is dropped and
    /// `deliver` called; a receiver that reacts to ECN takes this one.
    fn deliver_with_tos(&mut self, from: IpAddr, src_port: u16, tos: u8, transport: &[u8]) {
        let _ = tos;
        self.deliver(from, src_port, transport);
    }
    /// Whether a structurally sound datagram from `from` to multicast
    /// `group` (one the backend joined) could be taken: as
    /// [`Self::accepts`]. By default no: a receiver that knows nothing of
    /// multicast never sees it (counted as unwanted).
    fn accepts_group(&mut self, from: IpAddr, group: IpAddr) -> bool {
        let _ = (from, group);
        false
    }
    /// A datagram sent to multicast `group` that passed every check (its
    /// ICRC computed with the group as destination).
    fn deliver_multicast(
        &mut self,
        from: IpAddr,
        group: IpAddr,
        src_port: u16,
        tos: u8,
        transport: &[u8],
    ) {
        let _ = (from, group, src_port, tos, transport);
    }
}

/// A closure that takes every datagram (no [`Receiver::accepts`] filter).
struct TakeAll<F>(F);

impl<F: FnMut(IpAddr, u16, &[u8])> Receiver for TakeAll<F> {
    fn accepts(&mut self, _: IpAddr, _: u32) -> bool {
        true
    }
    fn deliver(&mut self, from: IpAddr, src_port: u16, transport: &[u8]) {
        (self.0)(from, src_port, transport)
    }
}

/// The ECN field of a TOS byte, and its Congestion Experienced value.
const ECN_MASK: u8 = 0b11;
const ECN_CE: u8 = 0b11;

/// Traffic and drop counters. A received datagram is checked from the
/// cheapest test to the dearest, and counted under the first it fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams received (each of a GRO train counted).
    pub rx_datagrams: u64,
    /// Datagrams delivered marked Congestion Experienced in their IP ECN
    /// field.
    pub rx_ce: u64,
    /// Dropped: larger than [`UdpConfig::max_datagram`] (or than the
    /// receive buffer).
    pub rx_truncated: u64,
    /// Dropped: too short to hold a BTH and an ICRC.
    pub rx_too_short: u64,
    /// Dropped: an unknown opcode or transport version.
    pub rx_bad_opcode: u64,
    /// Dropped: its length does not fit its opcode's headers, pad and
    /// payload.
    pub rx_bad_length: u64,
    /// Dropped: the receiver would not take it ([`Receiver::accepts`]: no
    /// such QP, or not from its peer).
    pub rx_unwanted: u64,
    /// Dropped: the ICRC did not check.
    pub rx_bad_icrc: u64,
    pub tx_datagrams: u64,
    /// Datagrams a full socket send buffer did not take; the caller keeps
    /// them for later (ferroce's driver does) or drops them.
    pub tx_buffer_full: u64,
    /// Datagrams that went out as part of a GSO train.
    pub tx_gso_datagrams: u64,
    /// Receive buffers that held a GRO train of several datagrams.
    pub rx_gro_trains: u64,
}

/// The UDP backend.
#[derive(Debug)]
pub struct UdpBackend {
    cfg: UdpConfig,
    rx: Socket,
    tx: HashMap<u16, Socket>,
    /// The ports of `tx`, in the order they were opened.
    tx_ports: Vec<u16>,
    /// The port on the wire of each source port asked for, once all the
    /// sockets allowed are open.
    shared_port: HashMap<u16, u16>,
    bufs: Vec<Vec<u8>>,
    received: Vec<sys::Received>,
    scratch: sys::Scratch,
    /// [`send`](Self::send)'s trains and messages, kept between calls.
    trains: Vec<Range<usize>>,
    msgs: Vec<sys::OutMsg>,
    verifier: RxVerifier,
    /// The ICRC state of the headers sent lately.
    headers: HeaderCache,
    stats: UdpStats,
    /// The multicast groups joined (see `mcast`).
    groups: Vec<mcast::Group>,
    /// Readable when `rx` or a group socket is (an epoll instance).
    wake: std::os::fd::OwnedFd,
    /// The index of the local address's interface (IPv6 only).
    mc_if: Option<u32>,
}

/// A socket for the device at `local`; `mc_if` is the index of its
/// interface, which IPv6 multicast leaves by.
fn new_socket(local: IpAddr, mc_if: Option<u32>) -> io::Result<Socket> {
    let domain = match local {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    let fd = s.as_raw_fd();
    match local {
        IpAddr::V4(a) => {
            sys::set_dont_fragment(fd)?;
            s.set_ttl_v4(64)?;
            // Multicast leaves from the device's interface, and crosses
            // routers as rdma_cm's RoCE v2 groups do (hop limit 64).
            s.set_multicast_if_v4(&a)?;
            s.set_multicast_ttl_v4(MULTICAST_HOPS)?;
        }
        IpAddr::V6(_) => {
            s.set_only_v6(true)?;
            sys::set_dont_fragment_v6(fd)?;
            sys::set_udp_no_check6(fd)?;
            s.set_unicast_hops_v6(64)?;
            s.set_multicast_hops_v6(MULTICAST_HOPS)?;
            if let Some(index) = mc_if {
                s.set_multicast_if_v6(index)?;
            }
        }
    }
    Ok(s)
}

/// The hop limit of multicast sends (rdma_cm's for RoCE v2 groups,
/// IPV6_DEFAULT_HOPLIMIT).
const MULTICAST_HOPS: u32 = 64;

/// 8 MiB socket buffers: forced if the process may (root in CI), else as
/// large as `net.core.rmem_max`/`wmem_max` allow.
fn set_buffers(s: &Socket) -> io::Result<()> {
    const SIZE: usize = 8 << 20;
    if sys::force_buffers(s.as_raw_fd(), SIZE as libc::c_int).is_err() {
        s.set_recv_buffer_size(SIZE)?;
        s.set_send_buffer_size(SIZE)?;
    }
    Ok(())
}

impl UdpBackend {
    /// Binds the receive socket. Fails if the port is taken (for instance by
    /// the kernel's rdma_rxe on the same address).
    pub fn bind(cfg: UdpConfig) -> io::Result<Self> {
        let mut cfg = cfg;
        // IPv6 multicast leaves by interface index: the device's, when an
        // interface has its address (looked up once: it reads every
        // interface's details).
        let mc_if = cfg
            .local
            .is_ipv6()
            .then(|| mcast::interface_index(cfg.local).ok())
            .flatten();
        let rx = new_socket(cfg.local, mc_if)?;
        set_buffers(&rx)?;
        rx.bind(&SocketAddr::new(cfg.local, cfg.port).into())?;
        // Without GRO support the kernel hands over datagrams one by one.
        cfg.gro = cfg.gro && sys::set_udp_gro(rx.as_raw_fd()).is_ok();
        sys::set_recv_tos(rx.as_raw_fd(), cfg.local.is_ipv6())?;
        tracing::debug!(local = %cfg.local, port = cfg.port, gso = cfg.gso, gro = cfg.gro, "UDP backend bound");
        let (slots, slot_len) = if cfg.gro {
            // A train is at most 64 KiB; fewer, larger buffers.
            (cfg.batch.clamp(1, 16), MAX_TRAIN.max(cfg.max_datagram))
        } else {
            (cfg.batch.max(1), cfg.max_datagram)
        };
        let wake = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        watch(&wake, &rx)?;
        Ok(Self {
            cfg,
            rx,
            tx: HashMap::default(),
            tx_ports: Vec::new(),
            shared_port: HashMap::default(),
            bufs: vec![vec![0u8; slot_len]; slots],
            received: Vec::with_capacity(cfg.batch),
            scratch: sys::Scratch::default(),
            trains: Vec::new(),
            msgs: Vec::new(),
            verifier: RxVerifier::default(),
            headers: HeaderCache::default(),
            stats: UdpStats::default(),
            groups: Vec::new(),
            wake,
            mc_if,
        })
    }

    pub fn local(&self) -> IpAddr {
        self.cfg.local
    }

    pub fn stats(&self) -> UdpStats {
        self.stats
    }

    /// The raw receive socket, for waiting on readiness (poll/epoll).
    pub fn rx_fd(&self) -> std::os::fd::RawFd {
        self.rx.as_raw_fd()
    }

    /// One `recvmmsg` into the receive buffers; `received` says what came.
    fn receive_batch(&mut self) -> io::Result<usize> {
        self.receive_batch_from(self.rx.as_raw_fd())
    }

    fn receive_batch_from(&mut self, fd: std::os::fd::RawFd) -> io::Result<usize> {
        sys::recv_batch(fd, &mut self.bufs, &mut self.received, &mut self.scratch)
    }

    /// Baseline for benchmarks: receives what is waiting with the same
    /// `recvmmsg` batching and hands each datagram to `f` unchecked.
    pub fn recv_raw(&mut self, mut f: impl FnMut(SocketAddr, &[u8])) -> io::Result<usize> {
        self.receive_batch()?;
        let mut n = 0;
        for r in &self.received {
            for d in segments(&self.bufs[r.index][..r.len], r.segment) {
                f(r.from, d);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Receives what is waiting (one `recvmmsg`), verifies each ICRC, and
    /// hands every good datagram to `f(from, src_port, transport)`.
    /// Returns the number of datagrams read (good or not).
    pub fn recv(&mut self, f: impl FnMut(IpAddr, u16, &[u8])) -> io::Result<usize> {
        self.recv_into(&mut TakeAll(f))
    }

    /// Receives what is waiting (one `recvmmsg`, and one per multicast
    /// group joined) and hands each datagram that passes every check to
    /// `rx`: first the cheap ones (its length, its opcode, its headers
    /// against its length, then `rx.accepts`), the ICRC last. Returns the
    /// number of datagrams read (good or not).
    pub fn recv_into(&mut self, rx: &mut impl Receiver) -> io::Result<usize> {
        self.fetch()?;
        self.deliver(rx)
    }

    /// The system call half of [`recv_into`](Self::recv_into): one
    /// `recvmmsg` on the receive socket into the receive buffers, handing
    /// nothing on. A caller that keeps its [`Receiver`] behind a lock (an
    /// engine shared with application threads) makes this call without
    /// holding it, then [`deliver`](Self::deliver)s under the lock: a
    /// system call is where a thread is most often preempted, and a lock
    /// held across one makes every other thread wait out the preemption.
    /// Returns the buffers filled (a GRO buffer holds several datagrams).
    pub fn fetch(&mut self) -> io::Result<usize> {
        self.receive_batch()?;
        Ok(self.received.len())
    }

    /// The other half of [`recv_into`](Self::recv_into): checks and hands
    /// on what the last [`fetch`](Self::fetch) brought (once: the buffers
    /// are then empty), then receives each joined multicast group's
    /// datagrams (one `recvmmsg` per group, made here). Returns the
    /// datagrams read (good or not).
    pub fn deliver(&mut self, rx: &mut impl Receiver) -> io::Result<usize> {
        let n = self.deliver_fetched(None, rx);
        if self.groups.is_empty() {
            return Ok(n);
        }
        Ok(n + self.recv_groups(rx)?)
    }

    /// One `recvmmsg` on `fd` (the receive socket, or `group`'s), each
    /// datagram checked and handed on.
    fn drain(
        &mut self,
        fd: std::os::fd::RawFd,
        group: Option<IpAddr>,
        rx: &mut impl Receiver,
    ) -> io::Result<usize> {
        self.receive_batch_from(fd)?;
        Ok(self.deliver_fetched(group, rx))
    }

    /// Checks and hands on each datagram of the receive buffers (which
    /// came to `group`, or to the local address), then empties them.
    fn deliver_fetched(&mut self, group: Option<IpAddr>, rx: &mut impl Receiver) -> usize {
        let mut n = 0;
        for r in &self.received {
            if r.truncated {
                tracing::trace!(from = %r.from, cause = "truncated", "datagram dropped");
                self.stats.rx_datagrams += 1;
                self.stats.rx_truncated += 1;
                n += 1;
                continue;
            }
            let train = &self.bufs[r.index][..r.len];
            if r.segment != 0 && r.len > r.segment {
                self.stats.rx_gro_trains += 1;
            }
            let (ip, port) = (r.from.ip(), r.from.port());
            for data in segments(train, r.segment) {
                n += 1;
                self.stats.rx_datagrams += 1;
                let to = Dest {
                    group,
                    local: self.cfg.local,
                };
                if let Err(why) = check(&mut self.verifier, &self.cfg, ip, to, port, data, rx) {
                    tracing::trace!(%ip, len = data.len(), cause = why.cause(), "datagram dropped");
                    why.count(&mut self.stats);
                    continue;
                }
                if r.tos & ECN_MASK == ECN_CE {
                    self.stats.rx_ce += 1;
                }
                match group {
                    None => rx.deliver_with_tos(ip, port, r.tos, data),
                    Some(g) => rx.deliver_multicast(ip, g, port, r.tos, data),
                }
            }
        }
        self.received.clear();
        n
    }
}

/// Where a datagram came to: the local address, or a group joined.
#[derive(Debug, Clone, Copy)]
struct Dest {
    group: Option<IpAddr>,
    local: IpAddr,
}

/// Every check of a received datagram, cheapest first.
fn check(
    verifier: &mut RxVerifier,
    cfg: &UdpConfig,
    from: IpAddr,
    to: Dest,
    src_port: u16,
    data: &[u8],
    rx: &mut impl Receiver,
) -> Result<(), Reject> {
    if data.len() > cfg.max_datagram {
        return Err(Reject::TooLong);
    }
    let packet = TransportPacket::new_checked(data).map_err(Reject::from_wire)?;
    let wanted = match to.group {
        None => rx.accepts(from, packet.bth().dest_qp()),
        Some(g) => rx.accepts_group(from, g),
    };
    if !wanted {
        return Err(Reject::Unwanted);
    }
    match verifier.verify(from, to.group.unwrap_or(to.local), src_port, cfg.port, data) {
        Verdict::Good | Verdict::GoodWithIdent(_) => Ok(()),
        Verdict::Bad => Err(Reject::BadIcrc),
    }
}

/// Why a received datagram was dropped (one [`UdpStats`] counter each).
#[derive(Debug, Clone, Copy)]
enum Reject {
    TooLong,
    TooShort,
    BadOpcode,
    BadLength,
    Unwanted,
    BadIcrc,
}

impl Reject {
    fn from_wire(e: ferroce_wire::Error) -> Self {
        use ferroce_wire::{Error, Header};
        match e {
            Error::Truncated {
                header: Header::Bth | Header::Icrc,
                ..
            } => Self::TooShort,
            Error::UnknownOpcode { .. } | Error::BadVersion { .. } => Self::BadOpcode,
            _ => Self::BadLength,
        }
    }

    /// The counter's name, for the trace event of each drop.
    fn cause(self) -> &'static str {
        match self {
            Self::TooLong => "truncated",
            Self::TooShort => "too_short",
            Self::BadOpcode => "bad_opcode",
            Self::BadLength => "bad_length",
            Self::Unwanted => "unwanted",
            Self::BadIcrc => "bad_icrc",
        }
    }

    fn count(self, s: &mut UdpStats) {
        *match self {
            Self::TooLong => &mut s.rx_truncated,
            Self::TooShort => &mut s.rx_too_short,
            Self::BadOpcode => &mut s.rx_bad_opcode,
            Self::BadLength => &mut s.rx_bad_length,
            Self::Unwanted => &mut s.rx_unwanted,
            Self::BadIcrc => &mut s.rx_bad_icrc,
        } += 1;
    }
}

/// Most datagrams in one GSO train (the kernel's UDP_MAX_SEGMENTS).
pub const MAX_SEGMENTS: usize = 64;
/// Most UDP payload bytes in one train: what IPv4's 16-bit total length
/// leaves after the IPv4 and UDP headers (65507).
pub const MAX_TRAIN: usize =
    u16::MAX as usize - ferroce_wire::ipv4::MIN_HEADER_LEN - ferroce_wire::udp::HEADER_LEN;

/// The datagrams of a received buffer: cut at `segment` bytes (a GRO
/// train), or the whole buffer if `segment` is 0.
fn segments(buf: &[u8], segment: usize) -> std::slice::Chunks<'_, u8> {
    let size = if segment == 0 {
        buf.len().max(1)
    } else {
        segment
    };
    buf.chunks(size)
}

/// Makes epoll instance `ep` readable whenever `fd` is (level-triggered).
fn watch(ep: &impl AsFd, fd: &impl AsFd) -> io::Result<()> {
    let data = epoll::EventData::new_u64(fd.as_fd().as_raw_fd() as u64);
    Ok(epoll::add(ep, fd, data, epoll::EventFlags::IN)?)
}
