//! Posting without the engine: each QP's send and receive rings and each
//! SRQ's ring, as a NIC's queues, which the application fills through a
//! [`QpPoster`] or an [`SrqPoster`] while the engine runs, and the engine
//! takes from.
//!
//! * [`QpPoster::try_post_send`] and [`QpPoster::try_post_recv`] check a
//!   work request as [`Endpoint::post_send`] and [`Endpoint::post_recv`]
//!   do, with the same errors, against what the QP shares with them: its
//!   fixed attributes, its state and path MTU as the engine last set them
//!   (`modify_qp` sets them before it returns), its queue room, and the
//!   regions' keys ([`LkeyTable`]). A request that passes is queued in the
//!   QP's ring: no engine lock, no system call. What needs the engine's
//!   tables (a BIND_MW or LOCAL_INV, an RD or XRC QP's send, a receive of a
//!   QP that takes them from an SRQ) is left to the locked call (`None`);
//!   an SRQ's receives go through its own poster.
//! * The engine takes a QP's posts ([`Endpoint`]'s `absorb_posts`) before
//!   anything that reads its queues: a round's transmit, timers and
//!   received packets, `modify_qp`, `destroy_qp` and the locked posts, so
//!   the requests of both ways keep the order they were posted in, and a
//!   completion for a request is never made before the request is queued.
//! * A request taken on a QP that is in error completes flushed, as a
//!   locked post to it does. One taken on a QP that a `modify_qp` put back
//!   in Reset, Init or RTR raced that call, which the engine orders first:
//!   it is dropped, as the Reset would have dropped it.
//! * Queue room: `used` counts each queue's requests, posted or queued, and
//!   a post takes its slot with a compare-and-swap; the engine frees it
//!   when the request leaves the queue ([`WorkQueue`]), so a completion is
//!   never visible before its slot is free again.
//!
//! [`Endpoint`]: crate::endpoint::Endpoint
//! [`Endpoint::post_send`]: crate::endpoint::Endpoint::post_send
//! [`Endpoint::post_recv`]: crate::endpoint::Endpoint::post_recv

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use crossbeam_queue::SegQueue;
use rustc_hash::FxHashMap as HashMap;

use crate::mr::SgeFacts;
use crate::verbs::{
    LocalErrors, Mtu, QpState, QpType, QueuedRecv, QueuedSend, RecvWr, SendWr, Sge, VerbsError,
};

/// What every QP of an endpoint shares with its posters: the QPs that
/// have posts to take, and the regions' keys.
#[derive(Debug, Default)]
pub(crate) struct PostBoard {
    /// QPNs whose rings have posts the engine has not taken (each listed
    /// once while its `listed` flag is set).
    ready: SegQueue<u32>,
    /// The same for SRQs, by handle.
    srq_ready: SegQueue<u32>,
    pub(crate) lkeys: Arc<LkeyTable>,
}

impl PostBoard {
    pub(crate) fn new(lkeys: Arc<LkeyTable>) -> Self {
        Self {
            ready: SegQueue::new(),
            srq_ready: SegQueue::new(),
            lkeys,
        }
    }

    /// The next QP with posts to take.
    pub(crate) fn next_ready(&self) -> Option<u32> {
        if self.ready.is_empty() {
            return None;
        }
        self.ready.pop()
    }

    /// The next SRQ with posts to take.
    pub(crate) fn next_ready_srq(&self) -> Option<u32> {
        if self.srq_ready.is_empty() {
            return None;
        }
        self.srq_ready.pop()
    }
}

/// The regions' lkeys and what a scatter/gather check needs of each,
/// kept by the engine's region table as it registers, re-registers and
/// deregisters, read by posters. Changes are rare: a read lock taken by a
/// post waits only for a registration in progress.
#[derive(Debug, Default)]
pub(crate) struct LkeyTable(RwLock<HashMap<u32, SgeFacts>>);

impl LkeyTable {
    pub(crate) fn set(&self, lkey: u32, facts: SgeFacts) {
        self.write().insert(lkey, facts);
    }

    pub(crate) fn remove(&self, lkey: u32) {
        self.write().remove(&lkey);
    }

    /// Checks `sg` as the engine's region table does
    /// ([`crate::mr::check_sge`]).
    fn check_sg(&self, pd: u32, sg: &[Sge], write: bool) -> Result<(), VerbsError> {
        let keys = self.0.read().unwrap_or_else(|p| p.into_inner());
        sg.iter()
            .try_for_each(|sge| crate::mr::check_sge(keys.get(&sge.lkey).copied(), pd, sge, write))
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<u32, SgeFacts>> {
        self.0.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether a QP's or SRQ's rings are in the board's `ready` (or
/// `srq_ready`) queue, so that each is listed once however many posts it
/// gets before the engine takes them.
#[derive(Debug, Default)]
struct Listed(AtomicBool);

impl Listed {
    /// After a post: lists `id` in `ready` unless it already is.
    fn list(&self, ready: &SegQueue<u32>, id: u32) {
        if !self.0.swap(true, Ordering::AcqRel) {
            ready.push(id);
        }
    }

    /// The engine is about to take the rings' posts: a post from now on
    /// lists them again. The swap's acquire makes every post of a poster
    /// that found the flag set visible to the takes that follow.
    fn clear(&self) {
        self.0.swap(false, Ordering::AcqRel);
    }
}

/// A send request checked and waiting in a ring: its copy and length.
#[derive(Debug)]
pub(crate) struct PostedSend {
    pub(crate) wr: QueuedSend,
    pub(crate) len: u64,
}

/// The `state` of a destroyed QP: every post fails with `NoSuchQp`.
const GONE: u8 = u8::MAX;

/// Every state, at its `as u8` value.
const STATES: [QpState; 7] = [
    QpState::Reset,
    QpState::Init,
    QpState::Rtr,
    QpState::Rts,
    QpState::Sqd,
    QpState::Sqe,
    QpState::Err,
];

/// What one QP shares with its posters.
#[derive(Debug)]
pub(crate) struct QpPosts {
    qpn: u32,
    qp_type: QpType,
    pd: u32,
    max_send_wr: u32,
    max_recv_wr: u32,
    /// Receives go to a queue of the QP's own (no SRQ, not XRC or RD).
    own_rq: bool,
    /// Sends may be checked and queued here (RC, UC, UD).
    fast_sends: bool,
    /// `QpState as u8`, or [`GONE`].
    state: AtomicU8,
    /// `Mtu as u8`: a UD send's limit.
    mtu: AtomicU8,
    /// [`LocalErrors::Immediate`]: a post checks its scatter list.
    immediate: AtomicBool,
    pub(crate) send_used: Arc<AtomicU32>,
    pub(crate) recv_used: Arc<AtomicU32>,
    pub(crate) sends: SegQueue<PostedSend>,
    pub(crate) recvs: SegQueue<QueuedRecv>,
    listed: Listed,
    board: Arc<PostBoard>,
}

impl QpPosts {
    pub(crate) fn new(qpn: u32, init: &crate::qp::QpInit, board: &Arc<PostBoard>) -> Arc<Self> {
        let t = init.qp_type;
        Arc::new(Self {
            qpn,
            qp_type: t,
            pd: init.pd,
            max_send_wr: init.max_send_wr,
            max_recv_wr: init.max_recv_wr,
            own_rq: init.srq.is_none() && matches!(t, QpType::Rc | QpType::Uc | QpType::Ud),
            fast_sends: matches!(t, QpType::Rc | QpType::Uc | QpType::Ud),
            state: AtomicU8::new(QpState::Reset as u8),
            mtu: AtomicU8::new(Mtu::Mtu1024 as u8),
            immediate: AtomicBool::new(true),
            send_used: Arc::new(AtomicU32::new(0)),
            recv_used: Arc::new(AtomicU32::new(0)),
            sends: SegQueue::new(),
            recvs: SegQueue::new(),
            listed: Listed::default(),
            board: Arc::clone(board),
        })
    }

    /// Publishes what posters check against; the engine calls it after
    /// every change a post depends on (create, `modify_qp`, the way local
    /// errors are reported).
    pub(crate) fn publish(&self, state: QpState, mtu: Mtu, local_errors: LocalErrors) {
        self.mtu.store(mtu as u8, Ordering::Release);
        self.immediate
            .store(local_errors == LocalErrors::Immediate, Ordering::Release);
        self.state.store(state as u8, Ordering::Release);
    }

    /// The QP is destroyed: posters get `NoSuchQp`.
    pub(crate) fn close(&self) {
        self.state.store(GONE, Ordering::Release);
    }

    /// Takes a slot of a queue of `depth` counted by `used`.
    fn reserve(used: &AtomicU32, depth: u32) -> bool {
        used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < depth).then_some(n + 1)
        })
        .is_ok()
    }

    /// Whether a locked post may take a send slot (then it has).
    pub(crate) fn reserve_send(&self) -> bool {
        Self::reserve(&self.send_used, self.max_send_wr)
    }

    pub(crate) fn reserve_recv(&self) -> bool {
        Self::reserve(&self.recv_used, self.max_recv_wr)
    }

    /// Frees the slot of a request taken from a ring and not queued.
    pub(crate) fn release_send(&self) {
        free(&self.send_used, 1);
    }

    pub(crate) fn release_recv(&self) {
        free(&self.recv_used, 1);
    }

    /// Says the QP has posts to take.
    fn list(&self) {
        self.listed.list(&self.board.ready, self.qpn);
    }

    /// The engine is about to take the rings' posts ([`Listed::clear`]).
    pub(crate) fn unlist(&self) {
        self.listed.clear();
    }

    fn state(&self) -> Result<QpState, VerbsError> {
        STATES
            .get(usize::from(self.state.load(Ordering::Acquire)))
            .copied()
            .ok_or(VerbsError::NoSuchQp(self.qpn))
    }
}

/// Frees `n` slots of a queue's count. Every freed slot was taken, so the
/// count cannot go below zero; if a bug ever made it, the queue would
/// report itself full for good, so it stops at zero instead.
fn free(used: &AtomicU32, n: u32) {
    let _ = used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
        debug_assert!(u >= n, "a queue freed {n} slots of {u}");
        Some(u.saturating_sub(n))
    });
}

/// A handle that posts to one QP without the engine (see the module
/// docs): `Clone + Send + Sync`, from [`Endpoint::qp_poster`].
///
/// [`Endpoint::qp_poster`]: crate::endpoint::Endpoint::qp_poster
#[derive(Debug, Clone)]
pub struct QpPoster(pub(crate) Arc<QpPosts>);

impl QpPoster {
    /// The QP's number.
    pub fn qpn(&self) -> u32 {
        self.0.qpn
    }

    /// `ibv_post_send` without the engine's lock: checks `wr` as
    /// [`Endpoint::post_send`] does and queues it for the engine, which
    /// takes it at its next call that moves the QP. `None`: this request
    /// needs the engine's tables (a BIND_MW or LOCAL_INV, or an RD or XRC
    /// QP): post it with [`Endpoint::post_send`].
    ///
    /// [`Endpoint::post_send`]: crate::endpoint::Endpoint::post_send
    pub fn try_post_send(&self, mut wr: SendWr<'_>) -> Option<Result<(), VerbsError>> {
        let p = &*self.0;
        if !p.fast_sends || wr.op.is_local() {
            return None;
        }
        Some((|| {
            let state = p.state()?;
            if matches!(state, QpState::Reset | QpState::Init | QpState::Rtr) {
                return Err(VerbsError::WrongState {
                    qpn: p.qpn,
                    state,
                    call: "post_send",
                });
            }
            let mtu = Mtu::from_code(p.mtu.load(Ordering::Acquire)).unwrap_or(Mtu::Mtu1024);
            let immediate = p.immediate.load(Ordering::Acquire);
            let len = crate::endpoint::check_send(p.qp_type, mtu, &mut wr, |sg, write| {
                if immediate {
                    p.board.lkeys.check_sg(p.pd, sg, write)
                } else {
                    Ok(())
                }
            })?;
            if !QpPosts::reserve(&p.send_used, p.max_send_wr) {
                return Err(VerbsError::QueueFull {
                    qpn: p.qpn,
                    queue: "send queue",
                    depth: p.max_send_wr,
                });
            }
            p.sends.push(PostedSend {
                wr: QueuedSend::from(&wr),
                len,
            });
            p.list();
            Ok(())
        })())
    }

    /// `ibv_post_recv` without the engine's lock, as
    /// [`try_post_send`](Self::try_post_send). `None`: the QP takes its
    /// receives from an SRQ, or is an XRC or RD QP: post with
    /// [`Endpoint::post_recv`].
    ///
    /// [`Endpoint::post_recv`]: crate::endpoint::Endpoint::post_recv
    pub fn try_post_recv(&self, wr: RecvWr<'_>) -> Option<Result<(), VerbsError>> {
        let p = &*self.0;
        if !p.own_rq {
            return None;
        }
        Some((|| {
            let state = p.state()?;
            if state == QpState::Reset {
                return Err(VerbsError::WrongState {
                    qpn: p.qpn,
                    state,
                    call: "post_recv",
                });
            }
            if p.immediate.load(Ordering::Acquire) {
                p.board.lkeys.check_sg(p.pd, wr.sg, true)?;
            }
            if !QpPosts::reserve(&p.recv_used, p.max_recv_wr) {
                return Err(VerbsError::QueueFull {
                    qpn: p.qpn,
                    queue: "receive queue",
                    depth: p.max_recv_wr,
                });
            }
            p.recvs.push(QueuedRecv::from(&wr));
            p.list();
            Ok(())
        })())
    }
}

/// What one SRQ shares with its posters: as [`QpPosts`]' receive side,
/// with a depth `modify_srq` may change.
#[derive(Debug)]
pub(crate) struct SrqPosts {
    srq: u32,
    pd: u32,
    depth: AtomicU32,
    immediate: AtomicBool,
    gone: AtomicBool,
    pub(crate) used: Arc<AtomicU32>,
    pub(crate) recvs: SegQueue<QueuedRecv>,
    listed: Listed,
    board: Arc<PostBoard>,
}

impl SrqPosts {
    pub(crate) fn new(srq: u32, pd: u32, depth: u32, board: &Arc<PostBoard>) -> Arc<Self> {
        Arc::new(Self {
            srq,
            pd,
            depth: AtomicU32::new(depth),
            immediate: AtomicBool::new(true),
            gone: AtomicBool::new(false),
            used: Arc::new(AtomicU32::new(0)),
            recvs: SegQueue::new(),
            listed: Listed::default(),
            board: Arc::clone(board),
        })
    }

    /// Publishes what posters check against (create, `modify_srq`, the
    /// way local errors are reported).
    pub(crate) fn publish(&self, depth: u32, local_errors: LocalErrors) {
        self.immediate
            .store(local_errors == LocalErrors::Immediate, Ordering::Release);
        self.depth.store(depth, Ordering::Release);
    }

    /// The SRQ is destroyed: posters get `NoSuchSrq`.
    pub(crate) fn close(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Requests posted and not yet taken by a QP, ring and queue.
    pub(crate) fn used(&self) -> u32 {
        self.used.load(Ordering::Acquire)
    }

    /// Whether a locked post may take a slot (then it has).
    pub(crate) fn reserve(&self) -> bool {
        QpPosts::reserve(&self.used, self.depth.load(Ordering::Acquire))
    }

    /// Frees the slot of a locked post refused after it took one.
    pub(crate) fn release(&self) {
        free(&self.used, 1);
    }

    /// See [`QpPosts::unlist`].
    pub(crate) fn unlist(&self) {
        self.listed.clear();
    }
}

/// A handle that posts to one SRQ without the engine, as [`QpPoster`]
/// does to a QP: `Clone + Send + Sync`, from [`Endpoint::srq_poster`].
///
/// [`Endpoint::srq_poster`]: crate::endpoint::Endpoint::srq_poster
#[derive(Debug, Clone)]
pub struct SrqPoster(pub(crate) Arc<SrqPosts>);

impl SrqPoster {
    /// `ibv_post_srq_recv` without the engine's lock: checks `wr` as
    /// [`Endpoint::post_srq_recv`] does, with the same errors, and queues
    /// it for the engine.
    ///
    /// [`Endpoint::post_srq_recv`]: crate::endpoint::Endpoint::post_srq_recv
    pub fn post_recv(&self, wr: RecvWr<'_>) -> Result<(), VerbsError> {
        let p = &*self.0;
        if p.gone.load(Ordering::Acquire) {
            return Err(VerbsError::NoSuchSrq(p.srq));
        }
        if !p.reserve() {
            return Err(VerbsError::SrqFull {
                srq: p.srq,
                depth: p.depth.load(Ordering::Acquire),
            });
        }
        if p.immediate.load(Ordering::Acquire)
            && let Err(e) = p.board.lkeys.check_sg(p.pd, wr.sg, true)
        {
            free(&p.used, 1);
            return Err(e);
        }
        p.recvs.push(QueuedRecv::from(&wr));
        p.listed.list(&p.board.srq_ready, p.srq);
        Ok(())
    }
}

/// A QP's send or receive queue on the engine's side: the requests it has
/// taken, in order. Every request that leaves frees its slot in `used`
/// (shared with the QP's posters); one put back takes it again.
#[derive(Debug)]
pub(crate) struct WorkQueue<T> {
    items: VecDeque<T>,
    used: Arc<AtomicU32>,
}

impl<T> WorkQueue<T> {
    pub(crate) fn new(used: Arc<AtomicU32>) -> Self {
        Self {
            items: VecDeque::new(),
            used,
        }
    }

    /// Queues a request whose slot its post took.
    pub(crate) fn push_back(&mut self, item: T) {
        self.items.push_back(item);
    }

    /// Queues a request no post counted (an EE context carrying an RD
    /// QP's request), taking its slot here.
    pub(crate) fn push_back_uncounted(&mut self, item: T) {
        self.used.fetch_add(1, Ordering::AcqRel);
        self.items.push_back(item);
    }

    /// Puts back at the front a request taken out (its slot taken again).
    pub(crate) fn push_front(&mut self, item: T) {
        self.used.fetch_add(1, Ordering::AcqRel);
        self.items.push_front(item);
    }

    /// Takes the oldest request out, freeing its slot.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        free(&self.used, 1);
        Some(item)
    }

    /// Takes every request out, freeing their slots.
    pub(crate) fn take_all(&mut self) -> VecDeque<T> {
        let items = std::mem::take(&mut self.items);
        free(&self.used, items.len() as u32);
        items
    }

    pub(crate) fn iter_mut(&mut self) -> std::collections::vec_deque::IterMut<'_, T> {
        self.items.iter_mut()
    }
}

impl<T> std::ops::Deref for WorkQueue<T> {
    type Target = VecDeque<T>;

    fn deref(&self) -> &VecDeque<T> {
        &self.items
    }
}

impl<T> std::ops::Index<usize> for WorkQueue<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.items[i]
    }
}

impl<T> std::ops::IndexMut<usize> for WorkQueue<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.items[i]
    }
}
