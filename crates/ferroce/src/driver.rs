//! The driver: the one place that reads the real clock and moves bytes
//! between the UDP backend and the sans-IO engine, on its own thread, so
//! that ACKs, READ responses and retransmissions happen while the
//! application is busy elsewhere.
//!
//! The engine and the backend sit behind mutexes shared with the API
//! handles. One round of progress (receive, timers, transmit) is
//! [`Shared::progress`]: the driver thread runs it in a loop, busy-polling
//! while there is traffic and backing off (spin, yield, then short sleeps
//! bounded by the next engine timer) when there is none; the API runs it
//! too when the application posts or polls, so a busy-polling application
//! makes progress without waiting for the driver thread to be scheduled
//! (on a machine with fewer cores than spinning threads, that wait is what
//! dominates latency).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferroce_core::{Endpoint, Instant, Transmit};
use ferroce_io::{OutDatagram, UdpBackend};

/// What the API handles and the driver thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    engine: Mutex<Endpoint>,
    backend: Mutex<UdpBackend>,
    /// Bumped by every API call that may create work for the driver.
    kick: AtomicU64,
    stop: AtomicBool,
    epoch: std::time::Instant,
    pub(crate) local: IpAddr,
    /// The port peers receive on.
    pub(crate) port: u16,
}

impl Shared {
    pub(crate) fn new(engine: Endpoint, backend: UdpBackend, local: IpAddr, port: u16) -> Self {
        Self {
            engine: Mutex::new(engine),
            backend: Mutex::new(backend),
            kick: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            epoch: std::time::Instant::now(),
            local,
            port,
        }
    }

    /// The engine, locked. A panic while holding the lock cannot leave the
    /// engine half-updated in a way later calls rely on, so a poisoned lock
    /// is taken over rather than propagated.
    pub(crate) fn engine(&self) -> MutexGuard<'_, Endpoint> {
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the driver there is new work.
    pub(crate) fn kick(&self) {
        self.kick.fetch_add(1, Ordering::Release);
    }

    pub(crate) fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// How many datagrams to move per lock.
const BATCH: usize = 64;

impl Shared {
    /// One round of progress: receive what is waiting, run due timers, send
    /// what the engine has. Returns whether anything moved and the next
    /// timer. Returns at once if another thread is already doing this.
    pub(crate) fn progress(&self) -> (bool, Option<Instant>) {
        let Ok(mut backend) = self.backend.try_lock() else {
            return (false, None);
        };
        let now = self.now();
        let mut out: Vec<Transmit> = Vec::new();
        let (received, next_timer) = {
            let mut ep = self.engine();
            let mut received = 0;
            for _ in 0..4 {
                let n = backend
                    .recv(|from, _port, data| ep.handle_datagram(now, from, data))
                    .unwrap_or(0);
                received += n;
                if n < BATCH {
                    break;
                }
            }
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while out.len() < BATCH {
                match ep.poll_transmit(now) {
                    Some(t) => out.push(t),
                    None => break,
                }
            }
            (received, ep.poll_timeout())
        };
        let worked = received > 0 || !out.is_empty();
        if !out.is_empty() {
            send_all(&mut backend, &mut out, self.port);
        }
        (worked, next_timer)
    }
}

/// The driver loop; returns when `stop` is set.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut idle: u32 = 0;
    let mut seen_kick = 0;
    while !shared.stop.load(Ordering::Acquire) {
        let (worked, next_timer) = shared.progress();
        let kick = shared.kick.load(Ordering::Acquire);
        if worked || kick != seen_kick {
            seen_kick = kick;
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        back_off(idle, next_timer.map(|t| t.since(shared.now())));
    }
}

fn send_all(backend: &mut UdpBackend, out: &mut Vec<Transmit>, port: u16) {
    // Group by source port so that each sendmmsg carries one flow's packets.
    out.sort_by_key(|t| t.path.udp_src_port);
    let mut batch: Vec<OutDatagram<'_>> = out
        .iter_mut()
        .filter(|t| !t.data.is_empty())
        .map(|t| OutDatagram {
            remote: t.path.remote,
            remote_port: port,
            src_port: t.path.udp_src_port,
            transport: &mut t.data,
        })
        .collect();
    // A full socket buffer drops what did not fit, as a congested link
    // would; the engine's retransmission recovers it.
    let _ = backend.send(&mut batch);
    drop(batch);
    out.clear();
}

/// Spins, then yields, then sleeps briefly (never past the next timer).
fn back_off(idle: u32, until_timer: Option<Duration>) {
    if idle < 200 {
        std::hint::spin_loop();
    } else if idle < 2_000 {
        std::thread::yield_now();
    } else {
        let cap = Duration::from_micros(if idle < 20_000 { 20 } else { 200 });
        std::thread::sleep(until_timer.map_or(cap, |t| t.min(cap)));
    }
}
