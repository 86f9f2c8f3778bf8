//! The driver: the one place that reads the real clock and moves bytes
//! between the backend (UDP, or raw Ethernet: [`crate::backend`]) and the
//! sans-IO engine, on its own thread, so
//! that ACKs, READ responses and retransmissions happen while the
//! application is busy elsewhere.
//!
//! The engine and the backend sit behind mutexes shared with the API
//! handles. One round of progress (timers, transmit, receive) is
//! [`Shared::progress`]; its system calls are made without the engine's
//! lock, which posts and polls take. The driver thread runs rounds in a
//! loop; the API runs one too when the application polls, so a
//! busy-polling application makes progress without waiting for the driver
//! thread to be scheduled. When the driver thread runs, stands back for a
//! polling application, or sleeps is [`pacing`]'s. Responses an
//! application round makes may wait a moment for the application's next
//! request ([`crate::hold`]); a poll with completions waiting and nothing
//! posted since the last round takes them without a round.
//!
//! Every round runs inside the device's `tracing` span (`device`, with
//! its address), whichever thread runs it, so the engine's events name the
//! device. A failed send is a warning the first time, debug after.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ferroce_core::{Endpoint, Instant, Transmit};
use ferroce_io::Sleeper;
use tracing::{Span, info_span};

use crate::backend::{Backend, NeighCache};
use crate::channel::ChannelInner;
use crate::hold::ResponseHold;

mod pacing;
pub(crate) use pacing::run;

/// The backend and what it could not send yet.
#[derive(Debug)]
pub(crate) struct Io {
    pub(crate) backend: Backend,
    /// Packets the engine gave out that found the socket buffer full: they
    /// go first next round, and until they are gone the engine is asked
    /// for no more (back-pressure instead of dropping our own packets).
    pending: Vec<Transmit>,
    /// Buffers of sent packets, given back to the engine at its next lock.
    spent: Vec<Vec<u8>>,
    /// Responses an application round held back.
    hold: ResponseHold,
    /// The engine's next timer as the last round left it (API calls between
    /// rounds arm none; a round that does, reads it again at its end).
    next_timer: Option<Instant>,
    /// A failed send has been logged as a warning (later ones go to debug).
    send_failed: bool,
}

/// What the API handles and the driver thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    engine: Mutex<Endpoint>,
    io: Mutex<Io>,
    /// Bumped by every API call that may create work for the driver.
    kick: AtomicU64,
    /// `kick` as the last round of progress found it when it began.
    round_kick: AtomicU64,
    /// When the application last ran a round of progress itself (ns since
    /// `epoch`); 0 if never, or if it blocked since.
    app_progress: AtomicU64,
    /// Application rounds in a row that moved nothing.
    app_idle: AtomicU64,
    stop: AtomicBool,
    /// The driver thread, idle, waits on the receive socket and this.
    sleeper: Sleeper,
    /// The driver thread is (about to be) waiting in `sleeper`.
    sleeping: AtomicBool,
    /// When that wait ends at the latest (ns since `epoch`).
    wakes_at: AtomicU64,
    /// The next timer as the last round left it (ns since `epoch`;
    /// `u64::MAX`: none), for a driver deciding without the `io` lock
    /// whether an application left it work.
    timer_at: AtomicU64,
    /// A duplicate of the backend's wait descriptor (readable when packets
    /// arrive), which the driver sleeps on without the `io` lock.
    rx_wait: std::os::fd::OwnedFd,
    /// This process may run on one CPU only (affinity, quota or machine):
    /// spinning then only delays the thread that would make progress.
    one_cpu: bool,
    epoch: std::time::Instant,
    /// The completion channel of each CQ created with one.
    channels: Mutex<HashMap<u32, Arc<ChannelInner>>>,
    /// Bumped (and `cq_waiters` notified) when a watched CQ gets a
    /// completion: threads blocked in `CompletionQueue::wait` sleep on it.
    cq_wakes: Mutex<u64>,
    cq_waiters: Condvar,
    /// The device's rdma_cm layer.
    pub(crate) cm: crate::cm::hub::CmHub,
    /// Asynchronous events taken from the engine after each round.
    pub(crate) async_events: crate::async_events::AsyncQueue,
    /// The device's span: what the engine logs during a round is inside it.
    pub(crate) span: Span,
    pub(crate) local: IpAddr,
    /// The port peers receive on.
    pub(crate) port: u16,
    /// Peers' MAC addresses, on the raw backend (`None` on UDP).
    pub(crate) neigh: Option<Arc<NeighCache>>,
}

impl Shared {
    pub(crate) fn new(
        engine: Endpoint,
        backend: Backend,
        neigh: Option<Arc<NeighCache>>,
        cm: crate::cm::hub::CmHub,
        local: IpAddr,
        port: u16,
    ) -> std::io::Result<Self> {
        // A descriptor of its own for the same file: the sleeping thread
        // waits on it without holding the backend's lock.
        let rx_wait = backend.wait_fd().try_clone_to_owned()?;
        Ok(Self {
            engine: Mutex::new(engine),
            io: Mutex::new(Io {
                backend,
                pending: Vec::new(),
                spent: Vec::new(),
                hold: ResponseHold::default(),
                next_timer: None,
                send_failed: false,
            }),
            kick: AtomicU64::new(0),
            round_kick: AtomicU64::new(0),
            app_progress: AtomicU64::new(0),
            app_idle: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            sleeper: Sleeper::new()?,
            sleeping: AtomicBool::new(false),
            wakes_at: AtomicU64::new(0),
            timer_at: AtomicU64::new(u64::MAX),
            rx_wait,
            one_cpu: std::thread::available_parallelism().is_ok_and(|n| n.get() == 1),
            epoch: std::time::Instant::now(),
            channels: Mutex::new(HashMap::new()),
            cq_wakes: Mutex::new(0),
            cq_waiters: Condvar::new(),
            cm,
            async_events: crate::async_events::AsyncQueue::new()?,
            span: info_span!("device", %local),
            local,
            port,
            neigh,
        })
    }

    /// The engine, locked. A panic while holding the lock cannot leave the
    /// engine half-updated in a way later calls rely on, so a poisoned lock
    /// is taken over rather than propagated.
    pub(crate) fn engine(&self) -> MutexGuard<'_, Endpoint> {
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The I/O side (backend, packets waiting), locked; a poisoned lock is
    /// taken over, as [`Self::engine`]'s.
    pub(crate) fn io(&self) -> MutexGuard<'_, Io> {
        self.io.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The UDP backend's counters.
    pub(crate) fn udp_stats(&self) -> ferroce_io::UdpStats {
        self.io
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .backend
            .udp_stats()
    }

    /// The raw backend's counters (`None` on the UDP backend).
    pub(crate) fn raw_stats(&self) -> Option<crate::backend::raw::RawDeviceStats> {
        self.io
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .backend
            .raw_stats()
    }

    /// Tells the driver there is new work, ringing its doorbell (a system
    /// call) only if it sleeps and would not wake soon on its own (see
    /// [`pacing`]).
    pub(crate) fn kick(&self) {
        self.kick.fetch_add(1, Ordering::SeqCst);
        if self.must_ring() {
            self.sleeper.wake();
        }
    }

    /// Whether an API call that may create work (a post) came since the
    /// last round of progress began.
    pub(crate) fn kicked_since_round(&self) -> bool {
        self.kick.load(Ordering::SeqCst) != self.round_kick.load(Ordering::SeqCst)
    }

    pub(crate) fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.sleeper.wake();
    }
}

/// How many datagrams to move per lock.
const BATCH: usize = 64;

/// Receive calls a round makes at most while each brings a full batch.
const RECV_CALLS: usize = 4;

impl Shared {
    /// Checks that this device can send on `path` before a QP or a UD send
    /// uses it: RoCE v1 needs the raw backend, and on the raw backend the
    /// peer's MAC address must resolve (waiting for the kernel's ARP or
    /// neighbour solicitation), as `ibv_modify_qp` and `ibv_create_ah`
    /// fail in rdma-core when the kernel cannot resolve the destination.
    pub(crate) fn check_path(&self, path: &ferroce_core::verbs::Path) -> std::io::Result<()> {
        use ferroce_core::verbs::RoceMode;
        match &self.neigh {
            None if path.roce == RoceMode::V1 => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a RoCE v1 path on a device of the UDP backend, which sends RoCE v2 only: \
                 open the device on the raw backend (DeviceConfig::backend = BackendKind::Raw, \
                 `--raw` in the ferroce tools) or pick a RoCE v2 GID index",
            )),
            None => Ok(()),
            Some(_)
                if path.roce == RoceMode::V2
                    && path.remote.to_canonical().is_ipv4()
                        != self.local.to_canonical().is_ipv4() =>
            {
                Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "a RoCE v2 path from {} to {}: an IP packet has one address family; \
                         open the device on an address of the peer's family (RoCE v1 GRHs \
                         carry either)",
                        self.local, path.remote
                    ),
                ))
            }
            // A group's MAC address comes from the group itself.
            Some(_) if ferroce_core::multicast_group(path.remote).is_some() => Ok(()),
            Some(neigh) => neigh
                .resolve(path.remote, crate::backend::raw::RESOLVE_WAIT)
                .map(drop),
        }
    }

    /// A few rounds of progress, to send what is owed before a QP or the
    /// device goes away: a round sends the responses (ACKs) that the
    /// previous round's receives made, so an application that stops right
    /// after its last poll would otherwise leave the peer's last request
    /// unacknowledged, retried until the peer gives up.
    pub(crate) fn flush(&self) {
        for _ in 0..4 {
            self.progress();
        }
    }

    /// [`flush`](Self::flush) that waits for a round the driver thread is
    /// running rather than leave the work to it: a QP about to be destroyed
    /// must not take its last ACK along (the C ABI's `ibv_destroy_qp` saw
    /// a peer's last SEND fail after its retries without it). Not for the
    /// driver thread itself (it would wait for its own round).
    pub(crate) fn flush_now(&self) {
        for _ in 0..3 {
            self.progress_now();
        }
    }

    /// One round of progress: run due timers, send what the engine has,
    /// then receive what is waiting. Returns whether anything moved and the
    /// next timer. Returns at once if another thread is already doing this.
    pub(crate) fn progress(&self) -> (bool, Option<Instant>) {
        self.progress_at(self.now(), false)
    }

    /// [`progress`](Self::progress) with the time already read; `hold` for
    /// a round an application polling in a tight loop runs (which may hold
    /// responses back).
    fn progress_at(&self, now: Instant, hold: bool) -> (bool, Option<Instant>) {
        let Ok(guard) = self.io.try_lock() else {
            return (false, None);
        };
        self.round(guard, now, hold)
    }

    /// The driver thread's round: after the one an application thread is
    /// running, if any (the driver must not skip its round for one that
    /// may have started before the work it woke for arrived).
    fn progress_driver(&self) -> (bool, Option<Instant>) {
        let guard = self.io.lock().unwrap_or_else(|p| p.into_inner());
        self.round(guard, self.now(), false)
    }

    /// A round of progress that waits for one another thread is running
    /// to finish rather than leave the work to it: for a caller that must
    /// know what it queued is on the wire when it returns (the CM's MADs,
    /// before an application may exit).
    pub(crate) fn progress_now(&self) {
        let guard = self.io.lock().unwrap_or_else(|p| p.into_inner());
        self.round(guard, self.now(), false);
    }

    fn round(
        &self,
        mut guard: MutexGuard<'_, Io>,
        now: Instant,
        hold: bool,
    ) -> (bool, Option<Instant>) {
        let io = &mut *guard;
        let _device = self.span.enter();
        self.round_kick
            .store(self.kick.load(Ordering::SeqCst), Ordering::SeqCst);
        // Send first: what the last round left (a full socket buffer), then
        // what the engine has now; then receive. What receiving makes (ACKs,
        // READ responses) waits for the next round, which comes at once
        // when this one moved anything: so a polling application sees new
        // data without first paying for their system call, and an ACK then
        // leaves with its next request. The exception is a message that
        // completes a receive (a SEND, a WRITE with immediate): its
        // receiver may act on it and stop polling, so its ACK goes in this
        // round, unless the application polls in a tight loop and its
        // requests have been carrying its answers (the hold pays: a
        // ping-pong, whose next request follows at once).
        let mut sent = self.transmit(io, now, hold);
        // The receive's system call is made without the engine's lock,
        // which application threads take to post and poll.
        let (mut received, mut messages) = (0, 0);
        for _ in 0..RECV_CALLS {
            io.backend.fetch();
            let d = io.backend.deliver(&mut self.engine(), now);
            received += d.packets;
            messages += d.messages;
            if d.packets < BATCH {
                break;
            }
        }
        if messages > 0 && !(hold && io.hold.pays()) {
            sent += self.transmit(io, now, hold);
        }
        let mut ep = self.engine();
        let mads: Vec<_> = std::iter::from_fn(|| ep.poll_mad()).collect();
        let wake = self.deliver_cq_events(&mut ep);
        self.async_events.collect(&mut ep);
        let engine_timer = ep.poll_timeout();
        drop(ep);
        if wake {
            self.wake_cq_waiters();
        }
        let cm_worked = self.cm_round(now, mads);
        // Packets held by a PFC pause go when it ends: wake then.
        let pause_end = io.backend.wake_in().map(|d| now.after(d));
        io.next_timer = [
            engine_timer,
            self.cm.next_timer(),
            pause_end,
            io.hold.releases_at(),
        ]
        .into_iter()
        .flatten()
        .min();
        self.timer_at.store(
            io.next_timer.map_or(u64::MAX, Instant::as_nanos),
            Ordering::Relaxed,
        );
        (received > 0 || sent > 0 || cm_worked, io.next_timer)
    }
}

impl Shared {
    /// Sends what the last round left (a full socket buffer), then what
    /// the engine has, through the response hold; returns how many went.
    fn transmit(&self, io: &mut Io, now: Instant, hold: bool) -> usize {
        let mut sent = 0;
        io.backend.send_parked();
        if !io.pending.is_empty() {
            sent += send_all(io, self.port);
        }
        if io.pending.is_empty() {
            let mut ep = self.engine();
            for b in io.spent.drain(..) {
                ep.recycle(b);
            }
            if io.next_timer.is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while io.pending.len() < BATCH {
                match ep.poll_transmit(now) {
                    Some(t) => io.pending.push(t),
                    None => break,
                }
            }
            drop(ep);
            io.hold.apply(&mut io.pending, now, hold);
        }
        if !io.pending.is_empty() {
            sent += send_all(io, self.port);
        }
        sent
    }
}

/// Completion notification: channels and blocked waiters.
impl Shared {
    /// Makes `channel` the one `cq`'s events go to.
    pub(crate) fn set_channel(&self, cq: u32, channel: Arc<ChannelInner>) {
        lock(&self.channels).insert(cq, channel);
    }

    /// Queues an event on the channel of each CQ whose arm fired; returns
    /// whether a watched CQ got a completion (its waiters are to be woken
    /// once the engine is unlocked).
    fn deliver_cq_events(&self, ep: &mut Endpoint) -> bool {
        let mut wake = false;
        ep.take_cq_events(|cq, fired| {
            wake |= fired.watch;
            if fired.notify
                && let Some(ch) = lock(&self.channels).get(&cq)
            {
                ch.push(cq);
            }
        });
        wake
    }

    /// The count of waiter wake-ups so far: read it before checking the
    /// CQ, and [`wait_for_cq`](Self::wait_for_cq) returns at once if a
    /// wake-up came since.
    pub(crate) fn cq_wakes(&self) -> u64 {
        *lock(&self.cq_wakes)
    }

    /// Blocks until the next waiter wake-up after `seen` (see
    /// [`cq_wakes`](Self::cq_wakes)) or `timeout`.
    pub(crate) fn wait_for_cq(&self, seen: u64, timeout: Duration) {
        let wakes = lock(&self.cq_wakes);
        let _ = self
            .cq_waiters
            .wait_timeout_while(wakes, timeout, |w| *w == seen);
    }

    fn wake_cq_waiters(&self) {
        *lock(&self.cq_wakes) += 1;
        self.cq_waiters.notify_all();
    }
}

/// A mutex whose data stays consistent across a panic (every holder makes
/// one-step updates), so a poisoned lock is taken over.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends what it can of `io.pending` and moves the buffers of what went
/// out to `io.spent`; what found the socket buffer full stays, in order.
/// Returns how many went out.
fn send_all(io: &mut Io, port: u16) -> usize {
    let Io {
        backend,
        pending: out,
        spent,
        send_failed,
        ..
    } = io;
    // Group by source port so that each sendmmsg carries one flow's packets
    // (stable: each flow keeps its order), requests before responses: a
    // new request is what a peer may be waiting on; an ACK can follow it.
    out.sort_by_key(|t| (t.path.udp_src_port, t.kind));
    let total = out.len();
    let n = backend.send(out, port, send_failed);
    spent.extend(out.drain(..n.min(total)).map(|t| t.data));
    n
}
