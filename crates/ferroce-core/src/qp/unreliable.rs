//! The receive side of UC and UD QPs. UC: no responses; a gap drops the
//! message in progress and the QP resynchronises on the next FIRST or
//! ONLY. UD: a Q_Key check and one packet per message, delivered behind a
//! 40-byte GRH.

use std::net::IpAddr;

use ferroce_wire::TransportPacket;
use ferroce_wire::aeth::NakCode;
use ferroce_wire::opcode::Kind;

use super::Qp;
use super::responder::{Outcome, check_recv, give_back, recv_fault, send, take_recv, write};
use crate::mr::{CopyFault, RegionBusy};
use crate::tables::Tables;
use crate::verbs::{QpState, WcOpcode, WcStatus, WorkCompletion};

/// A UC request packet: executed in order, or dropped with its message.
pub(super) fn uc_receive(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    t: &mut Tables<'_>,
) -> Result<(), RegionBusy> {
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
            return Ok(());
        }
        // Resynchronised on this packet (a deferred retry finds no gap).
        qp.resp.epsn = psn;
    }
    let outcome = match info.kind {
        Kind::Send => send(qp, pkt, t),
        Kind::Write => write(qp, pkt, t),
        _ => Outcome::Nak(NakCode::InvalidRequest),
    };
    if outcome == Outcome::Busy {
        return Err(RegionBusy);
    }
    qp.resp.epsn = psn + 1;
    if outcome == Outcome::Nak(NakCode::RemoteOperationalError) {
        // A receive request that failed its local checks (completed with
        // LOC_PROT_ERR): fatal for the QP, as on RC, with no NAK to send.
        enter_error(qp, t);
        return Ok(());
    }
    if !matches!(outcome, Outcome::Ok) {
        // UC never NAKs: the message is silently dropped.
        t.stats.rx_unexpected += 1;
        if let Some((wr, _)) = qp.resp.recv.take() {
            give_back(qp, t.srqs, wr);
        }
        qp.resp.write = None;
    }
    Ok(())
}

/// The GRH ibverbs puts in front of every UD receive.
const GRH_LEN: usize = 40;

/// A UD SEND: delivered into the next receive WQE behind a GRH, if its
/// Q_Key is the QP's. `group` is the multicast GID a multicast copy was
/// sent to, which goes into the GRH's destination as a NIC writes it.
pub(super) fn ud_receive(
    qp: &mut Qp,
    pkt: &TransportPacket<&[u8]>,
    from: IpAddr,
    v1_grh: Option<&crate::endpoint::Grh>,
    group: Option<IpAddr>,
    t: &mut Tables<'_>,
) -> Result<(), RegionBusy> {
    let Some(deth) = pkt.deth() else {
        t.stats.rx_malformed += 1;
        return Ok(());
    };
    // The sender has already replaced a Q_Key with the high bit set by its
    // QP's own (IBA C10-15, in the requester): compare as is.
    if deth.qkey() != qp.cfg.qkey {
        t.stats.rx_bad_qkey += 1;
        return Ok(());
    }
    let Some(wr) = take_recv(qp, t.srqs) else {
        t.stats.rx_unexpected += 1; // UD drops when no receive is posted
        return Ok(());
    };
    if let Err(why) = check_recv(qp, t, &wr) {
        recv_fault(qp, t, &wr, &why);
        enter_error(qp, t);
        return Ok(());
    }
    // ibverbs puts the 40-byte GRH in front of UD data: for RoCE v2 over
    // IPv4, the IPv4 header sits in its last 20 bytes.
    // Only the version and the addresses are filled in (the destination
    // for a multicast copy only).
    const IPV4_VERSION_IHL: u8 = 0x45;
    const IPV6_VERSION: u8 = 0x60;
    // A RoCE v1 packet's GRH goes in whole, as a NIC places it.
    let mut grh = [0u8; GRH_LEN];
    match (v1_grh, from) {
        (Some(g), _) => grh = *g,
        (None, IpAddr::V4(a)) => {
            grh[20] = IPV4_VERSION_IHL;
            grh[32..36].copy_from_slice(&a.octets());
        }
        (None, IpAddr::V6(a)) => {
            grh[0] = IPV6_VERSION;
            grh[8..24].copy_from_slice(&a.octets());
        }
    }
    match (v1_grh, group) {
        (None, Some(IpAddr::V4(g))) => grh[36..40].copy_from_slice(&g.octets()),
        (None, Some(IpAddr::V6(g))) => grh[24..40].copy_from_slice(&g.octets()),
        _ => {}
    }
    let data = pkt.payload();
    let copied = t
        .mrs
        .scatter(&wr.sg, 0, &grh)
        .and_then(|()| t.mrs.scatter(&wr.sg, GRH_LEN as u64, data));
    let status = match copied {
        Ok(()) => WcStatus::Success,
        Err(CopyFault::Short) => WcStatus::LocLenErr,
        Err(CopyFault::Busy) => {
            give_back(qp, t.srqs, wr);
            return Err(RegionBusy);
        }
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
            },
            pkt.bth().solicited(),
        );
    }
    Ok(())
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
