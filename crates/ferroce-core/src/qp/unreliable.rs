//! The receive side of UC and UD QPs. UC: no responses; a gap drops the
//! message in progress and the QP resynchronises on the next FIRST or
//! ONLY. UD: a Q_Key check and one packet per message, delivered behind a
//! 40-byte GRH.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ferroce_wire::TransportPacket;
use ferroce_wire::aeth::NakCode;
use ferroce_wire::ipv4::{self, Ipv4Repr};
use ferroce_wire::ipv6::Ipv6Repr;
use ferroce_wire::opcode::Kind;
use ferroce_wire::udp;

use super::Qp;
use super::responder::{Outcome, check_recv, give_back, recv_fault, send, take_recv, write};
use crate::tables::Tables;
use crate::transmit::Ecn;
use crate::verbs::{NetworkHeader, QpState, WcOpcode, WcStatus, WorkCompletion};

/// A UC request packet: executed in order, or dropped with its message.
pub(super) fn uc_receive(qp: &mut Qp, pkt: &TransportPacket<&[u8]>, t: &mut Tables<'_>) {
    let psn = pkt.bth().psn();
    let info = pkt.info();
    if psn != qp.resp.epsn {
        // A gap: the message in progress is lost (its receive WQE is
        // reused for the next message); resynchronise on a FIRST or ONLY.
        t.stats.rx_out_of_sequence += 1;
        if let Some((wr, _)) = qp.resp.recv.take() {
            give_back(qp, t.srqs, wr);
        }
        qp.resp.write = None;
        if !info.position.starts() {
            qp.resp.epsn = psn + 1;
            return;
        }
        // Resynchronised on this packet.
        qp.resp.epsn = psn;
    }
    let outcome = match info.kind {
        Kind::Send => send(qp, pkt, t),
        Kind::Write => write(qp, pkt, t),
        _ => Outcome::Nak(NakCode::InvalidRequest),
    };
    qp.resp.epsn = psn + 1;
    if outcome == Outcome::Nak(NakCode::RemoteOperationalError) {
        // A receive request that failed its local checks (completed with
        // LOC_PROT_ERR): fatal for the QP, as on RC, with no NAK to send.
        enter_error(qp, t);
        return;
    }
    if !matches!(outcome, Outcome::Ok) {
        // UC never NAKs: the message is silently dropped.
        t.stats.rx_unexpected += 1;
        if let Some((wr, _)) = qp.resp.recv.take() {
            give_back(qp, t.srqs, wr);
        }
        qp.resp.write = None;
    }
}

/// The GRH ibverbs puts in front of every UD receive.
const GRH_LEN: usize = 40;
/// Where a RoCE v2 IPv4 header sits in the GRH area (its last 20 bytes;
/// the first 20 are left zero, as rxe leaves them).
const IPV4_IN_GRH: usize = GRH_LEN - ipv4::MIN_HEADER_LEN;
/// The TTL / hop limit the GRH area shows for a RoCE v2 packet: the UDP
/// backend's sockets do not see the received one, and Linux sends with 64.
const RX_HOP_LIMIT: u8 = 64;

/// How a packet for a UD QP came: what its GRH area shows.
pub(crate) struct Arrival<'a> {
    /// The sender's address (a RoCE v1 packet's SGID as an address).
    pub from: IpAddr,
    /// The destination: the multicast group of a multicast copy, else the
    /// device's own address, if known.
    pub to: Option<IpAddr>,
    /// The ECN field the packet came with.
    pub ecn: Ecn,
    /// A RoCE v1 packet's GRH, which the receive gets whole.
    pub v1_grh: Option<&'a crate::endpoint::Grh>,
}

impl Arrival<'_> {
    /// The 40-byte GRH area of a receive of `len` transport bytes (BTH
    /// through ICRC), and which header it holds. RoCE v2 over IPv4: the
    /// IPv4 header in the last 20 bytes, as rxe and mlx5 write it (version
    /// and IHL, TOS, total length, flags with DF, TTL, protocol UDP,
    /// checksum, source, destination; ferroce's UDP sockets do not see the
    /// identification, TTL or DSCP, so they read 0, 64 and 0); over IPv6
    /// the IPv6 header in all 40.
    fn grh(&self, len: usize) -> ([u8; GRH_LEN], NetworkHeader) {
        let mut grh = [0u8; GRH_LEN];
        if let Some(g) = self.v1_grh {
            return (*g, NetworkHeader::Grh);
        }
        let udp_len = udp::HEADER_LEN + len;
        let unspecified = |v6: bool| match v6 {
            true => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            false => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        let to = self.to.unwrap_or_else(|| unspecified(self.from.is_ipv6()));
        match (self.from, to) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let hdr = Ipv4Repr {
                    header_len: ipv4::MIN_HEADER_LEN as u8,
                    dscp: 0,
                    ecn: self.ecn.bits(),
                    total_len: (ipv4::MIN_HEADER_LEN + udp_len).min(usize::from(u16::MAX)) as u16,
                    ident: 0,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                    ttl: RX_HOP_LIMIT,
                    protocol: ipv4::PROTO_UDP,
                    checksum: 0,
                    src,
                    dst,
                };
                // 20 bytes always fit the area's last 20.
                let _ = hdr.emit(&mut grh[IPV4_IN_GRH..]);
                (grh, NetworkHeader::Ipv4)
            }
            (src, dst) => {
                let as_v6 = |a: IpAddr| match a {
                    IpAddr::V4(a) => a.to_ipv6_mapped(),
                    IpAddr::V6(a) => a,
                };
                let hdr = Ipv6Repr {
                    traffic_class: self.ecn.bits(),
                    flow_label: 0,
                    payload_len: udp_len.min(usize::from(u16::MAX)) as u16,
                    next_header: ipv4::PROTO_UDP,
                    hop_limit: RX_HOP_LIMIT,
                    src: as_v6(src),
                    dst: as_v6(dst),
                };
                let _ = hdr.emit(&mut grh);
                (grh, NetworkHeader::Ipv6)
            }
        }
    }
}

/// A UD SEND: delivered into the next receive WQE behind the GRH area
/// ([`Arrival::grh`]), if its Q_Key is the QP's.
pub(super) fn ud_receive(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    arrival: &Arrival<'_>,
    t: &mut Tables<'_>,
) {
    let Some(deth) = pkt.deth() else {
        t.stats.rx_malformed += 1;
        return;
    };
    // The sender has already replaced a Q_Key with the high bit set by its
    // QP's own (IBA C10-15, in the requester): compare as is.
    if deth.qkey() != qp.cfg.qkey {
        t.stats.rx_bad_qkey += 1;
        return;
    }
    let Some(wr) = take_recv(qp, t.srqs) else {
        t.stats.rx_unexpected += 1; // UD drops when no receive is posted
        return;
    };
    if let Err(why) = check_recv(qp, t, &wr) {
        recv_fault(qp, t, &wr, &why);
        enter_error(qp, t);
        return;
    }
    let (grh, network) = arrival.grh(pkt.as_bytes().len());
    let data = pkt.payload();
    let copied = t
        .mrs
        .scatter(&wr.sg, 0, &grh)
        .and_then(|()| t.mrs.scatter(&wr.sg, GRH_LEN as u64, data));
    let status = match copied {
        Ok(()) => WcStatus::Success,
        Err(_) => WcStatus::LocLenErr,
    };
    if let Some(cq) = t.cqs.get_mut(&qp.init.recv_cq) {
        cq.push_solicited(
            WorkCompletion {
                wr_id: wr.wr_id,
                status,
                opcode: WcOpcode::Recv,
                qpn: qp.qpn,
                byte_len: (GRH_LEN + data.len()) as u32,
                imm: pkt.imm(),
                invalidated_rkey: None,
                src_qp: deth.src_qp(),
                network: Some(network),
            },
            pkt.bth().solicited(),
        );
    }
}

/// A UC or UD QP's move to the error state after a receive request failed
/// its local checks: the rest of its queues is flushed.
fn enter_error(qp: &mut Qp, t: &mut Tables<'_>) {
    crate::log::state_change(
        qp.qpn,
        qp.state,
        QpState::Err,
        crate::log::Why::Completion(WcStatus::LocProtErr),
    );
    qp.state = QpState::Err;
    super::completer::flush(qp, t.cqs);
}
