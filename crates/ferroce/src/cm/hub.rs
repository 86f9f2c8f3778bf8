//! Where the driver meets the rdma_cm layer: each device's [`CmHub`], fed
//! with QP1's MADs in the driver's rounds and entered by API calls.
//!
//! The CM stays off the data path: a round enters it only when QP1 has
//! MADs, a CM timer is due, or a dropped ID left something to settle.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ferroce_cm::rdma_cm::{DeviceLimits, RdmaService};
use ferroce_cm::{CmConfig, CmId as CommId};
use ferroce_core::Instant;
use ferroce_core::Mad;

use super::device::{DeviceCm, Orphan, peer};
use crate::Result;
use crate::driver::Shared;
use crate::roce_config::PortSettings;

/// How long a port's settings read for one connection serve the next.
const SETTINGS_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// "No CM timer" in [`CmHub::next`].
const NO_TIMER: u64 = u64::MAX;

/// One device's rdma_cm state and what the driver needs to know of it
/// without taking its lock.
#[derive(Debug)]
pub(crate) struct CmHub {
    cm: Mutex<DeviceCm>,
    orphans: Mutex<Vec<Orphan>>,
    /// The CM's next timer (ns of the device's clock), or [`NO_TIMER`].
    next: AtomicU64,
    /// Orphans wait.
    dirty: AtomicBool,
    /// The port's settings (`default_roce_tos`, `default_roce_mode`) and
    /// when they were read: they serve the connections resolved within
    /// [`SETTINGS_FRESH`] (reading the settings files per connection would
    /// cost a connection setup more than the CM's own work; a change
    /// reaches new connections within that time).
    settings: Mutex<Option<(std::time::Instant, PortSettings)>>,
    /// The device's depth limits, read at the first connection.
    pub(crate) limits: OnceLock<DeviceLimits>,
}

impl CmHub {
    pub(crate) fn new(local: std::net::IpAddr, config: CmConfig) -> Self {
        Self {
            cm: Mutex::new(DeviceCm::new(local, config)),
            orphans: Mutex::new(Vec::new()),
            next: AtomicU64::new(NO_TIMER),
            dirty: AtomicBool::new(false),
            limits: OnceLock::new(),
            settings: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, DeviceCm> {
        self.cm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The CM's next timer.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        let next = self.next.load(Ordering::Acquire);
        (next != NO_TIMER).then(|| Instant::from_nanos(next))
    }

    /// Whether a round must enter the CM at `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.dirty.load(Ordering::Acquire) || self.next_timer().is_some_and(|t| t <= now)
    }

    /// Records the device for the IDs of incoming requests.
    pub(crate) fn set_device(&self, device: std::sync::Weak<crate::context::DeviceHandle>) {
        self.lock().device = device;
    }

    /// The CM's counters.
    pub(crate) fn stats(&self) -> ferroce_cm::CmStats {
        self.lock().cm.stats().clone()
    }

    /// The settings of the device's port (`ferroce config`): the ToS of
    /// connections that set none of their own, and the RoCE version of
    /// those it starts. A settings file that does not parse is an error
    /// naming it.
    pub(crate) fn port_settings(
        &self,
    ) -> std::result::Result<PortSettings, crate::roce_config::ConfigError> {
        let mut cached = self.settings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, port)) = *cached
            && at.elapsed() < SETTINGS_FRESH
        {
            return Ok(port);
        }
        let port = crate::roce_config::port_settings(crate::DEVICE_NAME, 1)?;
        *cached = Some((std::time::Instant::now(), port));
        Ok(port)
    }

    /// The sizes of the CM's tables.
    pub(crate) fn tables(&self) -> super::CmTables {
        let dcm = self.lock();
        let (pending, timewait) = dcm.cm.table_sizes();
        super::CmTables {
            pending,
            timewait,
            total: dcm.cm.len(),
        }
    }
}

impl Shared {
    /// Runs `f` on the device's CM at the current time, then hands what it
    /// made to QP1 and the IDs, and sends it in a round of progress on the
    /// caller's thread: an application that exits right after
    /// `disconnect` (or `accept`, `reject`) has still sent its DREQ, DREP
    /// (or REP, REJ), as the kernel would have.
    pub(crate) fn with_cm<T>(
        &self,
        f: impl FnOnce(&mut DeviceCm, Instant) -> Result<T>,
    ) -> Result<T> {
        let now = self.now();
        let mut dcm = self.cm.lock();
        let out = f(&mut dcm, now);
        self.cm_flush(&mut dcm, now);
        let graveyard = dcm.take_graveyard();
        drop(dcm);
        drop(graveyard);
        self.kick();
        self.progress_now();
        out
    }

    /// Makes the CM answer REQs for `service_id` (a listener's).
    pub(crate) fn cm_listen(&self, service_id: u64) {
        let _ = self.with_cm(|dcm, _| {
            dcm.cm.listen(service_id);
            Ok(())
        });
    }

    /// What a dropped ID leaves: its communication to destroy, the service
    /// it listened on. Settled in the next round (the caller may be inside
    /// one).
    pub(crate) fn cm_orphan(&self, comm: Option<CommId>, listened: Option<RdmaService>) {
        let mut orphans = self.cm.orphans.lock().unwrap_or_else(|p| p.into_inner());
        orphans.extend(comm.map(Orphan::Comm));
        orphans.extend(listened.map(Orphan::Listen));
        drop(orphans);
        self.cm.dirty.store(true, Ordering::Release);
        self.kick();
    }

    /// The CM's part of a round: the MADs QP1 received, due timers and
    /// orphans. Returns whether it did anything.
    pub(crate) fn cm_round(&self, now: Instant, mads: Vec<Mad>) -> bool {
        if mads.is_empty() && !self.cm.due(now) {
            return false;
        }
        let mut dcm = self.cm.lock();
        for mad in &mads {
            dcm.cm.handle_mad(now, peer(mad), &mad.data[..]);
        }
        self.cm.dirty.store(false, Ordering::Release);
        let orphans: Vec<Orphan> =
            std::mem::take(&mut *self.cm.orphans.lock().unwrap_or_else(|p| p.into_inner()));
        for orphan in orphans {
            dcm.settle(now, orphan);
        }
        if dcm.cm.poll_timeout().is_some_and(|t| t <= now) {
            dcm.cm.handle_timeout(now);
        }
        self.cm_flush(&mut dcm, now);
        let graveyard = dcm.take_graveyard();
        drop(dcm);
        drop(graveyard);
        true
    }

    /// Acts on the CM's events and queues its MADs on QP1.
    fn cm_flush(&self, dcm: &mut DeviceCm, now: Instant) {
        dcm.process_events(self, now);
        let mut ep = self.engine();
        while let Some((to, mad)) = dcm.cm.poll_transmit() {
            if let Err(e) = ep.send_mad_via(to.roce, to.ip, to.qpn, &mad) {
                tracing::debug!(error = %e, "CM MAD not queued; the CM resends it");
            }
        }
        drop(ep);
        let next = dcm.cm.poll_timeout().map_or(NO_TIMER, |t| t.as_nanos());
        self.cm.next.store(next, Ordering::Release);
    }
}
