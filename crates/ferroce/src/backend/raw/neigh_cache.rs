//! Peers' MAC addresses on one interface, for the raw device's frames:
//! learnt from the kernel's neighbour table (`ferroce_io::route::neigh`)
//! and kept fresh as a NIC driver's neighbour handling keeps them.
//!
//! Contract:
//! * [`NeighCache::resolve`] (the API, when a path is set) asks the
//!   kernel and waits for it; [`NeighCache::lookup`] (the driver, per
//!   packet) never talks to the kernel: a known peer's MAC, or `None`
//!   after handing the peer to the cache's thread.
//! * A thread of the cache's own ([`NeighCache::start`]) asks the kernel
//!   for the peers the driver lacked, every [`RETRY_RESOLVE`] until it
//!   knows them (then it wakes the driver, which sends what it parked) or
//!   [`WANT_FOR`] has passed; at most [`MAX_WANTED`] at a time, so that
//!   MADs from many (spoofed) sources cost the driver nothing and the
//!   thread a bounded amount.
//! * The same thread, every [`TICK`], re-asks the kernel for every
//!   entry used within [`REFRESH_AFTER`] whose answer is older than that
//!   (`RTM_GETNEIGH`; a stale kernel entry is also re-confirmed with
//!   `NTF_USE`, since frames sent through a packet socket never pass the
//!   kernel's neighbour code that would confirm it for its own traffic).
//!   A new MAC (the peer's address moved, or its interface changed its
//!   MAC and announced it) is used from then on; a peer the kernel is
//!   still resolving keeps its last MAC meanwhile. So a change reaches the
//!   frames within [`REFRESH_AFTER`] + [`TICK`] of the kernel learning it.
//! * Entries unused for [`FORGET_AFTER`] are dropped (a later packet to
//!   the peer resolves it again, parked meanwhile), so that a device that
//!   talked to many peers once keeps no more than it uses.
//! * The thread holds the cache weakly and ends within a tick of the
//!   device closing.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use ferroce_io::route::neigh;

/// How long a driver round waits before asking the kernel again for a
/// peer it could not resolve.
pub(crate) const RETRY_RESOLVE: Duration = Duration::from_millis(5);

/// An entry in use is re-asked of the kernel once its answer is this old.
pub(crate) const REFRESH_AFTER: Duration = Duration::from_secs(5);

/// An entry not used for this long is dropped.
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(60);

/// How often the refresh thread looks at the entries.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// Peers the driver lacked, kept at most this many (more are not asked
/// for until some are known or given up).
pub(crate) const MAX_WANTED: usize = 1024;

/// How long the thread asks for a peer the driver lacked (the driver drops
/// what it parked for it after as long).
pub(crate) const WANT_FOR: Duration = Duration::from_secs(1);

/// The neighbour cache's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeighStats {
    /// Entries re-asked of the kernel by the refresh thread.
    pub refreshed: u64,
    /// Refreshes that found a new MAC for the peer.
    pub mac_changes: u64,
    /// Entries dropped, unused for `FORGET_AFTER`.
    pub forgotten: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    mac: [u8; 6],
    /// When the kernel last answered for it.
    checked: Instant,
    /// When a packet last went to it, to a refresh round's precision.
    used: Instant,
    /// A packet went to it since the last refresh round: the driver's
    /// per-packet lookup sets a flag rather than read the clock, and the
    /// round turns it into `used`.
    used_lately: bool,
}

/// What the thread calls when it learnt a peer the driver lacked.
struct Waker(Box<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waker")
    }
}

/// Peers' MAC addresses on one interface.
#[derive(Debug)]
pub(crate) struct NeighCache {
    pub(crate) interface: String,
    entries: Mutex<HashMap<IpAddr, Entry>>,
    /// Peers the driver lacked, and since when: the thread asks for them.
    wanted: Mutex<HashMap<IpAddr, Instant>>,
    /// Wakes the thread when `wanted` gains a peer.
    wake: Condvar,
    on_learn: OnceLock<Waker>,
    stats: Mutex<NeighStats>,
}

impl NeighCache {
    pub(crate) fn new(interface: &str) -> Self {
        Self {
            interface: interface.into(),
            entries: Mutex::default(),
            wanted: Mutex::default(),
            wake: Condvar::new(),
            on_learn: OnceLock::new(),
            stats: Mutex::default(),
        }
    }

    /// A cache for `interface` with its refresh thread running.
    pub(crate) fn start(interface: &str) -> io::Result<Arc<Self>> {
        let cache = Arc::new(Self::new(interface));
        let weak = Arc::downgrade(&cache);
        std::thread::Builder::new()
            .name("ferroce-neigh".into())
            .spawn(move || run(&weak))?;
        Ok(cache)
    }

    /// Makes the thread call `wake` when it learnt a peer the driver
    /// lacked (once; later calls are ignored).
    pub(crate) fn set_waker(&self, wake: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_learn.set(Waker(Box::new(wake)));
    }

    /// The MAC of `peer`, resolved now if not known, waiting up to
    /// `wait`; the error names the peer, the interface and what to check.
    pub(crate) fn resolve(&self, peer: IpAddr, wait: Duration) -> io::Result<[u8; 6]> {
        let peer = peer.to_canonical();
        if let Some(e) = lock(&self.entries).get_mut(&peer) {
            e.used_lately = true;
            return Ok(e.mac);
        }
        let mac = neigh::resolve(peer, &self.interface, wait)
            .map_err(|e| io::Error::new(io::ErrorKind::HostUnreachable, e))?;
        self.learn(peer, mac, Instant::now());
        Ok(mac)
    }

    fn learn(&self, peer: IpAddr, mac: [u8; 6], now: Instant) {
        let entry = Entry {
            mac,
            checked: now,
            used: now,
            used_lately: false,
        };
        lock(&self.entries).insert(peer, entry);
    }

    /// The MAC of `peer` if known; otherwise hands the peer to the thread
    /// (see the module docs) and returns `None`.
    pub(crate) fn lookup(&self, peer: IpAddr) -> Option<[u8; 6]> {
        let peer = peer.to_canonical();
        if let Some(e) = lock(&self.entries).get_mut(&peer) {
            e.used_lately = true;
            return Some(e.mac);
        }
        let mut wanted = lock(&self.wanted);
        if !wanted.contains_key(&peer) && wanted.len() < MAX_WANTED {
            wanted.insert(peer, Instant::now());
            self.wake.notify_one();
        }
        None
    }

    /// Asks `kernel` for each peer the driver lacked: learns those it
    /// knows (then calls the waker), gives up those wanted for
    /// [`WANT_FOR`].
    fn resolve_wanted(&self, now: Instant, mut kernel: impl FnMut(IpAddr) -> Option<[u8; 6]>) {
        let peers: Vec<(IpAddr, Instant)> = lock(&self.wanted)
            .iter()
            .map(|(p, since)| (*p, *since))
            .collect();
        let mut learnt = false;
        for (peer, since) in peers {
            let known = lock(&self.entries).contains_key(&peer);
            let mac = if known { None } else { kernel(peer) };
            if let Some(mac) = mac {
                self.learn(peer, mac, now);
                learnt = true;
            }
            if known || mac.is_some() || now.saturating_duration_since(since) >= WANT_FOR {
                lock(&self.wanted).remove(&peer);
            }
        }
        if learnt && let Some(w) = self.on_learn.get() {
            (w.0)();
        }
    }

    /// Waits up to `tick` for a wanted peer, or [`RETRY_RESOLVE`] if some
    /// are wanted already.
    fn wait_for_work(&self, tick: Duration) {
        let wanted = lock(&self.wanted);
        let _ = if wanted.is_empty() {
            self.wake.wait_timeout_while(wanted, tick, |w| w.is_empty())
        } else {
            self.wake.wait_timeout(wanted, RETRY_RESOLVE)
        };
    }

    /// One refresh round at `now`: drops the entries unused for
    /// [`FORGET_AFTER`], then asks `kernel` (outside the lock) for each
    /// entry in use whose answer is [`REFRESH_AFTER`] old; `None` (not
    /// resolved yet) keeps the MAC the entry had.
    pub(crate) fn refresh(&self, now: Instant, mut kernel: impl FnMut(IpAddr) -> Option<[u8; 6]>) {
        let due: Vec<IpAddr> = {
            let mut entries = lock(&self.entries);
            for e in entries.values_mut() {
                if std::mem::take(&mut e.used_lately) {
                    e.used = now;
                }
            }
            let before = entries.len();
            entries.retain(|_, e| now.saturating_duration_since(e.used) < FORGET_AFTER);
            lock(&self.stats).forgotten += (before - entries.len()) as u64;
            entries
                .iter()
                .filter(|(_, e)| {
                    now.saturating_duration_since(e.checked) >= REFRESH_AFTER
                        && now.saturating_duration_since(e.used) < REFRESH_AFTER
                })
                .map(|(peer, _)| *peer)
                .collect()
        };
        for peer in due {
            let answer = kernel(peer);
            let mut stats = lock(&self.stats);
            stats.refreshed += 1;
            let mut entries = lock(&self.entries);
            let Some(e) = entries.get_mut(&peer) else {
                continue;
            };
            e.checked = now;
            if let Some(mac) = answer
                && mac != e.mac
            {
                tracing::info!(%peer, interface = %self.interface, old = ?e.mac, new = ?mac,
                    "peer's MAC address changed");
                e.mac = mac;
                stats.mac_changes += 1;
            }
        }
    }

    /// The cache's counters.
    pub(crate) fn stats(&self) -> NeighStats {
        *lock(&self.stats)
    }

    /// How many peers the cache holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

/// The cache's thread while the cache lives: the peers the driver lacked
/// as soon as it lacks them, a refresh round every [`TICK`].
fn run(cache: &Weak<NeighCache>) {
    let mut last_round = Instant::now();
    loop {
        let Some(cache) = cache.upgrade() else {
            return;
        };
        cache.wait_for_work(TICK.saturating_sub(last_round.elapsed()));
        let interface = cache.interface.clone();
        let kernel = |peer| neigh::resolve(peer, &interface, Duration::ZERO).ok();
        let now = Instant::now();
        cache.resolve_wanted(now, kernel);
        if now.saturating_duration_since(last_round) >= TICK {
            cache.refresh(now, kernel);
            last_round = now;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    const Q: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3));
    const OLD: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const NEW: [u8; 6] = [2, 0, 0, 0, 0, 9];

    fn mac_of(c: &NeighCache, peer: IpAddr) -> Option<[u8; 6]> {
        lock(&c.entries).get(&peer).map(|e| e.mac)
    }

    fn use_at(c: &NeighCache, peer: IpAddr, at: Instant) {
        lock(&c.entries).get_mut(&peer).unwrap().used = at;
    }

    #[test]
    fn a_peer_the_driver_lacks_is_asked_for_off_its_thread_and_wakes_it() {
        let c = NeighCache::new("eth0");
        let woken = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let w = woken.clone();
        c.set_waker(move || {
            w.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        assert_eq!(c.lookup(P), None);
        assert_eq!(c.lookup(P), None, "asked for once");
        assert_eq!(lock(&c.wanted).len(), 1);
        let t0 = Instant::now();
        let mut asked = Vec::new();
        c.resolve_wanted(t0, |p| {
            asked.push(p);
            None
        });
        assert_eq!(
            (asked.len(), woken.load(std::sync::atomic::Ordering::SeqCst)),
            (1, 0)
        );
        c.resolve_wanted(t0, |_| Some(NEW));
        assert_eq!(woken.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(lock(&c.wanted).is_empty());
        assert_eq!(c.lookup(P), Some(NEW));
    }

    #[test]
    fn wanted_peers_are_bounded_and_given_up() {
        let c = NeighCache::new("eth0");
        for i in 0..MAX_WANTED as u32 + 10 {
            let peer = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            assert_eq!(c.lookup(peer), None);
        }
        assert_eq!(lock(&c.wanted).len(), MAX_WANTED);
        let later = Instant::now() + WANT_FOR;
        c.resolve_wanted(later, |_| None);
        assert!(lock(&c.wanted).is_empty(), "given up after WANT_FOR");
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn a_lookup_marks_the_entry_used_as_of_the_next_round() {
        let c = NeighCache::new("eth0");
        let t0 = Instant::now();
        c.learn(P, OLD, t0);
        c.learn(Q, OLD, t0);
        assert_eq!(c.lookup(P), Some(OLD));
        let at = t0 + REFRESH_AFTER * 2;
        let mut asked = Vec::new();
        c.refresh(at, |p| {
            asked.push(p);
            Some(OLD)
        });
        assert_eq!(asked, [P], "the looked-up entry only");
        asked.clear();
        // Not looked up since: idle for the next rounds.
        c.refresh(at + REFRESH_AFTER, |p| {
            asked.push(p);
            Some(OLD)
        });
        assert!(asked.is_empty(), "{asked:?}");
    }

    #[test]
    fn an_entry_in_use_is_re_asked_after_its_age_and_takes_a_new_mac() {
        let c = NeighCache::new("eth0");
        let t0 = Instant::now();
        c.learn(P, OLD, t0);
        let mut asked = Vec::new();
        let young = t0 + REFRESH_AFTER / 2;
        c.refresh(young, |p| {
            asked.push(p);
            Some(NEW)
        });
        assert!(asked.is_empty(), "re-asked before its age");
        let old_enough = t0 + REFRESH_AFTER;
        use_at(&c, P, old_enough - Duration::from_millis(1));
        c.refresh(old_enough, |p| {
            asked.push(p);
            Some(NEW)
        });
        assert_eq!(asked, [P]);
        assert_eq!(mac_of(&c, P), Some(NEW));
        let s = c.stats();
        assert_eq!((s.refreshed, s.mac_changes), (1, 1));
    }

    #[test]
    fn an_unanswered_refresh_keeps_the_mac_and_an_idle_entry_is_not_asked() {
        let c = NeighCache::new("eth0");
        let t0 = Instant::now();
        c.learn(P, OLD, t0);
        c.learn(Q, OLD, t0);
        let at = t0 + REFRESH_AFTER * 2;
        use_at(&c, P, at);
        let mut asked = Vec::new();
        c.refresh(at, |p| {
            asked.push(p);
            None
        });
        assert_eq!(asked, [P], "only the entry in use");
        assert_eq!(mac_of(&c, P), Some(OLD));
        assert_eq!(c.stats().mac_changes, 0);
    }

    #[test]
    fn entries_unused_for_long_are_forgotten() {
        let c = NeighCache::new("eth0");
        let t0 = Instant::now();
        c.learn(P, OLD, t0);
        c.learn(Q, OLD, t0);
        let later = t0 + FORGET_AFTER;
        use_at(&c, Q, later - Duration::from_secs(1));
        c.refresh(later, |_| Some(OLD));
        assert_eq!((mac_of(&c, P), mac_of(&c, Q)), (None, Some(OLD)));
        assert_eq!((c.len(), c.stats().forgotten), (1, 1));
    }

    #[test]
    fn the_refresh_thread_ends_with_the_cache() {
        let c = Arc::new(NeighCache::new("lo"));
        let weak = Arc::downgrade(&c);
        let thread = std::thread::spawn(move || run(&weak));
        drop(c);
        let start = Instant::now();
        while !thread.is_finished() {
            assert!(
                start.elapsed() < TICK * 3,
                "the refresh thread outlived its cache"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
