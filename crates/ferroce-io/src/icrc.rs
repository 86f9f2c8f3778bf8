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
//! it. The DF bit is taken to be set, as RoCE senders set it, and then
//! clear, which spends one more bit: 15 of the 32 ICRC bits still check the
//! packet, and about 1 in 32,768 random datagrams passes. The receive path
//! therefore runs this check last, after the header and QP checks (see
//! [`crate::udp::UdpBackend::recv_into`]).
//!
//! The pseudo-headers are written with `ferroce-wire`'s emitters
//! ([`Ipv4Repr`], [`Ipv6Repr`], [`UdpRepr`]).

use std::net::IpAddr;

use ferroce_wire::icrc::compute_v2_parts;
use ferroce_wire::ipv4::{self, Ipv4Repr};
use ferroce_wire::ipv6::{self, Ipv6Repr};
use ferroce_wire::transport::ICRC_LEN;
use ferroce_wire::udp::{self, UdpRepr};

/// The TTL and hop limit the backend's sockets send with (masked out of
/// the ICRC, so any value would do for it).
const HOP_LIMIT: u8 = 64;

/// The option-less IPv4 header the kernel will write for this datagram
/// (DF as given: RoCE senders set it; Identification `ident`).
pub(crate) fn ipv4_header(
    src: [u8; 4],
    dst: [u8; 4],
    udp_len: usize,
    ident: u16,
    df: bool,
) -> [u8; ipv4::MIN_HEADER_LEN] {
    let repr = Ipv4Repr {
        header_len: ipv4::MIN_HEADER_LEN as u8,
        dscp: 0,
        ecn: 0,
        total_len: (ipv4::MIN_HEADER_LEN + udp_len) as u16,
        ident,
        dont_frag: df,
        more_frags: false,
        frag_offset: 0,
        ttl: HOP_LIMIT,
        protocol: ipv4::PROTO_UDP,
        checksum: 0,
        src: src.into(),
        dst: dst.into(),
    };
    let mut h = [0u8; ipv4::MIN_HEADER_LEN];
    // The buffer is the header's size: emitting cannot fail.
    let _ = repr.emit(&mut h);
    h
}

/// The IPv6 header for this datagram.
pub(crate) fn ipv6_header(src: [u8; 16], dst: [u8; 16], udp_len: usize) -> [u8; ipv6::HEADER_LEN] {
    let repr = Ipv6Repr {
        traffic_class: 0,
        flow_label: 0,
        payload_len: udp_len as u16,
        next_header: ipv4::PROTO_UDP,
        hop_limit: HOP_LIMIT,
        src: src.into(),
        dst: dst.into(),
    };
    let mut h = [0u8; ipv6::HEADER_LEN];
    // The buffer is the header's size and the flow label 0: cannot fail.
    let _ = repr.emit(&mut h);
    h
}

/// The UDP header (checksum 0: masked out of the ICRC).
pub(crate) fn udp_header(src_port: u16, dst_port: u16, udp_len: usize) -> [u8; udp::HEADER_LEN] {
    let repr = UdpRepr {
        src_port,
        dst_port,
        length: udp_len as u16,
        checksum: 0,
    };
    let mut u = [0u8; udp::HEADER_LEN];
    let _ = repr.emit(&mut u);
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
    let udp_len = udp::HEADER_LEN + transport.len();
    let udp = udp_header(src_port, dst_port, udp_len);
    let body = &transport[..transport.len().checked_sub(ICRC_LEN)?];
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

/// Checks received ICRCs. Over IPv4 it solves for the sender's
/// Identification with one CRC pass and a few dozen word operations per
/// datagram, whatever its length, and keeps no per-length state (a flood of
/// random lengths costs what a flood of one length does).
///
/// How: the ICRC is computed with Identification 0 and DF set; the change
/// that Identification bits (or a clear DF) cause is, for a reflected CRC,
/// a fixed value `c` carried through the bytes that follow by the zero-byte
/// advance `Z` (multiplication by x^8 modulo the polynomial). So the
/// difference `d` from the received ICRC is `Z^k(c)`, `k` being the number
/// of ICRC input bytes after the Identification. `Z` is invertible (the
/// polynomial's constant term is 1), so `Z^-k(d)` is solved against one
/// basis of the 16 Identification bits' changes, built once.
#[derive(Debug)]
pub(crate) struct RxVerifier {
    ident: Basis,
    /// `Z^-k` for `k = 2^i`: `unshift[i]` as a polynomial, x^(-8 * 2^i).
    unshift: [u32; 17],
    /// `Z^-k` by `k`, filled in as lengths are seen (0: not yet; a power
    /// of x is never 0). Fixed size, so a flood of lengths can neither grow
    /// it nor make it thrash; longer inputs are computed each time.
    by_len: Vec<u32>,
    /// The change a clear DF causes, unshifted like the others.
    df: u32,
}

impl Default for RxVerifier {
    fn default() -> Self {
        // The ICRC input from the Identification on: its two bytes, then
        // the flags byte (DF is 0x40 in it).
        let mut changes = [0u32; 16];
        for (bit, c) in changes.iter_mut().enumerate() {
            let [hi, lo] = (1u16 << bit).to_be_bytes();
            // `hi` is followed by `lo`: one more zero byte's advance.
            *c = gf::mul(gf::byte(hi), gf::X8) ^ gf::byte(lo);
        }
        let mut unshift = [0u32; 17];
        let mut p = gf::X_MINUS_8;
        for u in unshift.iter_mut() {
            *u = p;
            p = gf::mul(p, p);
        }
        Self {
            ident: Basis::new(changes),
            unshift,
            by_len: vec![0; CACHED_LENGTHS],
            df: gf::mul(gf::byte(ipv4::DONT_FRAG.to_be_bytes()[0]), gf::X_MINUS_8),
        }
    }
}

/// `Z^-k` is kept for ICRC inputs of up to this many bytes after the
/// Identification (a 4096-byte MTU's packets and then some; 32 KiB).
const CACHED_LENGTHS: usize = 8192;

/// Bytes of the IPv4 ICRC input after the Identification, besides the
/// transport: the rest of the IPv4 header and the UDP header.
const AFTER_IDENT: usize = ipv4::AFTER_IDENT + udp::HEADER_LEN;

/// A GF(2) basis of the ICRC changes the 16 Identification bits cause:
/// (change, identification bits producing it), each with a distinct leading bit.
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

/// Polynomials modulo the CRC-32 polynomial, in the CRC register's
/// reflected order (bit 31 is x^0, bit 0 is x^31).
mod gf {
    /// The reflected CRC-32 polynomial.
    const POLY: u32 = 0xedb8_8320;
    /// x^0.
    pub(super) const ONE: u32 = 1 << 31;

    /// `a * b`.
    pub(super) const fn mul(a: u32, mut b: u32) -> u32 {
        let mut p = 0;
        let mut i = 0;
        while i < 32 {
            if a & (ONE >> i) != 0 {
                p ^= b;
            }
            b = times_x(b);
            i += 1;
        }
        p
    }

    const fn times_x(b: u32) -> u32 {
        if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 }
    }

    /// The inverse of [`times_x`]: the top bit says whether the polynomial
    /// was added (its x^0 term is set; a shifted value's never is).
    const fn over_x(b: u32) -> u32 {
        if b & ONE != 0 {
            ((b ^ POLY) << 1) | 1
        } else {
            b << 1
        }
    }

    const fn pow_x(steps: u32, inverse: bool) -> u32 {
        let mut p = ONE;
        let mut i = 0;
        while i < steps {
            p = if inverse { over_x(p) } else { times_x(p) };
            i += 1;
        }
        p
    }

    /// x^8: one zero byte's advance.
    pub(super) const X8: u32 = pow_x(8, false);
    /// x^-8: undoes one zero byte's advance.
    pub(super) const X_MINUS_8: u32 = pow_x(8, true);

    /// The register change one input byte `b` causes where it is hashed
    /// (the entry of a table-driven CRC's table): `b` enters the low byte
    /// of the register, which then advances 8 bits.
    pub(super) const fn byte(b: u8) -> u32 {
        let mut r = b as u32;
        let mut i = 0;
        while i < 8 {
            r = times_x(r);
            i += 1;
        }
        r
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
        let Some(body_len) = transport.len().checked_sub(ICRC_LEN) else {
            return Verdict::Bad;
        };
        let (body, tail) = transport.split_at(body_len);
        let received = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        let udp_len = udp::HEADER_LEN + transport.len();
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
                let ip = ipv4_header(s.octets(), d.octets(), udp_len, 0, true);
                let Ok(base) = compute_v2_parts(&ip, &udp, body) else {
                    return Verdict::Bad;
                };
                let Some(unshift) = self.unshift(AFTER_IDENT + body_len) else {
                    return Verdict::Bad;
                };
                let diff = gf::mul(base ^ received, unshift);
                // DF set, as RoCE senders set it; then clear.
                let ident = self.ident.solve(diff);
                match ident.or_else(|| self.ident.solve(diff ^ self.df)) {
                    Some(ident) => Verdict::GoodWithIdent(ident),
                    None => Verdict::Bad,
                }
            }
            _ => Verdict::Bad,
        }
    }

    /// `Z^-k`, if `k` fits the 17 powers kept.
    fn unshift(&mut self, k: usize) -> Option<u32> {
        if let Some(&u) = self.by_len.get(k).filter(|&&u| u != 0) {
            return Some(u);
        }
        if k >> self.unshift.len() != 0 {
            return None;
        }
        let u = (0..self.unshift.len())
            .filter(|i| k >> i & 1 != 0)
            .fold(gf::ONE, |p, i| gf::mul(p, self.unshift[i]));
        if let Some(slot) = self.by_len.get_mut(k) {
            *slot = u;
        }
        Some(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce_wire::udp::ROCE_V2_PORT;
    use std::net::Ipv4Addr;

    /// A datagram of `len` bytes whose ICRC was computed with `ident` and `df`.
    fn signed(len: usize, ident: u16, df: bool) -> Vec<u8> {
        let mut t: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let udp_len = 8 + len;
        let ip = ipv4_header([198, 18, 0, 11], [198, 18, 0, 12], udp_len, ident, df);
        let udp = udp_header(0xc121, ROCE_V2_PORT, udp_len);
        let c = compute_v2_parts(&ip, &udp, &t[..len - 4]).unwrap();
        t[len - 4..].copy_from_slice(&c.to_le_bytes());
        t
    }

    #[test]
    fn recovers_any_identification_and_rejects_corruption() {
        let src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11));
        let dst = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 12));
        let mut v = RxVerifier::default();
        // Lengths inside and beyond the cached range, DF set and clear.
        for (len, ident, df) in [
            (16usize, 0u16, true),
            (100, 0x1234, true),
            (1048, 0xbeef, false),
            (1048, 0xffff, true),
            (4140, 0x8001, true),
            (9000, 0x0102, false),
            (60_000, 0x7fff, true),
        ] {
            let mut t = signed(len, ident, df);
            // Twice: the second finds its length cached.
            for _ in 0..2 {
                assert_eq!(
                    v.verify(src, dst, 0xc121, ROCE_V2_PORT, &t),
                    Verdict::GoodWithIdent(ident),
                    "len {len}"
                );
            }
            t[5] ^= 0x10;
            assert_eq!(
                v.verify(src, dst, 0xc121, ROCE_V2_PORT, &t),
                Verdict::Bad,
                "len {len}"
            );
        }
    }

    /// The 16 Identification bits change the ICRC independently and DF is
    /// outside their span: each DF value explains 2^16 of the 2^32
    /// differences, so a random datagram passes with odds 2 x 2^16 / 2^32,
    /// 1 in 32,768 (the README's figure).
    #[test]
    fn identification_spends_sixteen_bits_and_df_one() {
        let v = RxVerifier::default();
        assert_eq!(v.ident.0.len(), 16);
        assert_eq!(v.ident.solve(v.df), None);
    }

    #[test]
    fn every_length_of_a_range_checks() {
        let src = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let dst = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
        let mut v = RxVerifier::default();
        for len in 16..600 {
            let ident = (len as u16).wrapping_mul(0x9e37);
            let mut t = signed(len, ident, true);
            let udp_len = 8 + len;
            let ip = ipv4_header([127, 0, 0, 2], [127, 0, 0, 1], udp_len, ident, true);
            let udp = udp_header(0xc121, ROCE_V2_PORT, udp_len);
            let c = compute_v2_parts(&ip, &udp, &t[..len - 4]).unwrap();
            t[len - 4..].copy_from_slice(&c.to_le_bytes());
            assert_eq!(
                v.verify(src, dst, 0xc121, ROCE_V2_PORT, &t),
                Verdict::GoodWithIdent(ident),
                "len {len}"
            );
        }
    }
}

/// A bench hook (`ferroce bench --packet-only`), not an API: the UDP
/// backend's own ICRC work on one datagram, sealing as a send does and
/// checking as a receive does, so that the bench times exactly that work.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct BenchIcrc(RxVerifier);

impl BenchIcrc {
    /// Writes `transport`'s ICRC as the backend's send does for a datagram
    /// alone (Identification 0) from `src:src_port` to `dst:dst_port`;
    /// false if it cannot be computed (mixed address families, too short).
    pub fn seal(
        &self,
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
        transport: &mut [u8],
    ) -> bool {
        let len = transport.len();
        let Some(c) = for_send(src, dst, src_port, dst_port, 0, transport) else {
            return false;
        };
        transport[len - ICRC_LEN..].copy_from_slice(&c.to_le_bytes());
        true
    }

    /// Whether `transport`'s ICRC checks as the backend's receive checks it.
    pub fn check(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
        transport: &[u8],
    ) -> bool {
        self.0.verify(src, dst, src_port, dst_port, transport) != Verdict::Bad
    }
}
