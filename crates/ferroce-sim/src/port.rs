//! One end of a link: serialization at the link's rate, and the PAUSE
//! state of each priority as PFC frames from the peer set it. A packet on
//! the wire is a [`Packet`]: the engine's transport bytes and the header
//! fields a switch looks at (addresses, UDP source port, ECN, priority).

use ferroce_core::Ecn;

use crate::scenario::PRIORITIES;
use crate::topology::NodeId;

/// Bytes a RoCE v2 packet takes on the wire beyond its transport bytes
/// (BTH through ICRC): Ethernet header 14, IPv4 20, UDP 8, FCS 4, and the
/// preamble, start delimiter and inter-frame gap, 20.
pub const FRAME_OVERHEAD: u64 = 14 + 20 + 8 + 4 + 20;

/// A PFC frame's size on the wire: a minimum Ethernet frame and its gap.
pub(crate) const PAUSE_FRAME_BYTES: u64 = 64 + 20;

/// Bytes in one pause quantum (512 bit times).
const QUANTUM_BYTES: u64 = 512 / 8;

/// Time, in picoseconds since the start.
pub(crate) type Ps = u64;

/// A packet travelling the fabric.
#[derive(Debug)]
pub struct Packet {
    /// Host indices.
    pub src: u32,
    pub dst: u32,
    /// The flow's entropy for ECMP (RoCE v2's UDP source port).
    pub udp_src_port: u16,
    pub ecn: Ecn,
    pub prio: u8,
    /// The port it came in on at the switch holding it (for PFC's books).
    pub in_port: u16,
    /// BTH through ICRC, as the engine built it.
    pub data: Vec<u8>,
}

impl Packet {
    pub fn wire_len(&self) -> u64 {
        self.data.len() as u64 + FRAME_OVERHEAD
    }

    /// Whether it is a CNP (BTH opcode 0x81, the first byte).
    pub fn is_cnp(&self) -> bool {
        self.data.first() == Some(&ferroce_wire::Opcode::CNP.0)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Pause {
    /// When the current pause began; `None` while not paused.
    since: Option<Ps>,
    /// When it runs out unless refreshed.
    until: Ps,
}

/// A port's transmit side.
#[derive(Debug)]
pub struct Port {
    pub peer: NodeId,
    pub peer_port: u16,
    ps_per_byte: f64,
    pub delay: Ps,
    /// Serializing a packet now.
    pub busy: bool,
    pause: [Pause; PRIORITIES],
    /// Time spent paused before the current pause (any priority; the
    /// simulated traffic uses one).
    paused_before: Ps,
    /// PAUSE frames received (XOFF and XON).
    pub pause_frames: u64,
    /// Packets sent.
    pub tx_packets: u64,
}

impl Port {
    pub fn new(peer: NodeId, peer_port: u16, rate_gbps: f64, delay_ns: u64) -> Self {
        Self {
            peer,
            peer_port,
            ps_per_byte: 8000.0 / rate_gbps,
            delay: delay_ns * 1000,
            busy: false,
            pause: [Pause::default(); PRIORITIES],
            paused_before: 0,
            pause_frames: 0,
            tx_packets: 0,
        }
    }

    /// The link's rate.
    pub fn rate_gbps(&self) -> f64 {
        8000.0 / self.ps_per_byte
    }

    /// Time to put `bytes` on the wire.
    pub fn serialize(&self, bytes: u64) -> Ps {
        (bytes as f64 * self.ps_per_byte).round() as Ps
    }

    pub fn paused(&self, prio: u8) -> bool {
        self.pause[usize::from(prio)].since.is_some()
    }

    /// A PAUSE frame for `prio` asking `quanta` (0: resume). Returns when
    /// the pause runs out, for the caller to look again then.
    pub fn on_pause(&mut self, now: Ps, prio: u8, quanta: u16) -> Option<Ps> {
        self.pause_frames += 1;
        let p = &mut self.pause[usize::from(prio)];
        if quanta == 0 {
            if let Some(since) = p.since.take() {
                self.paused_before += now - since;
            }
            p.until = now;
            return None;
        }
        p.since.get_or_insert(now);
        let until =
            now + ((u64::from(quanta) * QUANTUM_BYTES) as f64 * self.ps_per_byte).round() as Ps;
        p.until = until;
        Some(until)
    }

    /// The pause time of `prio` asked for `at` has come: true if the port
    /// may send again (no later frame refreshed it).
    pub fn pause_ends(&mut self, at: Ps, prio: u8) -> bool {
        let p = &mut self.pause[usize::from(prio)];
        match p.since {
            Some(since) if p.until == at => {
                self.paused_before += at - since;
                p.since = None;
                true
            }
            _ => false,
        }
    }

    /// Time paused up to `now`.
    pub fn paused_time(&self, now: Ps) -> Ps {
        self.paused_before
            + self
                .pause
                .iter()
                .filter_map(|p| p.since)
                .map(|s| now - s)
                .sum::<Ps>()
    }

    /// How long a PAUSE of `quanta` holds this port's peer (same link rate).
    pub fn pause_length(&self, quanta: u16) -> Ps {
        self.serialize(u64::from(quanta) * QUANTUM_BYTES)
    }
}
