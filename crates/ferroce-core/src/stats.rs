//! The endpoint's counters: traffic, and what was dropped and why. Below
//! both the endpoint and the QP engines, which count into it.

/// Counters of what was dropped and why. Every counter counts from the
/// endpoint's creation and never wraps in practice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets handed to the endpoint (`handle_datagram` and kin).
    pub rx_packets: u64,
    /// Packets `poll_transmit` returned (CNPs and MADs included).
    pub tx_packets: u64,
    /// Packets too short or inconsistent to parse (or missing a header
    /// their opcode needs): dropped.
    pub rx_malformed: u64,
    /// Packets for a QP number (or EE context) the endpoint does not have.
    pub rx_unknown_qp: u64,
    /// Packets for a QP whose state does not receive (Reset, Init, Err),
    /// or responses for one not in RTS or SQD.
    pub rx_wrong_state: u64,
    /// Packets for a connected QP from another address than its path's.
    pub rx_wrong_source: u64,
    /// Packets for a connected QP in the other RoCE version than its
    /// path's (a RoCE v1 packet for a QP whose path is RoCE v2, or the
    /// reverse), as a NIC drops them.
    pub rx_wrong_roce: u64,
    /// UD (and QP1) datagrams whose DETH Q_Key is not the QP's: dropped.
    pub rx_bad_qkey: u64,
    /// Packets whose BTH P_Key is not of the QP's partition.
    pub rx_bad_pkey: u64,
    /// Requests with a PSN already taken (answered again as IBA says), or
    /// responses for PSNs already acknowledged.
    pub rx_duplicate: u64,
    /// Requests past the expected PSN (NAK sequence error on RC; the
    /// message dropped on UC), or READ responses out of order.
    pub rx_out_of_sequence: u64,
    /// Packets the QP cannot take in its transport or state: the wrong
    /// transport or XRC half, a UC message that fails, a UD SEND with no
    /// receive posted.
    pub rx_unexpected: u64,
    /// Times the requester went back to resend (a timeout, a NAK sequence
    /// error, a gap in READ responses): rewinds, not packets.
    pub retransmits: u64,
    /// RNR NAKs the responder sent: a SEND found no receive WQE.
    pub rnr_naks_sent: u64,
    /// Duplicate READ or atomic requests that match no request the
    /// responder recorded serving (or ask for other bytes than it served):
    /// dropped, not executed again.
    pub rx_duplicate_unserved: u64,
    /// New READ or atomic requests beyond the responder resources
    /// (`max_dest_rd_atomic`) while as many responses are still owed:
    /// dropped unexecuted, for the requester to send again.
    pub rx_over_depth: u64,
    /// ACKs and NAKs not queued because the QP already owed as many
    /// responses as it may (a peer flooding it with requests).
    pub acks_dropped: u64,
    /// Packets the engine could not emit from its own header values (a
    /// bug; see [`crate::EmitError`]), not sent.
    pub tx_emit_errors: u64,
    /// Always 0: the engine no longer sets packets aside for a region the
    /// application uses (regions have no lock).
    #[deprecated(
        note = "always 0: the engine never defers a packet for a region the application uses"
    )]
    pub rx_deferred: u64,
    /// Always 0, as [`Stats::rx_deferred`].
    #[deprecated(
        note = "always 0: the engine never defers a packet for a region the application uses"
    )]
    pub rx_deferred_dropped: u64,
    /// Always 0: a packet's payload is copied from its region whatever the
    /// application does with it.
    #[deprecated(
        note = "always 0: the engine never holds back a packet for a region the application uses"
    )]
    pub tx_region_busy: u64,
    /// Packets received marked Congestion Experienced (IP ECN = CE, or
    /// a RoCE v1 GRH's traffic class) for a QP that takes them.
    pub rx_ce: u64,
    /// CNPs sent: CE-marked packets answered (at most one per QP per
    /// `min_time_between_cnps`).
    pub cnps_sent: u64,
    /// CNPs not sent because [`crate::MAX_QUEUED_CNPS`] were waiting.
    pub cnps_dropped: u64,
    /// CNPs received for an RC or UC QP.
    pub cnps_received: u64,
    /// CNPs dropped: for a UD QP (DCQCN runs on connected QPs).
    pub rx_bad_cnp: u64,
    /// Rate cuts DCQCN made on CNPs.
    pub rate_cuts: u64,
    /// XRC requests whose XRCETH names no XRC SRQ of the target's domain
    /// (answered NAK Invalid Request).
    pub rx_bad_xrc_srq: u64,
    /// RD requests an EE context refused: no RD QP of its domain ready at
    /// the BTH's QP number, or another Q_Key (answered NAK invalid RD
    /// request).
    pub rx_bad_rd: u64,
    /// Multicast packets (DQPN 0xFFFFFF to a multicast GID) for a group no
    /// QP of the endpoint is attached to.
    pub rx_mcast_unattached: u64,
    /// Packets that break the multicast addressing rules (IBA 10.5.2.2):
    /// DQPN 0xFFFFFF to a unicast GID, another DQPN to a multicast GID, or
    /// anything but a UD SEND to a group.
    pub rx_mcast_misaddressed: u64,
    /// Copies of a multicast packet handed to an attached QP (one per QP
    /// that took it).
    pub rx_mcast_delivered: u64,
}
