//! The invariant CRC (IBA vol. 1 §7.8.1; Annex A16 for RoCE v1, A17.4.4 for
//! RoCE v2), computed exactly as the kernel's rxe and RoCE NICs compute it.
//!
//! The ICRC is the Ethernet CRC-32 (reflected polynomial 0xEDB88320, initial
//! value all ones, result inverted) over the packet with every field that may
//! change in flight replaced by ones:
//!
//! * first 8 bytes of ones standing for the LRH (RoCE has none; a native IB
//!   packet with a GRH masks its whole LRH the same way, one without a GRH
//!   masks only the LRH's VL);
//! * RoCE v2 over IPv4: the IPv4 header with TOS (DSCP and ECN), TTL and the
//!   header checksum masked; over IPv6 and for a GRH: traffic class, flow
//!   label and hop limit masked; then the UDP header with its checksum masked;
//! * the BTH with byte 4 (FECN, BECN, reserved) masked;
//! * the rest up to the ICRC unchanged.
//!
//! On the wire the 32-bit result is stored least-significant byte first. In
//! this crate an ICRC *value* is that `u32`; `value.to_le_bytes()` are the
//! wire bytes.
//!
//! Speed: for RoCE v1, and v2 with a 20-byte IPv4 or an IPv6 header, the
//! masking is folded into the CRC's start state by a few table lookups (see
//! `MaskFix`) and the packet is hashed as it is, in one `crc32fast` pass
//! (PCLMULQDQ on x86-64, the CRC instructions on aarch64), with no copy.
//! [`compute_v2_parts`], for a UDP backend that has the headers apart from
//! the transport, masks the 28 or 48 bytes of IP and UDP header on the
//! stack and folds the BTH's masked byte into the second pass's start.
//! Other layouts copy their masked headers (at most 80 bytes) to the stack.
//! Measured and dropped as slower (`cargo bench -p ferroce-wire --bench
//! wire`): masking a staged copy of the headers and hashing it as a second
//! call (86-90% of plain CRC at 4 KiB, against 91-92% now), masking the packet
//! in place, and staging 128 or 256 bytes.

use crc32fast::Hasher;

use crate::transport::{BTH_LEN, ICRC_LEN};
use crate::{Error, Header, Result};
use crate::{ipv4, ipv6, udp};

/// `crc32(8 x 0xFF)`: the CRC state after the masked LRH. rxe keeps the same
/// state un-inverted as its seed 0xDEBB20E3.
const AFTER_MASKED_LRH: u32 = !0xdebb_20e3;

/// Where the ICRC input starts: what the first header is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcrcScope {
    /// RoCE v1: GRH, then the transport.
    RoceV1,
    /// RoCE v2 over IPv4: IPv4 header (any IHL), UDP, then the transport.
    RoceV2Ipv4,
    /// RoCE v2 over IPv6: IPv6 header, UDP, then the transport.
    RoceV2Ipv6,
    /// Native InfiniBand: LRH, optional GRH (by the LRH's LNH), transport.
    Infiniband,
}

/// Computes the ICRC value of `packet`, which starts at the first header the
/// scope names and ends with the 4 ICRC bytes (which are not read).
#[inline]
pub fn compute(scope: IcrcScope, packet: &[u8]) -> Result<u32> {
    let (prefix_len, start) = layout(scope, packet)?;
    Ok(compute_laid_out(scope, prefix_len, start, packet))
}

/// The ICRC of a RoCE packet whose transport starts at `transport_start`
/// (the caller has checked the headers and that the BTH and ICRC are there).
#[inline]
pub(crate) fn compute_roce(scope: IcrcScope, transport_start: usize, packet: &[u8]) -> u32 {
    compute_laid_out(scope, transport_start + BTH_LEN, AFTER_MASKED_LRH, packet)
}

/// [`compute`] once `layout` has checked the lengths.
#[inline]
fn compute_laid_out(scope: IcrcScope, prefix_len: usize, start: u32, packet: &[u8]) -> u32 {
    let body_end = packet.len() - ICRC_LEN;
    let fix = match (scope, prefix_len) {
        (IcrcScope::RoceV2Ipv4, V4_PREFIX) => &V4_FIX[..],
        (IcrcScope::RoceV2Ipv6, V6_PREFIX) => &V6_FIX[..],
        (IcrcScope::RoceV1, V1_PREFIX) => &V1_FIX[..],
        _ => return compute_staged(scope, prefix_len, start, packet),
    };
    // One pass over the unmasked bytes, from a start state that already
    // carries the masking (see `MaskFix`).
    let mut register = !start;
    for f in fix {
        register ^= f.table[usize::from(packet[f.at])];
    }
    let mut h = Hasher::new_with_initial(!register);
    h.update(&packet[..body_end]);
    h.finalize()
}

/// The general path (native IB, IPv4 with options): the prefix is copied
/// to the stack and masked there, the rest hashed in place.
fn compute_staged(scope: IcrcScope, prefix_len: usize, start: u32, packet: &[u8]) -> u32 {
    let body_end = packet.len() - ICRC_LEN;
    let mut stage = [0u8; STAGE];
    let m = or_mask(scope, prefix_len, packet[1] & 3 == 3);
    for i in 0..prefix_len {
        stage[i] = packet[i] | m[i];
    }
    let mut h = Hasher::new_with_initial(start);
    h.update(&stage[..prefix_len]);
    h.update(&packet[prefix_len..body_end]);
    h.finalize()
}

/// Masking folded into the CRC's start state, so that the packet is hashed
/// as it is, in one pass, with no copy.
///
/// In the table-driven CRC (reflected, register `r`), hashing byte `b` is
/// `r = (r >> 8) ^ T[(r ^ b) & 0xff]`, and `T` is linear. So changing data
/// byte `p` by `d` changes the register just before that byte by `d`, and
/// from there on the change only travels through `Z`, the register's
/// advance over a zero byte, whatever the data. Masking byte `p` (changing
/// it by `d = !b & mask`) therefore gives the same CRC as starting from a
/// register changed by `Z^-p(d)`; `Z` is invertible because the
/// polynomial's constant term is 1. `table[b]` holds that start change for
/// an original byte `b` at offset `at`, whatever the packet's length.
struct MaskFix {
    at: usize,
    table: [u32; 256],
}

/// The reflected CRC-32 polynomial.
const POLY: u32 = 0xedb8_8320;

/// One masked byte: offset `at` in the ICRC input, masked bits `mask`.
const fn mask_fix(at: usize, mask: u8) -> MaskFix {
    let mut table = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let mut r = (!(b as u8) & mask) as u32;
        // Undo `at` zero bytes, 8 bit-steps each. A step shifts right and,
        // if the bit shifted out was 1, adds POLY, whose top bit is set:
        // the top bit of the result says which case it was.
        let mut steps = at * 8;
        while steps > 0 {
            r = if r & 0x8000_0000 != 0 {
                ((r ^ POLY) << 1) | 1
            } else {
                r << 1
            };
            steps -= 1;
        }
        table[b] = r;
        b += 1;
    }
    MaskFix { at, table }
}

/// Where the masked bytes are. Offsets are in the ICRC input after the
/// 8 bytes standing for the LRH, i.e. from the first header on.
mod at {
    use crate::{ipv4, ipv6, udp};
    /// The IPv4 header's TOS (DSCP and ECN), TTL and header checksum.
    pub(super) const V4_TOS: usize = ipv4::field::TOS;
    pub(super) const V4_TTL: usize = ipv4::field::TTL;
    pub(super) const V4_CHECKSUM: usize = ipv4::field::CHECKSUM.start;
    /// The UDP checksum after an option-less IPv4 header, or an IPv6 one.
    pub(super) const V4_UDP_CHECKSUM: usize = ipv4::MIN_HEADER_LEN + udp::field::CHECKSUM.start;
    pub(super) const V6_UDP_CHECKSUM: usize = ipv6::HEADER_LEN + udp::field::CHECKSUM.start;
    /// An IPv6 header's or GRH's first word: version (kept), traffic class
    /// and flow label (masked); and its hop limit.
    pub(super) const GRH_FIRST_WORD: usize = ipv6::field::VER_TC_FLOW.start;
    pub(super) const GRH_HOP_LIMIT: usize = ipv6::field::HOP_LIMIT;
    /// The BTH's byte of FECN, BECN and resv6, from the BTH's start.
    pub(super) const BTH_FECN_BECN: usize = 4;
}

/// The masked bytes of an IPv6 header or GRH at `start`.
const fn grh_fix(start: usize) -> [MaskFix; 5] {
    let w = start + at::GRH_FIRST_WORD;
    [
        mask_fix(w, 0x0f), // the version's nibble is covered
        mask_fix(w + 1, 0xff),
        mask_fix(w + 2, 0xff),
        mask_fix(w + 3, 0xff),
        mask_fix(start + at::GRH_HOP_LIMIT, 0xff),
    ]
}

static V4_FIX: [MaskFix; 7] = [
    mask_fix(at::V4_TOS, 0xff),
    mask_fix(at::V4_TTL, 0xff),
    mask_fix(at::V4_CHECKSUM, 0xff),
    mask_fix(at::V4_CHECKSUM + 1, 0xff),
    mask_fix(at::V4_UDP_CHECKSUM, 0xff),
    mask_fix(at::V4_UDP_CHECKSUM + 1, 0xff),
    mask_fix(V4_PREFIX - BTH_LEN + at::BTH_FECN_BECN, 0xff),
];

static V6_FIX: [MaskFix; 8] = {
    let [a, b, c, d, e] = grh_fix(0);
    [
        a,
        b,
        c,
        d,
        e,
        mask_fix(at::V6_UDP_CHECKSUM, 0xff),
        mask_fix(at::V6_UDP_CHECKSUM + 1, 0xff),
        mask_fix(V6_PREFIX - BTH_LEN + at::BTH_FECN_BECN, 0xff),
    ]
};

static V1_FIX: [MaskFix; 6] = {
    let [a, b, c, d, e] = grh_fix(0);
    [
        a,
        b,
        c,
        d,
        e,
        mask_fix(V1_PREFIX - BTH_LEN + at::BTH_FECN_BECN, 0xff),
    ]
};

/// Room for the largest masked prefix (IPv4 with options: 60 + 8 + 12).
const STAGE: usize = 128;

const V4_PREFIX: usize = ipv4::MIN_HEADER_LEN + udp::HEADER_LEN + BTH_LEN;
const V6_PREFIX: usize = ipv6::HEADER_LEN + udp::HEADER_LEN + BTH_LEN;
const V1_PREFIX: usize = ipv6::HEADER_LEN + BTH_LEN;

/// The bits of a `len`-byte prefix laid out as `scope` says that the ICRC
/// replaces with ones: OR-ing it in is the masking. `ib_global`: a native IB
/// packet whose LRH says a GRH follows.
const fn or_mask(scope: IcrcScope, len: usize, ib_global: bool) -> [u8; STAGE] {
    let mut m = [0u8; STAGE];
    let bth = len - BTH_LEN;
    match scope {
        IcrcScope::RoceV1 => grh_mask(&mut m, 0),
        IcrcScope::RoceV2Ipv6 => {
            grh_mask(&mut m, 0);
            m[at::V6_UDP_CHECKSUM] = 0xff;
            m[at::V6_UDP_CHECKSUM + 1] = 0xff;
        }
        IcrcScope::RoceV2Ipv4 => {
            m[at::V4_TOS] = 0xff;
            m[at::V4_TTL] = 0xff;
            m[at::V4_CHECKSUM] = 0xff;
            m[at::V4_CHECKSUM + 1] = 0xff;
            // The UDP checksum, just before the BTH whatever the options.
            m[bth - 2] = 0xff;
            m[bth - 1] = 0xff;
        }
        IcrcScope::Infiniband => {
            if ib_global {
                let mut i = 0;
                while i < 8 {
                    m[i] = 0xff; // the whole LRH
                    i += 1;
                }
                grh_mask(&mut m, 8);
            } else {
                m[0] = 0xf0; // VL
            }
        }
    }
    m[bth + at::BTH_FECN_BECN] = 0xff;
    m
}

/// GRH / IPv6: traffic class, flow label, hop limit.
const fn grh_mask(m: &mut [u8; STAGE], start: usize) {
    let w = start + at::GRH_FIRST_WORD;
    m[w] = 0x0f;
    m[w + 1] = 0xff;
    m[w + 2] = 0xff;
    m[w + 3] = 0xff;
    m[start + at::GRH_HOP_LIMIT] = 0xff;
}

/// Checks the ICRC stored at the end of `packet` (see [`compute`]).
pub fn verify(scope: IcrcScope, packet: &[u8]) -> Result<()> {
    let computed = compute(scope, packet)?;
    let t = &packet[packet.len() - ICRC_LEN..];
    let received = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    if computed == received {
        Ok(())
    } else {
        Err(Error::BadIcrc { computed, received })
    }
}

/// The ICRC of a RoCE v2 packet given in pieces, as a UDP socket backend has
/// them: the IP header (IPv4 with any IHL, or IPv6, judged by its version
/// nibble), the 8-byte UDP header, and the UDP payload without its ICRC.
///
/// For an option-less IPv4 or an IPv6 header (every RoCE sender's), the
/// two headers are masked on the stack and hashed, and the transport in
/// place with the BTH's masked byte folded into the start state (as the
/// whole-packet path folds all of them): two `crc32fast` passes and no
/// copy of the transport.
pub fn compute_v2_parts(ip_header: &[u8], udp_header: &[u8], transport: &[u8]) -> Result<u32> {
    let scope = match ip_header.first().map(|b| b >> 4) {
        Some(4) => IcrcScope::RoceV2Ipv4,
        Some(6) => IcrcScope::RoceV2Ipv6,
        _ => {
            return Err(Error::BadVersion {
                field: "ip.version",
                value: ip_header.first().map_or(0, |b| b >> 4),
            });
        }
    };
    crate::field::check(Header::Udp, udp::HEADER_LEN, udp_header.len())?;
    crate::field::check(Header::Bth, BTH_LEN, transport.len())?;
    let ip_len = ip_header.len();
    let max_ip = if scope == IcrcScope::RoceV2Ipv4 {
        60
    } else {
        40
    };
    if ip_len > max_ip || ip_len < 20 {
        return Err(Error::BadLength {
            field: "ip header",
            claimed: ip_len,
            actual: max_ip,
        });
    }
    match V2Headers::mask_of(ip_header) {
        Some(mask) => V2Headers::masked(mask, ip_header, udp_header).icrc(transport),
        None => Ok(compute_parts_staged(
            scope, ip_header, udp_header, transport,
        )),
    }
}

/// The CRC state after a RoCE v2 datagram's masked IP and UDP headers
/// (option-less IPv4, or IPv6): what a UDP socket backend can keep per
/// flow and length, so that each datagram then hashes its transport alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V2Headers {
    /// `crc32fast`'s state (the register inverted).
    state: u32,
}

impl V2Headers {
    /// Whether [`Self::new`] takes this IP header: an option-less IPv4
    /// header or an IPv6 one.
    pub fn fits(ip_header: &[u8]) -> bool {
        Self::mask_of(ip_header).is_some()
    }

    /// The masks of this IP header and a UDP header after it, if it fits.
    fn mask_of(ip_header: &[u8]) -> Option<&'static [u8; STAGE]> {
        match (ip_header.first().map(|b| b >> 4), ip_header.len()) {
            (Some(4), ipv4::MIN_HEADER_LEN) => Some(&V4_MASK),
            (Some(6), ipv6::HEADER_LEN) => Some(&V6_MASK),
            _ => None,
        }
    }

    /// Masks and hashes the headers (see [`Self::fits`]).
    pub fn new(ip_header: &[u8], udp_header: &[u8]) -> Result<Self> {
        let mask = Self::mask_of(ip_header).ok_or(Error::BadLength {
            field: "ip header (option-less IPv4 or IPv6)",
            claimed: ip_header.len(),
            actual: ipv4::MIN_HEADER_LEN,
        })?;
        crate::field::check(Header::Udp, udp::HEADER_LEN, udp_header.len())?;
        Ok(Self::masked(mask, ip_header, udp_header))
    }

    /// [`Self::new`] once the header's `mask` is known and the UDP
    /// header's length checked.
    fn masked(mask: &[u8; STAGE], ip_header: &[u8], udp_header: &[u8]) -> Self {
        let ip_len = ip_header.len();
        let headers = ip_len + udp::HEADER_LEN;
        let mut stage = [0u8; ipv6::HEADER_LEN + udp::HEADER_LEN];
        stage[..ip_len].copy_from_slice(ip_header);
        stage[ip_len..headers].copy_from_slice(&udp_header[..udp::HEADER_LEN]);
        for (b, m) in stage[..headers].iter_mut().zip(mask) {
            *b |= m;
        }
        let mut h = Hasher::new_with_initial(AFTER_MASKED_LRH);
        h.update(&stage[..headers]);
        Self {
            state: h.finalize(),
        }
    }

    /// The same headers with their IPv4 Identification XORed with `xor`
    /// (the CRC is linear in it, so this costs two table look-ups). Only
    /// for headers made from an IPv4 header.
    pub fn with_ident_xor(self, xor: u16) -> Self {
        let [hi, lo] = xor.to_be_bytes();
        Self {
            state: self.state ^ IDENT_HI[usize::from(hi)] ^ IDENT_LO[usize::from(lo)],
        }
    }

    /// The ICRC of a datagram with these headers and `transport` (BTH
    /// through payload and pad, without the ICRC).
    pub fn icrc(&self, transport: &[u8]) -> Result<u32> {
        crate::field::check(Header::Bth, BTH_LEN, transport.len())?;
        let fix = BTH_FIX.table[usize::from(transport[at::BTH_FECN_BECN])];
        let mut h = Hasher::new_with_initial(self.state ^ fix);
        h.update(transport);
        Ok(h.finalize())
    }
}

/// The change an IPv4 Identification byte makes to the state after the
/// 28 bytes of IPv4 and UDP header: its high byte is hashed 24 bytes
/// before their end, its low byte 23.
static IDENT_HI: [u32; 256] =
    advance_table(ipv4::MIN_HEADER_LEN + udp::HEADER_LEN - ipv4::field::IDENT.start);
static IDENT_LO: [u32; 256] =
    advance_table(ipv4::MIN_HEADER_LEN + udp::HEADER_LEN - ipv4::field::IDENT.start - 1);

/// `table[b]`: the register change of byte `b` hashed `bytes` bytes
/// before the end (the byte itself included).
const fn advance_table(bytes: usize) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let mut r = b as u32;
        let mut steps = bytes * 8;
        while steps > 0 {
            r = if r & 1 != 0 { (r >> 1) ^ POLY } else { r >> 1 };
            steps -= 1;
        }
        table[b] = r;
        b += 1;
    }
    table
}

/// The masks of the IP and UDP headers before a BTH (the prefix's first
/// 28 or 48 bytes).
static V4_MASK: [u8; STAGE] = or_mask(IcrcScope::RoceV2Ipv4, V4_PREFIX, false);
static V6_MASK: [u8; STAGE] = or_mask(IcrcScope::RoceV2Ipv6, V6_PREFIX, false);
/// The BTH's masked byte, for a pass that starts at the BTH.
static BTH_FIX: MaskFix = mask_fix(at::BTH_FECN_BECN, 0xff);

/// [`compute_v2_parts`] for an IPv4 header with options: the whole
/// prefix copied to the stack and masked there.
fn compute_parts_staged(
    scope: IcrcScope,
    ip_header: &[u8],
    udp_header: &[u8],
    transport: &[u8],
) -> u32 {
    let ip_len = ip_header.len();
    let prefix_len = ip_len + udp::HEADER_LEN + BTH_LEN;
    let mut stage = [0u8; STAGE];
    stage[..ip_len].copy_from_slice(ip_header);
    stage[ip_len..ip_len + udp::HEADER_LEN].copy_from_slice(&udp_header[..udp::HEADER_LEN]);
    stage[ip_len + udp::HEADER_LEN..prefix_len].copy_from_slice(&transport[..BTH_LEN]);
    let m = or_mask(scope, prefix_len, false);
    for i in 0..prefix_len {
        stage[i] |= m[i];
    }
    let mut h = Hasher::new_with_initial(AFTER_MASKED_LRH);
    h.update(&stage[..prefix_len]);
    h.update(&transport[BTH_LEN..]);
    h.finalize()
}

/// Length of the masked prefix and the CRC state to start from.
#[inline]
fn layout(scope: IcrcScope, p: &[u8]) -> Result<(usize, u32)> {
    let (prefix_len, start) = match scope {
        IcrcScope::RoceV1 => (40 + BTH_LEN, AFTER_MASKED_LRH),
        IcrcScope::RoceV2Ipv6 => (40 + 8 + BTH_LEN, AFTER_MASKED_LRH),
        IcrcScope::RoceV2Ipv4 => {
            crate::field::check(Header::Ipv4, 20, p.len())?;
            (usize::from(p[0] & 0xf) * 4 + 8 + BTH_LEN, AFTER_MASKED_LRH)
        }
        IcrcScope::Infiniband => {
            crate::field::check(Header::Lrh, 8, p.len())?;
            // The LRH is hashed from the initial state: all ones for a
            // global packet (as RoCE), with only VL masked for a local one.
            let grh = if p[1] & 3 == 3 { 40 } else { 0 };
            (8 + grh + BTH_LEN, 0)
        }
    };
    crate::field::check(Header::Icrc, prefix_len + ICRC_LEN, p.len())?;
    Ok((prefix_len, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_agree_with_whole() {
        for s in crate::samples::all() {
            let bytes = s.to_bytes();
            let l3 = &bytes[s.repr.ethernet.map_or(0, |e| e.header_len())..];
            let (scope, ip_len) = match s.repr.network {
                crate::Network::V2Ipv4 { .. } => (IcrcScope::RoceV2Ipv4, 20),
                crate::Network::V2Ipv6 { .. } => (IcrcScope::RoceV2Ipv6, 40),
                crate::Network::V1 { .. } => continue,
            };
            let whole = compute(scope, l3).unwrap();
            assert_eq!(whole.to_le_bytes(), l3[l3.len() - 4..], "{}", s.description);
            let parts = compute_v2_parts(
                &l3[..ip_len],
                &l3[ip_len..ip_len + 8],
                &l3[ip_len + 8..l3.len() - 4],
            )
            .unwrap();
            assert_eq!(whole, parts, "{}", s.description);
        }
    }

    /// The one-pass path agrees with masking a copy, and ignores whatever
    /// the masked fields hold, for every RoCE layout and many lengths.
    #[test]
    fn folded_masking_matches_staged_masking() {
        use proptest::prelude::*;
        let layouts = [
            (IcrcScope::RoceV2Ipv4, V4_PREFIX, &V4_FIX[..]),
            (IcrcScope::RoceV2Ipv6, V6_PREFIX, &V6_FIX[..]),
            (IcrcScope::RoceV1, V1_PREFIX, &V1_FIX[..]),
        ];
        for (scope, prefix_len, fix) in layouts {
            let mask = or_mask(scope, prefix_len, false);
            let masked: Vec<usize> = (0..prefix_len).filter(|&i| mask[i] != 0).collect();
            let fixed: Vec<usize> = fix.iter().map(|f| f.at).collect();
            assert_eq!(masked, fixed, "{scope:?}");
        }
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let input = (0..3usize, prop::collection::vec(any::<u8>(), 80..9000));
        runner
            .run(&input, |(layout, mut packet)| {
                let (scope, prefix_len, fix) = layouts[layout];
                if scope == IcrcScope::RoceV2Ipv4 {
                    packet[0] = 0x45;
                }
                let folded = compute_laid_out(scope, prefix_len, AFTER_MASKED_LRH, &packet);
                let staged = compute_staged(scope, prefix_len, AFTER_MASKED_LRH, &packet);
                prop_assert_eq!(folded, staged);
                let mask = or_mask(scope, prefix_len, false);
                for f in fix {
                    packet[f.at] ^= packet[f.at].wrapping_mul(31).wrapping_add(7) & mask[f.at];
                }
                let changed = compute_laid_out(scope, prefix_len, AFTER_MASKED_LRH, &packet);
                prop_assert_eq!(folded, changed);
                Ok(())
            })
            .unwrap();
    }

    /// The headers-then-transport path agrees with the whole-packet one for
    /// any bytes, masked fields included, and so does the staged path of
    /// an IPv4 header with options (against masking by hand).
    #[test]
    fn parts_agree_with_whole_for_any_bytes() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let input = (any::<bool>(), prop::collection::vec(any::<u8>(), 80..5000));
        runner
            .run(&input, |(v6, mut packet)| {
                let (scope, ip_len) = if v6 {
                    packet[0] = 0x60 | (packet[0] & 0x0f);
                    (IcrcScope::RoceV2Ipv6, 40)
                } else {
                    packet[0] = 0x45;
                    (IcrcScope::RoceV2Ipv4, 20)
                };
                let whole = compute(scope, &packet).unwrap();
                let body = &packet[ip_len + 8..packet.len() - ICRC_LEN];
                let parts = compute_v2_parts(&packet[..ip_len], &packet[ip_len..ip_len + 8], body);
                prop_assert_eq!(parts.unwrap(), whole);
                Ok(())
            })
            .unwrap();
        // IPv4 with 8 bytes of options: masked by hand, hashed plainly.
        let mut packet: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        packet[0] = 0x47;
        let mut masked = packet.clone();
        for i in [1, 8, 10, 11, 28 + 6, 28 + 7, 28 + 8 + 4] {
            masked[i] = 0xff;
        }
        let mut h = Hasher::new_with_initial(AFTER_MASKED_LRH);
        h.update(&masked[..packet.len() - ICRC_LEN]);
        let by_hand = h.finalize();
        let parts = compute_v2_parts(
            &packet[..28],
            &packet[28..36],
            &packet[36..packet.len() - ICRC_LEN],
        );
        assert_eq!(parts.unwrap(), by_hand);
        assert_eq!(compute(IcrcScope::RoceV2Ipv4, &packet).unwrap(), by_hand);
    }

    /// Changing the kept headers' Identification is the same as hashing
    /// headers that carried it.
    #[test]
    fn an_identification_changed_by_table_matches_one_hashed() {
        let mut ip: Vec<u8> = (0..20u8).map(|i| i.wrapping_mul(29)).collect();
        ip[0] = 0x45;
        let udp = [0xc1, 0x22, 0x12, 0xb7, 0x04, 0x10, 0x00, 0x00];
        let transport: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let kept = V2Headers::new(&ip, &udp).unwrap();
        let was = u16::from_be_bytes([ip[4], ip[5]]);
        for ident in [0u16, 1, 0x00ff, 0x0100, 0xbeef, 0xffff] {
            ip[4..6].copy_from_slice(&ident.to_be_bytes());
            let hashed = V2Headers::new(&ip, &udp).unwrap();
            assert_eq!(kept.with_ident_xor(was ^ ident), hashed, "ident {ident:#x}");
            assert_eq!(
                hashed.icrc(&transport).unwrap(),
                compute_parts_staged(IcrcScope::RoceV2Ipv4, &ip, &udp, &transport)
            );
        }
        assert!(V2Headers::new(&ip[..19], &udp).is_err());
        assert!(kept.icrc(&transport[..11]).is_err());
    }

    #[test]
    fn seed_is_rxe_seed() {
        assert_eq!(crc32fast::hash(&[0xff; 8]), AFTER_MASKED_LRH);
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
    }
}
