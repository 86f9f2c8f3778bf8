//! perftest's `-R` (`--rdma_cm`): the exchange over an rdma_cm connection
//! instead of TCP, and the test's QPs connected by rdma_cm, as perftest
//! 4.5 does it (read in perftest's `perftest_communication.c`,
//! `perftest_resources.c` and the tools' `main`s).
//!
//! * The exchange runs over a connection of its own (the "comm" QP): the
//!   client resolves the server's address and the port (`-p`, 18515),
//!   connects (no private data, read depths 0, retry and RNR retry 7); the
//!   server listens on every address, takes the first request, posts one
//!   receive, accepts, and drops its listener. Each side keeps one receive
//!   posted and reposts it after each message.
//! * Every message of the TCP exchange (version, cycle buffer, cache line,
//!   MTU, key records, reports) is one SEND of the same size on that QP,
//!   in the same order (the client sends first), except that a key record
//!   is perftest's `struct pingpong_dest` in binary (56 bytes, see
//!   [`Key::encode_bin`]) and the exchange ends with a key record alone, no
//!   `done`.
//! * After the MTU, two more key records (all zero) bracket the test's
//!   connections: after the first, the server listens again on the same
//!   port and accepts one connection per QP (read depths = out_reads for
//!   READ and atomics, else 0; retries 7), and the client connects one ID
//!   per QP, retrying the whole set (up to 10 times, 100 ms apart) when
//!   the server was not listening yet; the second follows. The CM moves
//!   the QPs to RTS (MTU from the route, PSNs from the REQ and REP): the
//!   key records that follow are only the memory's addresses and keys.
//! * At the end the client disconnects the test's connections and waits
//!   for each DISCONNECTED (perftest's client too); ferroce's server waits
//!   up to 2 s for those DREQs and then disconnects what is left
//!   (perftest's destroys its IDs, which sends DREQs). Then the same for
//!   the exchange's connection (perftest leaves that to its exit).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ferroce::cm::{CmEvent, CmEventKind, CmId, ConnParam, Depth, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, Context, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr,
};

use super::super::setup::{Params, Side};
use super::super::{PerfArgs, Test};
use super::exchange::{Key, OUT_READS, Wire};
use crate::cmd::rdma_cm::events::{self, next_event};
use crate::cmd::rdma_cm::{resolve_v4_first, unspecified_like};
use crate::cmd::tcp;
use crate::error::{Error, open_device};

/// The largest message of the exchange (a key record); the receive
/// buffer is larger, so that a longer message is seen and refused.
const RECV_LEN: u32 = 256;
/// How long the steps of the setup may take.
const SETUP_WAIT: Duration = Duration::from_secs(30);
/// perftest's client: 10 tries of the test's connections, 100 ms apart.
const CONNECT_TRIES: u32 = 10;
const RETRY_DELAY: Duration = Duration::from_millis(100);
/// The RNR NAK timer perftest's server gives its test QPs (12: 0.64 ms;
/// rdma_cm's default, 0, would make a sender wait 655 ms).
const MIN_RNR_TIMER: u8 = 12;
/// How long the end waits for the disconnects to be answered.
const LINGER: Duration = Duration::from_secs(2);

/// The exchange's own rdma_cm connection.
pub(super) struct Comm {
    ch: EventChannel,
    id: CmId,
    // Dropped after the ID (rdma_cm: a QP outlives its connection).
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    mr: MemoryRegion,
    /// The device, for the test's resources.
    pub(super) ctx: Context,
    /// How long a receive may wait; `None`: for ever (once the setup is
    /// done, as the TCP exchange clears its timeouts).
    pub(super) timeout: Option<Duration>,
}

impl Comm {
    /// The client's side: connects to `server`, retrying while nothing
    /// listens there (REJ 8) for up to 10 s, as the TCP exchange does; the
    /// device opened as `device` says (the backend of `--raw`).
    pub(super) fn connect(
        device: ferroce::DeviceConfig,
        server: &str,
        port: u16,
    ) -> Result<Self, Error> {
        let dst = resolve_v4_first(server, port)?;
        let local = device.local;
        let ctx = open_device(device)?;
        let start = Instant::now();
        loop {
            let ch = EventChannel::new()?;
            let id = resolved_id(&ch, local, dst)?;
            let comm = Self::on(ch, id, ctx.clone())?;
            comm.id.connect(&comm_param())?;
            let e = next_event(&comm.ch, Some(&comm.id), SETUP_WAIT)?;
            match e.kind {
                CmEventKind::Established { .. } => return Ok(comm),
                CmEventKind::Rejected { reason: 8, .. } if start.elapsed() < tcp::CONNECT_WAIT => {
                    std::thread::sleep(RETRY_DELAY);
                }
                _ => {
                    return Err(format!(
                        "connecting the exchange to {dst} with rdma_cm: {e} (is `ib_*_bw -R` \
                         or `ferroce perf --perftest -R --listen` running there, on -p {port}?)"
                    )
                    .into());
                }
            }
        }
    }

    /// The server's side: listens on every address of `local`'s family at
    /// `port` (perftest binds INADDR_ANY), accepts the first request.
    pub(super) fn accept(device: ferroce::DeviceConfig, port: u16) -> Result<Self, Error> {
        let local = device.local;
        let ctx = open_device(device)?;
        let ch = EventChannel::new()?;
        let listen = listener(&ch, local, port)?;
        let req = wait_request(&listen, None)?;
        drop(listen);
        let comm = Self::on(ch, req.id, ctx)?;
        comm.id.accept(&comm_param())?;
        Ok(comm)
    }

    /// The comm QP on `id`, one receive posted.
    fn on(ch: EventChannel, id: CmId, ctx: Context) -> Result<Self, Error> {
        let pd = ctx.alloc_pd();
        let send_cq = ctx.create_cq(2)?;
        let recv_cq = ctx.create_cq(2)?;
        let mr = pd.reg_mr(2 * RECV_LEN as usize, Access::LOCAL_WRITE)?;
        let mut attr = QpInitAttr::new(QpType::Rc, &send_cq, &recv_cq);
        attr.max_send_wr = 1;
        attr.max_recv_wr = 1;
        let qp = id.create_qp(&pd, &attr)?;
        qp.post_recv(RecvWr::new(0, &[mr.sge(0, RECV_LEN)]))?;
        Ok(Self {
            ch,
            id,
            qp,
            send_cq,
            recv_cq,
            mr,
            ctx,
            timeout: Some(SETUP_WAIT),
        })
    }

    pub(super) fn peer(&self) -> String {
        self.id
            .peer_addr()
            .map_or_else(|| "the peer".into(), |a| a.to_string())
    }

    /// One message, as one SEND; returns when it is acknowledged.
    pub(super) fn send(&self, m: &[u8]) -> Result<(), String> {
        let at = u64::from(RECV_LEN);
        self.mr.write(at, m).map_err(|e| e.to_string())?;
        self.qp
            .post_send(SendWr::send(1, &[self.mr.sge(at, m.len() as u32)]))
            .map_err(|e| e.to_string())?;
        let wc = self
            .send_cq
            .wait(1, SETUP_WAIT)
            .map_err(|e| e.to_string())?
            .pop()
            .ok_or_else(|| {
                format!(
                    "a message was not acknowledged in {} s",
                    SETUP_WAIT.as_secs()
                )
            })?;
        wc.ok().map(drop).map_err(|e| format!("sending: {e}"))
    }

    /// The next message, which must have `n` bytes; reposts the receive.
    pub(super) fn recv(&self, n: usize) -> Result<Vec<u8>, String> {
        let start = Instant::now();
        let wc = loop {
            if let Some(wc) = self
                .recv_cq
                .wait(1, Duration::from_millis(500))
                .map_err(|e| e.to_string())?
                .pop()
            {
                break wc;
            }
            if self.disconnected() {
                return Err("the peer disconnected the exchange".into());
            }
            if self.timeout.is_some_and(|t| start.elapsed() > t) {
                return Err(format!("reading {n} bytes: nothing arrived in time"));
            }
        };
        let wc = wc.ok().map_err(|e| format!("receiving: {e}"))?;
        if wc.byte_len as usize != n {
            return Err(format!(
                "expected a message of {n} bytes, got {} (do both sides run the same test \
                 and -s, and is the peer a perftest tool with -R?)",
                wc.byte_len
            ));
        }
        let mut m = vec![0u8; n];
        self.mr.read(0, &mut m).map_err(|e| e.to_string())?;
        self.qp
            .post_recv(RecvWr::new(0, &[self.mr.sge(0, RECV_LEN)]))
            .map_err(|e| e.to_string())?;
        Ok(m)
    }

    fn disconnected(&self) -> bool {
        while let Some(e) = self.ch.try_get_event() {
            if e.id == self.id && matches!(e.kind, CmEventKind::Disconnected) {
                return true;
            }
        }
        false
    }

    /// Disconnects the exchange (perftest's side just exits); a server
    /// waits a little for the client's DREQ first.
    pub(super) fn close(self, server: bool) {
        disconnect_all(&self.ch, std::slice::from_ref(&self.id), server);
    }
}

/// perftest's parameters for the comm connection.
fn comm_param() -> ConnParam {
    ConnParam {
        responder_resources: Depth::Exactly(0),
        initiator_depth: Depth::Exactly(0),
        ..ConnParam::default()
    }
}

/// The test's connections: their IDs and channel, kept for the run.
pub(super) struct Conns {
    ch: EventChannel,
    ids: Vec<CmId>,
}

impl Conns {
    /// Disconnects every connection and waits (a little) for the answers;
    /// a server waits a little for the client's DREQs first.
    pub(super) fn close(self, server: bool) {
        disconnect_all(&self.ch, &self.ids, server);
    }
}

/// The test's QPs on the exchange's device, connected by rdma_cm between
/// the two zero key records (see the module docs).
pub(super) fn connect_test(
    w: &mut Wire,
    ctx: &Context,
    p: &Params,
    args: &PerfArgs,
) -> Result<(Side, Conns), Error> {
    let zero = Key::default();
    let ch = EventChannel::new()?;
    // ferroce listens before the first record, so that a ferroce client
    // finds it; perftest's server listens after it (its client retries).
    let listen = if args.listen {
        Some(listener(&ch, ctx.local(), args.port)?)
    } else {
        None
    };
    w.hand_shake(&zero)?;
    let result = match listen {
        Some(l) => serve_test(ch, &l, ctx, p),
        None => {
            let dst = resolve_v4_first(args.server.as_deref().unwrap_or_default(), args.port)?;
            connect_test_client(ctx, p, dst)
        }
    }?;
    w.hand_shake(&zero)?;
    Ok(result)
}

/// The read depths perftest asks for: its out_reads for READ and atomics.
fn test_param(p: &Params) -> ConnParam {
    let depth = if matches!(p.test, Test::Read | Test::Atomic) {
        Depth::Exactly(OUT_READS as u8)
    } else {
        Depth::Exactly(0)
    };
    ConnParam {
        responder_resources: depth,
        initiator_depth: depth,
        ..ConnParam::default()
    }
}

fn serve_test(
    ch: EventChannel,
    listen: &CmId,
    ctx: &Context,
    p: &Params,
) -> Result<(Side, Conns), Error> {
    let mut ids = Vec::with_capacity(p.qps as usize);
    for _ in 0..p.qps {
        ids.push(wait_request(listen, Some(SETUP_WAIT))?.id);
    }
    let side = Side::open_on(ctx.clone(), p, |pd, attr, i| ids[i].create_qp(pd, attr))?;
    for id in &ids {
        // perftest's server sets it after the accept; here before, so the
        // CM applies it at RTR.
        id.set_min_rnr_timer(MIN_RNR_TIMER);
        id.accept(&test_param(p))?;
    }
    Ok((side, Conns { ch, ids }))
}

fn connect_test_client(ctx: &Context, p: &Params, dst: SocketAddr) -> Result<(Side, Conns), Error> {
    let mut tries = 0;
    loop {
        tries += 1;
        let ch = EventChannel::new()?;
        let ids = (0..p.qps)
            .map(|_| resolved_id(&ch, ctx.local(), dst))
            .collect::<Result<Vec<_>, _>>()?;
        let side = Side::open_on(ctx.clone(), p, |pd, attr, i| ids[i].create_qp(pd, attr))?;
        for id in &ids {
            id.connect(&test_param(p))?;
        }
        let mut established = 0;
        let mut refused = None;
        while established < ids.len() && refused.is_none() {
            let e = next_event(&ch, None, SETUP_WAIT)?;
            match e.kind {
                CmEventKind::Established { .. } => established += 1,
                CmEventKind::Rejected { .. }
                | CmEventKind::Unreachable { .. }
                | CmEventKind::ConnectError { .. } => refused = Some(e),
                _ => {}
            }
        }
        match refused {
            None => return Ok((side, Conns { ch, ids })),
            Some(e) if tries >= CONNECT_TRIES => {
                return Err(format!(
                    "connecting the test's QPs to {dst} with rdma_cm, {tries} tries: {e}"
                )
                .into());
            }
            Some(_) => {
                drop(ids);
                drop(side);
                std::thread::sleep(RETRY_DELAY);
            }
        }
    }
}

/// An ID in the TCP port space, resolved from `local` to `dst`.
fn resolved_id(ch: &EventChannel, local: IpAddr, dst: SocketAddr) -> Result<CmId, Error> {
    let id = ch.create_id(PortSpace::Tcp)?;
    id.resolve_addr(Some(SocketAddr::new(local, 0)), dst, SETUP_WAIT)?;
    expect(ch, &id, "RDMA_CM_EVENT_ADDR_RESOLVED")?;
    id.resolve_route(SETUP_WAIT)?;
    expect(ch, &id, "RDMA_CM_EVENT_ROUTE_RESOLVED")?;
    Ok(id)
}

/// A listener on every address of `local`'s family at `port`.
fn listener(ch: &EventChannel, local: IpAddr, port: u16) -> Result<CmId, Error> {
    let id = ch.create_id(PortSpace::Tcp)?;
    id.bind_addr(SocketAddr::new(unspecified_like(local), port))?;
    id.listen(1)?;
    Ok(id)
}

/// The next connect request to `listen`, within `timeout` (`None`: wait
/// for ever, as a server waits for its client).
fn wait_request(listen: &CmId, timeout: Option<Duration>) -> Result<CmEvent, Error> {
    events::wait_request(listen, timeout)
        .map_err(|e| format!("waiting for the client's rdma_cm connections: {e}").into())
}

fn expect(ch: &EventChannel, id: &CmId, name: &str) -> Result<(), Error> {
    let e = next_event(ch, Some(id), SETUP_WAIT)?;
    if e.kind.name() != name {
        return Err(format!("rdma_cm: expected {name}, got {e}").into());
    }
    Ok(())
}

/// Disconnects `ids` and waits up to [`LINGER`] for their DISCONNECTED,
/// so that the DREQs (or DREPs) go out before the process ends. With
/// `peer_first` (the server), it first waits as long for the peer's DREQs,
/// so that the two sides do not both send one.
fn disconnect_all(ch: &EventChannel, ids: &[CmId], peer_first: bool) {
    let mut left = ids.len();
    if peer_first {
        left -= disconnected(ch, left);
    }
    for id in ids {
        if let Err(e) = id.disconnect() {
            tracing::debug!("rdma_cm disconnect: {e}");
        }
    }
    if left > 0 {
        disconnected(ch, left);
    }
    // When the DREQs crossed, the peer's left this side owing a DREP:
    // rdma_disconnect after DISCONNECTED sends it (nothing otherwise).
    for id in ids {
        let _ = id.disconnect();
    }
}

/// Counts DISCONNECTED events, up to `n`, for at most [`LINGER`].
fn disconnected(ch: &EventChannel, n: usize) -> usize {
    let deadline = Instant::now() + LINGER;
    let mut seen = 0;
    while seen < n {
        let wait = deadline.saturating_duration_since(Instant::now());
        match events::wait_event(ch, None, Some(wait)) {
            Ok(Some(e)) if matches!(e.kind, CmEventKind::Disconnected) => seen += 1,
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    seen
}
