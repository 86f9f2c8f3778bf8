//! The CM of one device: its tables, timers, and queues of MADs to send and
//! events to report. The message handlers live in `active`, `passive`,
//! `disconnect` and `sidr`; this module holds what they share.

mod active;
mod destroy;
mod disconnect;
mod passive;
mod sidr;

use std::collections::{BTreeSet, VecDeque};
use std::net::IpAddr;

use ferroce_core::Instant;
use ferroce_wire::mad::{
    BASE_VERSION, CM_CLASS, CM_CLASS_VERSION, CmMessage, Mad, MadHeader, attr, method,
};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::conn::{Category, CmInfo, CmState, Conn, TimerKind};
use crate::{CmConfig, CmError, CmEvent, CmId, CmStats, PeerAddr};

/// The Communication Manager of one device (see the crate docs).
#[derive(Debug)]
pub struct Cm {
    config: CmConfig,
    rng: ChaCha8Rng,
    conns: FxHashMap<u32, Conn>,
    /// (remote CA GUID, remote comm ID) -> local comm ID: finds duplicates.
    by_remote: FxHashMap<(u64, u32), u32>,
    /// (remote CA GUID, remote QPN) -> local comm ID: finds stale connections.
    by_qpn: FxHashMap<(u64, u32), u32>,
    /// (peer, request ID) -> local ID of a SIDR request being answered.
    by_sidr: FxHashMap<(IpAddr, u32), u32>,
    listeners: FxHashSet<u64>,
    timers: BTreeSet<(Instant, u32)>,
    timewait_order: VecDeque<u32>,
    pending: usize,
    timewait: usize,
    transmit: VecDeque<(PeerAddr, Vec<u8>)>,
    events: VecDeque<CmEvent>,
    stats: CmStats,
}

impl Cm {
    pub fn new(config: CmConfig) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            conns: FxHashMap::default(),
            by_remote: FxHashMap::default(),
            by_qpn: FxHashMap::default(),
            by_sidr: FxHashMap::default(),
            listeners: FxHashSet::default(),
            timers: BTreeSet::new(),
            timewait_order: VecDeque::new(),
            pending: 0,
            timewait: 0,
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            stats: CmStats::default(),
        }
    }

    pub fn stats(&self) -> &CmStats {
        &self.stats
    }

    /// The state of a communication, if it exists.
    pub fn state(&self, id: CmId) -> Option<CmState> {
        self.conns.get(&id.0).map(|c| c.state)
    }

    /// What is known about a communication, if it exists.
    pub fn info(&self, id: CmId) -> Option<CmInfo> {
        self.conns.get(&id.0).map(|c| CmInfo {
            state: c.state,
            peer: c.peer,
            remote_comm_id: c.remote_id,
            service_id: c.service_id,
            local_qpn: c.local_qpn,
            remote_qpn: c.remote_qpn,
        })
    }

    /// How many communications are not yet established, and in TimeWait.
    pub fn table_sizes(&self) -> (usize, usize) {
        (self.pending, self.timewait)
    }

    /// How many communications exist in any state.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Accept REQs and SIDR_REQs for `service_id` from now on.
    pub fn listen(&mut self, service_id: u64) {
        self.listeners.insert(service_id);
    }

    /// Stop listening; communications already started are unaffected.
    pub fn unlisten(&mut self, service_id: u64) {
        self.listeners.remove(&service_id);
    }

    /// The next MAD to send on QP1, and to whom.
    pub fn poll_transmit(&mut self) -> Option<(PeerAddr, Vec<u8>)> {
        self.transmit.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|&(at, _)| at)
    }

    /// Fires every timer due at `now`: resends, gives up, and ends
    /// TimeWaits.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, id));
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            let Some((_, kind)) = conn.timer.take() else {
                continue;
            };
            match kind {
                TimerKind::Resend => self.resend_or_give_up(now, id),
                TimerKind::TimeWaitExit => {
                    let destroyed = conn.destroyed;
                    self.remove(id);
                    if !destroyed {
                        self.event(CmEvent::TimewaitExit { id: CmId(id) });
                    }
                }
            }
        }
    }

    /// Takes one MAD received on QP1. Malformed, foreign and unknown MADs
    /// are counted in [`CmStats`] and dropped.
    pub fn handle_mad(&mut self, now: Instant, from: PeerAddr, bytes: &[u8]) {
        self.stats.received += 1;
        let mad = match Mad::parse(bytes) {
            Ok(mad) => mad,
            Err(err) => return self.count_malformed(&err),
        };
        if mad.header.mgmt_class != CM_CLASS {
            self.stats.wrong_class += 1;
            return;
        }
        if mad.header.method != method::SEND {
            self.stats.unknown_attribute += 1;
            return;
        }
        let tid = mad.header.transaction_id;
        let data = &bytes[ferroce_wire::mad::MAD_HEADER_LEN..ferroce_wire::mad::MAD_LEN];
        match (mad.cm, mad.header.attribute_id) {
            (Some(CmMessage::Req(m)), _) => self.on_req(now, from, tid, &m),
            (Some(CmMessage::Mra(m)), _) => self.on_mra(now, &m),
            (Some(CmMessage::Rej(m)), _) => self.on_rej(now, &m),
            (Some(CmMessage::Rep(m)), _) => self.on_rep(now, from, tid, &m),
            (Some(CmMessage::Rtu(m)), _) => self.on_rtu(&m),
            (Some(CmMessage::Dreq(m)), _) => self.on_dreq(now, from, tid, &m),
            (Some(CmMessage::Drep(m)), _) => self.on_drep(now, &m),
            (None, attr::SIDR_REQ) => self.on_sidr_req(from, tid, data),
            (None, attr::SIDR_REP) => self.on_sidr_rep(data),
            (None, _) => self.stats.unknown_attribute += 1,
        }
    }

    fn count_malformed(&mut self, err: &ferroce_wire::Error) {
        match err {
            ferroce_wire::Error::Truncated { .. } => self.stats.truncated += 1,
            ferroce_wire::Error::BadMad {
                field: "mad.base_version",
                ..
            } => self.stats.bad_base_version += 1,
            ferroce_wire::Error::BadMad {
                field: "mad.class_version",
                ..
            } => self.stats.bad_class_version += 1,
            _ => self.stats.malformed += 1,
        }
    }

    // ---- shared helpers ----

    fn conn(&self, id: CmId) -> Result<&Conn, CmError> {
        self.conns.get(&id.0).ok_or(CmError::UnknownId(id))
    }

    /// The connection `id` if it is in one of `states`, for an API call.
    fn conn_in(&self, id: CmId, call: &'static str, states: &[CmState]) -> Result<&Conn, CmError> {
        let conn = self.conn(id)?;
        if !states.contains(&conn.state) {
            return Err(CmError::WrongState {
                id,
                call,
                state: conn.state,
            });
        }
        Ok(conn)
    }

    /// A fresh comm ID: random, never 0, never one still in a table
    /// (TimeWait included).
    fn new_comm_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u32();
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// The transaction ID of a transaction this CM starts: the kernel's
    /// layout (agent half, then the comm ID as its bytes lie in memory).
    pub(crate) fn own_tid(&self, id: u32) -> u64 {
        u64::from(self.config.tid_high) << 32 | u64::from(id.swap_bytes())
    }

    fn event(&mut self, event: CmEvent) {
        if self.events.len() >= self.config.max_events {
            self.stats.events_dropped += 1;
            return;
        }
        self.events.push_back(event);
    }

    fn send(&mut self, to: PeerAddr, bytes: Vec<u8>) {
        if self.transmit.len() >= self.config.max_transmit_queue {
            self.stats.transmit_dropped += 1;
            return;
        }
        self.stats.sent += 1;
        self.transmit.push_back((to, bytes));
    }

    /// Sends the connection's outstanding message and arms its resend timer.
    fn send_outstanding(&mut self, now: Instant, id: u32) {
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let (peer, timeout) = (conn.peer, conn.timeout);
        if let Some(bytes) = conn.outstanding.clone() {
            self.send(peer, bytes);
            self.arm(id, now.after(timeout), TimerKind::Resend);
        }
    }

    /// Sends the connection's last answer again (for a duplicate).
    fn resend_answer(&mut self, id: u32) {
        if let Some(conn) = self.conns.get(&id)
            && let Some(bytes) = conn.answer.clone()
        {
            self.stats.duplicates_answered += 1;
            self.send(conn.peer, bytes);
        }
    }

    fn arm(&mut self, id: u32, at: Instant, kind: TimerKind) {
        self.disarm(id);
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.timer = Some((at, kind));
            self.timers.insert((at, id));
        }
    }

    fn disarm(&mut self, id: u32) {
        if let Some(conn) = self.conns.get_mut(&id)
            && let Some((at, _)) = conn.timer.take()
        {
            self.timers.remove(&(at, id));
        }
    }

    fn count(&mut self, category: Category, up: bool) {
        let counter = match category {
            Category::Pending => &mut self.pending,
            Category::TimeWait => &mut self.timewait,
            Category::Connected => return,
        };
        if up {
            *counter += 1;
        } else {
            *counter -= 1;
        }
    }

    fn insert(&mut self, id: u32, conn: Conn) {
        self.count(conn.state.category(), true);
        self.conns.insert(id, conn);
    }

    fn set_state(&mut self, id: u32, state: CmState) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let old = conn.state.category();
        conn.state = state;
        if old != state.category() {
            self.count(old, false);
            self.count(state.category(), true);
        }
    }

    /// Forgets a communication and every key and timer it holds.
    fn remove(&mut self, id: u32) {
        self.disarm(id);
        let Some(conn) = self.conns.remove(&id) else {
            return;
        };
        self.count(conn.state.category(), false);
        if let Some(key) = conn.remote_key {
            self.by_remote.remove(&key);
        }
        if let Some(key) = conn.qpn_key {
            self.by_qpn.remove(&key);
        }
        self.by_sidr.retain(|_, local| *local != id);
    }

    /// Enters TimeWait: the comm ID stays taken and a repeated DREQ or REQ
    /// is still answered, but the remote QPN is free for a new connection.
    fn enter_timewait(&mut self, now: Instant, id: u32) {
        if self.timewait >= self.config.max_timewait {
            self.evict_oldest_timewait();
        }
        let cap = self.config.timewait_cap;
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.outstanding = None;
        let wait = crate::timing::timewait(conn.packet_life_time, cap);
        if let Some(key) = conn.qpn_key.take() {
            self.by_qpn.remove(&key);
        }
        self.set_state(id, CmState::TimeWait);
        self.timewait_order.push_back(id);
        self.arm(id, now.after(wait), TimerKind::TimeWaitExit);
    }

    fn evict_oldest_timewait(&mut self) {
        while let Some(id) = self.timewait_order.pop_front() {
            if self.conns.get(&id).map(|c| c.state) == Some(CmState::TimeWait) {
                self.stats.timewait_evicted += 1;
                self.remove(id);
                self.event(CmEvent::TimewaitExit { id: CmId(id) });
                return;
            }
        }
    }

    /// A CM MAD around `message`, in the transaction `tid`.
    pub(crate) fn cm_mad(tid: u64, message: &CmMessage) -> Vec<u8> {
        let mut out = vec![0u8; ferroce_wire::mad::MAD_LEN];
        let mad = Mad {
            header: Self::header(tid, message.attribute_id()),
            cm: Some(*message),
        };
        // The messages are built from checked values; an emit error would be
        // a bug in this crate, and the zeroed MAD is then dropped by the peer.
        if let Err(err) = mad.emit(&mut out) {
            debug_assert!(false, "CM message failed to emit: {err}");
        }
        out
    }

    pub(crate) fn header(tid: u64, attribute_id: u16) -> MadHeader {
        MadHeader {
            base_version: BASE_VERSION,
            mgmt_class: CM_CLASS,
            class_version: CM_CLASS_VERSION,
            method: method::SEND,
            status: 0,
            class_specific: 0,
            transaction_id: tid,
            attribute_id,
            attribute_modifier: 0,
        }
    }
}

/// `data` copied into a fixed private-data field, or the error naming the
/// limit.
fn private<const N: usize>(data: &[u8], message: &'static str) -> Result<[u8; N], CmError> {
    if data.len() > N {
        return Err(CmError::PrivateDataTooLong {
            message,
            len: data.len(),
            max: N,
        });
    }
    let mut out = [0u8; N];
    out[..data.len()].copy_from_slice(data);
    Ok(out)
}

#[cfg(test)]
impl Cm {
    /// Panics unless the counters, timers and lookup tables agree with the
    /// communications they describe.
    pub(crate) fn check_invariants(&self) {
        let count = |category| {
            self.conns
                .values()
                .filter(|c| c.state.category() == category)
                .count()
        };
        assert_eq!(self.pending, count(Category::Pending), "pending count");
        assert_eq!(self.timewait, count(Category::TimeWait), "TimeWait count");
        let armed: BTreeSet<_> = self
            .conns
            .iter()
            .filter_map(|(&id, c)| c.timer.map(|(at, _)| (at, id)))
            .collect();
        assert_eq!(armed, self.timers, "timers");
        for (key, id) in &self.by_remote {
            let conn = self.conns.get(id).expect("by_remote names a communication");
            assert_eq!(conn.remote_key, Some(*key));
        }
        for (key, id) in &self.by_qpn {
            let conn = self.conns.get(id).expect("by_qpn names a communication");
            assert_eq!(conn.qpn_key, Some(*key));
        }
        for id in self.by_sidr.values() {
            assert!(self.conns.contains_key(id), "by_sidr names a communication");
        }
    }
}
