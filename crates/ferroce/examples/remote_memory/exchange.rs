//! What the two sides tell each other over TCP before any RDMA, in a fixed
//! byte layout (big-endian, IP addresses as 16 bytes, IPv4 mapped).

use std::net::IpAddr;

/// A QP as its peer needs it: the device's address (GID), QPN, first
/// PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) addr: IpAddr,
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
}

/// A registered region the peer may access: address, key, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) addr: u64,
    pub(crate) rkey: u32,
    pub(crate) len: u64,
}

type Res<T> = Result<T, String>;

impl Endpoint {
    pub(crate) const LEN: usize = 24;

    pub(crate) fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..16].copy_from_slice(&match self.addr {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        });
        b[16..20].copy_from_slice(&self.qpn.to_be_bytes());
        b[20..].copy_from_slice(&self.psn.to_be_bytes());
        b
    }

    pub(crate) fn from_bytes(b: &[u8; Self::LEN]) -> Res<Self> {
        let ip = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&b[..16]).unwrap());
        let addr = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
        let word = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
        let (qpn, psn) = (word(16), word(20));
        if qpn > 0xff_ffff || psn > 0xff_ffff {
            return Err(format!("peer sent QPN {qpn:#x} / PSN {psn:#x}: not 24-bit"));
        }
        Ok(Self { addr, qpn, psn })
    }
}

impl Region {
    pub(crate) const LEN: usize = 20;

    pub(crate) fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    pub(crate) fn from_bytes(b: &[u8; Self::LEN]) -> Res<Self> {
        Ok(Self {
            addr: u64::from_be_bytes(b[..8].try_into().unwrap()),
            rkey: u32::from_be_bytes(b[8..12].try_into().unwrap()),
            len: u64::from_be_bytes(b[12..].try_into().unwrap()),
        })
    }
}
