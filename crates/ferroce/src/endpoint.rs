//! What a peer needs to connect to a queue pair ([`QpEndpoint`]), how it
//! travels out of band (a stable byte encoding, and serde behind the
//! `serde` feature), and the attributes of the connection
//! ([`ConnectOptions`]).
//!
//! The endpoint holds the GID, the QP type, the QPN, the QP's first PSN
//! and its port's active MTU, nothing more: timers and retry counts are
//! each side's own choice, the path MTU is the smaller of the two ports'
//! active MTUs unless both sides set one (the same one, as with
//! rdma-core's `-m`), and the RoCE UDP port is a device setting
//! ([`DeviceConfig::peer_port`](crate::DeviceConfig::peer_port)), the
//! same for every peer of a device.
//!
//! [`QpEndpoint::exchange`] and [`RemoteRegion::exchange`](crate::RemoteRegion::exchange)
//! trade the encodings over any byte stream (a `TcpStream`, a pipe).

use std::net::{IpAddr, Ipv6Addr};

use crate::error::check_head;
use crate::{Access, DecodeError, Mtu, Psn, QpType};

/// One side of a connection, as the other side needs it: send it over any
/// channel (TCP, a file, a config service), then
/// [`QueuePair::connect`](crate::QueuePair::connect) to it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "serde_repr::Endpoint", into = "serde_repr::Endpoint")
)]
pub struct QpEndpoint {
    /// The device's address (its RoCE v2 GID).
    pub gid: IpAddr,
    /// RC or UC; connecting refuses a mismatch.
    pub qp_type: QpType,
    /// The QP number (24 bits).
    pub qpn: u32,
    /// The PSN of the QP's first request: its peer expects it, so it
    /// travels with the QPN, and the two cannot be swapped.
    pub psn: Psn,
    /// The active MTU of the QP's port, from which the peer's default
    /// path MTU is computed ([`ConnectOptions::path_mtu`]); `None` when
    /// unknown (an endpoint built from another tool's exchange).
    pub mtu: Option<Mtu>,
}

impl core::fmt::Debug for QpEndpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "QpEndpoint {{ gid: {}, qp_type: {:?}, qpn: {:#x}, psn: {:#x}, mtu: {:?} }}",
            self.gid,
            self.qp_type,
            self.qpn,
            self.psn.value(),
            self.mtu.map(Mtu::bytes)
        )
    }
}

impl core::fmt::Display for QpEndpoint {
    /// As the rdma-core examples print an address: `RC QP 0x000011 PSN
    /// 0x00abcd at 127.0.0.1`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let t = match self.qp_type {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
            QpType::XrcIni => "XRC_INI",
            QpType::XrcTgt => "XRC_TGT",
            QpType::Rd => "RD",
        };
        write!(
            f,
            "{t} QP {:#08x} PSN {:#08x} at {}",
            self.qpn,
            self.psn.value(),
            self.gid
        )
    }
}

/// First byte of an encoded endpoint.
const ENDPOINT_KIND: u8 = b'Q';
/// The encoding this build writes and reads.
const ENDPOINT_VERSION: u8 = 1;

impl QpEndpoint {
    /// The length of [`QpEndpoint::to_bytes`]'s encoding: kind, version,
    /// QP type, MTU, GID (16), QPN (4), PSN (4).
    pub const ENCODED_LEN: usize = 28;

    /// An endpoint of a port whose active MTU is unknown (`mtu: None`),
    /// as another tool's exchange describes a QP.
    pub const fn new(gid: IpAddr, qp_type: QpType, qpn: u32, psn: Psn) -> Self {
        Self {
            gid,
            qp_type,
            qpn,
            psn,
            mtu: None,
        }
    }

    /// The stable encoding (version 1, 28 bytes, network byte order):
    /// `'Q'`, version, QP type (0 RC, 1 UC, 2 UD, 3 XRC
    /// initiator, 4 XRC target, 5 RD: an EE context's endpoint), the port's
    /// active MTU as its `IBV_MTU_*` code (0 when unknown), the GID as 16 bytes
    /// (IPv4 as `::ffff:a.b.c.d`, as RoCE v2 GIDs are), QPN, PSN.
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let mut b = [0; Self::ENCODED_LEN];
        b[0] = ENDPOINT_KIND;
        b[1] = ENDPOINT_VERSION;
        b[2] = qp_type_code(self.qp_type);
        b[3] = self.mtu.map_or(0, |m| m as u8);
        b[4..20].copy_from_slice(&gid_bytes(self.gid));
        b[20..24].copy_from_slice(&self.qpn.to_be_bytes());
        b[24..28].copy_from_slice(&self.psn.value().to_be_bytes());
        b
    }

    /// Reads [`QpEndpoint::to_bytes`]'s encoding; refuses another kind or
    /// version, a wrong length, an MTU code past 5, a QPN or PSN past 24
    /// bits. An encoding of an earlier build (MTU byte 0) reads as
    /// `mtu: None`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        check_head(
            bytes,
            ENDPOINT_KIND,
            "QP endpoint",
            ENDPOINT_VERSION,
            Self::ENCODED_LEN,
        )?;
        let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        let gid: [u8; 16] = bytes[4..20].try_into().unwrap();
        Ok(Self {
            gid: gid_from_bytes(gid),
            qp_type: qp_type_from_code(bytes[2])?,
            qpn: check_24(word(20), "QPN")?,
            psn: Psn::new(check_24(word(24), "PSN")?),
            mtu: mtu_from_code(bytes[3])?,
        })
    }
}

fn mtu_from_code(code: u8) -> Result<Option<Mtu>, DecodeError> {
    if code == 0 {
        return Ok(None);
    }
    Mtu::from_code(code).map(Some).ok_or(DecodeError::BadValue {
        what: "port MTU code (0 unknown, 1-5)",
        value: code.into(),
    })
}

fn qp_type_code(t: QpType) -> u8 {
    match t {
        QpType::Rc => 0,
        QpType::Uc => 1,
        QpType::Ud => 2,
        QpType::XrcIni => 3,
        QpType::XrcTgt => 4,
        QpType::Rd => 5,
    }
}

fn qp_type_from_code(code: u8) -> Result<QpType, DecodeError> {
    match code {
        0 => Ok(QpType::Rc),
        1 => Ok(QpType::Uc),
        2 => Ok(QpType::Ud),
        3 => Ok(QpType::XrcIni),
        4 => Ok(QpType::XrcTgt),
        5 => Ok(QpType::Rd),
        _ => Err(DecodeError::BadValue {
            what: "QP type",
            value: code.into(),
        }),
    }
}

fn check_24(v: u32, what: &'static str) -> Result<u32, DecodeError> {
    if v > 0xff_ffff {
        return Err(DecodeError::BadValue {
            what,
            value: v.into(),
        });
    }
    Ok(v)
}

fn gid_bytes(gid: IpAddr) -> [u8; 16] {
    match gid {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn gid_from_bytes(b: [u8; 16]) -> IpAddr {
    let a = Ipv6Addr::from(b);
    a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4)
}

/// The attributes of a connection that each side chooses for itself
/// (what rdma-core's pingpong and perftest set in `ibv_modify_qp`). Every
/// field has a documented default ([`ConnectOptions::default`]); change
/// the ones you need with struct update syntax:
///
/// ```
/// use ferroce::{ConnectOptions, Mtu};
/// let opts = ConnectOptions { mtu: Some(Mtu::Mtu4096), ..ConnectOptions::default() };
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Path MTU; both sides must use the same. `None` (the default)
    /// takes the path MTU as ibverbs programs compute it: the smaller of
    /// this port's active MTU and the peer's ([`QpEndpoint::mtu`]), or
    /// this port's alone when the peer's endpoint does not carry it
    /// ([`ConnectOptions::path_mtu`]). `Some` is used as given (on the raw
    /// backend it may not exceed the port's active MTU).
    pub mtu: Option<Mtu>,
    /// Local ACK timeout: 4.096 µs × 2^`timeout` before a retransmission
    /// (RC); 0 waits forever. Default 14 (about 67 ms), as perftest.
    pub timeout: u8,
    /// Retransmissions before the request fails with
    /// [`WcStatus::RetryExcErr`](crate::WcStatus::RetryExcErr) (RC, 0-7).
    /// Default 7.
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (the peer had no receive posted) before
    /// [`WcStatus::RnrRetryExcErr`](crate::WcStatus::RnrRetryExcErr) (RC,
    /// 0-7); 7 retries forever. Default 7.
    pub rnr_retry: u8,
    /// The RNR NAK timer code this side sends when it has no receive
    /// posted (RC, IBA table 45: 12 is 0.64 ms). Default 12.
    pub min_rnr_timer: u8,
    /// READs and atomics this side has outstanding at once (initiator
    /// depth, RC). Default 16.
    pub max_rd_atomic: u8,
    /// READs and atomics this side serves at once for its peer (responder
    /// resources, RC). Default 16.
    pub max_dest_rd_atomic: u8,
    /// What the peer may do to this side's memory through this QP (the
    /// QP's access flags; each region's own flags apply too). Default:
    /// local write, remote write, remote read, remote atomic.
    pub access: Access,
    /// DSCP and ECN bits of the IP header (the GRH traffic class).
    /// Default 0.
    pub traffic_class: u8,
    /// IP TTL / hop limit. Default 64.
    pub hop_limit: u8,
    /// RoCE v2 (the default) or v1 (a GRH over Ethernet; the raw backend
    /// only). Both sides must use the same: a QP drops packets of the
    /// other version. [`crate::Context::gid_type`] gives a GID index's.
    pub roce: crate::RoceMode,
    /// The UDP source port of the flow; `None` (the default) derives it
    /// from the two QPNs as rdma-core does (`0xC000 | hash`).
    pub udp_src_port: Option<u16>,
}

impl ConnectOptions {
    /// The path MTU a connection with these options uses, on a port whose
    /// active MTU is `local_active`
    /// ([`PortAttr::active_mtu`](crate::PortAttr::active_mtu)) to `remote`:
    /// [`ConnectOptions::mtu`] if set, else the smaller of `local_active`
    /// and the remote port's active MTU when its endpoint carries it
    /// ([`QpEndpoint::mtu`]), else `local_active`.
    pub fn path_mtu(&self, local_active: Mtu, remote: &QpEndpoint) -> Mtu {
        match (self.mtu, remote.mtu) {
            (Some(mtu), _) => mtu,
            (None, Some(theirs)) => local_active.min(theirs),
            (None, None) => local_active,
        }
    }

    /// The path to `remote` from the context `local` (a QP, or an RD EE
    /// context) to the peer's `remote_qpn`, with these options' traffic
    /// class, hop limit, RoCE version and UDP source port.
    pub(crate) fn path(&self, remote: IpAddr, local: u32, remote_qpn: u32) -> crate::Path {
        let mut path = crate::qp::path_to(remote, local, remote_qpn);
        path.traffic_class = self.traffic_class;
        path.hop_limit = self.hop_limit;
        path.roce = self.roce;
        if let Some(port) = self.udp_src_port {
            path.udp_src_port = port;
        }
        path
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            mtu: None,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            access: Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC,
            traffic_class: 0,
            hop_limit: 64,
            roce: crate::RoceMode::V2,
            udp_src_port: None,
        }
    }
}

/// The active MTU of the device on `local`'s port; `None` if its
/// interface cannot be read.
pub(crate) fn port_active_mtu(local: IpAddr) -> Option<Mtu> {
    crate::device::query_port(local).ok().map(|p| p.active_mtu)
}

/// The path MTU `connect` gives a connection from the device on `local`
/// to `remote` ([`ConnectOptions::path_mtu`]); when the port cannot be
/// read, 1024 bytes (rdma-core's pingpong default) stands for its MTU.
pub(crate) fn connect_mtu(opts: &ConnectOptions, local: IpAddr, remote: &QpEndpoint) -> Mtu {
    let path = match opts.mtu {
        Some(mtu) => mtu,
        None => opts.path_mtu(port_active_mtu(local).unwrap_or(Mtu::Mtu1024), remote),
    };
    tracing::debug!(path_mtu = path.bytes(), requested = ?opts.mtu.map(Mtu::bytes),
        peer = ?remote.mtu.map(Mtu::bytes), "path MTU");
    path
}

/// The serde form: plain fields a JSON or TOML reader understands.
#[cfg(feature = "serde")]
mod serde_repr {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    pub(super) struct Endpoint {
        gid: IpAddr,
        qp_type: String,
        qpn: u32,
        psn: u32,
        /// Bytes (256 to 4096); absent when unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mtu: Option<usize>,
    }

    impl From<QpEndpoint> for Endpoint {
        fn from(e: QpEndpoint) -> Self {
            Self {
                gid: e.gid,
                qp_type: format!("{:?}", e.qp_type).to_uppercase(),
                qpn: e.qpn,
                psn: e.psn.value(),
                mtu: e.mtu.map(Mtu::bytes),
            }
        }
    }

    impl TryFrom<Endpoint> for QpEndpoint {
        type Error = DecodeError;
        fn try_from(e: Endpoint) -> Result<Self, DecodeError> {
            let qp_type = match e.qp_type.as_str() {
                "RC" => QpType::Rc,
                "UC" => QpType::Uc,
                "UD" => QpType::Ud,
                _ => {
                    return Err(DecodeError::BadValue {
                        what: "QP type (RC, UC or UD)",
                        value: 0,
                    });
                }
            };
            Ok(Self {
                gid: e.gid,
                qp_type,
                qpn: check_24(e.qpn, "QPN")?,
                psn: Psn::new(check_24(e.psn, "PSN")?),
                mtu: e
                    .mtu
                    .map(|b| {
                        Mtu::from_bytes(b).ok_or(DecodeError::BadValue {
                            what: "port MTU (256, 512, 1024, 2048 or 4096 bytes)",
                            value: b as u64,
                        })
                    })
                    .transpose()?,
            })
        }
    }
}
