//! When the driver thread works and when it waits: the application's
//! polling streaks, standing back for them, and backing off when idle.
//!
//! The driver thread runs rounds in a loop, busy-polling while there is
//! traffic and, when there is none, backing off: spin, yield, then sleep in
//! the kernel until a datagram arrives, the application kicks (a post) or
//! the next engine timer is due. The API runs a round too when the
//! application polls, so a busy-polling application makes progress without
//! waiting for the driver thread to be scheduled (on a machine with fewer
//! cores than spinning threads, that wait is what dominates latency); while
//! it does, the driver thread stands back (sleeps of up to 10 ms instead of
//! spinning), so that a process has one busy thread, not two, competing for
//! the cores.
//!
//! Standing back must never leave the peer waiting on an application that
//! has stopped polling, so it applies only to an application polling in a
//! tight loop, judged by time, not by a flag: polls less than
//! [`APP_ACTIVE`] apart make a streak, and the driver stands back only
//! while a streak at least [`APP_ACTIVE`] long is still going, for as long
//! as the streak has lasted (capped at [`STAND_BACK`]). An application that
//! polls once a millisecond never forms a streak, so the driver serves its
//! peer at full speed; one that spun for a second and then stops leaves the
//! driver away for at most 10 ms, once. A thread about to block
//! ([`crate::CompletionQueue::wait`], or arming a CQ before waiting on its
//! channel) ends the streak and wakes the driver at once: a blocked waiter
//! never counts as polling.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Shared;

/// An application thread that polls in vain this many times in a row
/// yields its CPU once (see [`Shared::app_progress`]).
const YIELD_EVERY: u64 = 1024;

/// Application polls less than this apart are one tight loop (a streak);
/// the driver thread stands back only while the last poll is this recent
/// and the streak at least this long.
const APP_ACTIVE: Duration = Duration::from_micros(200);

/// How recent the last poll must be on a single CPU (the streak's gap and
/// length stay [`APP_ACTIVE`]), longer than a scheduler time slice: there the
/// application cannot run while the driver thread does, so its last round
/// always looks old when the driver wakes, and with the short window both
/// threads took turns busy-polling the one CPU (the 8-byte latency between
/// two ferroce processes in a 1-vCPU guest was 2-5 times rxe's).
const APP_ACTIVE_ONE_CPU: Duration = Duration::from_millis(10);

/// The longest the driver thread sleeps at a time while it stands back:
/// each wake-up takes a core from a spinning application thread, and the
/// application moves the engine meanwhile. With two processes
/// busy-polling on 2 cores, the 8-byte WRITE latency's p99 was 16-19 µs at
/// 1 ms and 5.1-5.5 µs at 10 ms (the raw UDP ping-pong's: about 5 µs).
/// When the application stops polling, the driver takes over within this
/// long, sooner if an engine timer falls due ([`Shared::stand_back`]);
/// responses the application's last round left owed wait that long.
const STAND_BACK: Duration = Duration::from_millis(10);

/// The longest an idle driver sleeps: a packet, a kick and the next timer
/// end the sleep sooner.
const MAX_SLEEP: Duration = Duration::from_millis(5);

/// Idle rounds in a row that the driver thread spins through, then yields
/// through up to [`YIELD_UNTIL`], before it sleeps.
const SPIN_UNTIL: u32 = 200;
const YIELD_UNTIL: u32 = 2_000;

/// The driver loop; returns when `stop` is set.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut idle: u32 = 0;
    let mut seen_kick = 0;
    while !shared.stop.load(Ordering::Acquire) {
        if let Some(spinning) = shared.app_spinning_for() {
            // The application is polling and so moving the engine; a timer
            // that falls due is run by its next round. `app_blocks` ends
            // the nap early.
            let _ = shared.sleeper.nap(shared.stand_back(spinning));
            continue;
        }
        let (worked, next_timer) = shared.progress();
        let kick = shared.kick.load(Ordering::SeqCst);
        if worked || kick != seen_kick {
            seen_kick = kick;
            idle = 0;
            continue;
        }
        idle = idle.saturating_add(1);
        shared.back_off(idle, seen_kick, next_timer.map(|t| t.since(shared.now())));
    }
}

impl Shared {
    /// A round of progress run by an application call (`poll`), which
    /// also tells the driver thread that the application is busy-polling.
    ///
    /// Every [`YIELD_EVERY`] rounds in a row that moved nothing, the thread
    /// yields its CPU: on loopback the kernel may finish delivering packets
    /// in its softirq thread, which threads that only spin can starve on a
    /// busy machine. (On the 2-core CI machine with a TCG guest running,
    /// about one 1-QP WRITE run in twenty saw every packet arrive and yet
    /// no ACK for 67 ms, a retransmission timeout; this is the likely cause,
    /// not a proven one.)
    pub(crate) fn app_progress(&self) {
        let now = self.now();
        let t = now.as_nanos().max(1);
        let last = self.app_progress.swap(t, Ordering::Relaxed);
        if last == 0 || t.saturating_sub(last) >= APP_ACTIVE.as_nanos() as u64 {
            self.app_streak.store(t, Ordering::Relaxed);
        }
        // Only a tight loop holds responses back: its next poll, a moment
        // away, sends them. After an isolated poll (an application that
        // sleeps between polls) they would wait for the driver thread,
        // which the round's receive did not wake.
        let tight_loop = self.app_spinning_at(t).is_some();
        if self.progress_at(now, tight_loop).0 {
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
    /// the engine, so the driver thread stops standing back, now.
    pub(crate) fn app_blocks(&self) {
        if self.app_progress.swap(0, Ordering::Relaxed) != 0 {
            self.sleeper.wake();
        }
    }

    /// How recent the application's last poll must be for it to count as
    /// still polling.
    fn window(&self) -> Duration {
        if self.one_cpu {
            APP_ACTIVE_ONE_CPU
        } else {
            APP_ACTIVE
        }
    }

    /// How long the application has been polling in a tight loop: its
    /// last poll is within the window and its streak (polls less than
    /// [`APP_ACTIVE`] apart) at least [`APP_ACTIVE`] long; `None` if it is
    /// not. On one CPU the window is longer (the application is not
    /// running while the driver thread is), but a streak is not: an
    /// application that sleeps 1 ms between polls is no tight loop there
    /// either.
    fn app_spinning_for(&self) -> Option<Duration> {
        self.app_spinning_at(self.now().as_nanos())
    }

    /// [`app_spinning_for`](Self::app_spinning_for) at `now` (ns), for a
    /// caller that has just read the clock (a poll reads it once).
    fn app_spinning_at(&self, now: u64) -> Option<Duration> {
        let window = self.window().as_nanos() as u64;
        let gap = APP_ACTIVE.as_nanos() as u64;
        let last = self.app_progress.load(Ordering::Relaxed);
        let streak = self.app_streak.load(Ordering::Relaxed);
        // The streak's length runs to its last poll: time since then is
        // not polling.
        let length = last.saturating_sub(streak);
        let spinning = last != 0 && now.saturating_sub(last) < window;
        (spinning && streak != 0 && length >= gap).then(|| Duration::from_nanos(length))
    }

    /// How long to sleep while standing back for an application that has
    /// been spinning for `spinning`: as long again (it has likely as long
    /// to go), within [the window, [`STAND_BACK`]], and until the
    /// engine's next timer if that is sooner (should the application stop
    /// polling meanwhile, the timer is then not late), but not less than
    /// the window in which an active application runs it itself.
    fn stand_back(&self, spinning: Duration) -> Duration {
        let window = self.window();
        let d = spinning.clamp(window, STAND_BACK);
        let timer = self.io.try_lock().ok().and_then(|io| io.next_timer);
        timer.map_or(d, |t| t.since(self.now()).clamp(window, d))
    }
}

/// What the driver thread does after a round that moved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdleStep {
    Spin,
    Yield,
    Sleep,
}

impl IdleStep {
    /// After `idle` such rounds in a row: spin, then yield, then sleep;
    /// never spin on one CPU.
    fn after(idle: u32, one_cpu: bool) -> Self {
        if idle >= YIELD_UNTIL {
            Self::Sleep
        } else if idle < SPIN_UNTIL && !one_cpu {
            Self::Spin
        } else {
            Self::Yield
        }
    }
}

impl Shared {
    /// Spins, then yields, then sleeps in the kernel until a datagram
    /// arrives, the application kicks (`seen_kick` is the last kick this
    /// thread has acted on), or the next timer is due.
    fn back_off(&self, idle: u32, seen_kick: u64, until_timer: Option<Duration>) {
        match IdleStep::after(idle, self.one_cpu) {
            IdleStep::Spin => std::hint::spin_loop(),
            IdleStep::Yield => std::thread::yield_now(),
            IdleStep::Sleep => self.sleep(seen_kick, until_timer),
        }
    }

    /// Sleeps until a datagram arrives, the application kicks, or
    /// `until_timer` (at most [`MAX_SLEEP`]).
    fn sleep(&self, seen_kick: u64, until_timer: Option<Duration>) {
        self.sleeping.store(true, Ordering::SeqCst);
        // A kick between the last round and the flag above did not wake
        // us: do not sleep through it.
        if self.kick.load(Ordering::SeqCst) == seen_kick {
            let d = until_timer.map_or(MAX_SLEEP, |t| t.min(MAX_SLEEP));
            let _ = self
                .sleeper
                .sleep_on(std::os::fd::AsFd::as_fd(&self.rx_wait), d);
        }
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_driver_spins_then_yields_then_sleeps() {
        assert_eq!(IdleStep::after(0, false), IdleStep::Spin);
        assert_eq!(IdleStep::after(SPIN_UNTIL - 1, false), IdleStep::Spin);
        assert_eq!(IdleStep::after(SPIN_UNTIL, false), IdleStep::Yield);
        assert_eq!(IdleStep::after(YIELD_UNTIL - 1, false), IdleStep::Yield);
        assert_eq!(IdleStep::after(YIELD_UNTIL, false), IdleStep::Sleep);
        // On one CPU a spin only delays the thread that would make progress.
        assert_eq!(IdleStep::after(0, true), IdleStep::Yield);
    }
}
