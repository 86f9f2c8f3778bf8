//! Service ID Resolution messages (IBA vol. 1 §12.11, tables 114-115): how a
//! UD client learns the QPN and Q_Key behind a service ID.
//!
//! Same contract as the connection messages: `parse` reads the
//! [`CM_DATA_LEN`] bytes after the MAD header and fails only on truncation or
//! an additional-information length wider than its field; `emit` writes the
//! whole data area, reserved bits as zero. They are kept out of
//! [`super::CmMessage`] so that its exhaustive matches stay as they are.

use super::CM_DATA_LEN;
use crate::field::{
    read_u16, read_u24, read_u32, read_u64, write_u16, write_u24, write_u32, write_u64,
};
use crate::{Error, Header, Result};

/// SIDR_REP status: the QPN and Q_Key are valid.
pub const SIDR_STATUS_OK: u8 = 0;
/// SIDR_REP status: nothing serves the service ID.
pub const SIDR_STATUS_UNSUPPORTED: u8 = 1;
/// SIDR_REP status: the service rejected the request.
pub const SIDR_STATUS_REJECT: u8 = 2;
/// SIDR_REP status: no QP is available.
pub const SIDR_STATUS_NO_QP: u8 = 3;

/// ServiceIDResolutionRequest (SIDR_REQ, attribute 0x0017), table 114.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmSidrReq {
    /// Request ID: the client's handle, echoed in the SIDR_REP.
    pub request_id: u32,
    /// Partition Key the client's UD QP uses.
    pub partition_key: u16,
    /// ServiceID: the service to resolve.
    pub service_id: u64,
    /// Private Data: 216 bytes for the consumer.
    pub private_data: [u8; 216],
}

/// ServiceIDResolutionResponse (SIDR_REP, attribute 0x0018), table 115.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmSidrRep {
    /// Request ID: the SIDR_REQ's Request ID.
    pub request_id: u32,
    /// Status: [`SIDR_STATUS_OK`], [`SIDR_STATUS_UNSUPPORTED`] ...
    pub status: u8,
    /// Additional Information Length: how many bytes of `additional_info` are
    /// meaningful, at most 72.
    pub additional_info_length: u8,
    /// QPN: the service's UD QP number, 24 bits.
    pub qpn: u32,
    /// ServiceID: the SIDR_REQ's ServiceID.
    pub service_id: u64,
    /// Q_Key: the Q_Key the service's QP expects.
    pub qkey: u32,
    /// Additional Information, meaning set by `status`.
    pub additional_info: [u8; 72],
    /// Private Data: 136 bytes for the consumer.
    pub private_data: [u8; 136],
}

fn data_in(data: &[u8]) -> Result<&[u8]> {
    crate::field::check(Header::Mad, CM_DATA_LEN, data.len())?;
    Ok(&data[..CM_DATA_LEN])
}

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

fn array<const N: usize>(b: &[u8], start: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[start..start + N]);
    a
}

impl CmSidrReq {
    /// Decodes a SIDR_REQ from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        Ok(Self {
            request_id: read_u32(b, 0..4),
            partition_key: read_u16(b, 4..6),
            service_id: read_u64(b, 8..16),
            private_data: array(b, 16),
        })
    }

    /// Encodes the SIDR_REQ into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        let b = data_out(data)?;
        write_u32(b, 0..4, self.request_id);
        write_u16(b, 4..6, self.partition_key);
        write_u64(b, 8..16, self.service_id);
        b[16..].copy_from_slice(&self.private_data);
        Ok(())
    }
}

impl CmSidrRep {
    /// Decodes a SIDR_REP from the data area of a CM MAD.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let b = data_in(data)?;
        if b[5] > 72 {
            return Err(Error::BadMad {
                field: "sidr_rep.additional_info_length",
                value: b[5].into(),
            });
        }
        Ok(Self {
            request_id: read_u32(b, 0..4),
            status: b[4],
            additional_info_length: b[5],
            qpn: read_u24(b, 8..11),
            service_id: read_u64(b, 12..20),
            qkey: read_u32(b, 20..24),
            additional_info: array(b, 24),
            private_data: array(b, 96),
        })
    }

    /// Encodes the SIDR_REP into the data area of a CM MAD.
    pub fn emit(&self, data: &mut [u8]) -> Result<()> {
        if self.additional_info_length > 72 {
            return Err(Error::FieldOverflow {
                field: "sidr_rep.additional_info_length",
                value: self.additional_info_length.into(),
            });
        }
        if self.qpn > 0x00ff_ffff {
            return Err(Error::FieldOverflow {
                field: "sidr_rep.qpn",
                value: self.qpn.into(),
            });
        }
        let b = data_out(data)?;
        write_u32(b, 0..4, self.request_id);
        b[4] = self.status;
        b[5] = self.additional_info_length;
        write_u24(b, 8..11, self.qpn);
        write_u64(b, 12..20, self.service_id);
        write_u32(b, 20..24, self.qkey);
        b[24..96].copy_from_slice(&self.additional_info);
        b[96..].copy_from_slice(&self.private_data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sidr_messages_round_trip(
            ids in any::<(u32, u16, u64, u32)>(),
            qpn in 0u32..1 << 24,
            small in (any::<u8>(), 0u8..=72),
            fill in any::<u8>(),
        ) {
            let req = CmSidrReq {
                request_id: ids.0,
                partition_key: ids.1,
                service_id: ids.2,
                private_data: [fill; 216],
            };
            let mut data = [0xffu8; CM_DATA_LEN];
            req.emit(&mut data).unwrap();
            prop_assert_eq!(CmSidrReq::parse(&data).unwrap(), req);
            let rep = CmSidrRep {
                request_id: ids.0,
                status: small.0,
                additional_info_length: small.1,
                qpn,
                service_id: ids.2,
                qkey: ids.3,
                additional_info: [fill; 72],
                private_data: [fill.wrapping_add(1); 136],
            };
            rep.emit(&mut data).unwrap();
            prop_assert_eq!(CmSidrRep::parse(&data).unwrap(), rep);
        }
    }

    #[test]
    fn refused_values() {
        let mut data = [0u8; CM_DATA_LEN];
        data[5] = 73;
        assert!(CmSidrRep::parse(&data).is_err());
        assert!(CmSidrReq::parse(&data[..CM_DATA_LEN - 1]).is_err());
        let mut rep = CmSidrRep::parse(&[0u8; CM_DATA_LEN]).unwrap();
        rep.qpn = 1 << 24;
        assert!(rep.emit(&mut data).is_err());
    }
}
