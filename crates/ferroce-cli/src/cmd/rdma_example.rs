//! `ferroce rdma-server` / `ferroce rdma-client`: rdma-core's librdmacm
//! examples `rdma_server` and `rdma_client`, over ferroce's rdma_cm.
//!
//! The protocol, as the examples run it (read in rdma-core's
//! `librdmacm/examples/rdma_{server,client}.c`): TCP port space, port 7471;
//! the server listens (by default on every address), takes one connect
//! request, posts one 16-byte receive and accepts with librdmacm's default
//! parameters (no private data, the device's read depths, 7 and 7
//! retries); the client posts its 16-byte receive, connects, sends 16
//! bytes (zeros: the examples never fill their buffers; inline, which is
//! not visible on the wire), and waits for its send and then its receive;
//! the server, once the client's message is in, sends its own 16 bytes.
//! Both then disconnect. Each prints `<tool>: start` and `<tool>: end N`
//! on standard output, N = 0 on success.
//!
//! Where this differs: the examples print `perror` of the failing call and
//! `end -1`, exiting 255; here the error says what failed and why, the
//! tool prints `end -1` and exits 1. Both check each completion's status
//! and length (the examples count completions only). ferroce needs an
//! address for its device: the client's is `-L` (default: the one the
//! routing table picks); a server listening on every address opens a
//! device on each IPv4 address of the host's interfaces that is up, or
//! only on `-L` when given.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use clap::Args;
use ferroce::cm::{CmEventKind, CmId, ConnParam, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, Context, MemoryRegion, QpInitAttr, QpType, QueuePair, RecvWr, SendWr,
    WcOpcode,
};

use super::rdma_cm::device::{open_on, open_wildcard};
use super::rdma_cm::events::{next_event, wait_event, wait_request};
use super::rdma_cm::{RawArgs, resolve_v4_first};
use crate::error::Error;

/// The examples' message size.
const MSG: usize = 16;
/// How long the client waits for each step of the connection, and either
/// side for a completion. A server waits for its client without a limit.
const WAIT: Duration = Duration::from_secs(30);
/// How long a side waits for the disconnect to be answered.
const LINGER: Duration = Duration::from_secs(2);

/// Arguments of `ferroce rdma-server`.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Address (or host name) to listen on; 0.0.0.0: every address.
    #[arg(short = 's', default_value = "0.0.0.0")]
    server: String,
    /// Port (rdma_cm TCP port space).
    #[arg(short = 'p', default_value_t = 7471)]
    port: u16,
    /// With -s 0.0.0.0: open the device on this address only, instead of
    /// on every IPv4 address of the host.
    #[arg(short = 'L', long)]
    local: Option<IpAddr>,
    #[command(flatten)]
    raw: RawArgs,
}

/// Arguments of `ferroce rdma-client`.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// The server (a host name or address).
    #[arg(short = 's', default_value = "127.0.0.1")]
    server: String,
    /// Port (rdma_cm TCP port space).
    #[arg(short = 'p', default_value_t = 7471)]
    port: u16,
    /// This device's address (default: the one the routing table picks
    /// to reach the server).
    #[arg(short = 'L', long)]
    local: Option<IpAddr>,
    #[command(flatten)]
    raw: RawArgs,
}

pub(crate) fn server(args: &ServerArgs) -> Result<bool, Error> {
    println!("rdma_server: start");
    report("rdma_server", run_server(args))
}

pub(crate) fn client(args: &ClientArgs) -> Result<bool, Error> {
    println!("rdma_client: start");
    report("rdma_client", run_client(args))
}

/// Prints the examples' last line; a failure is explained on stderr.
fn report(tool: &str, result: Result<(), Error>) -> Result<bool, Error> {
    match result {
        Ok(()) => {
            println!("{tool}: end 0");
            Ok(true)
        }
        Err(e) => {
            eprintln!("{tool}: {e}");
            println!("{tool}: end -1");
            Ok(false)
        }
    }
}

/// The connection's QP, its completions and its two 16-byte messages
/// (receive at 0, send at 16). Sends and receives complete on CQs of their
/// own, as `rdma_create_ep` makes them: the peer's answer may complete
/// before the acknowledgement of our message does.
struct Msgs {
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    mr: MemoryRegion,
}

impl Msgs {
    /// `rdma_create_ep`'s QP (one send, one receive) on the ID's device,
    /// with one receive posted.
    fn new(id: &CmId) -> Result<Self, Error> {
        let ctx = id
            .verbs()
            .ok_or("the rdma_cm ID has no device (not resolved or bound)")?;
        let pd = ctx.alloc_pd();
        let send_cq = ctx.create_cq(1)?;
        let recv_cq = ctx.create_cq(1)?;
        let mr = pd.reg_mr(2 * MSG, Access::LOCAL_WRITE)?;
        let mut attr = QpInitAttr::new(QpType::Rc, &send_cq, &recv_cq);
        attr.max_send_wr = 1;
        attr.max_recv_wr = 1;
        attr.sq_sig_all = true;
        let qp = id.create_qp(&pd, &attr)?;
        qp.post_recv(RecvWr::new(0, &[mr.sge(0, MSG as u32)]))?;
        Ok(Self {
            qp,
            send_cq,
            recv_cq,
            mr,
        })
    }

    fn send(&self) -> Result<(), Error> {
        self.qp
            .post_send(SendWr::send(1, &[self.mr.sge(MSG as u64, MSG as u32)]))?;
        self.completion(WcOpcode::Send, "the send completion")
    }

    fn recv(&self) -> Result<(), Error> {
        self.completion(WcOpcode::Recv, "the peer's 16-byte message")
    }

    /// Waits for the next completion on `want`'s CQ, which must be a
    /// successful `want` (of 16 bytes, for a receive).
    fn completion(&self, want: WcOpcode, what: &str) -> Result<(), Error> {
        let cq = if want == WcOpcode::Recv {
            &self.recv_cq
        } else {
            &self.send_cq
        };
        let wc = cq
            .wait(1, WAIT)?
            .pop()
            .ok_or_else(|| format!("{what} did not come within {} s", WAIT.as_secs()))?;
        let wc = wc.ok().map_err(|e| format!("waiting for {what}: {e}"))?;
        if wc.opcode != want {
            return Err(format!("waiting for {what}: got a {:?} completion", wc.opcode).into());
        }
        if want == WcOpcode::Recv && wc.byte_len as usize != MSG {
            return Err(format!(
                "the peer's message has {} bytes, not {MSG}: is it rdma_client/rdma_server?",
                wc.byte_len
            )
            .into());
        }
        Ok(())
    }
}

fn run_server(args: &ServerArgs) -> Result<(), Error> {
    let at = resolve_v4_first(&args.server, args.port)?;
    let _devices = open_devices(args, at.ip())?;
    let ch = EventChannel::new()?;
    let listen = ch.create_id(PortSpace::Tcp)?;
    listen.bind_addr(at)?;
    listen.listen(0)?;
    let id = wait_request(&listen, None)?.id;
    let m = Msgs::new(&id)?;
    id.accept(&ConnParam::default())?;
    expect_established(&ch, &id)?;
    m.recv()?;
    m.send()?;
    disconnect(&ch, &id);
    Ok(())
}

/// The devices a server listens through: the one on `-s` (opened by the
/// rdma_cm on demand), else the one on `-L`, else one on every IPv4
/// address of the host's interfaces that are up (an address whose RoCE
/// port another process holds is skipped). With `--raw`, the raw one on
/// `-s` or `-L`.
fn open_devices(args: &ServerArgs, server: IpAddr) -> Result<Vec<Context>, Error> {
    if args.raw.raw {
        let local = if server.is_unspecified() {
            args.local
        } else {
            Some(server)
        };
        return Ok(args.raw.open(local, "-L", None)?.into_iter().collect());
    }
    if !server.is_unspecified() {
        return Ok(Vec::new());
    }
    if let Some(local) = args.local {
        return Ok(vec![open_on(local, None, None)?]);
    }
    let all = open_wildcard(server.is_ipv6(), true, |a| open_on(a, None, None))?;
    if all.opened.is_empty() {
        let skipped: Vec<_> = all
            .skipped
            .iter()
            .map(|(a, e)| format!("{a} ({e})"))
            .collect();
        return Err(format!(
            "no device could be opened on any address of the host: {}; give one with -L",
            skipped.join("; ")
        )
        .into());
    }
    for (a, e) in all.skipped {
        tracing::warn!("not listening on {a} ({e})");
    }
    Ok(all.opened.into_iter().map(|(_, ctx)| ctx).collect())
}

fn run_client(args: &ClientArgs) -> Result<(), Error> {
    let dst = resolve_v4_first(&args.server, args.port)?;
    let _raw_device = args.raw.open(args.local, "-L", Some(dst.ip()))?;
    let ch = EventChannel::new()?;
    let id = ch.create_id(PortSpace::Tcp)?;
    id.resolve_addr(args.local.map(|l| SocketAddr::new(l, 0)), dst, WAIT)?;
    expect(&ch, &id, "RDMA_CM_EVENT_ADDR_RESOLVED")?;
    id.resolve_route(WAIT)?;
    expect(&ch, &id, "RDMA_CM_EVENT_ROUTE_RESOLVED")?;
    let m = Msgs::new(&id)?;
    id.connect(&ConnParam::default())?;
    expect_established(&ch, &id)?;
    m.send()?;
    m.recv()?;
    disconnect(&ch, &id);
    Ok(())
}

/// The next event about `id` (others are dropped: the examples have one
/// connection), which must be `name`, within [`WAIT`].
fn expect(ch: &EventChannel, id: &CmId, name: &str) -> Result<(), Error> {
    let e = next_event(ch, Some(id), WAIT)?;
    if e.kind.name() != name {
        return Err(format!("expected {name}, got {e}").into());
    }
    Ok(())
}

/// Waits for ESTABLISHED, as librdmacm's synchronous `rdma_connect` and
/// `rdma_accept` do; a REJECTED, UNREACHABLE or CONNECT_ERROR is the error.
fn expect_established(ch: &EventChannel, id: &CmId) -> Result<(), Error> {
    let e = next_event(ch, Some(id), WAIT)?;
    match e.kind {
        CmEventKind::Established { .. } => Ok(()),
        CmEventKind::Rejected { reason: 8, .. } => {
            Err(format!("connecting: {e} (start rdma_server first, on the same -p)").into())
        }
        _ => Err(format!("connecting: {e}").into()),
    }
}

/// `rdma_disconnect`, and a short wait for the peer's answer so that our
/// DREQ or DREP goes out before the process ends.
fn disconnect(ch: &EventChannel, id: &CmId) {
    if let Err(e) = id.disconnect() {
        tracing::debug!("disconnect: {e}");
        return;
    }
    let deadline = Instant::now() + LINGER;
    let left = || Some(deadline.saturating_duration_since(Instant::now()));
    while let Ok(Some(e)) = wait_event(ch, Some(id), left()) {
        if matches!(e.kind, CmEventKind::Disconnected) {
            break;
        }
    }
    // The examples disconnect at once on both sides: when the DREQs
    // crossed, the peer's left us owing a DREP, which rdma_disconnect after
    // DISCONNECTED sends (nothing otherwise).
    let _ = id.disconnect();
}
