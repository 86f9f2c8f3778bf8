//! Communication Manager message bodies (IBA vol. 1 §12.6, tables 106-113).
//!
//! Each message occupies the [`CM_DATA_LEN`] bytes that follow the MAD
//! header. Offsets below are relative to that data area and bits are counted
//! from the most significant bit of a byte, as in the spec's `Byte[Bit]`
//! notation. `parse` never fails on field values (reserved bits are ignored),
//! except a REJ whose ARI length exceeds the ARI field. `emit` writes the whole
//! data area, reserved bits as zero, and refuses values wider than their field.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{CM_DATA_LEN, attr};
use crate::field::{
    Field, read_u16, read_u24, read_u32, read_u64, write_u16, write_u24, write_u32, write_u64,
};
use crate::{Error, Header, Psn, Result};

/// Transport service type of a REQ: reliable connection.
pub const TRANSPORT_RC: u8 = 0x0;
/// Transport service type of a REQ: unreliable connection.
pub const TRANSPORT_UC: u8 = 0x1;
/// Transport service type of a REQ: reliable datagram.
pub const TRANSPORT_RD: u8 = 0x2;

/// rdma_cm port space of TCP-like (RC) connections.
pub const IP_CM_PS_TCP: u16 = 0x0106;
/// rdma_cm port space of UDP-like (UD) endpoints.
pub const IP_CM_PS_UDP: u16 = 0x0111;
/// rdma_cm port space of native IB endpoints.
pub const IP_CM_PS_IB: u16 = 0x013f;

/// The length of the rdma_cm IP header at the start of the private data.
const IP_CM_HEADER_LEN: usize = 36;

/// The data area of a message being parsed, or `Truncated`.
fn data_in(data: &[u8]) -> Result<&[u8]> {
    crate::field::check(Header::Mad, CM_DATA_LEN, data.len())?;
    Ok(&data[..CM_DATA_LEN])
}

/// The zeroed data area of a message being emitted, or `BufferTooSmall`.
fn data_out(data: &mut [u8]) -> Result<&mut [u8]> {
    if data.len() < CM_DATA_LEN {
        return Err(Error::BufferTooSmall {
            needed: CM_DATA_LEN,
            available: data.len(),
        });
    }
    let out = &mut data[..CM_DATA_LEN];
    out.fill(0);
    Ok(out)
}

/// `width` bits of `byte`, starting `offset` bits below its most significant bit.
const fn bits(byte: u8, offset: u32, width: u32) -> u8 {
    ((byte as u32 >> (8 - offset - width)) & ((1 << width) - 1)) as u8
}

/// Bit `offset` (from the most significant) of `byte`.
const fn bit(byte: u8, offset: u32) -> bool {
    bits(byte, offset, 1) == 1
}

/// `value` placed at `offset` bits below the most significant bit of a byte.
fn place(field: &'static str, value: u8, offset: u32, width: u32) -> Result<u8> {
    if u32::from(value) >> width != 0 {
        return Err(Error::FieldOverflow {
            field,
            value: value.into(),
        });
    }
    Ok(value << (8 - offset - width))
}

/// A flag placed at bit `offset` (from the most significant) of a byte.
fn flag(value: bool, offset: u32) -> u8 {
    u8::from(value) << (7 - offset)
}

/// Writes a 24-bit field, refusing wider values.
fn put_u24(field: &'static str, b: &mut [u8], f: Field, value: u32) -> Result<()> {
    if value > 0x00ff_ffff {
        return Err(Error::FieldOverflow {
            field,
            value: value.into(),
        });
    }
    write_u24(b, f, value);
    Ok(())
}

fn array<const N: usize>(b: &[u8], start: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[start..start + N]);
    a
}

/// The names used in errors for the fields of one path of a REQ.
struct PathFields {
    flow_label: &'static str,
    packet_rate: &'static str,
    sl: &'static str,
    local_ack_timeout: &'static str,
}

const PRIMARY: PathFields = PathFields {
    flow_label: "req.primary_path.flow_label",
    packet_rate: "req.primary_path.packet_rate",
    sl: "req.primary_path.sl",
    local_ack_timeout: "req.primary_path.local_ack_timeout",
};

const ALTERNATE: PathFields = PathFields {
    flow_label: "req.alternate_path.flow_label",
    packet_rate: "req.alternate_path.packet_rate",
    sl: "req.alternate_path.sl",
    local_ack_timeout: "req.alternate_path.local_ack_timeout",
};

/// The primary or alternate path of a REQ (44 bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmPath {
    /// Local Port LID: the sender's LID; 0xFFFF (permissive) over RoCE.
    pub local_port_lid: u16,
    /// Remote Port LID: the receiver's LID; 0xFFFF (permissive) over RoCE.
    pub remote_port_lid: u16,
    /// Local Port GID: the sender's GID; over RoCE an IPv4-mapped IPv6 address for IPv4.
    pub local_port_gid: [u8; 16],
    /// Remote Port GID: the receiver's GID.
    pub remote_port_gid: [u8; 16],
    /// Flow Label of the GRH, 20 bits.
    pub flow_label: u32,
    /// Packet Rate: the static rate, 6 bits in the IBA rate encoding.
    pub packet_rate: u8,
    /// Traffic Class of the GRH (on RoCE v2 the IP DSCP and ECN).
    pub traffic_class: u8,
    /// Hop Limit of the GRH (on RoCE v2 the IP TTL).
    pub hop_limit: u8,
    /// SL: the service level, 4 bits.
    pub sl: u8,
    /// Subnet Local: the path does not leave the subnet (no GRH needed on IB).
    pub subnet_local: bool,
    /// Local ACK Timeout: 4.096 µs × 2^value, 5 bits.
    pub local_ack_timeout: u8,
}

impl CmPath {
    const LEN: usize = 44;

    fn parse(b: &[u8]) -> Self {
        Self {
            local_port_lid: read_u16(b, 0..2),
            remote_port_lid: read_u16(b, 2..4),
            local_port_gid: array(b, 4),
            remote_port_gid: array(b, 20),
            flow_label: read_u32(b, 36..40) >> 12,
            packet_rate: bits(b[39], 2, 6),
            traffic_class: b[40],
            hop_limit: b[41],
            sl: bits(b[42], 0, 4),
            subnet_local: bit(b[42], 4),
            local_ack_timeout: bits(b[43], 0, 5),
        }
    }

    fn emit(&self, b: &mut [u8], names: &PathFields) -> Result<()> {
        if self.flow_label > 0x000f_ffff {
            return Err(Error::FieldOverflow {
                field: names.flow_label,
                value: self.flow_label.into(),
            });
        }
        let rate = place(names.packet_rate, self.packet_rate, 2, 6)?;
        write_u16(b, 0..2, self.local_port_lid);
        write_u16(b, 2..4, self.remote_port_lid);
        b[4..20].copy_from_slice(&self.local_port_gid);
        b[20..36].copy_from_slice(&self.remote_port_gid);
        write_u32(b, 36..40, self.flow_label << 12 | u32::from(rate));
        b[40] = self.traffic_class;
        b[41] = self.hop_limit;
        b[42] = place(names.sl, self.sl, 0, 4)? | flag(self.subnet_local, 4);
        b[43] = place(names.local_ack_timeout, self.local_ack_timeout, 0, 5)?;
        Ok(())
    }
}

/// ConnectRequest (REQ, attribute 0x0010), table 106.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmReq {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// ServiceID: the service asked for (rdma_cm: see [`IpCmService`]).
    pub service_id: u64,
    /// Local CA GUID: the sender's channel adapter GUID.
    pub local_ca_guid: u64,
    /// Local Q_Key: the sender's Q_Key (RD only).
    pub local_qkey: u32,
    /// Local QPN: the sender's QP number, 24 bits.
    pub local_qpn: u32,
    /// Responder Resources: RDMA READs and atomics the sender accepts outstanding as responder.
    pub responder_resources: u8,
    /// Local EECN: the sender's EE context (RD only), 24 bits.
    pub local_eecn: u32,
    /// Initiator Depth: RDMA READs and atomics the sender issues outstanding as initiator.
    pub initiator_depth: u8,
    /// Remote EECN: the receiver's EE context (RD only), 24 bits.
    pub remote_eecn: u32,
    /// Remote CM Response Timeout: how long the receiver may take to answer, 4.096 µs × 2^value, 5 bits.
    pub remote_cm_response_timeout: u8,
    /// Transport Service Type, 2 bits: [`TRANSPORT_RC`], [`TRANSPORT_UC`],
    /// [`TRANSPORT_RD`], or 3 (see `extended_transport_type`).
    pub transport_service_type: u8,
    /// End-to-End Flow Control: the sender's receive queue issues credits.
    pub end_to_end_flow_control: bool,
    /// The first PSN the *passive* side sends with (the active side's
    /// expected receive PSN); the kernel CM sets it as the responder's SQ PSN.
    pub starting_psn: Psn,
    /// Local CM Response Timeout: how long the sender takes to answer, 4.096 µs × 2^value, 5 bits.
    pub local_cm_response_timeout: u8,
    /// Retry Count: transport retries after a local ACK timeout, 3 bits.
    pub retry_count: u8,
    /// Partition Key of the connection.
    pub partition_key: u16,
    /// Path Packet Payload MTU: 4 bits, IBA MTU encoding (1 = 256 ... 5 = 4096).
    pub path_packet_mtu: u8,
    /// RDC Exists: an RD channel already exists (RD only).
    pub rdc_exists: bool,
    /// RNR Retry Count: retries after an RNR NAK, 3 bits; 7 means retry forever.
    pub rnr_retry_count: u8,
    /// Max CM Retries: times a CM resends a message that gets no answer, 4 bits.
    pub max_cm_retries: u8,
    /// SRQ: the sender's QP uses a shared receive queue.
    pub srq: bool,
    /// Extended Transport Type, 3 bits; 1 is XRC when `transport_service_type` is 3.
    pub extended_transport_type: u8,
    /// The primary path.
    pub primary_path: CmPath,
    /// The alternate path; all zero when there is none.
    pub alternate_path: CmPath,
    /// The REQ's SAP Supported bit.
    pub sap_supported: bool,
    /// Private Data: 92 bytes for the consumer (rdma_cm puts [`IpCmPrivateData`] first).
    pub private_data: [u8; 92],
}

impl CmReq {
    const PRIMARY_PATH: usize = 52;
    const ALTERNATE_PATH: usize = 96;
    const PRIVATE_DATA: usize = 140;

    /// Decodes a REQ from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        let alternate = &b[Self::ALTERNATE_PATH..Self::ALTERNATE_PATH + CmPath::LEN];
        Ok(Self {
            local_comm_id: read_u32(b, 0..4),
            service_id: read_u64(b, 8..16),
            local_ca_guid: read_u64(b, 16..24),
            local_qkey: read_u32(b, 28..32),
            local_qpn: read_u24(b, 32..35),
            responder_resources: b[35],
            local_eecn: read_u24(b, 36..39),
            initiator_depth: b[39],
            remote_eecn: read_u24(b, 40..43),
            remote_cm_response_timeout: bits(b[43], 0, 5),
            transport_service_type: bits(b[43], 5, 2),
            end_to_end_flow_control: bit(b[43], 7),
            starting_psn: Psn::new(read_u24(b, 44..47)),
            local_cm_response_timeout: bits(b[47], 0, 5),
            retry_count: bits(b[47], 5, 3),
            partition_key: read_u16(b, 48..50),
            path_packet_mtu: bits(b[50], 0, 4),
            rdc_exists: bit(b[50], 4),
            rnr_retry_count: bits(b[50], 5, 3),
            max_cm_retries: bits(b[51], 0, 4),
            srq: bit(b[51], 4),
            extended_transport_type: bits(b[51], 5, 3),
            primary_path: CmPath::parse(&b[Self::PRIMARY_PATH..]),
            alternate_path: CmPath::parse(alternate),
            sap_supported: bit(alternate[43], 5),
            private_data: array(b, Self::PRIVATE_DATA),
        })
    }

    /// Encodes the REQ into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        let b = data_out(data)?;
        write_u32(b, 0..4, self.local_comm_id);
        write_u64(b, 8..16, self.service_id);
        write_u64(b, 16..24, self.local_ca_guid);
        write_u32(b, 28..32, self.local_qkey);
        put_u24("req.local_qpn", b, 32..35, self.local_qpn)?;
        b[35] = self.responder_resources;
        put_u24("req.local_eecn", b, 36..39, self.local_eecn)?;
        b[39] = self.initiator_depth;
        put_u24("req.remote_eecn", b, 40..43, self.remote_eecn)?;
        b[43] = place(
            "req.remote_cm_response_timeout",
            self.remote_cm_response_timeout,
            0,
            5,
        )? | place(
            "req.transport_service_type",
            self.transport_service_type,
            5,
            2,
        )? | flag(self.end_to_end_flow_control, 7);
        write_u24(b, 44..47, self.starting_psn.value());
        b[47] = place(
            "req.local_cm_response_timeout",
            self.local_cm_response_timeout,
            0,
            5,
        )? | place("req.retry_count", self.retry_count, 5, 3)?;
        write_u16(b, 48..50, self.partition_key);
        b[50] = place("req.path_packet_mtu", self.path_packet_mtu, 0, 4)?
            | flag(self.rdc_exists, 4)
            | place("req.rnr_retry_count", self.rnr_retry_count, 5, 3)?;
        b[51] = place("req.max_cm_retries", self.max_cm_retries, 0, 4)?
            | flag(self.srq, 4)
            | place(
                "req.extended_transport_type",
                self.extended_transport_type,
                5,
                3,
            )?;
        self.primary_path
            .emit(&mut b[Self::PRIMARY_PATH..Self::ALTERNATE_PATH], &PRIMARY)?;
        let alternate = &mut b[Self::ALTERNATE_PATH..Self::PRIVATE_DATA];
        self.alternate_path.emit(alternate, &ALTERNATE)?;
        alternate[43] |= flag(self.sap_supported, 5);
        b[Self::PRIVATE_DATA..].copy_from_slice(&self.private_data);
        Ok(())
    }

    /// The rdma_cm IP addressing carried by this REQ, if its service ID is in
    /// an rdma_cm IP port space and its private data starts with a valid
    /// rdma_cm header (version 0, IP version 4 or 6).
    pub fn ip_cm(&self) -> Option<IpCmPrivateData> {
        let service = IpCmService::from_service_id(self.service_id)?;
        let p = &self.private_data[..IP_CM_HEADER_LEN];
        if p[0] != 0 {
            return None;
        }
        let ip_version = p[1] >> 4;
        let address = |start: usize| -> Option<IpAddr> {
            let raw: [u8; 16] = array(p, start);
            match ip_version {
                4 => Some(IpAddr::V4(Ipv4Addr::new(
                    raw[12], raw[13], raw[14], raw[15],
                ))),
                6 => Some(IpAddr::V6(Ipv6Addr::from(raw))),
                _ => None,
            }
        };
        Some(IpCmPrivateData {
            ip_version,
            port_space: service.port_space,
            source_port: read_u16(p, 2..4),
            destination_port: service.port,
            source_ip: address(4)?,
            destination_ip: address(20)?,
        })
    }
}

/// The rdma_cm service ID layout: `0x0000_0000_01xx_pppp` where `01xx` is the
/// port space ([`IP_CM_PS_TCP`], [`IP_CM_PS_UDP`], [`IP_CM_PS_IB`]) and `pppp`
/// the destination port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCmService {
    /// The rdma_cm port space, e.g. [`IP_CM_PS_TCP`].
    pub port_space: u16,
    /// The destination port.
    pub port: u16,
}

impl IpCmService {
    /// Splits a service ID, or `None` if it is outside the rdma_cm IP ranges.
    pub const fn from_service_id(service_id: u64) -> Option<Self> {
        let port_space = (service_id >> 16) as u16;
        let known = matches!(port_space, IP_CM_PS_TCP | IP_CM_PS_UDP | IP_CM_PS_IB);
        if service_id >> 32 != 0 || !known {
            return None;
        }
        Some(Self {
            port_space,
            port: service_id as u16,
        })
    }

    /// The service ID this port space and port map to.
    pub const fn service_id(self) -> u64 {
        (self.port_space as u64) << 16 | self.port as u64
    }
}

/// The rdma_cm header at the start of a REQ's private data: version byte (0),
/// IP version in the high nibble of byte 1, source port, then the source and
/// destination addresses in 16-byte fields (IPv4 in the last 4 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCmPrivateData {
    /// The IP version of the addresses, 4 or 6.
    pub ip_version: u8,
    /// The rdma_cm port space, from the service ID.
    pub port_space: u16,
    /// The active side's port.
    pub source_port: u16,
    /// The passive side's port, from the service ID.
    pub destination_port: u16,
    /// The active side's address.
    pub source_ip: IpAddr,
    /// The passive side's address.
    pub destination_ip: IpAddr,
}

/// MessageReceiptAcknowledgement (MRA, attribute 0x0011), table 107.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmMra {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle, from the message acknowledged.
    pub remote_comm_id: u32,
    /// Message MRAed: which message this acknowledges, 2 bits: 0 REQ, 1 REP, 2 LAP.
    pub message_mraed: u8,
    /// Service Timeout: when the real answer follows at the latest, 4.096 µs × 2^value, 5 bits.
    pub service_timeout: u8,
    /// Private Data: 222 bytes for the consumer.
    pub private_data: [u8; 222],
}

impl CmMra {
    /// Decodes an MRA from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        Ok(Self {
            local_comm_id: read_u32(b, 0..4),
            remote_comm_id: read_u32(b, 4..8),
            message_mraed: bits(b[8], 0, 2),
            service_timeout: bits(b[9], 0, 5),
            private_data: array(b, 10),
        })
    }

    /// Encodes the MRA into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        let b = data_out(data)?;
        write_u32(b, 0..4, self.local_comm_id);
        write_u32(b, 4..8, self.remote_comm_id);
        b[8] = place("mra.message_mraed", self.message_mraed, 0, 2)?;
        b[9] = place("mra.service_timeout", self.service_timeout, 0, 5)?;
        b[10..].copy_from_slice(&self.private_data);
        Ok(())
    }
}

/// ConnectReject (REJ, attribute 0x0012), table 108.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmRej {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle, from the message rejected.
    pub remote_comm_id: u32,
    /// Message Rejected: which message is refused, 2 bits: 0 REQ, 1 REP, 2 none.
    pub message_rejected: u8,
    /// Reject Info Length: how many bytes of `ari` are meaningful, 7 bits, at most 72.
    pub rejected_info_length: u8,
    /// Reason: the rejection code (IBA table 109; 28 is consumer reject).
    pub reason: u16,
    /// ARI: additional rejection information, meaning set by `reason`.
    pub ari: [u8; 72],
    /// Private Data: 148 bytes for the consumer.
    pub private_data: [u8; 148],
}

impl CmRej {
    /// Decodes a REJ from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        let rejected_info_length = bits(b[9], 0, 7);
        if usize::from(rejected_info_length) > 72 {
            return Err(Error::BadMad {
                field: "rej.rejected_info_length",
                value: rejected_info_length.into(),
            });
        }
        Ok(Self {
            local_comm_id: read_u32(b, 0..4),
            remote_comm_id: read_u32(b, 4..8),
            message_rejected: bits(b[8], 0, 2),
            rejected_info_length,
            reason: read_u16(b, 10..12),
            ari: array(b, 12),
            private_data: array(b, 84),
        })
    }

    /// Encodes the REJ into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        if self.rejected_info_length > 72 {
            return Err(Error::FieldOverflow {
                field: "rej.rejected_info_length",
                value: self.rejected_info_length.into(),
            });
        }
        let b = data_out(data)?;
        write_u32(b, 0..4, self.local_comm_id);
        write_u32(b, 4..8, self.remote_comm_id);
        b[8] = place("rej.message_rejected", self.message_rejected, 0, 2)?;
        b[9] = self.rejected_info_length << 1;
        write_u16(b, 10..12, self.reason);
        b[12..84].copy_from_slice(&self.ari);
        b[84..].copy_from_slice(&self.private_data);
        Ok(())
    }

    /// The meaningful part of the ARI.
    pub fn ari_bytes(&self) -> &[u8] {
        let len = usize::from(self.rejected_info_length).min(self.ari.len());
        &self.ari[..len]
    }
}

/// ConnectReply (REP, attribute 0x0013), table 110.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmRep {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// Remote Communication ID: the REQ's Local Communication ID.
    pub remote_comm_id: u32,
    /// Local Q_Key: the sender's Q_Key (RD only).
    pub local_qkey: u32,
    /// Local QPN: the sender's QP number, 24 bits.
    pub local_qpn: u32,
    /// Local EECN: the sender's EE context (RD only), 24 bits.
    pub local_eecn: u32,
    /// Starting PSN: the first PSN the *active* side sends with (the passive side's
    /// expected receive PSN).
    pub starting_psn: Psn,
    /// Responder Resources: RDMA READs and atomics the sender accepts outstanding as responder.
    pub responder_resources: u8,
    /// Initiator Depth: RDMA READs and atomics the sender issues outstanding as initiator.
    pub initiator_depth: u8,
    /// Target ACK Delay: the sender's maximum ACK delay, 4.096 µs × 2^value, 5 bits.
    pub target_ack_delay: u8,
    /// Failover Accepted, 2 bits: 0 accepted, 1 rejected, 2 unsupported.
    pub failover_accepted: u8,
    /// End-to-End Flow Control: the sender's receive queue issues credits.
    pub end_to_end_flow_control: bool,
    /// RNR Retry Count: retries after an RNR NAK, 3 bits; 7 means retry forever.
    pub rnr_retry_count: u8,
    /// SRQ: the sender's QP uses a shared receive queue.
    pub srq: bool,
    /// Local CA GUID: the sender's channel adapter GUID.
    pub local_ca_guid: u64,
    /// Private Data: 196 bytes for the consumer.
    pub private_data: [u8; 196],
}

impl CmRep {
    /// Decodes a REP from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        Ok(Self {
            local_comm_id: read_u32(b, 0..4),
            remote_comm_id: read_u32(b, 4..8),
            local_qkey: read_u32(b, 8..12),
            local_qpn: read_u24(b, 12..15),
            local_eecn: read_u24(b, 16..19),
            starting_psn: Psn::new(read_u24(b, 20..23)),
            responder_resources: b[24],
            initiator_depth: b[25],
            target_ack_delay: bits(b[26], 0, 5),
            failover_accepted: bits(b[26], 5, 2),
            end_to_end_flow_control: bit(b[26], 7),
            rnr_retry_count: bits(b[27], 0, 3),
            srq: bit(b[27], 3),
            local_ca_guid: read_u64(b, 28..36),
            private_data: array(b, 36),
        })
    }

    /// Encodes the REP into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        let b = data_out(data)?;
        write_u32(b, 0..4, self.local_comm_id);
        write_u32(b, 4..8, self.remote_comm_id);
        write_u32(b, 8..12, self.local_qkey);
        put_u24("rep.local_qpn", b, 12..15, self.local_qpn)?;
        put_u24("rep.local_eecn", b, 16..19, self.local_eecn)?;
        write_u24(b, 20..23, self.starting_psn.value());
        b[24] = self.responder_resources;
        b[25] = self.initiator_depth;
        b[26] = place("rep.target_ack_delay", self.target_ack_delay, 0, 5)?
            | place("rep.failover_accepted", self.failover_accepted, 5, 2)?
            | flag(self.end_to_end_flow_control, 7);
        b[27] = place("rep.rnr_retry_count", self.rnr_retry_count, 0, 3)? | flag(self.srq, 3);
        write_u64(b, 28..36, self.local_ca_guid);
        b[36..].copy_from_slice(&self.private_data);
        Ok(())
    }
}

/// ReadyToUse (RTU, attribute 0x0014), table 111.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmRtu {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle.
    pub remote_comm_id: u32,
    /// Private Data: 224 bytes for the consumer.
    pub private_data: [u8; 224],
}

/// DisconnectReply (DREP, attribute 0x0016), table 113; same layout as RTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmDrep {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle.
    pub remote_comm_id: u32,
    /// Private Data: 224 bytes for the consumer.
    pub private_data: [u8; 224],
}

/// RTU and DREP: two comm IDs and private data.
macro_rules! comm_ids_only {
    ($name:ident, $what:literal) => {
        impl $name {
            #[doc = concat!("Decodes ", $what, " from the data area of a CM MAD.")]
            pub fn parse(data: &[u8]) -> Result<Self> {
                let b = data_in(data)?;
                Ok(Self {
                    local_comm_id: read_u32(b, 0..4),
                    remote_comm_id: read_u32(b, 4..8),
                    private_data: array(b, 8),
                })
            }

            #[doc = concat!("Encodes ", $what, " into the data area of a CM MAD.")]
            pub fn emit(&self, data: &mut [u8]) -> Result<()> {
                let b = data_out(data)?;
                write_u32(b, 0..4, self.local_comm_id);
                write_u32(b, 4..8, self.remote_comm_id);
                b[8..].copy_from_slice(&self.private_data);
                Ok(())
            }
        }
    };
}

comm_ids_only!(CmRtu, "an RTU");
comm_ids_only!(CmDrep, "a DREP");

/// DisconnectRequest (DREQ, attribute 0x0015), table 112.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmDreq {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// Remote Communication ID: the receiver's handle.
    pub remote_comm_id: u32,
    /// Remote QPN/EECN: the receiver's QP number (EE context for RD), 24 bits.
    pub remote_qpn: u32,
    /// Private Data: 220 bytes for the consumer.
    pub private_data: [u8; 220],
}

impl CmDreq {
    /// Decodes a DREQ from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        Ok(Self {
            local_comm_id: read_u32(b, 0..4),
            remote_comm_id: read_u32(b, 4..8),
            remote_qpn: read_u24(b, 8..11),
            private_data: array(b, 12),
        })
    }

    /// Encodes the DREQ into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        let b = data_out(data)?;
        write_u32(b, 0..4, self.local_comm_id);
        write_u32(b, 4..8, self.remote_comm_id);
        put_u24("dreq.remote_qpn", b, 8..11, self.remote_qpn)?;
        b[12..].copy_from_slice(&self.private_data);
        Ok(())
    }
}

/// One decoded CM message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmMessage {
    /// A REQ (ConnectRequest).
    Req(CmReq),
    /// An MRA (MessageReceiptAcknowledgement).
    Mra(CmMra),
    /// A REJ (ConnectReject).
    Rej(CmRej),
    /// A REP (ConnectReply).
    Rep(CmRep),
    /// An RTU (ReadyToUse).
    Rtu(CmRtu),
    /// A DREQ (DisconnectRequest).
    Dreq(CmDreq),
    /// A DREP (DisconnectReply).
    Drep(CmDrep),
}

impl CmMessage {
    /// Decodes the data area of a CM MAD with attribute `attribute_id`;
    /// `Ok(None)` for attributes other than the seven connection messages.
    pub fn parse(attribute_id: u16, data: &[u8]) -> Result<Option<Self>> {
        Ok(Some(match attribute_id {
            attr::REQ => Self::Req(CmReq::parse(data)?),
            attr::MRA => Self::Mra(CmMra::parse(data)?),
            attr::REJ => Self::Rej(CmRej::parse(data)?),
            attr::REP => Self::Rep(CmRep::parse(data)?),
            attr::RTU => Self::Rtu(CmRtu::parse(data)?),
            attr::DREQ => Self::Dreq(CmDreq::parse(data)?),
            attr::DREP => Self::Drep(CmDrep::parse(data)?),
            _ => return Ok(None),
        }))
    }

    /// Encodes the message into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        match self {
            Self::Req(m) => m.emit(data),
            Self::Mra(m) => m.emit(data),
            Self::Rej(m) => m.emit(data),
            Self::Rep(m) => m.emit(data),
            Self::Rtu(m) => m.emit(data),
            Self::Dreq(m) => m.emit(data),
            Self::Drep(m) => m.emit(data),
        }
    }

    /// The MAD attribute ID of this message.
    pub const fn attribute_id(&self) -> u16 {
        match self {
            Self::Req(_) => attr::REQ,
            Self::Mra(_) => attr::MRA,
            Self::Rej(_) => attr::REJ,
            Self::Rep(_) => attr::REP,
            Self::Rtu(_) => attr::RTU,
            Self::Dreq(_) => attr::DREQ,
            Self::Drep(_) => attr::DREP,
        }
    }

    /// The short name: `"REQ"`, `"REP"`, ...
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Req(_) => "REQ",
            Self::Mra(_) => "MRA",
            Self::Rej(_) => "REJ",
            Self::Rep(_) => "REP",
            Self::Rtu(_) => "RTU",
            Self::Dreq(_) => "DREQ",
            Self::Drep(_) => "DREP",
        }
    }

    /// The sender's communication ID.
    pub const fn local_comm_id(&self) -> u32 {
        match self {
            Self::Req(m) => m.local_comm_id,
            Self::Mra(m) => m.local_comm_id,
            Self::Rej(m) => m.local_comm_id,
            Self::Rep(m) => m.local_comm_id,
            Self::Rtu(m) => m.local_comm_id,
            Self::Dreq(m) => m.local_comm_id,
            Self::Drep(m) => m.local_comm_id,
        }
    }

    /// The receiver's communication ID; a REQ has none yet.
    pub const fn remote_comm_id(&self) -> Option<u32> {
        match self {
            Self::Req(_) => None,
            Self::Mra(m) => Some(m.remote_comm_id),
            Self::Rej(m) => Some(m.remote_comm_id),
            Self::Rep(m) => Some(m.remote_comm_id),
            Self::Rtu(m) => Some(m.remote_comm_id),
            Self::Dreq(m) => Some(m.remote_comm_id),
            Self::Drep(m) => Some(m.remote_comm_id),
        }
    }

    /// The private data field (its full fixed size; the CM does not carry
    /// the length the consumer gave).
    pub const fn private_data(&self) -> &[u8] {
        match self {
            Self::Req(m) => &m.private_data,
            Self::Mra(m) => &m.private_data,
            Self::Rej(m) => &m.private_data,
            Self::Rep(m) => &m.private_data,
            Self::Rtu(m) => &m.private_data,
            Self::Dreq(m) => &m.private_data,
            Self::Drep(m) => &m.private_data,
        }
    }
}

#[cfg(test)]
mod tests;
