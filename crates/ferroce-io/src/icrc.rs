//! The ICRC as a UDP socket backend can have it.
//!
//! On send, the kernel builds the IP header, so it must be predictable: the
//! backend's sockets send with DF set and are never connected, and Linux
//! then writes IPv4 Identification 0 (checked on loopback with tshark). TOS,
//! TTL, the IPv4 checksum and the UDP checksum are masked out of the ICRC,
//! and the lengths and addresses are known, so the whole ICRC is exact.
//!
//! On receive, a UDP socket does not show the IP header. Over IPv6 every
//! field the ICRC covers is known (payload length, next header, addresses),
//! so the ICRC is verified in full. Over IPv4 the Identification is unknown
//! (rxe counts it per destination). The CRC is linear in those 16 bits, so
//! the backend solves for the one Identification that makes the ICRC match:
//! a corrupted packet passes only if some 16-bit value happens to explain
//! it, so 16 of the 32 ICRC bits still check the packet. The DF bit is taken
//! to be set, as RoCE senders set it, and then clear.

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use ferroce_wire::icrc::compute_v2_parts;

/// The 20-byte IPv4 header the kernel will write for this datagram.
pub(crate) fn ipv4_header(
    src: [u8; 4],
    dst: [u8; 4],
    udp_len: usize,
    ident: u16,
    df: bool,
) -> [u8; 20] {
    let total = (20 + udp_len) as u16;
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&ident.to_be_bytes());
    h[6] = if df { 0x40 } else { 0 };
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    h
}

/// The 40-byte IPv6 header for this datagram.
pub(crate) fn ipv6_header(src: [u8; 16], dst: [u8; 16], udp_len: usize) -> [u8; 40] {
    let mut h = [0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    h[6] = 17;
    h[7] = 64;
    h[8..24].copy_from_slice(&src);
    h[24..40].copy_from_slice(&dst);
    h
}

pub(crate) fn udp_header(src_port: u16, dst_port: u16, udp_len: usize) -> [u8; 8] {
    let mut u = [0u8; 8];
    u[0..2].copy_from_slice(&src_port.to_be_bytes());
    u[2..4].copy_from_slice(&dst_port.to_be_bytes());
    u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    u
}

/// The ICRC value for a datagram `transport` (BTH through ICRC) sent from
/// `src:src_port` to `dst:dst_port` by this backend (DF set; IPv4
/// Identification `ident`: 0, or the segment's index in a GSO train).
pub(crate) fn for_send(
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    dst_port: u16,
    ident: u16,
    transport: &[u8],
) -> Option<u32> {
    let udp_len = 8 + transport.len();
    let udp = udp_header(src_port, dst_port, udp_len);
    let body = &transport[..transport.len().checked_sub(4)?];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => compute_v2_parts(
            &ipv4_header(s.octets(), d.octets(), udp_len, ident, true),
            &udp,
            body,
        )
        .ok(),
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            compute_v2_parts(&ipv6_header(s.octets(), d.octets(), udp_len), &udp, body).ok()
        }
        _ => None,
    }
}

/// Solves for the IPv4 Identification; one solver per datagram length.
#[derive(Debug, Default)]
pub(crate) struct RxVerifier {
    by_len: HashMap<usize, Basis>,
}

/// A GF(2) basis of the ICRC changes the 16 Identification bits cause, for
/// one datagram length: (change, identification bits producing it), each
/// with a distinct leading bit.
#[derive(Debug, Clone)]
struct Basis(Vec<(u32, u16)>);

impl Basis {
    /// `changes[k]`: how the ICRC changes when bit k of the Identification flips.
    fn new(changes: [u32; 16]) -> Self {
        let mut rows: Vec<(u32, u16)> = Vec::new();
        for (k, &c) in changes.iter().enumerate() {
            let (mut v, mut ids) = (c, 1u16 << k);
            for &(r, rid) in &rows {
                if v ^ r < v {
                    v ^= r;
                    ids ^= rid;
                }
            }
            if v != 0 {
                rows.push((v, ids));
                rows.sort_by_key(|r| std::cmp::Reverse(r.0));
            }
        }
        Self(rows)
    }

    /// The Identification bits that explain `diff`, if any.
    fn solve(&self, mut diff: u32) -> Option<u16> {
        let mut ids = 0;
        for &(r, rid) in &self.0 {
            if diff ^ r < diff {
                diff ^= r;
                ids ^= rid;
            }
        }
        (diff == 0).then_some(ids)
    }
}

/// What receive-side verification concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Verified in full (IPv6).
    Good,
    /// Verified up to the IPv4 Identification, which was this.
    GoodWithIdent(u16),
    Bad,
}

impl RxVerifier {
    const MAX_LENGTHS: usize = 256;

    /// Checks a received datagram `transport` (BTH through ICRC) that came
    /// from `src:src_port` to `dst:dst_port`.
    pub(crate) fn verify(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
        transport: &[u8],
    ) -> Verdict {
        let Some(body_len) = transport.len().checked_sub(4) else {
            return Verdict::Bad;
        };
        let (body, tail) = transport.split_at(body_len);
        let received = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        let udp_len = 8 + transport.len();
        let udp = udp_header(src_port, dst_port, udp_len);
        match (src, dst) {
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let ip = ipv6_header(s.octets(), d.octets(), udp_len);
                match compute_v2_parts(&ip, &udp, body) {
                    Ok(c) if c == received => Verdict::Good,
                    _ => Verdict::Bad,
                }
            }
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                for df in [true, false] {
                    let ip = ipv4_header(s.octets(), d.octets(), udp_len, 0, df);
                    let Ok(base) = compute_v2_parts(&ip, &udp, body) else {
                        return Verdict::Bad;
                    };
                    if let Some(ident) = self
                        .basis(transport.len(), s.octets(), d.octets(), &udp, body)
                        .solve(base ^ received)
                    {
                        return Verdict::GoodWithIdent(ident);
                    }
                }
                Verdict::Bad
            }
            _ => Verdict::Bad,
        }
    }

    fn basis(&mut self, len: usize, s: [u8; 4], d: [u8; 4], udp: &[u8; 8], body: &[u8]) -> &Basis {
        if self.by_len.len() >= Self::MAX_LENGTHS && !self.by_len.contains_key(&len) {
            self.by_len.clear();
        }
        self.by_len.entry(len).or_insert_with(|| {
            // The change from flipping one Identification bit depends only
            // on how many bytes follow it, not on their values: measure it
            // on this packet once per length.
            let udp_len = 8 + len;
            let zero =
                compute_v2_parts(&ipv4_header(s, d, udp_len, 0, true), udp, body).unwrap_or(0);
            let mut changes = [0u32; 16];
            for (k, c) in changes.iter_mut().enumerate() {
                let ip = ipv4_header(s, d, udp_len, 1 << k, true);
                *c = compute_v2_parts(&ip, udp, body).unwrap_or(0) ^ zero;
            }
            Basis::new(changes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce_wire::udp::ROCE_V2_PORT;
    use std::net::Ipv4Addr;

    #[test]
    fn recovers_any_identification_and_rejects_corruption() {
        let src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11));
        let dst = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12));
        let mut v = RxVerifier::default();
        for (len, ident) in [
            (16usize, 0u16),
            (100, 0x1234),
            (1048, 0xbeef),
            (1048, 0xffff),
        ] {
            let mut t: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let udp_len = 8 + len;
            let ip = ipv4_header([198, 18, 0, 11], [198, 18, 0, 12], udp_len, ident, true);
            let udp = udp_header(0xc121, ROCE_V2_PORT, udp_len);
            let c = compute_v2_parts(&ip, &udp, &t[..len - 4]).unwrap();
            t[len - 4..].copy_from_slice(&c.to_le_bytes());
            assert_eq!(
                v.verify(src, dst, 0xc121, ROCE_V2_PORT, &t),
                Verdict::GoodWithIdent(ident)
            );
            t[5] ^= 0x10;
            assert_eq!(
                v.verify(src, dst, 0xc121, ROCE_V2_PORT, &t),
                Verdict::Bad,
                "len {len}"
            );
        }
    }
}
