//! An open device ([`Context`]): the engine, its backend (UDP, or raw
//! Ethernet: [`BackendKind`]) and the driver thread.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ferroce_core::{CongestionConfig, Endpoint, EndpointConfig};
use ferroce_io::{UdpBackend, UdpConfig};

use crate::backend::{Backend, BackendKind, NeighCache, RawDevice};
use crate::driver::{self, Shared};
use crate::{
    AsyncEvent, CompletionChannel, CompletionQueue, ProtectionDomain, Result, Stats, UdpStats,
};

/// Device settings for [`Context::open_with`].
#[derive(Debug, Clone, Copy)]
pub struct DeviceConfig {
    /// The address to bind (the device's RoCE v2 GID; on the raw backend
    /// also its RoCE v1 GID, and its interface is the one bound).
    pub local: IpAddr,
    /// The RoCE port to receive on, 4791 unless testing.
    pub port: u16,
    /// The RoCE port peers receive on, 4791 unless testing (two devices
    /// on one address, e.g. `::1`, need two ports).
    pub peer_port: u16,
    /// Seed for keys; from the clock if `None`.
    pub seed: Option<u64>,
    /// Send runs of equal-size packets as UDP GSO trains (IPv4). On by
    /// default; off, every packet is its own send. A capture on `lo` shows
    /// a train as one large datagram (loopback never cuts it up), so turn
    /// it off to read loopback captures packet by packet.
    /// [`DeviceConfig::new`] takes it from [`crate::env::GSO`]
    /// (`FERROCE_GSO=0` turns it off for every device a process opens,
    /// the `ferroce` tools included).
    pub gso: bool,
    /// The backend: UDP (the default), or raw Ethernet on the interface
    /// that owns `local` (RoCE v1 and v2; needs CAP_NET_RAW; `port` and
    /// `peer_port` must then be 4791, the port RoCE v2 frames go to).
    pub backend: BackendKind,
    /// Congestion control: ECN marking, CNPs and DCQCN (see
    /// [`CongestionConfig`]). On by default, as on a RoCE NIC.
    pub congestion: CongestionConfig,
    /// Raw backend only: VLAN, traffic class to 802.1Q priority, PFC
    /// (off by default) and the receive ring's size
    /// ([`crate::RawOptions`]).
    pub raw: crate::RawOptions,
}

impl DeviceConfig {
    /// Port 4791 both ways, keys seeded from the clock, GSO on unless
    /// `FERROCE_GSO=0` ([`crate::env::Env::gso`]).
    pub fn new(local: IpAddr) -> Self {
        Self {
            local,
            port: ferroce_wire::udp::ROCE_V2_PORT,
            peer_port: ferroce_wire::udp::ROCE_V2_PORT,
            seed: None,
            gso: crate::env::Env::get().gso,
            backend: BackendKind::Udp,
            congestion: CongestionConfig::default(),
            raw: crate::RawOptions::default(),
        }
    }
}

/// An open device: the engine, its backend (UDP or raw Ethernet) and the
/// driver thread.
/// Clones share the device; dropping the last one (rdma_cm IDs bound to
/// the device hold one too) stops the driver.
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) shared: Arc<Shared>,
    pub(crate) device: Arc<DeviceHandle>,
}

/// What stops the driver when the last [`Context`] goes.
#[derive(Debug)]
pub(crate) struct DeviceHandle {
    shared: Arc<Shared>,
    driver: Mutex<Option<JoinHandle<()>>>,
}

impl Context {
    /// Opens a device on `local`, UDP port 4791.
    pub fn open(local: IpAddr) -> Result<Self> {
        Self::open_with(DeviceConfig::new(local))
    }

    /// Opens a device with the settings of `cfg`.
    pub fn open_with(cfg: DeviceConfig) -> Result<Self> {
        let seed = cfg.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            t.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
        });
        let (backend, neigh) = open_backend(&cfg, seed)?;
        let mut engine = Endpoint::new(EndpointConfig { seed });
        // QPNs from a point of this process's own (0x11 to 0xFFFF), so
        // that a kernel peer still holding a connection of an earlier
        // process on this address (same node GUID, same QPN) does not
        // reject this one's as stale (REJ 10).
        engine.start_qpns_at(0x11 + ((seed >> 17) % 0xffee) as u32);
        engine.set_congestion_control(cfg.congestion);
        // A UD receive's GRH area shows the packet's destination: this.
        engine.set_local_addr(cfg.local);
        // UD messages are as large as the port's active MTU, as rxe's.
        if let Ok(port) = crate::device::query_port(cfg.local) {
            engine.set_port_mtu(port.active_mtu);
        }
        let cm = crate::cm::hub::CmHub::new(cfg.local, cm_config(cfg.local, seed));
        let shared = Arc::new(Shared::new(
            engine,
            backend,
            neigh,
            cm,
            cfg.local,
            cfg.peer_port,
        )?);
        if let Some(neigh) = &shared.neigh {
            // The cache's thread learnt a peer the driver lacked: a round
            // sends what the driver parked for it.
            let weak = Arc::downgrade(&shared);
            neigh.set_waker(move || {
                if let Some(s) = weak.upgrade() {
                    s.kick();
                }
            });
        }
        let s = shared.clone();
        let driver = std::thread::Builder::new()
            .name("ferroce-driver".into())
            .spawn(move || driver::run(s))?;
        tracing::info!(parent: &shared.span, backend = ?cfg.backend, port = cfg.port, peer_port = cfg.peer_port, gso = cfg.gso, "device opened");
        let ctx = Self {
            device: Arc::new(DeviceHandle {
                shared: shared.clone(),
                driver: Mutex::new(Some(driver)),
            }),
            shared,
        };
        shared_cm(&ctx).set_device(Arc::downgrade(&ctx.device));
        crate::cm::registry::register(&ctx);
        Ok(ctx)
    }

    /// QP `qpn`'s congestion control: DCQCN's rates and alpha, and its CE
    /// marks, CNPs and rate cuts (the device's totals are in
    /// [`Self::stats`]).
    pub fn qp_congestion(&self, qpn: u32) -> Result<crate::QpCongestion> {
        let now = self.shared.now();
        Ok(self.shared.engine().qp_congestion(qpn, now)?)
    }

    /// The device's congestion-control settings.
    pub fn congestion_control(&self) -> CongestionConfig {
        self.shared.engine().congestion_control()
    }

    /// The device's address (its RoCE v2 GID).
    pub fn local(&self) -> IpAddr {
        self.shared.local
    }

    /// Puts on the wire what the device owes its peers now (the ACK of a
    /// request just received, say), waiting for a round the driver thread
    /// is running instead of leaving the work to it. For a caller about to
    /// destroy a QP right after its last completion (the C ABI's
    /// `ibv_destroy_qp`): the driver makes a received request's ACK in the
    /// round after the one that completed it, and a QP destroyed in
    /// between takes the ACK with it, so the peer's last request fails
    /// after its retries. Not for the driver thread itself.
    pub fn flush_now(&self) {
        self.shared.flush_now();
    }

    /// The engine's traffic and drop counters.
    pub fn stats(&self) -> Stats {
        self.shared.engine().stats()
    }

    /// The UDP backend's counters: datagrams in and out, bad ICRCs, GSO
    /// and GRO use, datagrams the socket buffer could not take.
    pub fn udp_stats(&self) -> UdpStats {
        self.shared.udp_stats()
    }

    /// The raw backend's counters (frames, drops by cause, peers not
    /// resolved), or `None` on the UDP backend.
    pub fn raw_stats(&self) -> Option<crate::RawDeviceStats> {
        self.shared.raw_stats()
    }

    /// The device's backend.
    pub fn backend(&self) -> BackendKind {
        if self.shared.neigh.is_some() {
            BackendKind::Raw
        } else {
            BackendKind::Udp
        }
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> ProtectionDomain {
        let handle = self.shared.engine().alloc_pd();
        ProtectionDomain {
            shared: self.shared.clone(),
            device: self.device.clone(),
            handle,
        }
    }

    /// `ibv_create_cq` without a completion channel: a completion queue of
    /// `depth` entries (beyond it, completions are lost and
    /// [`CompletionQueue::overflowed`] says so); wait on it with
    /// [`CompletionQueue::poll`] or [`CompletionQueue::wait`].
    pub fn create_cq(&self, depth: u32) -> Result<CompletionQueue> {
        let (handle, reader) = self.new_cq(depth)?;
        Ok(CompletionQueue {
            shared: self.shared.clone(),
            _device: self.device.clone(),
            handle,
            reader,
            channel: None,
        })
    }

    /// `ibv_create_comp_channel`: a file descriptor that becomes readable
    /// when an armed CQ gets a completion ([`CompletionChannel`]).
    pub fn create_comp_channel(&self) -> Result<CompletionChannel> {
        CompletionChannel::new()
    }

    /// `ibv_create_cq` with a completion channel: after
    /// [`CompletionQueue::req_notify`], its next completion queues an
    /// event on `channel`. Several CQs may share a channel.
    pub fn create_cq_with_channel(
        &self,
        depth: u32,
        channel: &CompletionChannel,
    ) -> Result<CompletionQueue> {
        let (handle, reader) = self.new_cq(depth)?;
        self.shared.set_channel(handle, channel.inner.clone());
        Ok(CompletionQueue {
            shared: self.shared.clone(),
            _device: self.device.clone(),
            handle,
            reader,
            channel: Some(channel.clone()),
        })
    }

    /// An engine CQ of `depth` entries: its handle and its reader.
    fn new_cq(&self, depth: u32) -> Result<(u32, ferroce_core::CqReader)> {
        let mut ep = self.shared.engine();
        let handle = ep.create_cq(depth)?;
        Ok((handle, ep.cq_reader(handle)?))
    }

    /// The oldest asynchronous event not yet taken, as
    /// `ibv_get_async_event` returns it, but without waiting (and with
    /// nothing to acknowledge). Events name their object by
    /// [`crate::QueuePair::qpn`], [`CompletionQueue::handle`] or
    /// [`crate::SharedReceiveQueue::handle`]. Also moves the engine forward.
    pub fn poll_async_event(&self) -> Option<AsyncEvent> {
        self.shared.app_progress();
        self.shared.async_events.collect(&mut self.shared.engine());
        self.shared.async_events.pop()
    }

    /// A descriptor that is readable exactly while an asynchronous event
    /// waits for [`poll_async_event`](Self::poll_async_event) (for
    /// `poll`/epoll; never read it). The driver thread moves events out of
    /// the engine at the end of each round, so it turns readable without
    /// any call from the application. It is the same descriptor for every
    /// clone of this context, and lives as long as the device.
    pub fn async_event_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.shared.async_events.as_fd()
    }
}

/// The backend `cfg` asks for, and on the raw one the peers' MAC table it
/// shares with the API.
fn open_backend(cfg: &DeviceConfig, seed: u64) -> Result<(Backend, Option<Arc<NeighCache>>)> {
    match cfg.backend {
        BackendKind::Udp => {
            let mut udp = UdpConfig::new(cfg.local);
            udp.port = cfg.port;
            udp.gso = cfg.gso;
            let udp = UdpBackend::bind(udp).map_err(|e| port_taken(e, cfg, "UDP"))?;
            Ok((Backend::Udp(Box::new(udp)), None))
        }
        BackendKind::Raw => {
            let roce = ferroce_wire::udp::ROCE_V2_PORT;
            if cfg.port != roce || cfg.peer_port != roce {
                return Err(crate::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the raw backend sends and receives RoCE v2 on UDP port 4791 only; \
                     leave DeviceConfig's port and peer_port at 4791",
                )));
            }
            let iface = crate::device::bound_interface(cfg.local)?;
            let neigh = NeighCache::start(&iface.name)?;
            let cnp_prio = cfg.congestion.np.cnp_802p_prio;
            let raw = RawDevice::open(
                &iface.name,
                cfg.local,
                neigh.clone(),
                seed,
                &cfg.raw,
                cnp_prio,
            )
            .map_err(|e| port_taken(e, cfg, "raw"))?;
            Ok((Backend::Raw(Box::new(raw)), Some(neigh)))
        }
    }
}

/// An open that failed because `cfg`'s address and RoCE port are bound
/// already (the raw backend binds them too, so that the kernel does not
/// answer RoCE packets with ICMP), said with the address, the port and
/// what to do; other errors as they are. The kind stays `AddrInUse`.
fn port_taken(e: std::io::Error, cfg: &DeviceConfig, backend: &str) -> std::io::Error {
    if e.kind() != std::io::ErrorKind::AddrInUse {
        return e;
    }
    let (local, port) = (cfg.local, cfg.port);
    std::io::Error::new(
        e.kind(),
        format!(
            "UDP port {port} on {local} is taken by another process, or by a device \
             this process has open there ({e}; {backend} backend): each device needs \
             an address of its own, so close the other or open this one on another \
             address (e.g. FERROCE_DEVICES=127.0.0.2 for a second process on one host)"
        ),
    )
}

/// The CM of a device on `local`: its node GUID (as `ibv_query_device`
/// reports it) in REQs and REPs, comm IDs seeded from the device's seed.
fn cm_config(local: IpAddr, seed: u64) -> ferroce_cm::CmConfig {
    let guid = crate::device::query_device(local).map_or(0, |a| a.node_guid.0);
    ferroce_cm::CmConfig {
        seed: seed ^ 0x636d, // "cm": not the engine's stream
        local_ca_guid: guid,
        ..ferroce_cm::CmConfig::default()
    }
}

fn shared_cm(ctx: &Context) -> &crate::cm::hub::CmHub {
    &ctx.shared.cm
}

impl Context {
    /// A context for a device the registry holds.
    pub(crate) fn from_handle(device: Arc<DeviceHandle>) -> Self {
        Self {
            shared: device.shared.clone(),
            device,
        }
    }

    /// The rdma_cm connection manager's counters for this device: MADs
    /// through, resends, and what it dropped and why.
    pub fn cm_stats(&self) -> crate::cm::CmStats {
        self.shared.cm.stats()
    }

    /// How many communications the device's CM holds, by table: those
    /// being set up (both sides), those in TimeWait, and all of them. Each
    /// table has its limit (`ferroce_cm::CmConfig`); this shows a flood of
    /// requests stays within them.
    pub fn cm_tables(&self) -> crate::cm::CmTables {
        self.shared.cm.tables()
    }

    /// QP1's counters: MADs taken and sent, and the packets for QP1 it
    /// dropped and why (not a 256-byte UD SEND_ONLY with the GSI Q_Key and
    /// the default partition, or past its queue).
    pub fn mad_stats(&self) -> crate::MadStats {
        self.shared.engine().mad_stats()
    }
}

impl Drop for DeviceHandle {
    fn drop(&mut self) {
        self.shared.stop();
        let driver = self.driver.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = driver.take() {
            // The last handle may go on the driver thread itself (an
            // rdma_cm ID released in a round): it stops on its own then.
            if d.thread().id() != std::thread::current().id() {
                let _ = d.join();
            }
        }
        self.shared.flush();
        let s = &self.shared;
        tracing::debug!(parent: &s.span, stats = ?s.engine().stats(), udp = ?s.udp_stats(), "device closed");
    }
}
