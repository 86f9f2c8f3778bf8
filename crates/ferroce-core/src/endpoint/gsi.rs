//! QP1, the General Services Interface (GSI) QP every endpoint has from
//! creation (IBA 13.5): a UD QP with QPN 1, Q_Key 0x80010000 and the
//! default P_Key, over which the connection manager's MADs travel.
//!
//! Contract:
//! * QP1 is the endpoint's own: it is not in the application's QP table,
//!   so `modify_qp`, `destroy_qp`, `post_send` and `post_recv` on QPN 1
//!   fail with [`VerbsError::NoSuchQp`], and `create_qp` never returns it.
//! * In: a packet for QPN 1 is taken if it is a UD SEND_ONLY (no
//!   immediate: MADs never carry one) of the default partition with the
//!   GSI Q_Key and exactly [`MAD_LEN`] bytes of payload. Anything else is
//!   dropped and counted by cause in [`MadStats`]. The MAD's contents
//!   (base version, class, attribute) are not judged here: that is the CM's
//!   job, which counts its own malformed MADs.
//! * Taken MADs wait in a queue of at most [`MAX_QUEUED_MADS`] for
//!   [`Endpoint::poll_mad`]; past the bound the oldest is dropped and
//!   counted ([`MadStats::rx_overflow`]), so that MADs nobody reads (no CM
//!   above yet) cost bounded memory and no caller has to drain them.
//! * Out: [`Endpoint::send_mad`] (RoCE v2) or [`Endpoint::send_mad_via`]
//!   (either version) queues a UD SEND_ONLY from QP 1 with the GSI Q_Key,
//!   sent by [`Endpoint::poll_transmit`] ahead of the
//!   application's QPs (MADs are few and small; a CM retry timer should
//!   not wait behind a bulk transfer).
//!
//! The UDP source port is rxe's for QP1: rxe treats QP1 as any UD QP,
//! `0xC000 + hash_32(qpn, 14)`, which for QPN 1 is 55410 (0xD872),
//! [`ferroce_wire::udp::ud_source_port`]. Verified on the CM MADs of
//! `shared/vectors/rxe/rping.pcap` (REQ, REP and RTU: all from UDP source
//! port 55410, in both directions, TTL 64, BTH AckReq set, PSNs counting
//! up by one per MAD from a small number).

use std::collections::VecDeque;
use std::net::IpAddr;

use ferroce_wire::{Opcode, Psn, TransportPacket};

use super::{Endpoint, Transmit};
use crate::qp::{DEFAULT_PKEY, pkey_matches, transport_repr};
use crate::transmit::BufPool;
use crate::verbs::{Path, RoceMode, VerbsError};

/// QP1's number.
pub const GSI_QPN: u32 = 1;

/// The GSI's well-known Q_Key (IBA 13.5.1, the kernel's `IB_QP1_QKEY`).
pub const GSI_QKEY: u32 = 0x8001_0000;

/// A MAD's size on the wire: every CM MAD is exactly this (IBA 13.4.1).
pub const MAD_LEN: usize = 256;

/// At most this many received MADs wait for [`Endpoint::poll_mad`] (and as
/// many for sending): 64 KiB each way.
pub const MAX_QUEUED_MADS: usize = 256;

/// The IP hop limit (TTL) of QP1 packets: rxe's 64.
const HOP_LIMIT: u8 = 64;

/// A MAD received on QP1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mad {
    /// The sender's address (its GID as an IP address).
    pub from: IpAddr,
    /// The RoCE version it came in: v1 (a GRH in an Ethernet frame) or v2
    /// (UDP). The CM answers in the same version, as the kernel's does.
    pub roce: RoceMode,
    /// The sending QP (DETH source QP): 1 for the CM.
    pub src_qp: u32,
    /// The index of the P_Key it came in under: 0, the only one (0xFFFF).
    pub pkey_index: u16,
    /// The MAD itself: the UD payload, exactly [`MAD_LEN`] bytes.
    pub data: Box<[u8; MAD_LEN]>,
}

/// QP1's counters: MADs through, and the packets dropped and why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MadStats {
    /// MADs received and queued for [`Endpoint::poll_mad`].
    pub rx_mads: u64,
    /// MADs sent (returned by `poll_transmit`).
    pub tx_mads: u64,
    /// Not a UD SEND_ONLY (another transport, or with immediate data).
    pub rx_bad_opcode: u64,
    /// A Q_Key other than [`GSI_QKEY`].
    pub rx_bad_qkey: u64,
    /// A P_Key not of the default partition.
    pub rx_bad_pkey: u64,
    /// A payload other than [`MAD_LEN`] bytes.
    pub rx_bad_length: u64,
    /// Received MADs dropped, oldest first, past [`MAX_QUEUED_MADS`].
    pub rx_overflow: u64,
}

/// Where a queued MAD goes: the peer's address and QP, and the RoCE
/// version of its frame.
#[derive(Debug, Clone, Copy)]
struct OutMad {
    to: IpAddr,
    dest_qp: u32,
    roce: RoceMode,
}

/// QP1's queues and send PSN.
#[derive(Debug, Default)]
pub(super) struct Gsi {
    rx: VecDeque<Mad>,
    tx: VecDeque<(OutMad, Box<[u8; MAD_LEN]>)>,
    /// The next send PSN; the kernel's MAD layer starts QP1 at 0.
    psn: u32,
    stats: MadStats,
}

impl Gsi {
    /// A packet for QPN 1: queued if it is a MAD, else counted.
    /// `roce` is the version it came in (a GRH: v1).
    pub(super) fn receive(&mut self, pkt: &TransportPacket<&[u8]>, from: IpAddr, roce: RoceMode) {
        let s = &mut self.stats;
        if pkt.bth().opcode() != Opcode::UD_SEND_ONLY {
            s.rx_bad_opcode += 1;
            return;
        }
        if !pkey_matches(pkt.bth().pkey(), DEFAULT_PKEY) {
            s.rx_bad_pkey += 1;
            return;
        }
        let Some(deth) = pkt.deth() else {
            s.rx_bad_opcode += 1; // a UD SEND_ONLY always parses with one
            return;
        };
        if deth.qkey() != GSI_QKEY {
            s.rx_bad_qkey += 1;
            return;
        }
        let Ok(data) = <[u8; MAD_LEN]>::try_from(pkt.payload()) else {
            s.rx_bad_length += 1;
            return;
        };
        if self.rx.len() >= MAX_QUEUED_MADS {
            self.rx.pop_front();
            s.rx_overflow += 1;
        }
        s.rx_mads += 1;
        self.rx.push_back(Mad {
            from,
            roce,
            src_qp: deth.src_qp(),
            pkey_index: 0,
            data: Box::new(data),
        });
    }

    /// The next queued MAD as a packet, if any.
    pub(super) fn next_transmit(&mut self, pool: &mut BufPool) -> Option<Transmit> {
        let (OutMad { to, dest_qp, roce }, mad) = self.tx.pop_front()?;
        let psn = Psn::new(self.psn);
        self.psn = (self.psn + 1) & 0xff_ffff;
        let mut t = transport_repr(Opcode::UD_SEND_ONLY, psn, dest_qp, MAD_LEN);
        // rxe sets AckReq on its MADs (seen in rping.pcap); UD ignores it.
        t.bth.ack_req = true;
        t.deth = Some(ferroce_wire::deth::DethRepr {
            qkey: GSI_QKEY,
            src_qp: GSI_QPN,
        });
        let path = Path {
            remote: to,
            udp_src_port: ferroce_wire::udp::ud_source_port(GSI_QPN),
            traffic_class: 0,
            hop_limit: HOP_LIMIT,
            roce,
        };
        // Built from constants and a checked length, so it cannot fail;
        // were it to, the MAD is lost as on the wire and the CM resends.
        let t = Transmit::build(pool, path, &t, |out| out.copy_from_slice(&mad[..])).ok()?;
        self.stats.tx_mads += 1;
        Some(t)
    }
}

impl Endpoint {
    /// The oldest MAD received on QP1 not yet taken.
    pub fn poll_mad(&mut self) -> Option<Mad> {
        self.gsi.rx.pop_front()
    }

    /// Queues `mad` to go from QP1 to QP `dest_qp` (1 for the CM) at `to`
    /// over RoCE v2, with the GSI Q_Key; [`Self::poll_transmit`] sends it.
    pub fn send_mad(&mut self, to: IpAddr, dest_qp: u32, mad: &[u8]) -> Result<(), VerbsError> {
        self.send_mad_via(RoceMode::V2, to, dest_qp, mad)
    }

    /// [`Self::send_mad`] in a frame of RoCE version `roce` (v1 needs a
    /// backend that sends Ethernet frames; the UDP one drops it, counted).
    pub fn send_mad_via(
        &mut self,
        roce: RoceMode,
        to: IpAddr,
        dest_qp: u32,
        mad: &[u8],
    ) -> Result<(), VerbsError> {
        let Ok(data) = <[u8; MAD_LEN]>::try_from(mad) else {
            return Err(VerbsError::BadValue {
                what: "MAD length (a MAD is 256 bytes)",
                value: mad.len() as u64,
            });
        };
        if dest_qp > 0xff_ffff {
            return Err(VerbsError::BadValue {
                what: "destination QP number (24 bits)",
                value: dest_qp.into(),
            });
        }
        if self.gsi.tx.len() >= MAX_QUEUED_MADS {
            return Err(VerbsError::QueueFull {
                qpn: GSI_QPN,
                queue: "QP1 send queue (call poll_transmit)",
                depth: MAX_QUEUED_MADS as u32,
            });
        }
        let out = OutMad { to, dest_qp, roce };
        self.gsi.tx.push_back((out, Box::new(data)));
        Ok(())
    }

    /// QP1's counters.
    pub fn mad_stats(&self) -> MadStats {
        self.gsi.stats
    }
}
