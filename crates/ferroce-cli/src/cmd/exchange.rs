//! The out-of-band exchange of rdma-core's `ibv_*_pingpong` examples: each
//! side sends one NUL-terminated ASCII record `LLLL:QQQQQQ:PPPPPP:GID` over
//! TCP (LID, QPN and PSN in hex, the GID as 32 hex digits in wire byte
//! order), 52 bytes in all; the client then sends `done\0`.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};

use super::tcp;
use crate::error::Error;

/// The record's length on the wire, NUL included.
pub(crate) const LEN: usize = 52;

/// One side's connection parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dest {
    pub(crate) lid: u16,
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    pub(crate) gid: [u8; 16],
}

/// The GID of an address as RoCE v2 forms it (IPv4-mapped for IPv4).
pub(crate) fn gid_of(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The address a RoCE v2 GID names.
pub(crate) fn addr_of(gid: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None if gid == [0; 16] => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        None => IpAddr::V6(v6),
    }
}

impl Dest {
    pub(crate) fn encode(&self) -> [u8; LEN] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "{:04x}:{:06x}:{:06x}:{gid}",
            self.lid,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff
        );
        let mut out = [0u8; LEN];
        out[..text.len()].copy_from_slice(text.as_bytes());
        out
    }

    pub(crate) fn decode(buf: &[u8]) -> Result<Self, String> {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let text =
            std::str::from_utf8(&buf[..end]).map_err(|_| "record is not ASCII".to_string())?;
        let parts: Vec<&str> = text.split(':').collect();
        let [lid, qpn, psn, gid] = parts[..] else {
            return Err(format!("malformed record {text:?}: want LID:QPN:PSN:GID"));
        };
        // Hex digits only (from_str_radix would take a sign), within the
        // field's width.
        let hex = |s: &str, what: &str, max: u32| {
            u32::from_str_radix(s, 16)
                .ok()
                .filter(|v| s.bytes().all(|b| b.is_ascii_hexdigit()) && *v <= max)
                .ok_or_else(|| format!("bad {what} {s:?} in {text:?}"))
        };
        if gid.len() != 32 || !gid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("bad GID {gid:?}: want 32 hex digits"));
        }
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = u8::from_str_radix(&gid[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("bad GID {gid:?}"))?;
        }
        Ok(Self {
            lid: hex(lid, "LID", 0xffff)? as u16,
            qpn: hex(qpn, "QPN", 0xff_ffff)?,
            psn: hex(psn, "PSN", 0xff_ffff)?,
            gid: g,
        })
    }
}

/// Client side: send ours, read theirs, send `done`. `server` names the
/// peer in errors; a peer that answers something other than a record is
/// named as not being a pingpong server.
pub(crate) fn client(stream: &mut TcpStream, ours: &Dest, server: &str) -> Result<Dest, Error> {
    let fail = |what: String| Error::Exchange {
        peer: server.to_owned(),
        what,
    };
    let mut buf = [0u8; LEN];
    stream
        .write_all(&ours.encode())
        .and_then(|()| stream.read_exact(&mut buf))
        .map_err(|e| fail(answer_error(&e)))?;
    let theirs = Dest::decode(&buf).map_err(|e| {
        fail(format!(
            "not an ibv_*_pingpong or ferroce pingpong server ({e})"
        ))
    })?;
    stream
        .write_all(b"done\0")
        .map_err(|e| fail(e.to_string()))?;
    Ok(theirs)
}

/// What a failed read of the server's record means.
fn answer_error(e: &io::Error) -> String {
    if tcp::is_timeout(e) {
        format!(
            "no record within {} s: is it an ibv_*_pingpong or ferroce pingpong server?",
            tcp::ANSWER_TIMEOUT.as_secs()
        )
    } else {
        format!("{e} (is it an ibv_*_pingpong or ferroce pingpong server?)")
    }
}

/// Server side, first half: read the client's record. A client that sends
/// nothing in time, or not a record, is [`Error::Refused`].
pub(crate) fn server_read(stream: &mut TcpStream) -> Result<Dest, Error> {
    let mut buf = [0u8; LEN];
    stream.read_exact(&mut buf).map_err(|e| {
        Error::Refused(if tcp::is_timeout(&e) {
            format!("no record within {} s", tcp::OPENING_TIMEOUT.as_secs())
        } else {
            format!("reading its record: {e}")
        })
    })?;
    Dest::decode(&buf).map_err(|e| Error::Refused(format!("not a pingpong client: {e}")))
}

/// Server side, second half (after connecting the QP): send ours, read `done`.
pub(crate) fn server_reply(stream: &mut TcpStream, ours: &Dest) -> Result<(), Error> {
    let mut done = [0u8; 5];
    stream
        .write_all(&ours.encode())
        .and_then(|()| stream.read_exact(&mut done))
        .map_err(|e| Error::Exchange {
            peer: stream
                .peer_addr()
                .map_or_else(|_| "the client".into(), |a| a.to_string()),
            what: format!("after our record, no `done`: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_core_records() {
        // From the rxe rig capture (../shared/rig/README.md §5).
        let mut rec = *b"0000:000011:2c3616:00000000000000000000ffffc612000c\0";
        let d = Dest::decode(&rec).unwrap();
        assert_eq!((d.lid, d.qpn, d.psn), (0, 0x11, 0x2c3616));
        assert_eq!(addr_of(d.gid), "198.18.0.12".parse::<IpAddr>().unwrap());
        assert_eq!(d.encode(), rec);
        rec[5] = b'x';
        assert!(Dest::decode(&rec).is_err());
        // Hostile records are errors, never a panic: a GID of 32 bytes
        // that are not 32 digits (a char split by the digit pairs), a
        // sign, a QPN wider than 24 bits.
        let mut odd = *b"0000:000011:2c3616:00000000000000000000000000000000\0";
        odd[19..22].copy_from_slice("\u{20ac}".as_bytes());
        assert!(Dest::decode(&odd).is_err());
        assert!(Dest::decode(b"0000:+00011:2c3616:00000000000000000000ffffc612000c\0").is_err());
        assert!(Dest::decode(b"0000:1000011:2c3616:00000000000000000000ffffc612000c").is_err());
        let v6 = Dest::decode(b"0000:000014:aa6436:fd526f43450000000000000000000012\0").unwrap();
        assert_eq!(
            addr_of(v6.gid),
            "fd52:6f43:4500::12".parse::<IpAddr>().unwrap()
        );
    }
}
