//! What the upper layer gives the CM: its limits, and the parameters of a
//! connection request, a reply, and a SIDR request.

use core::time::Duration;
use std::net::IpAddr;

use ferroce_core::verbs::RoceMode;
use ferroce_wire::Psn;
use ferroce_wire::mad::{CmPath, TRANSPORT_RC};

/// Where a MAD came from or goes to: the peer's IP address, the QP that
/// sent it (QP1 for every CM MAD the kernel sends), and the RoCE version
/// of its frames (the GID type of the path): a communication's MADs all go
/// in the version its first one came in or was sent in, as the kernel's
/// CM answers with an address handle made from the request's work
/// completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerAddr {
    pub ip: IpAddr,
    pub qpn: u32,
    pub roce: RoceMode,
}

impl PeerAddr {
    /// The peer's GSI QP (QP1) over RoCE v2.
    pub const fn gsi(ip: IpAddr) -> Self {
        Self::gsi_via(RoceMode::V2, ip)
    }

    /// The peer's GSI QP over RoCE version `roce`.
    pub const fn gsi_via(roce: RoceMode, ip: IpAddr) -> Self {
        Self { ip, qpn: 1, roce }
    }
}

/// Limits and identity of one [`crate::Cm`].
#[derive(Debug, Clone)]
pub struct CmConfig {
    /// Seeds the comm ID generator.
    pub seed: u64,
    /// The node GUID this CM puts in REQ and REP.
    pub local_ca_guid: u64,
    /// The high 32 bits of the transaction IDs this CM starts.
    pub tid_high: u32,
    /// The device's ACK delay (rxe: 15), for the REQ's local ACK timeout.
    pub ca_ack_delay: u8,
    /// Connections not yet established plus SIDR requests in flight, both
    /// sides; a REQ beyond it is rejected with "no resources".
    pub max_pending: usize,
    /// Connections in TimeWait; entering one more ends the oldest early.
    pub max_timewait: usize,
    /// Longest TimeWait, whatever the packet life time says.
    pub timewait_cap: Duration,
    /// MADs waiting for `poll_transmit`; more are dropped and counted.
    pub max_transmit_queue: usize,
    /// Events waiting for `poll_event`; more are dropped and counted.
    pub max_events: usize,
    /// The service timeout of the MRA sent when the peer repeats a REQ (or
    /// REP) the application has not answered yet: rdma_cm's delayed MRA,
    /// 24 (about 67 s). `None`: MRAs only when the application calls
    /// `send_mra`.
    pub delayed_mra: Option<u8>,
}

impl Default for CmConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            local_ca_guid: 0,
            tid_high: 2,
            ca_ack_delay: 15,
            max_pending: 1024,
            max_timewait: 4096,
            timewait_cap: Duration::from_secs(10),
            max_transmit_queue: 4096,
            max_events: 4096,
            delayed_mra: Some(24),
        }
    }
}

/// A connection request (the fields of the REQ the caller chooses).
#[derive(Debug, Clone)]
pub struct ConnectParams {
    pub peer: PeerAddr,
    pub service_id: u64,
    pub qpn: u32,
    /// Carried as the REQ's starting PSN (see `CmReq::starting_psn`).
    pub starting_psn: Psn,
    /// At most 92 bytes.
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 3 bits.
    pub retry_count: u8,
    /// 3 bits; 7 is forever.
    pub rnr_retry_count: u8,
    /// 4 bits: how often this CM and the peer resend an unanswered message.
    pub max_cm_retries: u8,
    /// 5-bit IBA times: how long the peer may take to answer us, and we it.
    pub remote_cm_response_timeout: u8,
    pub local_cm_response_timeout: u8,
    /// 5-bit IBA time; rdma_cm uses 18 over RoCE.
    pub packet_life_time: u8,
    /// IBA MTU code (1 = 256 ... 5 = 4096).
    pub path_mtu: u8,
    /// `TRANSPORT_RC` or `TRANSPORT_UC`.
    pub transport: u8,
    pub partition_key: u16,
    /// The primary path; its `local_ack_timeout` is computed by the CM.
    pub path: CmPath,
}

impl ConnectParams {
    /// rdma_cm's defaults over RoCE: RC, retries 7, CM retries 15, response
    /// timeouts 20, packet life time 18, MTU 1024, one read each way.
    pub fn new(peer: PeerAddr, service_id: u64, qpn: u32, starting_psn: Psn) -> Self {
        Self {
            peer,
            service_id,
            qpn,
            starting_psn,
            private_data: Vec::new(),
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            remote_cm_response_timeout: 20,
            local_cm_response_timeout: 20,
            packet_life_time: 18,
            path_mtu: 3,
            transport: TRANSPORT_RC,
            partition_key: 0xffff,
            path: CmPath {
                local_port_lid: 0xffff,
                remote_port_lid: 0xffff,
                local_port_gid: [0; 16],
                remote_port_gid: [0; 16],
                flow_label: 0,
                packet_rate: 0,
                traffic_class: 0,
                hop_limit: 64,
                sl: 0,
                subnet_local: false,
                local_ack_timeout: 0,
            },
        }
    }
}

/// The passive side's answer to a REQ.
#[derive(Debug, Clone, Default)]
pub struct RepParams {
    pub qpn: u32,
    /// Carried as the REP's starting PSN (see `CmRep::starting_psn`).
    pub starting_psn: Psn,
    /// At most 196 bytes.
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 3 bits.
    pub rnr_retry_count: u8,
    pub srq: bool,
}

/// A service ID resolution request (UD).
#[derive(Debug, Clone)]
pub struct SidrParams {
    pub peer: PeerAddr,
    pub service_id: u64,
    pub partition_key: u16,
    /// At most 216 bytes.
    pub private_data: Vec<u8>,
    /// Wait for each try, and how many tries after the first.
    pub timeout: Duration,
    pub max_retries: u8,
}

/// The answer to a SIDR request.
#[derive(Debug, Clone, Default)]
pub struct SidrReplyParams {
    /// `SIDR_STATUS_OK` and the others of `ferroce_wire::mad`.
    pub status: u8,
    pub qpn: u32,
    pub qkey: u32,
    /// At most 136 bytes.
    pub private_data: Vec<u8>,
}
