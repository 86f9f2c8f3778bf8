//! When the driver thread works and when it waits.
//!
//! The driver thread is the device's engine, as a NIC is: it runs a round
//! of progress whenever there is work (a datagram, a post, a timer) and
//! never waits for the application. Idle, it blocks in the kernel on the
//! receive socket (or ring) and on its doorbell until a datagram arrives,
//! an API call rings, or the next timer is due. It first spins for about
//! 30 µs, or, where its application blocks in waits and it has a core to
//! itself, for up to a few milliseconds ([`Spin`]).
//!
//! An application that polls a CQ also runs rounds itself
//! ([`Shared::app_progress`]). That is measured to pay: with the rounds
//! left to the driver thread alone, perftest's `ib_write_lat` between two
//! processes on a 2-core machine took a typical 139 µs instead of 7.7 µs,
//! since each packet then waits for a thread wake-up, which costs tens of
//! microseconds on a virtual machine whose cores are busy. The two never
//! wait on each other's rounds: an application's round is skipped while
//! another runs, and the driver runs its round after the application's.
//!
//! While the application polls (its last poll within [`APP_ACTIVE`]), the
//! driver thread stands back, since the polls receive and send: it
//! neither spins nor sleeps on the socket (a spinning or woken driver
//! beside a spinning application is two busy threads for one job, and on
//! a machine with fewer cores than busy threads latency jumped to a
//! scheduler time slice), and posts do not ring its doorbell (a system
//! call on the critical path of every ping-pong). It naps instead, from
//! [`OWED_BOUND`] up to [`NAP_MAX`], and after each nap takes over if the
//! application left anything: it did not poll during the nap, a datagram
//! waits unreceived (an application that polls memory between its CQ
//! polls, as `ib_write_lat` does, receives nothing meanwhile), or a timer
//! is due (a held response's among them). So what an application's last
//! round left owed (an ACK, a READ response, a post) goes out within two
//! naps however the application goes on (and within two [`OWED_BOUND`]s
//! where the polls have been leaving work); the ACK of a message that
//! completes a receive goes in the round that received it (see
//! [`Shared`]'s round). These bounds are the timer's: on a virtual machine
//! whose idle cores halt, a timed wait can end milliseconds late (on the
//! 2-core CI machine, an 80 µs sleep takes a median 179 µs and a 99th
//! percentile 2.6 ms when the machine is otherwise idle).
//!
//! On a single CPU (affinity, quota or machine) the application and the
//! driver cannot run at once, so the application counts as polling for
//! longer ([`APP_ACTIVE_ONE_CPU`]), naps grow up to
//! [`NAP_MAX_ONE_CPU`], and a datagram waiting after a nap is left to the
//! application's next poll: each nap's wake-up preempts the application,
//! and with the two-core rules `ib_write_lat` pinned to one CPU took 4 ms
//! a round trip instead of 9 us.
//!
//! A thread about to block ([`crate::CompletionQueue::wait`], or arming a
//! CQ before waiting on its channel) ends the polling and rings at once:
//! a blocked waiter never counts as polling.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Shared;

/// An application thread that polls in vain this many times in a row
/// yields its CPU once (see [`Shared::app_progress`]).
const YIELD_EVERY: u64 = 1024;

/// An application whose last poll is this recent counts as polling: the
/// driver thread stands back for it.
const APP_ACTIVE: Duration = Duration::from_micros(200);

/// How recent the last poll must be on a single CPU, longer than a
/// scheduler time slice: there the application cannot run while the
/// driver thread does, so its last poll always looks old when the driver
/// wakes, and with [`APP_ACTIVE`] both threads took turns polling the one
/// CPU (in the rig's 1-vCPU guests, `ib_write_lat` between two ferroce
/// processes took 3 to 5 times rxe's t_typical). Whether the application
/// still polls after a nap is told by its polls during the nap, not by
/// this window, so what it leaves owed is still taken over after a nap.
const APP_ACTIVE_ONE_CPU: Duration = Duration::from_millis(10);

/// The driver thread's first nap beside a polling application, and the
/// one it returns to when a nap finds work left. Each nap's wake-up takes
/// a core from a spinning application, so the length is a trade: for 8-byte SEND ping-pongs between two processes on two
/// cores, naps of 50 µs cost about 8 µs of average latency and naps of
/// 100-200 µs about 4 µs (against 10 ms naps), while a datagram that a
/// memory-polling application leaves waits up to the nap.
pub(super) const OWED_BOUND: Duration = Duration::from_micros(80);

/// The longest nap beside a polling application: naps double from
/// [`OWED_BOUND`] up to this while each finds that the polls took
/// everything, and drop back to [`OWED_BOUND`] when one finds work left.
/// The periodic wake-ups of short naps take cores from the threads that
/// do the work: a client polling in a tight loop against a passive server
/// that blocks in `wait` lost a quarter to a half of its throughput with
/// 80 µs naps throughout. Longer naps (1 ms) left `ib_write_lat`'s WRITEs
/// that arrive while it polls memory waiting that long.
const NAP_MAX: Duration = Duration::from_micros(320);

/// [`NAP_MAX`] on a single CPU: there a nap's wake-up preempts the
/// application, which moves the engine itself while it polls.
const NAP_MAX_ONE_CPU: Duration = Duration::from_millis(10);

/// The longest an idle driver sleeps with no timer armed. A datagram, the
/// doorbell and the next timer end the sleep sooner; this only bounds how
/// long a lost wake-up could go unnoticed.
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// Idle rounds in a row that the driver thread spins through at most
/// before it sleeps, where it may spin at all ([`Shared::may_spin`]), its
/// application blocks in waits rather than polls, and no other thread
/// waits for its core ([`Spin`]): a few milliseconds. A sleeping driver's
/// wake-up costs tens of microseconds, and milliseconds on a virtual
/// machine whose idle cores halt, so a passive peer's driver that sleeps
/// between a sender's bursts slows the sender down.
const SPIN_ROUNDS: u32 = 2_000;

/// Otherwise (an application that polls, or a kernel that does not say
/// how long the driver waits for its core) the driver spins this many
/// rounds only (about 30 µs): longer spins, beside an application that
/// polls memory between its CQ polls (`ib_write_lat`), made four busy
/// threads of two processes on two cores, and the run-queue wait caught
/// that too late (a worst run of 30 averaging 9-11 times the median
/// against 1.4 times).
const SPIN_ROUNDS_BLIND: u32 = 20;

/// A spinning driver reads its run-queue wait every this many rounds.
const SPIN_CHECK_EVERY: u32 = 16;

/// Run-queue wait during one spin that shows another thread wants the
/// driver's core: the spin ends, and no spin starts for
/// [`SPIN_BACK_OFF`].
const CONTENDED: Duration = Duration::from_micros(20);
const SPIN_BACK_OFF: Duration = Duration::from_secs(1);

/// How precisely the driver thread's naps end: Linux lets a thread's timed
/// waits run late by its timer slack, 50 µs by default, which would add
/// most of [`OWED_BOUND`] again.
const TIMER_SLACK: Duration = Duration::from_micros(1);

/// The driver loop; returns when `stop` is set.
pub(crate) fn run(shared: Arc<Shared>) {
    ferroce_io::wait::set_timer_slack(TIMER_SLACK);
    let mut spin = Spin::new();
    let mut nap = OWED_BOUND;
    let mut idle: u32 = 0;
    let mut seen_kick = 0;
    while !shared.stop.load(Ordering::Acquire) {
        if shared.app_polling() {
            // Posts made meanwhile are the application's polls' to send.
            seen_kick = shared.kick.load(Ordering::SeqCst);
            let since = shared.now().as_nanos();
            shared.stand_back(seen_kick, nap);
            if shared.app_polled_since(since) && !shared.work_waiting() {
                // The polls take everything: look less often.
                nap = (nap * 2).min(shared.nap_max());
                continue;
            }
            nap = OWED_BOUND;
        }
        let (worked, next_timer) = shared.progress_driver();
        let kick = shared.kick.load(Ordering::SeqCst);
        if worked || kick != seen_kick {
            seen_kick = kick;
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        if shared.may_spin() && spin.goes_on(idle, shared.now().as_nanos(), shared.app_waits()) {
            std::hint::spin_loop();
        } else if !shared.app_polling() {
            shared.sleep(seen_kick, next_timer.map(|t| t.since(shared.now())));
        }
    }
}

/// Whether an idle driver goes on spinning: for up to [`SPIN_ROUNDS`]
/// idle rounds, unless its run-queue wait shows another thread waiting
/// for its core, on a core of its own in effect. That is how it tells an
/// application spinning on memory (which no poll reveals) on its core
/// from a core to spare.
struct Spin {
    wait: Option<ferroce_io::wait::RunQueueWait>,
    /// The run-queue wait when the current spin began.
    start: u64,
    /// No spin before this (ns since the device's epoch).
    banned_until: u64,
}

impl Spin {
    fn new() -> Self {
        Self {
            wait: ferroce_io::wait::RunQueueWait::of_this_thread(),
            start: 0,
            banned_until: 0,
        }
    }

    /// After `idle` idle rounds in a row (from 1), at `now` (ns); `long`
    /// where the application blocks in waits rather than polls, so that
    /// the driver is the process's one busy thread.
    fn goes_on(&mut self, idle: u32, now: u64, long: bool) -> bool {
        let Some(wait) = self.wait.as_ref().filter(|_| long) else {
            return idle < SPIN_ROUNDS_BLIND;
        };
        if now < self.banned_until || idle >= SPIN_ROUNDS {
            return false;
        }
        if idle == 1 {
            self.start = wait.waited_ns().unwrap_or(u64::MAX);
        } else if idle.is_multiple_of(SPIN_CHECK_EVERY) {
            let waited = wait.waited_ns().unwrap_or(u64::MAX);
            if waited.saturating_sub(self.start) > CONTENDED.as_nanos() as u64 {
                self.banned_until = now + SPIN_BACK_OFF.as_nanos() as u64;
                return false;
            }
        }
        true
    }
}

impl Shared {
    /// A round of progress run by an application call (`poll`), which
    /// also tells the driver thread that the application is polling.
    ///
    /// Every [`YIELD_EVERY`] rounds in a row that moved nothing, the thread
    /// yields its CPU: on loopback the kernel may finish delivering packets
    /// in its softirq thread, which threads that only spin can starve on a
    /// busy machine.
    pub(crate) fn app_progress(&self) {
        let now = self.now();
        self.app_progress
            .store(now.as_nanos().max(1), Ordering::Relaxed);
        // The round may hold responses back for the application's next
        // request: its next poll sends them, or the driver within
        // OWED_BOUND.
        if self.progress_at(now, true).0 {
            self.app_idle.store(0, Ordering::Relaxed);
        } else if self.one_cpu
            || self.app_idle.fetch_add(1, Ordering::Relaxed) % YIELD_EVERY == YIELD_EVERY - 1
        {
            // On one CPU, every poll in vain yields: what it waits for can
            // only come from a thread that is not running.
            std::thread::yield_now();
        }
    }

    /// The application is about to block (in a wait): it no longer moves
    /// the engine, so the driver thread takes everything over, now.
    pub(crate) fn app_blocks(&self) {
        if self.app_progress.swap(0, Ordering::Relaxed) != 0 {
            self.sleeper.wake();
        }
    }

    /// The longest nap beside a polling application: [`NAP_MAX`], or on one
    /// CPU [`NAP_MAX_ONE_CPU`].
    fn nap_max(&self) -> Duration {
        if self.one_cpu {
            NAP_MAX_ONE_CPU
        } else {
            NAP_MAX
        }
    }

    /// Whether the application polled within [`APP_ACTIVE`] (on one CPU,
    /// [`APP_ACTIVE_ONE_CPU`]).
    fn app_polling(&self) -> bool {
        let window = if self.one_cpu {
            APP_ACTIVE_ONE_CPU
        } else {
            APP_ACTIVE
        };
        let last = self.app_progress.load(Ordering::Relaxed);
        last != 0 && self.now().as_nanos().saturating_sub(last) < window.as_nanos() as u64
    }

    /// Whether the application waits rather than polls: it has not polled
    /// since it last blocked (or ever). An application that polls memory
    /// between its CQ polls, which no call reveals, is not one.
    fn app_waits(&self) -> bool {
        self.app_progress.load(Ordering::Relaxed) == 0
    }

    /// Whether the application polled after `since` (ns since `epoch`):
    /// then its next round, a moment away, sends what its last one left.
    fn app_polled_since(&self, since: u64) -> bool {
        self.app_progress.load(Ordering::Relaxed) > since
    }

    /// Whether a polling application has left the driver something it
    /// does not take itself: a datagram not yet received (a CQ polled in a
    /// tight loop takes each within a microsecond or so; memory polled
    /// between CQ polls takes none), or a timer due (a held response's
    /// among them). On one CPU a datagram waiting does not count: the
    /// application could not run while the driver did, so it will receive
    /// it at its next poll, and counting it kept the driver's naps at
    /// their shortest, a preempting wake-up every [`OWED_BOUND`].
    fn work_waiting(&self) -> bool {
        self.timer_at.load(Ordering::Relaxed) <= self.now().as_nanos()
            || (!self.one_cpu
                && ferroce_io::wait::readable(
                    std::os::fd::AsFd::as_fd(&self.rx_wait),
                    Duration::ZERO,
                )
                .unwrap_or(true))
    }

    /// Naps, blind to the socket, while a polling application receives:
    /// `nap` ([`OWED_BOUND`] to [`NAP_MAX`]), less if a timer falls due
    /// sooner; a ring ends it.
    fn stand_back(&self, seen_kick: u64, nap: Duration) {
        let now = self.now().as_nanos();
        let timer = self.timer_at.load(Ordering::Relaxed).saturating_sub(now);
        let d = nap.min(Duration::from_nanos(timer));
        // Posts need not ring: the polls send them, and this nap ends
        // within NAP_MAX anyway.
        self.wakes_at.store(0, Ordering::SeqCst);
        self.sleeping.store(true, Ordering::SeqCst);
        if self.kick.load(Ordering::SeqCst) == seen_kick && !d.is_zero() {
            let _ = self.sleeper.nap(d);
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// Whether an idle driver may spin: not on one CPU (the spin would
    /// only delay the thread that makes progress), not beside a polling
    /// application.
    fn may_spin(&self) -> bool {
        !self.one_cpu && !self.app_polling()
    }

    /// Sleeps in the kernel until a datagram arrives, the doorbell rings
    /// (`seen_kick` is the last kick this thread has acted on: one since
    /// ends the sleep at once), or `until_timer` (at most [`MAX_SLEEP`]).
    fn sleep(&self, seen_kick: u64, until_timer: Option<Duration>) {
        let d = until_timer.map_or(MAX_SLEEP, |t| t.min(MAX_SLEEP));
        self.wakes_at
            .store(self.now().after(d).as_nanos(), Ordering::SeqCst);
        self.sleeping.store(true, Ordering::SeqCst);
        // A kick between the last round and the flag above did not ring:
        // do not sleep through it.
        if self.kick.load(Ordering::SeqCst) == seen_kick && !d.is_zero() {
            let _ = self
                .sleeper
                .sleep_on(std::os::fd::AsFd::as_fd(&self.rx_wait), d);
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// Whether new work must ring the doorbell: the driver sleeps and
    /// would not wake within [`OWED_BOUND`] on its own.
    pub(super) fn must_ring(&self) -> bool {
        self.sleeping.load(Ordering::SeqCst)
            && self.wakes_at.load(Ordering::SeqCst) > self.now().after(OWED_BOUND).as_nanos()
    }
}
