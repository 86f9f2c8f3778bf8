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

use ferroce_wire::icrc::V2Headers;
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

/// One datagram's addresses, ports and UDP length: what its headers'
/// ICRC state depends on, besides the IPv4 Identification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flow {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
    pub(crate) udp_len: usize,
}

impl Flow {
    /// The flow of a datagram `transport` (BTH through ICRC) long.
    pub(crate) fn of(
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
        transport: &[u8],
    ) -> Self {
        Self {
            src,
            dst,
            src_port,
            dst_port,
            udp_len: udp::HEADER_LEN + transport.len(),
        }
    }

    /// Its masked headers' CRC state (IPv4: Identification 0, DF set);
    /// None for mixed address families.
    fn headers(&self) -> Option<V2Headers> {
        let udp = udp_header(self.src_port, self.dst_port, self.udp_len);
        let headers = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => V2Headers::new(
                &ipv4_header(s.octets(), d.octets(), self.udp_len, 0, true),
                &udp,
            ),
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                V2Headers::new(&ipv6_header(s.octets(), d.octets(), self.udp_len), &udp)
            }
            _ => return None,
        };
        headers.ok()
    }

    fn is_v4(&self) -> bool {
        self.src.is_ipv4()
    }
}

/// The headers' CRC state of the last flows seen, direct-mapped: a stream
/// sends and receives a few lengths to a few peers, and then each datagram
/// hashes its transport alone. A miss costs what computing them always
/// did (building and hashing 28 or 48 bytes of headers).
#[derive(Debug, Default)]
pub(crate) struct HeaderCache {
    slots: [Option<(Flow, V2Headers)>; CACHED_FLOWS],
}

/// Entries of a [`HeaderCache`].
const CACHED_FLOWS: usize = 8;

impl HeaderCache {
    /// `flow`'s headers (IPv4: Identification 0, DF set).
    pub(crate) fn get(&mut self, flow: &Flow) -> Option<V2Headers> {
        let port = usize::from(flow.src_port ^ flow.dst_port);
        let slot = &mut self.slots[(flow.udp_len ^ port) % CACHED_FLOWS];
        match slot {
            Some((f, h)) if f == flow => Some(*h),
            _ => {
                let h = flow.headers()?;
                *slot = Some((*flow, h));
                Some(h)
            }
        }
    }

    /// The ICRC value for a datagram `transport` (BTH through ICRC) of
    /// `flow`, sent by this backend (DF set; IPv4 Identification `ident`:
    /// 0, or the segment's index in a GSO train).
    pub(crate) fn for_send(&mut self, flow: &Flow, ident: u16, transport: &[u8]) -> Option<u32> {
        let body = &transport[..transport.len().checked_sub(ICRC_LEN)?];
        let mut headers = self.get(flow)?;
        if flow.is_v4() {
            headers = headers.with_ident_xor(ident);
        }
        headers.icrc(body).ok()
    }
}

/// Checks received ICRCs. Over IPv4 it solves for the sender's
/// Identification with one CRC pass and eight table look-ups per datagram,
/// whatever its length, in a map kept for the last lengths seen (a length
/// not seen lately first builds its map). Its state has a fixed size: a
/// flood of random lengths can neither grow it nor cost more than one map
/// build a datagram.
///
/// How: the ICRC is computed with Identification 0 and DF set; the change
/// that Identification bits (or a clear DF) cause is, for a reflected CRC,
/// a fixed value `c` carried through the bytes that follow by the zero-byte
/// advance `Z` (multiplication by x^8 modulo the polynomial). So the
/// difference `d` from the received ICRC is `Z^k(c)`, `k` being the number
/// of ICRC input bytes after the Identification. `Z` is invertible (the
/// polynomial's constant term is 1), so `Z^-k(d)` is written in a basis of
/// GF(2)^32 whose first 16 vectors are the Identification bits' changes
/// and whose 17th is a clear DF's: its coordinates are the Identification
/// and the DF bit, and the other 15 must be 0.
#[derive(Debug)]
pub(crate) struct RxVerifier {
    coords: Coordinates,
    /// `Z^-k` for `k = 2^i`: `unshift[i]` as a polynomial, x^(-8 * 2^i).
    unshift: [u32; 17],
    /// `Z^-k` by `k`, filled in as lengths are seen (0: not yet; a power
    /// of x is never 0). Fixed size, so a flood of lengths can neither grow
    /// it nor make it thrash; longer inputs are computed each time.
    by_len: Vec<u32>,
    /// The whole map from a difference to its coordinates for the last
    /// lengths seen, by `k % RECENT_LENGTHS`: a stream's full packets and
    /// its ACKs hit here; a miss costs one map's build (about a hundred
    /// nanoseconds).
    recent: Vec<Unshifted>,
    headers: HeaderCache,
}

/// How many lengths keep their whole map ([`Unshifted`], 512 bytes each).
const RECENT_LENGTHS: usize = 16;

/// `d -> coords(Z^-k(d))` for one `k`, a linear map applied a nibble at a
/// time by table: eight look-ups instead of a 32-step multiplication.
#[derive(Debug, Clone)]
struct Unshifted {
    /// 0: not filled (an ICRC input always has bytes after the Identification).
    k: usize,
    nibbles: [[u32; 16]; 8],
}

impl Unshifted {
    const EMPTY: Self = Self {
        k: 0,
        nibbles: [[0; 16]; 8],
    };

    /// The map for `k`, whose `Z^-k` is `unshift`.
    fn new(k: usize, unshift: u32, coords: &Coordinates) -> Self {
        // Bit 31 - i of a difference is its x^i term (reflected order).
        let mut column = [0u32; 32];
        let mut p = unshift;
        for i in 0..32 {
            column[31 - i] = coords.of(p);
            p = gf::times_x(p);
        }
        let mut nibbles = [[0u32; 16]; 8];
        for (j, table) in nibbles.iter_mut().enumerate() {
            for n in 1..16usize {
                let low = n.trailing_zeros() as usize;
                table[n] = table[n & (n - 1)] ^ column[4 * j + low];
            }
        }
        Self { k, nibbles }
    }

    fn of(&self, d: u32) -> u32 {
        let mut c = 0;
        for (j, table) in self.nibbles.iter().enumerate() {
            c ^= table[(d >> (4 * j)) as usize & 0xf];
        }
        c
    }
}

impl Default for RxVerifier {
    fn default() -> Self {
        // The ICRC input from the Identification on: its two bytes, then
        // the flags byte (DF is 0x40 in it).
        let mut changes = [0u32; 17];
        for (bit, c) in changes.iter_mut().take(16).enumerate() {
            let [hi, lo] = (1u16 << bit).to_be_bytes();
            // `hi` is followed by `lo`: one more zero byte's advance.
            *c = gf::mul(gf::byte(hi), gf::X8) ^ gf::byte(lo);
        }
        changes[16] = gf::mul(gf::byte(ipv4::DONT_FRAG.to_be_bytes()[0]), gf::X_MINUS_8);
        let mut unshift = [0u32; 17];
        let mut p = gf::X_MINUS_8;
        for u in unshift.iter_mut() {
            *u = p;
            p = gf::mul(p, p);
        }
        Self {
            // Checked by a test: the 17 changes are independent.
            coords: Coordinates::new(&changes).unwrap_or_else(Coordinates::empty),
            unshift,
            by_len: vec![0; CACHED_LENGTHS],
            recent: vec![Unshifted::EMPTY; RECENT_LENGTHS],
            headers: HeaderCache::default(),
        }
    }
}

/// `Z^-k` is kept for ICRC inputs of up to this many bytes after the
/// Identification (a 4096-byte MTU's packets and then some; 32 KiB).
const CACHED_LENGTHS: usize = 8192;

/// Bytes of the IPv4 ICRC input after the Identification, besides the
/// transport: the rest of the IPv4 header and the UDP header.
const AFTER_IDENT: usize = ipv4::AFTER_IDENT + udp::HEADER_LEN;

/// Coordinates in a basis of GF(2)^32 whose first vectors are given: a
/// linear map, applied a byte at a time by table (bit `i` of the result is
/// the coefficient of basis vector `i`).
#[derive(Debug)]
struct Coordinates([[u32; 256]; 4]);

impl Coordinates {
    /// The basis starts with `first`, completed by unit vectors; None if
    /// `first` is not linearly independent.
    fn new(first: &[u32]) -> Option<Self> {
        // Reduced rows (vector, the basis vectors summing to it), each with
        // a distinct leading bit, highest first.
        let mut rows: Vec<(u32, u32)> = Vec::with_capacity(32);
        let reduce = |rows: &[(u32, u32)], mut v: u32| {
            let mut combo = 0;
            for &(r, rc) in rows {
                if v ^ r < v {
                    v ^= r;
                    combo ^= rc;
                }
            }
            (v, combo)
        };
        let units = (0..32).map(|bit| 1u32 << bit);
        for (i, v) in first.iter().copied().chain(units).enumerate() {
            let (v, combo) = reduce(&rows, v);
            if v == 0 {
                if i < first.len() {
                    return None;
                }
                continue;
            }
            rows.push((v, combo ^ (1 << rows.len())));
            rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        }
        let mut tables = [[0u32; 256]; 4];
        for (byte, table) in tables.iter_mut().enumerate() {
            for (value, entry) in table.iter_mut().enumerate() {
                *entry = reduce(&rows, (value as u32) << (8 * byte)).1;
            }
        }
        Some(Self(tables))
    }

    /// A map that explains nothing (every difference has a nonzero
    /// coordinate past the 17th): what a failed construction leaves.
    fn empty() -> Self {
        Self([[u32::MAX; 256]; 4])
    }

    fn of(&self, v: u32) -> u32 {
        let [a, b, c, d] = v.to_le_bytes();
        self.0[0][usize::from(a)]
            ^ self.0[1][usize::from(b)]
            ^ self.0[2][usize::from(c)]
            ^ self.0[3][usize::from(d)]
    }
}

/// Polynomials modulo the CRC-32 polynomial, in the CRC register's
/// reflected order (bit 31 is x^0, bit 0 is x^31).
mod gf {
    /// The reflected CRC-32 polynomial.
    const POLY: u32 = 0xedb8_8320;
    /// x^0.
    pub(super) const ONE: u32 = 1 << 31;

    /// `a * b`, with no branch on the operands' bits (a data-dependent
    /// branch per bit cost more than the arithmetic).
    pub(super) const fn mul(a: u32, mut b: u32) -> u32 {
        let mut p = 0;
        let mut i = 0;
        while i < 32 {
            p ^= b & ((a >> (31 - i)) & 1).wrapping_neg();
            b = (b >> 1) ^ (POLY & (b & 1).wrapping_neg());
            i += 1;
        }
        p
    }

    /// `b * x`.
    pub(super) const fn times_x(b: u32) -> u32 {
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
        let flow = Flow::of(src, dst, src_port, dst_port, transport);
        let Some(base) = self.headers.get(&flow).and_then(|h| h.icrc(body).ok()) else {
            return Verdict::Bad;
        };
        if !flow.is_v4() {
            return if base == received {
                Verdict::Good
            } else {
                Verdict::Bad
            };
        }
        let Some(map) = self.unshifted(AFTER_IDENT + body_len) else {
            return Verdict::Bad;
        };
        let coords = map.of(base ^ received);
        // Coordinate 16 is a clear DF (RoCE senders set it); the rest past
        // the Identification explain nothing.
        if coords >> 17 == 0 {
            Verdict::GoodWithIdent(coords as u16)
        } else {
            Verdict::Bad
        }
    }

    /// The map from a difference to its coordinates for `k` bytes after
    /// the Identification, if `k` fits the 17 powers kept.
    fn unshifted(&mut self, k: usize) -> Option<&Unshifted> {
        let slot = k % RECENT_LENGTHS;
        if self.recent[slot].k != k {
            let u = self.unshift(k)?;
            self.recent[slot] = Unshifted::new(k, u, &self.coords);
        }
        Some(&self.recent[slot])
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
    use ferroce_wire::icrc::compute_v2_parts;
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
        let explained = (0..1u32 << 16)
            .map(|i| i.wrapping_mul(0x9e37_79b9))
            .filter(|&d| v.coords.of(d) >> 17 == 0)
            .count();
        // 65,536 differences spread over the space: about 2 explained.
        assert!(
            explained < 16,
            "{explained} of 65536 random differences explained"
        );
        // Each Identification bit and DF is one coordinate.
        for bit in 0..16 {
            let [hi, lo] = (1u16 << bit).to_be_bytes();
            let change = gf::mul(gf::byte(hi), gf::X8) ^ gf::byte(lo);
            assert_eq!(v.coords.of(change), 1 << bit);
        }
        let df = gf::mul(gf::byte(ipv4::DONT_FRAG.to_be_bytes()[0]), gf::X_MINUS_8);
        assert_eq!(v.coords.of(df), 1 << 16);
    }

    #[test]
    fn dependent_first_vectors_are_refused() {
        assert!(Coordinates::new(&[0x8000_0001, 0x0000_0001, 0x8000_0000]).is_none());
        assert!(Coordinates::new(&[0x8000_0001, 0x0000_0001]).is_some());
    }

    /// The branchless multiplication agrees with the schoolbook one.
    #[test]
    fn multiplication_is_the_polynomial_product() {
        let slow = |a: u32, mut b: u32| {
            let mut p = 0;
            for i in 0..32 {
                if a & (gf::ONE >> i) != 0 {
                    p ^= b;
                }
                b = if b & 1 != 0 {
                    (b >> 1) ^ 0xedb8_8320
                } else {
                    b >> 1
                };
            }
            p
        };
        let mut x = 0x1234_5678u32;
        for _ in 0..1000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let y = x.rotate_left(13) ^ 0xdead_beef;
            assert_eq!(gf::mul(x, y), slow(x, y));
        }
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
pub struct BenchIcrc(RxVerifier, HeaderCache);

impl BenchIcrc {
    /// Writes `transport`'s ICRC as the backend's send does for a datagram
    /// alone (Identification 0) from `src:src_port` to `dst:dst_port`;
    /// false if it cannot be computed (mixed address families, too short).
    pub fn seal(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
        transport: &mut [u8],
    ) -> bool {
        let len = transport.len();
        let flow = Flow::of(src, dst, src_port, dst_port, transport);
        let Some(c) = self.1.for_send(&flow, 0, transport) else {
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
