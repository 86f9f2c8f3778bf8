//! Management Datagrams (IBA vol. 1 ch. 13.4) as carried by a UD SEND to QP1
//! (the GSI), with the Communication Manager messages (class 0x07, ch. 12)
//! decoded.
//!
//! Contract: a MAD is [`MAD_LEN`] bytes, a 24-byte common header then
//! [`CM_DATA_LEN`] bytes of class data. [`Mad::parse`] reads the first 256
//! bytes of its input (any bytes after them are ignored), returns `Err` and
//! never panics on malformed input, and decodes the class data only for CM
//! REQ, MRA, REJ, REP, RTU, DREQ and DREP. Emitters write every byte of their
//! region (reserved bits as zero) and refuse values wider than their field.

mod cm;
mod sidr;

pub use cm::{
    CmDrep, CmDreq, CmMessage, CmMra, CmPath, CmRej, CmRep, CmReq, CmRtu, IP_CM_PS_IB,
    IP_CM_PS_TCP, IP_CM_PS_UDP, IpCmPrivateData, IpCmService, TRANSPORT_RC, TRANSPORT_RD,
    TRANSPORT_UC,
};
pub use sidr::{
    CmSidrRep, CmSidrReq, SIDR_STATUS_NO_QP, SIDR_STATUS_OK, SIDR_STATUS_REJECT,
    SIDR_STATUS_UNSUPPORTED,
};

use crate::field::{read_u16, read_u32, read_u64, write_u16, write_u32, write_u64};
use crate::{Error, Header, Result};

/// The length of an IB MAD (base version 1).
pub const MAD_LEN: usize = 256;
/// The length of the common MAD header.
pub const MAD_HEADER_LEN: usize = 24;
/// The length of the class data after the header; a CM message fills it.
pub const CM_DATA_LEN: usize = MAD_LEN - MAD_HEADER_LEN;
/// The only MAD base version of InfiniBand (OPA uses 0x80).
pub const BASE_VERSION: u8 = 0x01;
/// Management class of the Communication Manager.
pub const CM_CLASS: u8 = 0x07;
/// Class version of the Communication Manager.
pub const CM_CLASS_VERSION: u8 = 0x02;
/// The well-known Q_Key of QP1.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// Attribute IDs of the Communication Manager class.
pub mod attr {
    /// ClassPortInfo: the class's capabilities and redirection.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// ConnectRequest: the active side asks for a connection.
    pub const REQ: u16 = 0x0010;
    /// MsgRcptAck: message received, reply later; extends the peer's timeout.
    pub const MRA: u16 = 0x0011;
    /// ConnectReject: refuses a REQ or REP.
    pub const REJ: u16 = 0x0012;
    /// ConnectReply: the passive side accepts a REQ.
    pub const REP: u16 = 0x0013;
    /// ReadyToUse: the active side confirms a REP.
    pub const RTU: u16 = 0x0014;
    /// DisconnectRequest.
    pub const DREQ: u16 = 0x0015;
    /// DisconnectReply.
    pub const DREP: u16 = 0x0016;
    /// ServiceIDResReq: resolves a service ID to a UD QP.
    pub const SIDR_REQ: u16 = 0x0017;
    /// ServiceIDResReqResp: the answer to a SIDR_REQ.
    pub const SIDR_REP: u16 = 0x0018;
    /// LoadAlternatePath; not decoded here.
    pub const LAP: u16 = 0x0019;
    /// AlternatePathResponse; not decoded here.
    pub const APR: u16 = 0x001a;
}

/// Common MAD methods (the response bit 0x80 included).
pub mod method {
    /// Get: read an attribute.
    pub const GET: u8 = 0x01;
    /// Set: write an attribute.
    pub const SET: u8 = 0x02;
    /// Send: a datagram with no response expected; CM messages use it.
    pub const SEND: u8 = 0x03;
    /// GetResp: the response to a Get or Set.
    pub const GET_RESP: u8 = 0x81;
}

/// The name of a CM attribute (`"REQ"`, `"SIDR_REQ"`, `"ClassPortInfo"` ...).
pub const fn cm_attribute_name(attribute_id: u16) -> Option<&'static str> {
    Some(match attribute_id {
        attr::CLASS_PORT_INFO => "ClassPortInfo",
        attr::REQ => "REQ",
        attr::MRA => "MRA",
        attr::REJ => "REJ",
        attr::REP => "REP",
        attr::RTU => "RTU",
        attr::DREQ => "DREQ",
        attr::DREP => "DREP",
        attr::SIDR_REQ => "SIDR_REQ",
        attr::SIDR_REP => "SIDR_REP",
        attr::LAP => "LAP",
        attr::APR => "APR",
        _ => return None,
    })
}

/// The 24-byte common MAD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadHeader {
    /// BaseVersion: 1 for InfiniBand.
    pub base_version: u8,
    /// MgmtClass: the management class, e.g. [`CM_CLASS`].
    pub mgmt_class: u8,
    /// ClassVersion: the version of the class's MAD format.
    pub class_version: u8,
    /// The whole byte: response bit 0x80 and the 7-bit method.
    pub method: u8,
    /// Status: the result code of a response, 0 in requests.
    pub status: u16,
    /// ClassSpecific: class-defined, 0 for CM.
    pub class_specific: u16,
    /// TransactionID: matches a response to its request.
    pub transaction_id: u64,
    /// AttributeID: the object the method acts on, e.g. [`attr::REQ`].
    pub attribute_id: u16,
    /// AttributeModifier: attribute-specific parameter.
    pub attribute_modifier: u32,
}

impl MadHeader {
    /// Reads the header fields; no value is refused here.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        crate::field::check(Header::Mad, MAD_HEADER_LEN, buf.len())?;
        Ok(Self {
            base_version: buf[0],
            mgmt_class: buf[1],
            class_version: buf[2],
            method: buf[3],
            status: read_u16(buf, 4..6),
            class_specific: read_u16(buf, 6..8),
            transaction_id: read_u64(buf, 8..16),
            attribute_id: read_u16(buf, 16..18),
            attribute_modifier: read_u32(buf, 20..24),
        })
    }

    /// Writes the header into the first 24 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < MAD_HEADER_LEN {
            return Err(Error::BufferTooSmall {
                needed: MAD_HEADER_LEN,
                available: buf.len(),
            });
        }
        buf[0] = self.base_version;
        buf[1] = self.mgmt_class;
        buf[2] = self.class_version;
        buf[3] = self.method;
        write_u16(buf, 4..6, self.status);
        write_u16(buf, 6..8, self.class_specific);
        write_u64(buf, 8..16, self.transaction_id);
        write_u16(buf, 16..18, self.attribute_id);
        write_u16(buf, 18..20, 0);
        write_u32(buf, 20..24, self.attribute_modifier);
        Ok(())
    }

    /// Whether the response bit of the method is set.
    pub const fn is_response(&self) -> bool {
        self.method & 0x80 != 0
    }

    /// The attribute name, for the CM class only.
    pub const fn attribute_name(&self) -> Option<&'static str> {
        if self.mgmt_class == CM_CLASS {
            cm_attribute_name(self.attribute_id)
        } else {
            None
        }
    }
}

/// A MAD: its header and, for the seven CM connection messages, the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mad {
    /// The common MAD header.
    pub header: MadHeader,
    /// The decoded CM message, if the MAD is one of the seven decoded.
    pub cm: Option<CmMessage>,
}

impl Mad {
    /// Decodes the first 256 bytes of `buf`. Refuses a base version other
    /// than 1, and a CM class version other than 2.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        crate::field::check(Header::Mad, MAD_LEN, buf.len())?;
        let header = MadHeader::parse(buf)?;
        if header.base_version != BASE_VERSION {
            return Err(Error::BadMad {
                field: "mad.base_version",
                value: header.base_version.into(),
            });
        }
        let cm = if header.mgmt_class == CM_CLASS {
            if header.class_version != CM_CLASS_VERSION {
                return Err(Error::BadMad {
                    field: "mad.class_version",
                    value: header.class_version.into(),
                });
            }
            CmMessage::parse(header.attribute_id, &buf[MAD_HEADER_LEN..MAD_LEN])?
        } else {
            None
        };
        Ok(Self { header, cm })
    }

    /// Writes the MAD into the first 256 bytes of `buf`. With a CM message,
    /// the header must name the CM class and the message's attribute; without
    /// one, the 232 data bytes are left as they are for the caller to fill.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < MAD_LEN {
            return Err(Error::BufferTooSmall {
                needed: MAD_LEN,
                available: buf.len(),
            });
        }
        if let Some(message) = &self.cm {
            if self.header.mgmt_class != CM_CLASS {
                return Err(Error::BadMad {
                    field: "mad.mgmt_class",
                    value: self.header.mgmt_class.into(),
                });
            }
            if self.header.attribute_id != message.attribute_id() {
                return Err(Error::BadMad {
                    field: "mad.attribute_id",
                    value: self.header.attribute_id.into(),
                });
            }
            message.emit(&mut buf[MAD_HEADER_LEN..MAD_LEN])?;
        }
        self.header.emit(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Psn;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr};

    use crate::samples::rping::{DREP, DREQ, REP, REQ, RTU};

    // Facts from the rest of the capture, read from the BTHs of the RC data
    // packets: both sides use QP 0x1e; the client's first SEND (packet 4)
    // has PSN 0xd79776, the server's first RDMA READ request (packet 6) has
    // PSN 0x214660.
    const CLIENT_QPN: u32 = 0x1e;
    const SERVER_QPN: u32 = 0x1e;
    const CLIENT_FIRST_PSN: u32 = 0xd7_9776;
    const SERVER_FIRST_PSN: u32 = 0x21_4660;
    const CLIENT_COMM_ID: u32 = 0x64ba_f67c;
    const SERVER_COMM_ID: u32 = 0x1ebb_c7be;

    fn mad_bytes(hex: &str) -> [u8; MAD_LEN] {
        let mut out = [0u8; MAD_LEN];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let text = core::str::from_utf8(pair).unwrap();
            out[i] = u8::from_str_radix(text, 16).unwrap();
        }
        out
    }

    /// Parses a captured MAD, checks the common header, and checks that
    /// emitting it gives back the captured bytes.
    fn decode(hex: &str, attribute_id: u16) -> CmMessage {
        let bytes = mad_bytes(hex);
        let mad = Mad::parse(&bytes).unwrap();
        assert_eq!(mad.header.base_version, BASE_VERSION);
        assert_eq!(mad.header.mgmt_class, CM_CLASS);
        assert_eq!(mad.header.class_version, CM_CLASS_VERSION);
        assert_eq!(mad.header.method, method::SEND);
        assert_eq!(mad.header.status, 0);
        assert_eq!(mad.header.attribute_id, attribute_id);
        assert_eq!(mad.header.attribute_modifier, 0);
        // One transaction for the whole connection: the active side's.
        assert_eq!(mad.header.transaction_id, 0x0000_0002_7cf6_ba64);
        let mut out = [0xa5u8; MAD_LEN];
        mad.emit(&mut out).unwrap();
        assert_eq!(out, bytes);
        mad.cm.unwrap()
    }

    #[test]
    fn capture_req() {
        let CmMessage::Req(req) = decode(REQ, attr::REQ) else {
            panic!("not a REQ")
        };
        assert_eq!(req.local_comm_id, CLIENT_COMM_ID);
        assert_eq!(req.service_id, 0x0000_0000_0106_1c06);
        assert_eq!(req.local_ca_guid, 0x5054_00ff_fe52_000b);
        assert_eq!(req.local_qkey, 0);
        assert_eq!(req.local_qpn, CLIENT_QPN);
        assert_eq!((req.responder_resources, req.initiator_depth), (1, 1));
        assert_eq!((req.local_eecn, req.remote_eecn), (0, 0));
        assert_eq!(req.remote_cm_response_timeout, 20);
        assert_eq!(req.transport_service_type, TRANSPORT_RC);
        assert!(!req.end_to_end_flow_control);
        // The REQ carries the PSN the passive side will send with.
        assert_eq!(req.starting_psn, Psn::new(SERVER_FIRST_PSN));
        assert_eq!(req.local_cm_response_timeout, 20);
        assert_eq!(req.retry_count, 7);
        assert_eq!(req.partition_key, 0xffff);
        assert_eq!(req.path_packet_mtu, 3); // 1024
        assert!(!req.rdc_exists);
        assert_eq!(req.rnr_retry_count, 7);
        assert_eq!(req.max_cm_retries, 15);
        assert!(!req.srq);
        assert_eq!(req.extended_transport_type, 0);
        let path = req.primary_path;
        assert_eq!(
            (path.local_port_lid, path.remote_port_lid),
            (0xffff, 0xffff)
        );
        let mapped = |ip: [u8; 4]| {
            let mut gid = [0u8; 16];
            gid[10..12].copy_from_slice(&[0xff, 0xff]);
            gid[12..].copy_from_slice(&ip);
            gid
        };
        assert_eq!(path.local_port_gid, mapped([198, 18, 0, 12]));
        assert_eq!(path.remote_port_gid, mapped([198, 18, 0, 11]));
        assert_eq!(path.flow_label, 0x7_e612);
        assert_eq!(path.packet_rate, 0);
        assert_eq!((path.traffic_class, path.hop_limit), (0, 64));
        assert_eq!(path.sl, 0);
        assert!(!path.subnet_local);
        assert_eq!(path.local_ack_timeout, 19);
        assert_eq!(req.alternate_path.local_port_gid, [0; 16]);
        assert!(!req.sap_supported);

        let ip = req.ip_cm().unwrap();
        assert_eq!(ip.ip_version, 4);
        assert_eq!(ip.port_space, IP_CM_PS_TCP);
        assert_eq!(ip.source_port, 50292);
        assert_eq!(ip.destination_port, 7174);
        assert_eq!(ip.source_ip, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12)));
        assert_eq!(ip.destination_ip, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11)));
        // rdma_cm derives the RoCE flow label from the two IP CM ports.
        let ports = u32::from(ip.source_port) * 31 + u32::from(ip.destination_port);
        assert_eq!(path.flow_label, ports & 0xf_ffff);
    }

    #[test]
    fn capture_rep() {
        let CmMessage::Rep(rep) = decode(REP, attr::REP) else {
            panic!("not a REP")
        };
        assert_eq!(rep.local_comm_id, SERVER_COMM_ID);
        assert_eq!(rep.remote_comm_id, CLIENT_COMM_ID);
        assert_eq!(rep.local_qkey, 0);
        assert_eq!(rep.local_qpn, SERVER_QPN);
        assert_eq!(rep.local_eecn, 0);
        // The REP carries the PSN the active side will send with.
        assert_eq!(rep.starting_psn, Psn::new(CLIENT_FIRST_PSN));
        assert_eq!((rep.responder_resources, rep.initiator_depth), (1, 1));
        assert_eq!(rep.target_ack_delay, 15);
        assert_eq!(rep.failover_accepted, 0);
        assert!(!rep.end_to_end_flow_control);
        assert_eq!(rep.rnr_retry_count, 7);
        assert!(!rep.srq);
        assert_eq!(rep.local_ca_guid, 0x5054_00ff_fe52_000a);
        assert_eq!(rep.private_data, [0; 196]);
    }

    #[test]
    fn capture_rtu_dreq_drep() {
        let CmMessage::Rtu(rtu) = decode(RTU, attr::RTU) else {
            panic!("not an RTU")
        };
        assert_eq!(rtu.local_comm_id, CLIENT_COMM_ID);
        assert_eq!(rtu.remote_comm_id, SERVER_COMM_ID);
        let CmMessage::Dreq(dreq) = decode(DREQ, attr::DREQ) else {
            panic!("not a DREQ")
        };
        assert_eq!(dreq.local_comm_id, CLIENT_COMM_ID);
        assert_eq!(dreq.remote_comm_id, SERVER_COMM_ID);
        assert_eq!(dreq.remote_qpn, SERVER_QPN);
        let drep = decode(DREP, attr::DREP);
        assert_eq!(drep.name(), "DREP");
        assert_eq!(drep.local_comm_id(), SERVER_COMM_ID);
        assert_eq!(drep.remote_comm_id(), Some(CLIENT_COMM_ID));
    }

    #[test]
    fn transaction_id_embeds_comm_id() {
        // The kernel CM builds the TID from its agent's high half (2) and the
        // local comm ID as stored in memory (byte-swapped on little endian).
        let tid = Mad::parse(&mad_bytes(REQ)).unwrap().header.transaction_id;
        assert_eq!(tid >> 32, 2);
        assert_eq!((tid as u32).swap_bytes(), CLIENT_COMM_ID);
    }

    #[test]
    fn every_short_length_is_truncated() {
        let bytes = mad_bytes(REQ);
        for len in 0..MAD_LEN {
            let err = Mad::parse(&bytes[..len]).unwrap_err();
            assert_eq!(
                err,
                Error::Truncated {
                    header: Header::Mad,
                    needed: MAD_LEN,
                    available: len
                }
            );
            assert!(CmReq::parse(&bytes[MAD_HEADER_LEN..len.max(MAD_HEADER_LEN)]).is_err());
        }
        assert!(MadHeader::parse(&bytes[..MAD_HEADER_LEN - 1]).is_err());
        assert!(Mad::emit(&Mad::parse(&bytes).unwrap(), &mut [0u8; 255]).is_err());
    }

    #[test]
    fn refused_values() {
        let mut bytes = mad_bytes(REQ);
        bytes[0] = 0x80;
        let err = Mad::parse(&bytes).unwrap_err();
        assert_eq!(err.code(), "bad_mad");
        let mut bytes = mad_bytes(REQ);
        bytes[2] = 0x01;
        assert!(matches!(
            Mad::parse(&bytes),
            Err(Error::BadMad {
                field: "mad.class_version",
                value: 1
            })
        ));
        // A REJ whose ARI length exceeds the 72-byte ARI field.
        let mut rej = mad_bytes(RTU);
        rej[17] = 0x12;
        rej[MAD_HEADER_LEN + 9] = 73 << 1;
        assert!(Mad::parse(&rej).is_err());
        rej[MAD_HEADER_LEN + 9] = 72 << 1;
        assert!(matches!(
            Mad::parse(&rej).unwrap().cm,
            Some(CmMessage::Rej(_))
        ));
    }

    #[test]
    fn other_attributes_and_classes_are_named_not_decoded() {
        let mut bytes = mad_bytes(RTU);
        for (id, name) in [
            (0x0001, "ClassPortInfo"),
            (0x0017, "SIDR_REQ"),
            (0x001a, "APR"),
        ] {
            bytes[16..18].copy_from_slice(&u16::to_be_bytes(id));
            let mad = Mad::parse(&bytes).unwrap();
            assert_eq!(mad.header.attribute_name(), Some(name));
            assert_eq!(mad.cm, None);
        }
        bytes[1] = 0x03; // SubnAdm
        let mad = Mad::parse(&bytes).unwrap();
        assert_eq!((mad.header.attribute_name(), mad.cm), (None, None));
    }

    #[test]
    fn emit_checks_header_against_message() {
        let mut mad = Mad::parse(&mad_bytes(REP)).unwrap();
        mad.header.attribute_id = attr::RTU;
        assert!(mad.emit(&mut [0u8; MAD_LEN]).is_err());
        mad.header.attribute_id = attr::REP;
        mad.header.mgmt_class = 0x03;
        assert!(mad.emit(&mut [0u8; MAD_LEN]).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = Mad::parse(&bytes);
        }

        #[test]
        fn every_cm_message_round_trips(
            attribute_id in 0x0010u16..=0x0016,
            data in prop::collection::vec(any::<u8>(), CM_DATA_LEN),
        ) {
            let mut bytes = mad_bytes(RTU);
            bytes[16..18].copy_from_slice(&attribute_id.to_be_bytes());
            bytes[MAD_HEADER_LEN..].copy_from_slice(&data);
            // A REJ with an oversized ARI length is refused; nothing else is.
            let Ok(mad) = Mad::parse(&bytes) else {
                prop_assert_eq!(attribute_id, attr::REJ);
                return Ok(());
            };
            let message = mad.cm.unwrap();
            prop_assert_eq!(message.attribute_id(), attribute_id);
            let mut out = [0u8; MAD_LEN];
            mad.emit(&mut out).unwrap();
            prop_assert_eq!(Mad::parse(&out).unwrap(), mad);
        }
    }
}
