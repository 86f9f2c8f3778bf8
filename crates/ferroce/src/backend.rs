//! The device's network backend, one of two behind one idiom: the UDP
//! backend (the default: RoCE v2 through the kernel's UDP sockets) or the
//! raw-Ethernet backend ([`raw`]: whole frames through AF_PACKET rings,
//! RoCE v1 and v2, needs CAP_NET_RAW).
//!
//! Contract: [`Backend::send`] takes packets from the front of the list
//! in order and returns how many it took (sent, or dropped and counted:
//! the engine's retransmission recovers them); what it did not take found
//! the socket buffer or ring full and goes first next round.
//! [`Backend::recv`] hands every good packet to the engine.

pub(crate) mod raw;

use std::net::IpAddr;
use std::os::fd::BorrowedFd;

use ferroce_core::{Endpoint, Instant, Transmit};
use ferroce_io::{OutDatagram, Receiver, UdpBackend};
use tracing::{debug, warn};

pub(crate) use raw::{NeighCache, RawDevice};

/// Which backend a device opens ([`crate::DeviceConfig::backend`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// RoCE v2 through UDP sockets (no privileges needed).
    #[default]
    Udp,
    /// Whole Ethernet frames on the interface that owns the device's
    /// address: RoCE v1 and v2, a GID table of both types. Needs
    /// CAP_NET_RAW (root).
    Raw,
}

/// The environment variable that picks the backend of the devices a
/// process opens without naming one itself: those of the C libraries
/// (`ibv_open_device`, and rdma_cm's) and those rdma_cm opens for an
/// address ([`crate::cm`]). `udp` (the default, also when unset or empty)
/// or `raw`.
pub const BACKEND_ENV: &str = crate::env::BACKEND;

impl BackendKind {
    /// The backend [`BACKEND_ENV`] names ([`crate::env::Env`]); another
    /// value is an error naming the variable and the values it takes.
    pub fn from_env() -> std::io::Result<Self> {
        crate::env::Env::get()
            .backend
            .clone()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    }

    /// `udp`, `raw` or empty (UDP), as [`BACKEND_ENV`] takes them.
    pub fn parse(name: &str) -> std::io::Result<Self> {
        match name.trim() {
            "" | "udp" => Ok(Self::Udp),
            "raw" => Ok(Self::Raw),
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{BACKEND_ENV}={other:?} names no backend: set it to `udp` (RoCE v2 \
                     through UDP sockets, the default) or `raw` (whole frames, RoCE v1 and \
                     v2; needs CAP_NET_RAW)"
                ),
            )),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Backend {
    Udp(Box<UdpBackend>),
    Raw(Box<RawDevice>),
}

impl Backend {
    /// The descriptor that turns readable when packets arrive.
    pub(crate) fn wait_fd(&self) -> BorrowedFd<'_> {
        match self {
            // Readable for the receive socket and every group socket.
            Self::Udp(b) => b.wait_fd(),
            Self::Raw(r) => r.wait_fd(),
        }
    }

    /// Joins multicast `group` (the IP group on the socket or the
    /// interface; see `ferroce_io`'s `udp::mcast` and `raw::mcast`).
    pub(crate) fn join(&mut self, group: IpAddr) -> std::io::Result<()> {
        match self {
            Self::Udp(b) => b.join(group),
            Self::Raw(r) => r.join(group),
        }
    }

    /// Leaves multicast `group`.
    pub(crate) fn leave(&mut self, group: IpAddr) {
        match self {
            Self::Udp(b) => b.leave(group),
            Self::Raw(r) => r.leave(group),
        }
    }

    /// Sends what it can from the front of `out` (to UDP `port` on the
    /// UDP backend; the raw one always sends to 4791); returns how many
    /// it took. `failed` keeps whether a failed send was logged yet.
    pub(crate) fn send(&mut self, out: &mut [Transmit], port: u16, failed: &mut bool) -> usize {
        match self {
            Self::Udp(b) => send_udp(b, out, port, failed),
            Self::Raw(r) => r.send(out, failed),
        }
    }

    /// Sends what waited for a peer's address to resolve (raw backend;
    /// nothing on UDP). Called every round, whether or not there is new
    /// work.
    pub(crate) fn send_parked(&mut self) {
        if let Self::Raw(r) = self {
            r.send_parked();
        }
    }

    /// How long until a PFC pause ends while packets wait for it (raw
    /// backend with PFC on), so that the driver wakes then.
    pub(crate) fn wake_in(&self) -> Option<std::time::Duration> {
        match self {
            Self::Udp(_) => None,
            Self::Raw(r) => r.wake_in(),
        }
    }

    /// The system call that receives, made without the engine: on UDP
    /// one `recvmmsg` into the backend's buffers, which
    /// [`deliver`](Self::deliver) then hands to the engine. The raw
    /// backend reads its ring in `deliver` and needs no call here.
    pub(crate) fn fetch(&mut self) {
        if let Self::Udp(b) = self
            && let Err(e) = b.fetch()
        {
            debug!(error = %e, "receive failed");
        }
    }

    /// Hands what [`fetch`](Self::fetch) brought (on the raw backend,
    /// what its ring holds) to `ep`.
    pub(crate) fn deliver(&mut self, ep: &mut Endpoint, now: Instant) -> Delivered {
        match self {
            Self::Udp(b) => {
                let local = b.local();
                let mut rx = EngineRx {
                    ep,
                    now,
                    local,
                    messages: 0,
                };
                let packets = b.deliver(&mut rx).unwrap_or_else(|e| {
                    debug!(error = %e, "receive failed");
                    0
                });
                Delivered {
                    packets,
                    messages: rx.messages,
                }
            }
            Self::Raw(r) => r.recv(ep, now),
        }
    }

    /// The UDP backend's counters (zero on the raw backend).
    pub(crate) fn udp_stats(&self) -> ferroce_io::UdpStats {
        match self {
            Self::Udp(b) => b.stats(),
            Self::Raw(_) => ferroce_io::UdpStats::default(),
        }
    }

    /// The raw backend's counters, or `None` on the UDP backend.
    pub(crate) fn raw_stats(&mut self) -> Option<raw::RawDeviceStats> {
        match self {
            Self::Udp(_) => None,
            Self::Raw(r) => Some(r.stats()),
        }
    }
}

/// What a receive handed to the engine.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Delivered {
    /// Packets (datagrams or frames) read, good or not.
    pub(crate) packets: usize,
    /// Of those, the ones that end a message completing a receive
    /// ([`completes_receive`]).
    pub(crate) messages: usize,
}

/// Whether a transport packet (BTH first) ends a message that completes a
/// receive work request: a SEND's last or only packet, or an RDMA WRITE
/// with immediate's. Its receiver gets a completion for it, may act on it
/// at once and stop polling: what it owes for it (the ACK) is best sent
/// in the same round.
pub(crate) fn completes_receive(transport: &[u8]) -> bool {
    use ferroce_wire::opcode::Kind;
    let Some(info) = transport
        .first()
        .and_then(|&op| ferroce_wire::Opcode(op).info())
    else {
        return false;
    };
    info.position.ends()
        && (info.kind == Kind::Send || (info.kind == Kind::Write && info.immediate))
}

/// The engine as the UDP backend's [`Receiver`]: it filters datagrams
/// before their ICRC is checked and takes the good ones.
struct EngineRx<'a> {
    ep: &'a mut Endpoint,
    now: Instant,
    /// The device's address: a multicast datagram from it is its own,
    /// looped back by the kernel.
    local: IpAddr,
    /// Packets that completed a receive ([`completes_receive`]).
    messages: usize,
}

impl Receiver for EngineRx<'_> {
    fn accepts(&mut self, from: IpAddr, dest_qp: u32) -> bool {
        self.ep.accepts(from, dest_qp)
    }
    fn deliver(&mut self, from: IpAddr, _src_port: u16, transport: &[u8]) {
        self.ep.handle_datagram(self.now, from, transport);
    }
    fn deliver_with_tos(&mut self, from: IpAddr, _src_port: u16, tos: u8, transport: &[u8]) {
        self.messages += usize::from(completes_receive(transport));
        let ecn = ferroce_core::Ecn::from_traffic_class(tos);
        self.ep.handle_datagram_ecn(self.now, from, ecn, transport);
    }
    fn accepts_group(&mut self, _from: IpAddr, group: IpAddr) -> bool {
        self.ep.accepts_group(group)
    }
    fn deliver_multicast(&mut self, from: IpAddr, group: IpAddr, _: u16, tos: u8, data: &[u8]) {
        let ecn = ferroce_core::Ecn::from_traffic_class(tos);
        if from == self.local {
            self.ep
                .handle_own_multicast(self.now, from, group, None, ecn, data);
        } else {
            self.ep.handle_multicast(self.now, from, group, ecn, data);
        }
    }
}

fn send_udp(backend: &mut UdpBackend, out: &mut [Transmit], port: u16, failed: &mut bool) -> usize {
    let mut batch: Vec<OutDatagram<'_>> = out
        .iter_mut()
        .map(|t| OutDatagram {
            remote: t.path.remote,
            remote_port: port,
            src_port: t.path.udp_src_port,
            tos: t.tos(),
            transport: &mut t.data,
        })
        .collect();
    let total = batch.len();
    // A send that fails outright (no route, say) loses the batch as a
    // broken link would; the engine's retransmission takes it from there.
    backend.send(&mut batch).unwrap_or_else(|e| {
        if std::mem::replace(failed, true) {
            debug!(error = %e, datagrams = total, "send failed");
        } else {
            warn!(error = %e, datagrams = total, "send failed; the datagrams are lost (RC retransmits them)");
        }
        total
    })
}
