//! The rdma_cm objects handed to C, each a Rust struct whose first field
//! is the C struct (as `crate::objects` does for the verbs):
//!
//! * [`ChannelObj`]: `rdma_event_channel`, whose `fd` is readable while
//!   events wait. Shared (`Arc`)
//!   by the IDs on it, so that an ID never points at a freed channel.
//! * [`IdObj`]: `rdma_cm_id` over a [`CmId`]. A synchronous ID (created
//!   without a channel, as `rdma_create_ep` does, or migrated to none)
//!   has a private channel and its calls wait for their own outcome.
//! * [`EventObj`]: `rdma_cm_event` with the bytes its private data
//!   pointer names, alive until `rdma_ack_cm_event`.
//!
//! Every live ID is in [`ids`], so that an event about a ferroce
//! [`CmId`] finds its C ID. The fields C reads (`id`, `ev`) are written
//! through raw pointers in `src/ffi` (C may read them from another
//! thread, as with librdmacm); the Rust fields are shared or locked.

use std::cell::UnsafeCell;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use ferroce::cm::{CmEvent, CmId, EventChannel};

use super::abi::*;
use crate::abi::{ibv_pd, ibv_qp_init_attr};

/// `ch.fd` is `watch`, an epoll descriptor over the ferroce channel's
/// (always non-blocking) eventfd: readable exactly when that is, and with
/// file flags of its own, so that an application's `O_NONBLOCK` on it
/// (librdmacm's descriptor is blocking until set so) can be seen.
///
/// `rdma_migrate_id` moves an ID to another channel, but its events still
/// arrive on the ferroce channel it was made on (its `home`): the new
/// channel then also reads that one (`sources`, watched by its epoll
/// descriptor too), and every channel takes only the events of the IDs it
/// owns.
#[repr(C)]
pub(crate) struct ChannelObj {
    pub(crate) ch: rdma_event_channel,
    pub(crate) inner: EventChannel,
    pub(crate) watch: OwnedFd,
    /// Home channels of IDs migrated here.
    pub(crate) sources: Mutex<Vec<Weak<Self>>>,
}

/// What a passive endpoint (`rdma_create_ep` with `RAI_PASSIVE`) keeps for
/// the IDs `rdma_get_request` hands out: their QP is made as asked.
#[derive(Clone, Copy)]
pub(crate) struct EpQp {
    pub(crate) pd: *mut ibv_pd,
    pub(crate) attr: ibv_qp_init_attr,
}

/// `id` and `path` are C's to read and write at any time (and this
/// library's through raw pointers), hence the `UnsafeCell`s, which keep
/// the layout: the `rdma_cm_id` is still the first byte of the object.
#[repr(C)]
pub(crate) struct IdObj {
    pub(crate) id: UnsafeCell<rdma_cm_id>,
    pub(crate) inner: CmId,
    /// Where the ID's events arrive (the channel it was made on, or for a
    /// request's ID its listener's).
    pub(crate) chan: Arc<ChannelObj>,
    /// The channel that delivers them (`id->channel`; `chan` until
    /// `rdma_migrate_id`).
    pub(crate) owner: Mutex<Arc<ChannelObj>>,
    /// Synchronous (created without a channel, or migrated to none): calls
    /// wait for their outcome. `rdma_migrate_id` changes it.
    pub(crate) sync: AtomicBool,
    /// `id.route.path_rec` points here once the route is resolved.
    pub(crate) path: UnsafeCell<ibv_sa_path_rec>,
    /// Events delivered and not yet acknowledged (destroy waits for 0).
    pub(crate) unacked: Unacked,
    /// For a passive endpoint: the QP of each request's ID.
    pub(crate) ep_qp: Mutex<Option<EpQp>>,
    /// The CQs and channels `rdma_create_qp` made for this ID (it destroys
    /// them with the QP).
    pub(crate) own_cqs: AtomicBool,
    /// The `context` of each multicast join (the group, as an address):
    /// MULTICAST_JOIN hands it back.
    pub(crate) mc_contexts: Mutex<Vec<(std::net::IpAddr, usize)>>,
}

#[repr(C)]
pub(crate) struct EventObj {
    pub(crate) ev: rdma_cm_event,
    /// What `ev.param`'s private data pointer names.
    pub(crate) private_data: Vec<u8>,
    /// The ID whose count of unacknowledged events this one is in (the
    /// listener, for a CONNECT_REQUEST), as an address.
    pub(crate) owner: usize,
    /// Holds the ferroce event (and so its IDs) until the ack.
    pub(crate) _held: CmEvent,
}

/// A count that `rdma_destroy_id` waits on.
#[derive(Default)]
pub(crate) struct Unacked {
    n: Mutex<usize>,
    zero: Condvar,
}

impl Unacked {
    fn lock(&self) -> MutexGuard<'_, usize> {
        self.n.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn add(&self) {
        *self.lock() += 1;
    }

    pub(crate) fn done(&self) {
        let mut n = self.lock();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.zero.notify_all();
        }
    }

    /// Blocks until every event is acknowledged (librdmacm's
    /// `rdma_destroy_id` does the same: the events point at the ID).
    pub(crate) fn wait_zero(&self) {
        let mut n = self.lock();
        while *n != 0 {
            n = self
                .zero
                .wait_timeout(n, Duration::from_secs(1))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

static IDS: Mutex<Vec<(CmId, usize)>> = Mutex::new(Vec::new());

/// The live IDs: each ferroce ID with its C object's address.
pub(crate) fn ids() -> MutexGuard<'static, Vec<(CmId, usize)>> {
    IDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`ids`], unless another thread holds them now.
pub(crate) fn try_ids() -> Option<MutexGuard<'static, Vec<(CmId, usize)>>> {
    match IDS.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// The C object of `id`, if it is live.
pub(crate) fn find(id: &CmId) -> Option<usize> {
    ids().iter().find(|(i, _)| i == id).map(|&(_, p)| p)
}

impl IdObj {
    /// The channel that delivers this ID's events, as an address.
    pub(crate) fn owner_addr(&self) -> usize {
        Arc::as_ptr(&self.owner.lock().unwrap_or_else(|p| p.into_inner())) as usize
    }

    /// Whether the ID is synchronous (its calls wait for their outcome).
    pub(crate) fn is_sync(&self) -> bool {
        self.sync.load(Ordering::Acquire)
    }
}

/// One `rdma_addrinfo` of `rdma_getaddrinfo`, with the addresses its
/// pointers name.
#[repr(C)]
pub(crate) struct AddrInfoObj {
    pub(crate) ai: rdma_addrinfo,
    pub(crate) src: sockaddr_storage,
    pub(crate) dst: sockaddr_storage,
}
