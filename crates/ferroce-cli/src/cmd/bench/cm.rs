//! rdma_cm connection setups per second on loopback, beside TCP's.
//!
//! A setup is what an rdma_cm application does for a short connection:
//! the client creates an ID, resolves the address and route, creates an RC
//! QP and connects; the server accepts on a QP of its own; both see
//! ESTABLISHED; the client disconnects, the server sees DISCONNECTED and
//! disconnects too, and the client sees DISCONNECTED; both drop their ID
//! and QP. The client keeps 1 (one at a time) or 64 (in parallel) setups in
//! flight for about `--cm-secs` and counts the ones that completed.
//!
//! Both sides run in this process, each on its own device (its own address,
//! RoCE port and driver thread) and its own thread. The baseline is TCP on
//! the same two addresses: connect, accept, and close on both sides, the
//! server closing first (so TIME_WAIT stays on its side and the client's
//! ephemeral ports do not run out), with as many in flight.

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferroce::cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace};
use ferroce::{
    CompletionQueue, Context, DeviceConfig, ProtectionDomain, QpInitAttr, QpType, QueuePair,
};

use crate::error::Error;

/// The RoCE ports of the two devices: away from 4791 (other benches, a
/// kernel rxe) and from the memory bench's 4899.
const SERVER_PORT: u16 = 4893;
const CLIENT_PORT: u16 = 4894;
/// The rdma_cm (and TCP) port the server listens on.
const SERVICE_PORT: u16 = 7480;
/// How long to wait for any one event before calling the run stuck.
const STUCK: Duration = Duration::from_secs(10);
/// How long a thread waits for an event before it looks at the clock.
const TICK: Duration = Duration::from_millis(5);

/// Setups per second with `parallel` in flight, for about `secs`.
pub(super) fn rdma_cm_rate(
    server: IpAddr,
    client: IpAddr,
    parallel: usize,
    secs: f64,
) -> Result<f64, Error> {
    let open = |local, port, peer_port| {
        Context::open_with(DeviceConfig {
            port,
            peer_port,
            ..DeviceConfig::new(local)
        })
    };
    let sdev = open(server, SERVER_PORT, CLIENT_PORT)?;
    let cdev = open(client, CLIENT_PORT, SERVER_PORT)?;
    let sch = EventChannel::new()?;
    let listen = sch.create_id(PortSpace::Tcp)?;
    listen.bind_addr(SocketAddr::new(server, SERVICE_PORT))?;
    listen.listen(1024)?;
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        let srv = scope.spawn(|| serve(&sdev, &sch, &done));
        let driven = drive(&cdev, server, parallel, secs);
        done.store(true, Ordering::Relaxed);
        let served = srv
            .join()
            .unwrap_or_else(|_| Err("the rdma_cm server thread panicked".into()))?;
        let (completed, elapsed) = driven?;
        // The client's DISCONNECTED follows the server's DREP, sent when
        // it handled its own: every setup counted went through both sides.
        if served != completed {
            return Err(format!(
                "rdma_cm: the client completed {completed} setups, the server {served}"
            )
            .into());
        }
        Ok(completed as f64 / elapsed)
    });
    drop(listen);
    result
}

/// One side's PD and CQ, shared by its QPs.
struct Verbs {
    pd: ProtectionDomain,
    cq: CompletionQueue,
}

impl Verbs {
    fn new(ctx: &Context) -> Result<Self, Error> {
        Ok(Self {
            pd: ctx.alloc_pd(),
            cq: ctx.create_cq(64)?,
        })
    }

    fn qp(&self, id: &CmId) -> Result<QueuePair, Error> {
        Ok(id.create_qp(&self.pd, &QpInitAttr::new(QpType::Rc, &self.cq, &self.cq))?)
    }
}

/// A failed setup, in words.
fn failed(event: &CmEvent) -> Error {
    Error::Run(format!("rdma_cm setup failed: {event}"))
}

/// The server: accepts every request, disconnects when the client does.
/// Returns how many connections it saw end.
fn serve(ctx: &Context, ch: &EventChannel, done: &AtomicBool) -> Result<u64, Error> {
    let verbs = Verbs::new(ctx)?;
    let mut conns: HashMap<u32, (CmId, QueuePair)> = HashMap::new();
    let mut ended = 0;
    while !done.load(Ordering::Relaxed) {
        let Some(event) = ch.get_event_timeout(TICK)? else {
            continue;
        };
        match &event.kind {
            CmEventKind::ConnectRequest { .. } => {
                let qp = verbs.qp(&event.id)?;
                event.id.accept(&ConnParam::default())?;
                conns.insert(qp.qpn(), (event.id, qp));
            }
            CmEventKind::Established { .. } | CmEventKind::TimewaitExit => {}
            CmEventKind::Disconnected => {
                event.id.disconnect()?;
                if let Some(qpn) = event.id.qp_num() {
                    conns.remove(&qpn);
                }
                ended += 1;
            }
            _ => return Err(failed(&event)),
        }
    }
    Ok(ended)
}

/// The client: keeps `parallel` setups going for `secs`, then lets the
/// last ones finish. Returns the setups completed and the seconds taken.
fn drive(ctx: &Context, server: IpAddr, parallel: usize, secs: f64) -> Result<(u64, f64), Error> {
    let verbs = Verbs::new(ctx)?;
    let ch = EventChannel::new()?;
    let service = SocketAddr::new(server, SERVICE_PORT);
    let local = SocketAddr::new(ctx.local(), 0);
    let start_one = || -> Result<(), Error> {
        let id = ch.create_id(PortSpace::Tcp)?;
        Ok(id.resolve_addr(Some(local), service, STUCK)?)
    };
    let mut conns: HashMap<u32, (CmId, QueuePair)> = HashMap::new();
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    for _ in 0..parallel {
        start_one()?;
    }
    let (mut in_flight, mut completed) = (parallel, 0u64);
    let mut last_event = Instant::now();
    while in_flight > 0 {
        let Some(event) = ch.get_event_timeout(TICK)? else {
            if last_event.elapsed() > STUCK {
                return Err(format!(
                    "rdma_cm setups stuck: {in_flight} in flight, no event in 10 s"
                )
                .into());
            }
            continue;
        };
        last_event = Instant::now();
        match &event.kind {
            CmEventKind::AddrResolved => event.id.resolve_route(STUCK)?,
            CmEventKind::RouteResolved => {
                let qp = verbs.qp(&event.id)?;
                event.id.connect(&ConnParam::default())?;
                conns.insert(qp.qpn(), (event.id, qp));
            }
            CmEventKind::Established { .. } => event.id.disconnect()?,
            CmEventKind::Disconnected => {
                if let Some(qpn) = event.id.qp_num() {
                    conns.remove(&qpn);
                }
                completed += 1;
                in_flight -= 1;
                if Instant::now() < until {
                    start_one()?;
                    in_flight += 1;
                }
            }
            CmEventKind::TimewaitExit => {}
            _ => return Err(failed(&event)),
        }
    }
    Ok((completed, start.elapsed().as_secs_f64()))
}

/// TCP connect + accept + close per second with `parallel` clients in
/// flight, for about `secs`.
pub(super) fn tcp_rate(server: IpAddr, parallel: usize, secs: f64) -> Result<f64, Error> {
    let listener = TcpListener::bind(SocketAddr::new(server, SERVICE_PORT))?;
    listener.set_nonblocking(true)?;
    let done = AtomicBool::new(false);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Accept and close at once: the server closes first.
            while !done.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => drop(stream),
                    Err(_) => std::thread::sleep(Duration::from_micros(50)),
                }
            }
        });
        let start = Instant::now();
        let clients: Vec<_> = (0..parallel)
            .map(|_| scope.spawn(|| tcp_client(server, until)))
            .collect();
        let mut completed = 0u64;
        let mut failure = None;
        for c in clients {
            match c.join() {
                Ok(Ok(n)) => completed += n,
                Ok(Err(e)) => failure = Some(e),
                Err(_) => failure = Some("a TCP client thread panicked".into()),
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        done.store(true, Ordering::Relaxed);
        match failure {
            Some(e) => Err(e),
            None => Ok(completed as f64 / elapsed),
        }
    })
}

/// One TCP client: connect, wait for the server's close, close; again
/// until `until`. Returns how many it made. (std cannot bind a client
/// socket to an address before connecting; the source is the route's
/// choice, a loopback address like the client's.)
fn tcp_client(server: IpAddr, until: Instant) -> Result<u64, Error> {
    let to = SocketAddr::new(server, SERVICE_PORT);
    let mut n = 0;
    while Instant::now() < until {
        let mut stream = TcpStream::connect_timeout(&to, STUCK)?;
        let mut byte = [0u8; 1];
        // 0 bytes: the server closed.
        let _ = stream.read(&mut byte)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn short_runs_complete_setups_one_at_a_time_and_in_parallel() {
        let (server, client) = (ip("127.0.9.1"), ip("127.0.9.2"));
        for parallel in [1, 8] {
            let rate = rdma_cm_rate(server, client, parallel, 0.2).unwrap();
            assert!(rate > 0.0, "{parallel} in flight: {rate}/s");
        }
        let rate = tcp_rate(server, 4, 0.2).unwrap();
        assert!(rate > 0.0, "TCP: {rate}/s");
    }
}
