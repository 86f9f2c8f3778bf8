//! The rdma_cm header ahead of the application's private data, and how much
//! private data each CM message leaves the application.
//!
//! The IB CM fixes each message's private data size (IBA §12.6; the kernel's
//! `IB_CM_*_PRIVATE_DATA_SIZE`). rdma_cm takes the first
//! [`CMA_HEADER_LEN`] bytes of a REQ's and a SIDR_REQ's for its header
//! (cma.c's `cma_user_data_offset`), so an application may give 92 − 36 = 56
//! bytes with `rdma_connect` and 216 − 36 = 180 with a UD resolve; REP, REJ
//! and SIDR_REP carry the application's bytes alone. RTU, DREQ, DREP and MRA
//! leave cma.c with no private data at all.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::RdmaCmError;

/// The rdma_cm header's length (`struct cma_hdr`).
pub const CMA_HEADER_LEN: usize = 36;

/// The only header version rdma_cm has (`CMA_VERSION`).
const CMA_VERSION: u8 = 0;

/// Where the fields sit in the header.
const IP_VERSION: usize = 1;
const SOURCE_PORT: core::ops::Range<usize> = 2..4;
const SOURCE: usize = 4;
const DESTINATION: usize = 20;

/// The CM messages that carry private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    Req,
    Mra,
    Rej,
    Rep,
    Rtu,
    Dreq,
    Drep,
    SidrReq,
    SidrRep,
}

/// The IB CM's private data size of `message` (IBA §12.6).
pub const fn ib_cm_limit(message: Message) -> usize {
    match message {
        Message::Req => 92,
        Message::Mra => 222,
        Message::Rej => 148,
        Message::Rep => 196,
        Message::Rtu => 224,
        Message::Dreq => 220,
        Message::Drep => 224,
        Message::SidrReq => 216,
        Message::SidrRep => 136,
    }
}

/// How many bytes of its own private data an rdma_cm application may put
/// in `message`: the IB CM's size less the header where rdma_cm adds one,
/// 0 where rdma_cm sends the message without private data.
pub const fn app_limit(message: Message) -> usize {
    match message {
        Message::Req | Message::SidrReq => ib_cm_limit(message) - CMA_HEADER_LEN,
        Message::Rep | Message::Rej | Message::SidrRep => ib_cm_limit(message),
        Message::Mra | Message::Rtu | Message::Dreq | Message::Drep => 0,
    }
}

/// Refuses application private data longer than [`app_limit`].
pub const fn check_app_data(message: Message, len: usize) -> Result<(), RdmaCmError> {
    let limit = app_limit(message);
    if len > limit {
        return Err(RdmaCmError::PrivateDataTooLong {
            message,
            len,
            limit,
        });
    }
    Ok(())
}

/// The header rdma_cm puts at the start of a REQ's or SIDR_REQ's private
/// data. The destination port is not in it: it is the service ID's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmaHeader {
    pub source_port: u16,
    pub source: IpAddr,
    pub destination: IpAddr,
}

impl CmaHeader {
    /// The header's bytes; `MixedFamilies` if the two addresses differ in
    /// family (cma.c takes both from one ID, so they never do).
    pub fn emit(&self) -> Result<[u8; CMA_HEADER_LEN], RdmaCmError> {
        let mut out = [0u8; CMA_HEADER_LEN];
        out[0] = CMA_VERSION;
        out[IP_VERSION] = match (self.source, self.destination) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4 << 4,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6 << 4,
            _ => return Err(RdmaCmError::MixedFamilies),
        };
        out[SOURCE_PORT].copy_from_slice(&self.source_port.to_be_bytes());
        put_address(&mut out[SOURCE..SOURCE + 16], self.source);
        put_address(&mut out[DESTINATION..DESTINATION + 16], self.destination);
        Ok(out)
    }

    /// Reads the header at the start of `private_data`. The bytes around an
    /// IPv4 address are not checked: the kernel ignores them too.
    pub fn parse(private_data: &[u8]) -> Result<Self, RdmaCmError> {
        let Some(p) = private_data.get(..CMA_HEADER_LEN) else {
            return Err(RdmaCmError::HeaderTruncated {
                len: private_data.len(),
            });
        };
        if p[0] != CMA_VERSION {
            return Err(RdmaCmError::HeaderVersion { version: p[0] });
        }
        let ip_version = p[IP_VERSION] >> 4;
        let address = |at: usize| -> Result<IpAddr, RdmaCmError> {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(&p[at..at + 16]);
            match ip_version {
                4 => Ok(IpAddr::V4(Ipv4Addr::new(
                    raw[12], raw[13], raw[14], raw[15],
                ))),
                6 => Ok(IpAddr::V6(Ipv6Addr::from(raw))),
                _ => Err(RdmaCmError::HeaderIpVersion { ip_version }),
            }
        };
        Ok(Self {
            source_port: u16::from_be_bytes([p[SOURCE_PORT.start], p[SOURCE_PORT.start + 1]]),
            source: address(SOURCE)?,
            destination: address(DESTINATION)?,
        })
    }
}

/// An address in the header's 16-byte field: IPv6 whole, IPv4 in the last
/// four bytes after zeros (not the IPv4-mapped form GIDs use).
fn put_address(field: &mut [u8], address: IpAddr) {
    match address {
        IpAddr::V4(v4) => field[12..].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => field.copy_from_slice(&v6.octets()),
    }
}

/// The header, then the application's bytes, zero-padded to `N`.
fn with_header<const N: usize>(
    message: Message,
    header: &CmaHeader,
    app: &[u8],
) -> Result<[u8; N], RdmaCmError> {
    check_app_data(message, app.len())?;
    let mut out = [0u8; N];
    out[..CMA_HEADER_LEN].copy_from_slice(&header.emit()?);
    out[CMA_HEADER_LEN..CMA_HEADER_LEN + app.len()].copy_from_slice(app);
    Ok(out)
}

/// The private data of a REQ as rdma_cm sends it: the header, then at most
/// 56 bytes of the application's.
pub fn req_private_data(header: &CmaHeader, app: &[u8]) -> Result<[u8; 92], RdmaCmError> {
    with_header(Message::Req, header, app)
}

/// The private data of a SIDR_REQ as rdma_cm sends it: the header, then at
/// most 180 bytes of the application's.
pub fn sidr_req_private_data(header: &CmaHeader, app: &[u8]) -> Result<[u8; 216], RdmaCmError> {
    with_header(Message::SidrReq, header, app)
}
