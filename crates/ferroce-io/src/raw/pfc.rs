//! Priority flow control (IEEE 802.1Qbb) on one port, without I/O: the
//! sender's side honours received PFC frames per priority, the receiver's
//! side turns a receive backlog into XOFF and XON frames. The caller
//! supplies the time (nanoseconds from any fixed origin), so the tests run
//! it on a fake clock.
//!
//! Contract:
//! * Honouring ([`Pfc::on_frame`], [`Pfc::is_paused`]): a PFC frame pauses
//!   each priority whose class-enable bit is set and which PFC is enabled
//!   on ([`PfcConfig::priorities`]) for its pause time, `quanta * 512` bit
//!   times at the link speed; a later frame replaces the time (a refresh
//!   extends, a zero time, XON, resumes at once). Priorities not named keep
//!   flowing. [`Pfc::next_resume`] is when the earliest pause ends, for a
//!   caller that must wake then instead of polling. An 802.3x PAUSE is
//!   counted and not honoured (RoCE fabrics run PFC; a link PAUSE would
//!   stop the CNPs and ACKs too). Any bytes are safe input: a frame only
//!   reaches here parsed, and every vector and time is valid.
//! * Sending ([`Pfc::observe_backlog`]): given the frames waiting per
//!   priority, it returns the PFC frame to send, if any: XOFF (the
//!   configured quanta) for an enabled priority whose backlog reached
//!   `xoff`; XON (time 0) once a paused one drains to `xon` or below; and
//!   while a priority stays above `xon`, XOFF again when half of the last
//!   pause time has gone (switches and NICs refresh before expiry, so the
//!   peer never resumes while the backlog is still high). One frame names
//!   every priority that changed.
//! * Counters per priority ([`PfcStats`]): PFC frames received that paused
//!   or resumed it, XOFF and XON sent, and time paused as the sender (to
//!   the pause's end, or to the XON).

use ferroce_wire::pfc::{BITS_PER_QUANTUM, MacControlRepr, PRIORITIES};

/// The link speed assumed when the interface does not report one
/// (`/sys/class/net/IF/speed` unreadable or -1), in Mbit/s. A veth reports
/// 10000 itself when up.
pub const DEFAULT_LINK_MBPS: u32 = 10_000;

/// PFC settings of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcConfig {
    /// The priorities PFC is on for (bit N: priority N), both honouring
    /// and sending.
    pub priorities: u8,
    /// Frames waiting for a priority at which it is paused (XOFF).
    pub xoff: u32,
    /// Frames waiting at or below which a paused priority resumes (XON).
    pub xon: u32,
    /// The pause time sent in an XOFF, in quanta of 512 bit times.
    pub pause_quanta: u16,
    /// The link speed in Mbit/s; `None` reads the interface's.
    pub link_mbps: Option<u32>,
}

impl Default for PfcConfig {
    /// Every priority; XOFF at 128 frames waiting, XON at 32 (the device's
    /// receive ring holds 512, each slot a frame or a super-frame of up to
    /// 64 packets); the longest pause (65,535 quanta: 3.4 ms
    /// at 10 Gbit/s), refreshed while needed.
    fn default() -> Self {
        Self {
            priorities: 0xff,
            xoff: 128,
            xon: 32,
            pause_quanta: u16::MAX,
            link_mbps: None,
        }
    }
}

impl PfcConfig {
    /// Checks the thresholds against a receive ring of `ring` frames; the
    /// error says which setting to change.
    pub fn check(&self, ring: u32) -> Result<(), String> {
        if self.xon >= self.xoff {
            return Err(format!(
                "PFC: the XON threshold ({}) must be below the XOFF threshold ({})",
                self.xon, self.xoff
            ));
        }
        if self.xoff >= ring {
            return Err(format!(
                "PFC: the XOFF threshold ({}) must be below the receive ring's {ring} frames, \
                 leaving room for what is in flight when the pause goes out",
                self.xoff
            ));
        }
        if self.pause_quanta == 0 {
            return Err("PFC: a pause time of 0 quanta pauses nothing; use 1-65535".into());
        }
        Ok(())
    }
}

/// Counters per priority (index = priority).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PfcStats {
    /// PFC frames received with a non-zero time for this priority.
    pub rx_pause: [u64; PRIORITIES],
    /// PFC frames received with time 0 (XON) for this priority.
    pub rx_resume: [u64; PRIORITIES],
    /// XOFF frames sent for this priority (refreshes included).
    pub tx_pause: [u64; PRIORITIES],
    /// XON frames sent for this priority.
    pub tx_resume: [u64; PRIORITIES],
    /// Time this priority's frames were held, in µs.
    pub paused_us: [u64; PRIORITIES],
    /// 802.3x PAUSE frames received (counted, not honoured).
    pub rx_link_pause: u64,
}

/// The length of `quanta` at `link_mbps`, in ns (512 bit times each).
pub fn quanta_nanos(quanta: u16, link_mbps: u32) -> u64 {
    u64::from(quanta) * BITS_PER_QUANTUM * 1000 / u64::from(link_mbps.max(1))
}

/// The speed of `interface` in Mbit/s as the kernel reports it, or `None`
/// (down, virtual without a speed, or unknown: -1).
pub fn interface_mbps(interface: &str) -> Option<u32> {
    let path = format!("/sys/class/net/{interface}/speed");
    let text = std::fs::read_to_string(path).ok()?;
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|&s| s > 0)?
        .try_into()
        .ok()
}

/// The PFC state of one port (see the module docs).
#[derive(Debug, Clone)]
pub struct Pfc {
    cfg: PfcConfig,
    link_mbps: u32,
    /// When each paused priority may send again.
    until: [Option<u64>; PRIORITIES],
    /// When each priority's current pause began.
    since: [u64; PRIORITIES],
    /// When the last XOFF for each priority went out (`None`: not paused).
    xoff_at: [Option<u64>; PRIORITIES],
    paused_ns: [u64; PRIORITIES],
    stats: PfcStats,
}

impl Pfc {
    /// A port of `link_mbps` Mbit/s (`cfg.link_mbps` wins when set).
    pub fn new(cfg: PfcConfig, link_mbps: u32) -> Self {
        Self {
            link_mbps: cfg.link_mbps.unwrap_or(link_mbps).max(1),
            cfg,
            until: [None; PRIORITIES],
            since: [0; PRIORITIES],
            xoff_at: [None; PRIORITIES],
            paused_ns: [0; PRIORITIES],
            stats: PfcStats::default(),
        }
    }

    pub fn config(&self) -> &PfcConfig {
        &self.cfg
    }
    pub fn link_mbps(&self) -> u32 {
        self.link_mbps
    }

    fn enabled(&self, priority: usize) -> bool {
        self.cfg.priorities & (1 << priority) != 0
    }

    /// Takes a received MAC control frame into account at `now`.
    pub fn on_frame(&mut self, repr: &MacControlRepr, now: u64) {
        self.expire(now);
        match *repr {
            MacControlRepr::Pfc { enabled, quanta } => {
                for (p, &q) in quanta.iter().enumerate() {
                    if enabled & (1 << p) == 0 {
                        continue;
                    }
                    if q == 0 {
                        self.stats.rx_resume[p] += 1;
                    } else {
                        self.stats.rx_pause[p] += 1;
                    }
                    if self.enabled(p) {
                        self.pause(p, q, now);
                    }
                }
            }
            MacControlRepr::Pause { .. } => self.stats.rx_link_pause += 1,
            MacControlRepr::Other { .. } => {}
        }
    }

    /// Pauses `p` for `quanta` from `now` (0: resumes it).
    fn pause(&mut self, p: usize, quanta: u16, now: u64) {
        if quanta == 0 {
            self.end_pause(p, now);
            return;
        }
        if self.until[p].is_none() {
            self.since[p] = now;
        }
        self.until[p] = Some(now.saturating_add(quanta_nanos(quanta, self.link_mbps)));
    }

    fn end_pause(&mut self, p: usize, at: u64) {
        if self.until[p].take().is_some() {
            self.paused_ns[p] += at.saturating_sub(self.since[p]);
        }
    }

    /// Ends the pauses whose time is up at `now` (counted to their end).
    pub fn expire(&mut self, now: u64) {
        for p in 0..PRIORITIES {
            if let Some(end) = self.until[p].filter(|&end| end <= now) {
                self.end_pause(p, end);
            }
        }
    }

    /// Whether `priority`'s frames must wait at `now`.
    pub fn is_paused(&mut self, priority: u8, now: u64) -> bool {
        self.expire(now);
        self.until
            .get(usize::from(priority))
            .is_some_and(Option::is_some)
    }

    /// Whether `priority` is paused at `now`, without ending any pause.
    pub fn is_paused_at(&self, priority: u8, now: u64) -> bool {
        self.until
            .get(usize::from(priority))
            .is_some_and(|u| u.is_some_and(|end| end > now))
    }

    /// Whether any priority is paused (as of the last call with a time).
    pub fn any_paused(&self) -> bool {
        self.until.iter().any(Option::is_some)
    }

    /// When the earliest pause ends, if any priority is paused.
    pub fn next_resume(&self) -> Option<u64> {
        self.until.iter().flatten().min().copied()
    }

    /// The PFC frame to send for `backlog` (frames waiting per priority)
    /// at `now`, if any (see the module docs).
    pub fn observe_backlog(
        &mut self,
        backlog: &[u32; PRIORITIES],
        now: u64,
    ) -> Option<MacControlRepr> {
        let refresh = quanta_nanos(self.cfg.pause_quanta, self.link_mbps) / 2;
        let mut enabled = 0u8;
        let mut quanta = [0u16; PRIORITIES];
        for (p, &waiting) in backlog.iter().enumerate() {
            if !self.enabled(p) {
                continue;
            }
            let xoff = match self.xoff_at[p] {
                None => waiting >= self.cfg.xoff,
                Some(_) if waiting <= self.cfg.xon => {
                    enabled |= 1 << p;
                    self.xoff_at[p] = None;
                    self.stats.tx_resume[p] += 1;
                    false
                }
                Some(at) => now >= at.saturating_add(refresh),
            };
            if xoff {
                enabled |= 1 << p;
                quanta[p] = self.cfg.pause_quanta;
                self.xoff_at[p] = Some(now);
                self.stats.tx_pause[p] += 1;
            }
        }
        (enabled != 0).then_some(MacControlRepr::Pfc { enabled, quanta })
    }

    /// The counters, time paused included up to `now`.
    pub fn stats(&self, now: u64) -> PfcStats {
        let mut s = self.stats;
        for p in 0..PRIORITIES {
            let ongoing = match self.until[p] {
                Some(end) => now.min(end).saturating_sub(self.since[p]),
                None => 0,
            };
            s.paused_us[p] = (self.paused_ns[p] + ongoing) / 1000;
        }
        s
    }
}

#[cfg(test)]
#[path = "pfc_tests.rs"]
mod tests;
