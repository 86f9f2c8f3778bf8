//! ferroce: RDMA over Converged Ethernet (RoCE v2) in userspace, with an API
//! an ibverbs user recognises.
//!
//! ```no_run
//! use ferroce::{Access, Context, QpInitAttr, QpType};
//! # fn main() -> Result<(), ferroce::Error> {
//! let ctx = Context::open("127.0.0.1".parse().unwrap())?;
//! let pd = ctx.alloc_pd();
//! let cq = ctx.create_cq(256)?;
//! let mr = pd.reg_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))?;
//! // modify_qp to INIT, RTR, RTS with the peer's QPN and PSN, then
//! // post_send / post_recv, and poll the CQ.
//! # let _ = (mr, qp); Ok(()) }
//! ```
//!
//! | ibverbs | ferroce |
//! |---|---|
//! | `ibv_open_device` | [`Context::open`] (binds UDP port 4791 on an address) |
//! | `ibv_alloc_pd` / `ibv_reg_mr` | [`Context::alloc_pd`] / [`ProtectionDomain::reg_mr`] |
//! | `ibv_create_cq` / `ibv_poll_cq` | [`Context::create_cq`] / [`CompletionQueue::poll`] |
//! | `ibv_create_qp` / `ibv_modify_qp` | [`ProtectionDomain::create_qp`] / [`QueuePair::modify`] |
//! | `ibv_post_send` / `ibv_post_recv` | [`QueuePair::post_send`] / [`QueuePair::post_recv`] |
//! | `ibv_create_srq` / `ibv_post_srq_recv` | [`ProtectionDomain::create_srq`] / [`SharedReceiveQueue::post_recv`] |
//! | `ibv_modify_srq` / `ibv_query_srq` | [`SharedReceiveQueue::arm_limit`], [`SharedReceiveQueue::modify`] / [`SharedReceiveQueue::query`] |
//! | `ibv_get_async_event` | [`Context::poll_async_event`] (no wait, nothing to acknowledge) |
//!
//! Registered memory is owned by ferroce (a remote peer writes into it at
//! any time, from the driver thread). The application reaches it through
//! [`MemoryRegion::read`], [`MemoryRegion::write`] and
//! [`MemoryRegion::with_bytes`], which take the same lock the driver takes:
//! no data race and no `unsafe` are reachable from this API.
//!
//! ferroce logs through [`tracing`](https://docs.rs/tracing) and prints
//! nothing unless the application installs a subscriber. Each device has
//! a span `device` (its address); inside it, at info the device opening,
//! at debug QP state changes and their cause, retransmissions, RNR waits,
//! NAKs and the counters at close, at trace every dropped packet and its
//! cause. The `ferroce` command's `-v`/`-q` and `FERROCE_LOG` choose.

mod device;
mod driver;
mod hold;

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use ferroce_core::{Endpoint, EndpointConfig, QpInit};
use ferroce_io::{UdpBackend, UdpConfig};

pub use device::*;
pub use ferroce_core::verbs::{
    Access, AsyncEvent, Mtu, Path, QpAttr, QpState, QpType, RecvWr, SendOp, SendWr, Sge, SrqAttr,
    SrqInfo, UdDest, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
pub use ferroce_core::{MAX_MSG_SIZE, MrInfo, Stats};
pub use ferroce_io::UdpStats;
pub use ferroce_wire::Psn;

use driver::Shared;

/// What a ferroce call can fail with.
#[derive(Debug)]
pub enum Error {
    /// The verbs call was refused; the error says what is wrong.
    Verbs(VerbsError),
    /// The network backend failed (e.g. the address is not local, or port
    /// 4791 is taken).
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verbs(e) => e.fmt(f),
            Self::Io(e) => write!(f, "network: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Verbs(e) => Some(e),
            Self::Io(e) => Some(e),
        }
    }
}

impl From<VerbsError> for Error {
    fn from(e: VerbsError) -> Self {
        Self::Verbs(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Device settings for [`Context::open_with`].
#[derive(Debug, Clone, Copy)]
pub struct DeviceConfig {
    /// The address to bind (the device's RoCE v2 GID).
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
    /// it off to read loopback captures packet by packet. The environment
    /// variable `FERROCE_GSO=0` turns it off for every device a process
    /// opens (the `ferroce` tools included).
    pub gso: bool,
}

impl DeviceConfig {
    pub fn new(local: IpAddr) -> Self {
        Self {
            local,
            port: ferroce_wire::udp::ROCE_V2_PORT,
            peer_port: ferroce_wire::udp::ROCE_V2_PORT,
            seed: None,
            gso: std::env::var_os("FERROCE_GSO").is_none_or(|v| v != "0"),
        }
    }
}

/// An open device: the engine, its UDP backend and the driver thread.
/// Dropping it stops the driver.
#[derive(Debug)]
pub struct Context {
    shared: Arc<Shared>,
    driver: Option<JoinHandle<()>>,
}

impl Context {
    /// Opens a device on `local`, UDP port 4791.
    pub fn open(local: IpAddr) -> Result<Self> {
        Self::open_with(DeviceConfig::new(local))
    }

    pub fn open_with(cfg: DeviceConfig) -> Result<Self> {
        let mut udp = UdpConfig::new(cfg.local);
        udp.port = cfg.port;
        udp.gso = cfg.gso;
        let backend = UdpBackend::bind(udp)?;
        let seed = cfg.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            t.as_nanos() as u64 ^ u64::from(std::process::id()) << 32
        });
        let engine = Endpoint::new(EndpointConfig { seed });
        let shared = Arc::new(Shared::new(engine, backend, cfg.local, cfg.peer_port)?);
        let s = shared.clone();
        let driver = std::thread::Builder::new()
            .name("ferroce-driver".into())
            .spawn(move || driver::run(s))?;
        tracing::info!(parent: &shared.span, port = cfg.port, peer_port = cfg.peer_port, gso = cfg.gso, "device opened");
        Ok(Self {
            shared,
            driver: Some(driver),
        })
    }

    /// The device's address (its RoCE v2 GID).
    pub fn local(&self) -> IpAddr {
        self.shared.local
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

    pub fn alloc_pd(&self) -> ProtectionDomain {
        let handle = self.shared.engine().alloc_pd();
        ProtectionDomain {
            shared: self.shared.clone(),
            handle,
        }
    }

    pub fn create_cq(&self, depth: u32) -> Result<CompletionQueue> {
        let handle = self.shared.engine().create_cq(depth)?;
        Ok(CompletionQueue {
            shared: self.shared.clone(),
            handle,
        })
    }

    /// The oldest asynchronous event not yet taken, as
    /// `ibv_get_async_event` returns it, but without waiting (and with
    /// nothing to acknowledge). Events name their object by
    /// [`QueuePair::qpn`], [`CompletionQueue::handle`] or
    /// [`SharedReceiveQueue::handle`]. Also moves the engine forward.
    pub fn poll_async_event(&self) -> Option<AsyncEvent> {
        self.shared.app_progress();
        self.shared.engine().poll_async_event()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        self.shared.stop();
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
        self.shared.flush();
        let s = &self.shared;
        tracing::debug!(parent: &s.span, stats = ?s.engine().stats(), udp = ?s.udp_stats(), "device closed");
    }
}

/// A protection domain.
#[derive(Debug)]
pub struct ProtectionDomain {
    shared: Arc<Shared>,
    handle: u32,
}

impl ProtectionDomain {
    /// Registers `len` zeroed bytes with `access`.
    pub fn reg_mr(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        let info = self.shared.engine().reg_mr(self.handle, len, access)?;
        Ok(MemoryRegion {
            shared: self.shared.clone(),
            info,
        })
    }

    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<QueuePair> {
        let qpn = self.shared.engine().create_qp(QpInit {
            pd: self.handle,
            qp_type: attr.qp_type,
            send_cq: attr.send_cq.handle,
            recv_cq: attr.recv_cq.handle,
            max_send_wr: attr.max_send_wr,
            max_recv_wr: attr.max_recv_wr,
            sq_sig_all: attr.sq_sig_all,
            srq: attr.srq.map(|s| s.inner.handle),
        })?;
        Ok(QueuePair {
            shared: self.shared.clone(),
            qpn,
            srq: attr.srq.map(|s| s.inner.clone()),
        })
    }

    /// A shared receive queue of up to `max_wr` receive work requests
    /// (`ibv_create_srq`), its limit not armed. QPs created with it in
    /// [`QpInitAttr::srq`] take their receives from it.
    pub fn create_srq(&self, max_wr: u32) -> Result<SharedReceiveQueue> {
        let handle = self.shared.engine().create_srq(self.handle, max_wr, 0)?;
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqHandle {
                shared: self.shared.clone(),
                handle,
            }),
        })
    }
}

/// A shared receive queue. Dropping it destroys it once the last QP that
/// uses it is gone too (ibverbs refuses `ibv_destroy_srq` before that).
#[derive(Debug)]
pub struct SharedReceiveQueue {
    inner: Arc<SrqHandle>,
}

/// The engine's SRQ, destroyed when the last of its handle and its QPs
/// drops.
#[derive(Debug)]
struct SrqHandle {
    shared: Arc<Shared>,
    handle: u32,
}

impl Drop for SrqHandle {
    fn drop(&mut self) {
        let _ = self.shared.engine().destroy_srq(self.handle);
    }
}

impl SharedReceiveQueue {
    /// The number [`AsyncEvent::SrqLimitReached`] names it by.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// `ibv_post_srq_recv`: one receive work request, for whichever of
    /// its QPs next needs one.
    pub fn post_recv(&self, wr: RecvWr) -> Result<()> {
        self.inner
            .shared
            .engine()
            .post_srq_recv(self.inner.handle, wr)?;
        self.inner.shared.kick();
        Ok(())
    }

    /// Arms the limit (`ibv_modify_srq` with `IBV_SRQ_LIMIT`): once fewer
    /// than `limit` work requests are left, [`Context::poll_async_event`]
    /// returns [`AsyncEvent::SrqLimitReached`] once, and the limit disarms.
    /// 0 disarms it.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        self.modify(&SrqAttr {
            max_wr: None,
            srq_limit: Some(limit),
        })
    }

    /// `ibv_modify_srq`: resize and/or set the limit.
    pub fn modify(&self, attr: &SrqAttr) -> Result<()> {
        Ok(self
            .inner
            .shared
            .engine()
            .modify_srq(self.inner.handle, attr)?)
    }

    /// `ibv_query_srq`, and how many work requests are waiting.
    pub fn query(&self) -> Result<SrqInfo> {
        Ok(self.inner.shared.engine().query_srq(self.inner.handle)?)
    }
}

/// A registered memory region.
#[derive(Debug)]
pub struct MemoryRegion {
    shared: Arc<Shared>,
    info: MrInfo,
}

impl MemoryRegion {
    pub fn lkey(&self) -> u32 {
        self.info.lkey
    }
    pub fn rkey(&self) -> u32 {
        self.info.rkey
    }
    /// The address a peer puts in RDMA requests for byte 0 of the region.
    pub fn addr(&self) -> u64 {
        self.info.addr
    }
    pub fn len(&self) -> usize {
        self.info.len
    }
    pub fn is_empty(&self) -> bool {
        self.info.len == 0
    }

    /// A scatter/gather element for `len` bytes at `offset`.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            lkey: self.info.lkey,
            offset,
            len,
        }
    }

    /// Runs `f` on the region's bytes, with remote access held off meanwhile.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let mut ep = self.shared.engine();
        Ok(f(ep.mr_bytes_mut(self.info.lkey)?))
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.with_bytes(|b| {
            let dst = b
                .get_mut(offset..offset + data.len())
                .ok_or(VerbsError::BadValue {
                    what: "write past the end of the region",
                    value: (offset + data.len()) as u64,
                })?;
            dst.copy_from_slice(data);
            Ok(())
        })?
    }

    /// Copies `out.len()` bytes from the region at `offset`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.with_bytes(|b| {
            let src = b
                .get(offset..offset + out.len())
                .ok_or(VerbsError::BadValue {
                    what: "read past the end of the region",
                    value: (offset + out.len()) as u64,
                })?;
            out.copy_from_slice(src);
            Ok(())
        })?
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let _ = self.shared.engine().dereg_mr(self.info.lkey);
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    shared: Arc<Shared>,
    handle: u32,
}

impl CompletionQueue {
    /// Takes up to `max` completions, as `ibv_poll_cq`. Also moves the
    /// engine forward, so that a busy-polling caller never waits on the
    /// driver thread.
    pub fn poll(&self, max: usize) -> Result<Vec<WorkCompletion>> {
        // Completions already there are returned without a round of
        // progress, unless something was posted since the last round (a
        // post is not sent until a round runs). That round's receive is a
        // system call, about 1 µs on loopback, which a ping-pong taking the
        // two completions of one arrival (its SEND's and the peer's reply)
        // paid between them.
        if max > 0 && !self.shared.kicked_since_round() {
            let wcs = self.shared.engine().poll_cq(self.handle, max)?;
            if !wcs.is_empty() {
                return Ok(wcs);
            }
        }
        self.shared.app_progress();
        Ok(self.shared.engine().poll_cq(self.handle, max)?)
    }

    /// Whether completions were lost because the queue was full.
    pub fn overflowed(&self) -> Result<bool> {
        Ok(self.shared.engine().cq_overflowed(self.handle)?)
    }

    /// The number [`AsyncEvent::CqOverflow`] names it by.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

/// What `create_qp` takes (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy)]
pub struct QpInitAttr<'a> {
    pub qp_type: QpType,
    pub send_cq: &'a CompletionQueue,
    pub recv_cq: &'a CompletionQueue,
    pub max_send_wr: u32,
    /// Ignored when the QP takes its receives from an SRQ.
    pub max_recv_wr: u32,
    pub sq_sig_all: bool,
    /// Take receive work requests from this shared receive queue instead
    /// of a receive queue of the QP's own (`post_recv` is then refused).
    pub srq: Option<&'a SharedReceiveQueue>,
}

impl<'a> QpInitAttr<'a> {
    /// Queues of 256 entries; only signaled send requests complete.
    pub fn new(
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> Self {
        Self {
            qp_type,
            send_cq,
            recv_cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct QueuePair {
    shared: Arc<Shared>,
    qpn: u32,
    /// Keeps the SRQ it takes receives from until the QP is destroyed.
    srq: Option<Arc<SrqHandle>>,
}

impl QueuePair {
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    pub fn state(&self) -> Result<QpState> {
        Ok(self.shared.engine().qp_state(self.qpn)?)
    }

    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        let _device = self.shared.span.enter();
        self.shared.engine().modify_qp(self.qpn, attr)?;
        self.shared.kick();
        Ok(())
    }

    /// `ibv_post_send`. Only queues the request: the driver thread, or
    /// the next [`CompletionQueue::poll`], sends it, so that a burst of
    /// posts goes out in batches rather than one system call each.
    pub fn post_send(&self, wr: SendWr) -> Result<()> {
        self.shared.engine().post_send(self.qpn, wr)?;
        self.shared.kick();
        Ok(())
    }

    /// `ibv_post_recv`; refused on a QP created with an SRQ (post to the
    /// [`SharedReceiveQueue`] instead).
    pub fn post_recv(&self, wr: RecvWr) -> Result<()> {
        self.shared.engine().post_recv(self.qpn, wr)?;
        self.shared.kick();
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // What the QP owes its peer (the ACK of the last request received)
        // goes out before it is destroyed.
        self.shared.flush();
        let _ = self.shared.engine().destroy_qp(self.qpn);
        // Then the SRQ, if this QP was the last thing holding it.
        self.srq.take();
    }
}

/// A connected QP's path to `remote`, with the RoCE v2 UDP source port
/// derived from the two QP numbers as rdma-core derives it.
pub fn path_to(remote: IpAddr, local_qpn: u32, remote_qpn: u32) -> Path {
    use ferroce_wire::udp::{flow_label_from_qpns, source_port_from_flow_label};
    Path {
        remote,
        udp_src_port: source_port_from_flow_label(flow_label_from_qpns(local_qpn, remote_qpn)),
        traffic_class: 0,
        hop_limit: 64,
    }
}

/// Brings an RC or UC QP from RESET to RTS against a peer, as rdma-core's
/// pingpong examples do: `local_psn` is this side's first send PSN,
/// `remote_psn` the peer's.
pub fn connect_qp(
    qp: &QueuePair,
    qp_type: QpType,
    remote: IpAddr,
    remote_qpn: u32,
    local_psn: Psn,
    remote_psn: Psn,
    mtu: Mtu,
) -> Result<()> {
    let rc = qp_type == QpType::Rc;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    qp.modify(&QpAttr {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(1),
        access: Some(access),
        ..QpAttr::default()
    })?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rtr),
        path: Some(path_to(remote, qp.qpn(), remote_qpn)),
        path_mtu: Some(mtu),
        dest_qpn: Some(remote_qpn),
        rq_psn: Some(remote_psn),
        max_dest_rd_atomic: rc.then_some(16),
        min_rnr_timer: rc.then_some(12),
        ..QpAttr::default()
    })?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(local_psn),
        timeout: rc.then_some(14),
        retry_cnt: rc.then_some(7),
        rnr_retry: rc.then_some(7),
        max_rd_atomic: rc.then_some(16),
        ..QpAttr::default()
    })
}
