//! A deterministic simulated network between endpoints on a virtual clock,
//! with seeded loss, duplication, reordering (random extra delay) and
//! corruption (dropped, as the I/O layer's ICRC check would).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::verbs::WorkCompletion;
use crate::verbs::{
    Access, Mtu, Path, QpAttr, QpState, QpType, RecvWr, RemoteSlice, RoceMode, SendWr, Sge,
};
use crate::{Ecn, Endpoint, EndpointConfig, Instant, MrInfo, QpInit, Transmit};
use ferroce_wire::{Opcode, Psn, TransportRepr};

/// Fault rates in [0, 1], per packet.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    pub(crate) loss: f64,
    pub(crate) duplicate: f64,
    /// Chance a packet is delayed by up to `jitter` (so overtaken).
    pub(crate) reorder: f64,
    pub(crate) corrupt: f64,
    /// Chance a packet is marked congestion-experienced on the way. The
    /// marking lands in BTH FECN, as an IB fabric marks it (over RoCE v2 a
    /// switch marks the IP ECN field, which the I/O layer owns); FECN is
    /// outside the ICRC, so a marked packet stays valid.
    pub(crate) ecn_mark: f64,
    /// Chance a packet is marked CE in its IP header on the way, as a
    /// RoCE v2 switch marks it: delivered with
    /// [`Endpoint::handle_datagram_ecn`].
    pub(crate) ce_mark: f64,
}

/// A packet on the wire: arrival time, sequence (ties), receiver, sender,
/// the multicast group it was sent to, whether it is RoCE v1 (a GRH rather
/// than IP/UDP), its IP ECN field, bytes.
type InFlight = (
    Instant,
    u64,
    usize,
    usize,
    Option<IpAddr>,
    bool,
    Ecn,
    Vec<u8>,
);

pub(crate) struct Pair {
    pub(crate) now: Instant,
    pub(crate) eps: [Endpoint; 2],
    pub(crate) addrs: [IpAddr; 2],
    pub(crate) faults: Faults,
    pub(crate) latency: Duration,
    pub(crate) jitter: Duration,
    rng: ChaCha8Rng,
    seq: u64,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    pub(crate) delivered: u64,
    /// Packets marked by `Faults::ecn_mark`.
    pub(crate) ecn_marked: u64,
    /// Packets marked CE by `Faults::ce_mark`.
    pub(crate) ce_marked: u64,
    /// Request bytes (transport) each endpoint sent.
    pub(crate) request_bytes: [u64; 2],
    pub(crate) dropped: u64,
    /// RoCE v1 packets delivered (with the GRH [`v1_grh`] makes).
    pub(crate) v1_delivered: u64,
}

impl Pair {
    pub(crate) fn new(seed: u64) -> Self {
        let addrs = [
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        ];
        let mut eps = [
            Endpoint::new(EndpointConfig { seed: seed ^ 1 }),
            Endpoint::new(EndpointConfig { seed: seed ^ 2 }),
        ];
        // Each knows its address, as the driver tells a device's engine.
        for (ep, addr) in eps.iter_mut().zip(addrs) {
            ep.set_local_addr(addr);
        }
        Self {
            now: Instant::ZERO,
            eps,
            addrs,
            faults: Faults::default(),
            latency: Duration::from_micros(5),
            jitter: Duration::from_micros(50),
            rng: ChaCha8Rng::seed_from_u64(seed),
            seq: 0,
            in_flight: BinaryHeap::new(),
            delivered: 0,
            ecn_marked: 0,
            ce_marked: 0,
            request_bytes: [0; 2],
            dropped: 0,
            v1_delivered: 0,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() as f64 / u64::MAX as f64) < p
    }

    /// Moves every packet both endpoints want to send into the network.
    fn transmit(&mut self) {
        for i in 0..2 {
            while let Some(t) = self.eps[i].poll_transmit(self.now) {
                // A multicast packet reaches both endpoints, its sender's
                // too (as a switch and the kernel's multicast loop do).
                let group = crate::multicast_group(t.path.remote);
                if group.is_some() {
                    self.put_on_wire(i, 0, group, t.clone());
                    self.put_on_wire(i, 1, group, t);
                    continue;
                }
                let to = usize::from(t.path.remote != self.addrs[0]);
                assert_eq!(
                    self.addrs[to], t.path.remote,
                    "packet to an unknown address"
                );
                self.put_on_wire(i, to, None, t);
            }
        }
    }

    /// One packet from endpoint `i` to endpoint `to`, through the faults.
    fn put_on_wire(&mut self, i: usize, to: usize, group: Option<IpAddr>, t: Transmit) {
        {
            {
                let copies = if self.chance(self.faults.duplicate) {
                    2
                } else {
                    1
                };
                let v1 = t.path.roce == RoceMode::V1;
                if t.kind == crate::PacketKind::Request {
                    self.request_bytes[i] += t.data.len() as u64;
                }
                let sent_ecn = t.ecn;
                let mut data = Some(t.data);
                for copy in 0..copies {
                    if self.chance(self.faults.loss) || self.chance(self.faults.corrupt) {
                        self.dropped += 1;
                        continue;
                    }
                    let mut at = self.now.after(self.latency);
                    if self.chance(self.faults.reorder) {
                        let extra = self.rng.next_u64() % self.jitter.as_nanos().max(1) as u64;
                        at = at.after(Duration::from_nanos(extra));
                    }
                    self.seq += 1;
                    // The last copy takes the buffer; an earlier one clones it.
                    let mut bytes = if copy + 1 == copies {
                        data.take().unwrap_or_default()
                    } else {
                        data.clone().unwrap_or_default()
                    };
                    if self.chance(self.faults.ecn_mark) && bytes.len() > 4 {
                        bytes[4] |= 0x80;
                        self.ecn_marked += 1;
                    }
                    let mut ecn = sent_ecn;
                    if ecn != Ecn::NotEct && self.chance(self.faults.ce_mark) {
                        ecn = Ecn::Ce;
                        self.ce_marked += 1;
                    }
                    let packet = (at, self.seq, to, i, group, v1, ecn, bytes);
                    self.in_flight.push(Reverse(packet));
                }
            }
        }
    }

    /// One step: send, deliver what is due, or jump the clock to the next
    /// event. Returns false when nothing at all is pending.
    pub(crate) fn step(&mut self) -> bool {
        self.transmit();
        if let Some(Reverse((at, ..))) = self.in_flight.peek()
            && *at <= self.now
        {
            let Some(Reverse((_, _, to, sender, group, v1, ecn, data))) = self.in_flight.pop()
            else {
                return false;
            };
            let from = self.addrs[sender];
            if std::env::var_os("SIM_TRACE").is_some()
                && let Ok(t) = ferroce_wire::TransportPacket::new_checked(&data[..])
            {
                let aeth = t.aeth().map(|a| a.syndrome());
                eprintln!(
                    "{:>10} {} -> {to} {} psn={} {aeth:?}",
                    self.now.as_nanos(),
                    sender,
                    t.bth().opcode(),
                    t.bth().psn()
                );
            }
            if v1 {
                let dst = group.unwrap_or(self.addrs[to]);
                let grh = v1_grh(from, dst, data.len());
                match group {
                    Some(g) if to == sender => {
                        let ecn = Ecn::NotEct;
                        self.eps[to].handle_own_multicast(self.now, from, g, Some(&grh), ecn, &data)
                    }
                    _ => self.eps[to].handle_v1_packet(self.now, from, &grh, &data),
                }
                self.v1_delivered += 1;
            } else if let Some(g) = group {
                if to == sender {
                    self.eps[to].handle_own_multicast(self.now, from, g, None, ecn, &data);
                } else {
                    self.eps[to].handle_multicast(self.now, from, g, ecn, &data);
                }
            } else {
                self.eps[to].handle_datagram_ecn(self.now, from, ecn, &data);
            }
            self.delivered += 1;
            return true;
        }
        let next_packet = self.in_flight.peek().map(|Reverse((at, ..))| *at);
        let next_timer = self.eps.iter_mut().filter_map(|e| e.poll_timeout()).min();
        let next = match (next_packet, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        self.now = self.now.max(next);
        for e in &mut self.eps {
            e.handle_timeout(self.now);
        }
        true
    }

    /// Steps until `done` holds; panics after `max_steps` (a hang).
    pub(crate) fn drive_until(
        &mut self,
        max_steps: usize,
        mut done: impl FnMut(&mut Self) -> bool,
    ) {
        for _ in 0..max_steps {
            if done(self) {
                return;
            }
            if !self.step() && done(self) {
                return;
            }
        }
        assert!(
            done(self),
            "not done after {max_steps} steps (t = {:?})",
            self.now
        );
    }

    /// Drains every completion of `cq` on endpoint `i`.
    pub(crate) fn completions(&mut self, i: usize, cq: u32) -> Vec<WorkCompletion> {
        self.eps[i].poll_cq(cq, usize::MAX).unwrap()
    }

    /// Drives until endpoint `i`'s `cq` has given `n` completions; returns
    /// them in order.
    pub(crate) fn wait_cqes(&mut self, i: usize, cq: u32, n: usize) -> Vec<WorkCompletion> {
        let mut got = Vec::new();
        self.drive_until(1_000_000, |p| {
            got.extend(p.completions(i, cq));
            got.len() >= n
        });
        got
    }

    /// Drives until nothing is in flight and no timer is armed, or `max_steps`.
    pub(crate) fn settle(&mut self, max_steps: usize) {
        for _ in 0..max_steps {
            if !self.step() {
                return;
            }
        }
    }

    /// Every packet endpoint `i` wants to send now, taken without
    /// delivering it (for tests that play the network by hand).
    pub(crate) fn take_transmits(&mut self, i: usize) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.eps[i].poll_transmit(self.now))
            .map(|t| t.data)
            .collect()
    }

    /// Hands `data` to endpoint `to` as if it came from the other one.
    pub(crate) fn deliver(&mut self, to: usize, data: &[u8]) {
        let from = self.addrs[1 - to];
        self.eps[to].handle_datagram(self.now, from, data);
    }
}

/// The GRH of a RoCE v1 packet of `len` transport bytes from `src` to
/// `dst` (their GIDs: IPv4 addresses mapped), as the raw backend emits it.
pub(crate) fn v1_grh(src: IpAddr, dst: IpAddr, len: usize) -> crate::Grh {
    let gid = |a: IpAddr| match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    };
    let grh = ferroce_wire::ipv6::Ipv6Repr {
        traffic_class: 0,
        flow_label: 0,
        payload_len: len as u16,
        next_header: ferroce_wire::ipv6::NEXT_HEADER_IBA,
        hop_limit: 64,
        src: gid(src),
        dst: gid(dst),
    };
    let mut out = [0; 40];
    grh.emit(&mut out).unwrap();
    out
}

/// A packet as a peer (or an attacker) would build it: `op` at `psn` to QP
/// `dest`, every extension header filled with plausible values by
/// `ferroce_wire::samples::transport`, for the caller to adjust.
pub(crate) fn craft(op: Opcode, psn: Psn, dest: u32, payload_len: usize) -> TransportRepr {
    let mut t = ferroce_wire::samples::transport(op, psn.value(), payload_len);
    t.bth.dest_qp = dest;
    t
}

/// The bytes of `t` with `payload` (BTH .. ICRC, ICRC left zero).
pub(crate) fn emit(t: &TransportRepr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0; t.buffer_len()];
    let n = t.emit(&mut b, payload).expect("a well-formed test packet");
    b.truncate(n);
    b
}

/// Parses a packet the engine sent.
pub(crate) fn parse(data: &[u8]) -> TransportRepr {
    let p =
        ferroce_wire::TransportPacket::new_checked(data).expect("the engine sends valid packets");
    TransportRepr::parse(&p).expect("the engine sends valid packets")
}

/// One side of a connected pair of QPs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side {
    pub(crate) pd: u32,
    pub(crate) cq: u32,
    pub(crate) qpn: u32,
    pub(crate) mr: MrInfo,
}

/// How [`connect_with`] sets up a connected pair of QPs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    pub(crate) qp_type: QpType,
    pub(crate) mr_len: usize,
    pub(crate) mtu: Mtu,
    pub(crate) sq_sig_all: bool,
    /// First PSN from endpoint 0 to endpoint 1; the other direction starts
    /// 7 later. The default is 16 short of the wrap, so that every test
    /// crosses 0xFFFFFF -> 0.
    pub(crate) psn: u32,
    /// The QPs' remote access flags (the regions always allow everything).
    pub(crate) qp_access: Access,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    /// Initiator depth: READs and atomics outstanding at once.
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    /// Each side's path's RoCE version.
    pub(crate) roce: [RoceMode; 2],
}

/// Every access right a region or QP can have.
pub(crate) fn all_access() -> Access {
    Access::LOCAL_WRITE
        | Access::REMOTE_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_ATOMIC
        | Access::FLUSH_GLOBAL
}

impl Opts {
    pub(crate) fn new(qp_type: QpType, mr_len: usize, mtu: Mtu) -> Self {
        Self {
            qp_type,
            mr_len,
            mtu,
            sq_sig_all: false,
            psn: 0xff_fff0,
            qp_access: all_access(),
            timeout: 8,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            roce: [RoceMode::V2; 2],
        }
    }
}

/// Creates a QP of `qp_type` and a region of `mr_len` bytes on each side
/// and brings the QPs to RTS, connected to each other.
pub(crate) fn connect(p: &mut Pair, qp_type: QpType, mr_len: usize, mtu: Mtu) -> [Side; 2] {
    connect_with(p, Opts::new(qp_type, mr_len, mtu))
}

/// [`connect`] with every knob.
pub(crate) fn connect_with(p: &mut Pair, o: Opts) -> [Side; 2] {
    let qp_type = o.qp_type;
    let sides: Vec<Side> = (0..2)
        .map(|i| {
            let e = &mut p.eps[i];
            let pd = e.alloc_pd();
            let cq = e.create_cq(4096).unwrap();
            let qpn = e
                .create_qp(QpInit {
                    pd,
                    qp_type,
                    send_cq: cq,
                    recv_cq: cq,
                    max_send_wr: o.max_send_wr,
                    max_recv_wr: o.max_recv_wr,
                    sq_sig_all: o.sq_sig_all,
                    srq: None,
                })
                .unwrap();
            let mr = e.reg_mr(pd, o.mr_len, all_access()).unwrap();
            Side { pd, cq, qpn, mr }
        })
        .collect();
    let sides = [sides[0], sides[1]];
    bring_up(p, sides, o);
    sides
}

/// Takes the QPs of `sides` from Reset to RTS, connected to each other.
pub(crate) fn bring_up(p: &mut Pair, sides: [Side; 2], o: Opts) {
    let qp_type = o.qp_type;
    // The first PSN sent by endpoint i.
    let first_psn = |i: usize| Psn::new(o.psn + 7 * i as u32);
    for i in 0..2 {
        let peer = sides[1 - i];
        let e = &mut p.eps[i];
        let q = sides[i].qpn;
        let ud = qp_type == QpType::Ud;
        let rc = qp_type == QpType::Rc;
        e.modify_qp(
            q,
            &QpAttr {
                state: Some(QpState::Init),
                pkey_index: Some(0),
                port: Some(1),
                access: (!ud).then_some(o.qp_access),
                qkey: ud.then_some(0x1111_1111),
                ..QpAttr::default()
            },
        )
        .unwrap();
        let path = Path {
            remote: p.addrs[1 - i],
            udp_src_port: 0xc000 | (q as u16 & 0x3fff),
            traffic_class: 0,
            hop_limit: 64,
            roce: o.roce[i],
        };
        e.modify_qp(
            q,
            &QpAttr {
                state: Some(QpState::Rtr),
                path: (!ud).then_some(path),
                path_mtu: (!ud).then_some(o.mtu),
                dest_qpn: (!ud).then_some(peer.qpn),
                rq_psn: (!ud).then_some(first_psn(1 - i)),
                max_dest_rd_atomic: rc.then_some(16),
                min_rnr_timer: rc.then_some(o.min_rnr_timer),
                ..QpAttr::default()
            },
        )
        .unwrap();
        e.modify_qp(
            q,
            &QpAttr {
                state: Some(QpState::Rts),
                sq_psn: Some(first_psn(i)),
                timeout: rc.then_some(o.timeout),
                retry_cnt: rc.then_some(o.retry_cnt),
                rnr_retry: rc.then_some(o.rnr_retry),
                max_rd_atomic: rc.then_some(o.max_rd_atomic),
                ..QpAttr::default()
            },
        )
        .unwrap();
    }
}

pub(crate) fn sge(side: &Side, offset: u64, len: u32) -> Vec<Sge> {
    vec![Sge {
        lkey: side.mr.lkey,
        offset,
        len,
    }]
}

pub(crate) fn send_wr(wr_id: u64, op: crate::verbs::SendOp, sg: &[Sge]) -> SendWr<'_> {
    SendWr::new(wr_id, op, sg)
}

pub(crate) fn recv_wr(wr_id: u64, sg: &[Sge]) -> RecvWr<'_> {
    RecvWr::new(wr_id, sg)
}

/// Peer memory by bare address and key: the engine tests aim at wrong
/// addresses and keys on purpose, so the slice's own bound is the largest
/// message, and the peer's checks are what is tested.
pub(crate) fn rmem(addr: u64, rkey: u32) -> RemoteSlice {
    RemoteSlice::new(addr, rkey, crate::MAX_MSG_SIZE)
}

/// Deterministic bytes for a test buffer.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}
