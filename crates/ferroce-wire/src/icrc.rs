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
//! Speed: the masked headers (at most 80 bytes) are copied to the stack and
//! masked there; the payload is hashed in place with `crc32fast`, which uses
//! PCLMULQDQ on x86-64 and the CRC instructions on aarch64. No copy of the
//! packet is made.

use crc32fast::Hasher;

use crate::transport::{BTH_LEN, ICRC_LEN};
use crate::{Error, Header, Result};

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
pub fn compute(scope: IcrcScope, packet: &[u8]) -> Result<u32> {
    let (prefix_len, start) = layout(scope, packet)?;
    let body_end = packet.len() - ICRC_LEN;
    let mut stage = [0u8; STAGE];
    stage[..prefix_len].copy_from_slice(&packet[..prefix_len]);
    Ok(hash_staged(
        scope,
        start,
        &mut stage,
        prefix_len,
        &packet[prefix_len..body_end],
    ))
}

/// Room for the largest masked prefix (IPv4 with options: 60 + 8 + 12).
///
/// Measured alternatives that were slower (`cargo bench --bench wire`):
/// masking in place in the packet (the CRC's vector loads then stall on the
/// fresh byte stores) and topping the stage up to 128 bytes so both calls
/// take crc32fast's folding path (same stall, on the stage).
const STAGE: usize = 128;

/// Masks `stage[..prefix_len]` (the headers, laid out as `scope` says) and
/// hashes it, then `rest` in place.
fn hash_staged(
    scope: IcrcScope,
    start: u32,
    stage: &mut [u8; STAGE],
    prefix_len: usize,
    rest: &[u8],
) -> u32 {
    mask(scope, &mut stage[..prefix_len]);
    let mut h = Hasher::new_with_initial(start);
    h.update(&stage[..prefix_len]);
    h.update(rest);
    h.finalize()
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
    crate::field::check(Header::Udp, 8, udp_header.len())?;
    crate::field::check(Header::Bth, BTH_LEN, transport.len())?;
    let ip_len = ip_header.len();
    let prefix_len = ip_len + 8 + BTH_LEN;
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
    let mut stage = [0u8; STAGE];
    stage[..ip_len].copy_from_slice(ip_header);
    stage[ip_len..ip_len + 8].copy_from_slice(&udp_header[..8]);
    stage[ip_len + 8..prefix_len].copy_from_slice(&transport[..BTH_LEN]);
    Ok(hash_staged(
        scope,
        AFTER_MASKED_LRH,
        &mut stage,
        prefix_len,
        &transport[BTH_LEN..],
    ))
}

/// Length of the masked prefix and the CRC state to start from.
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

/// Masks the variant fields of a prefix laid out as the scope says.
fn mask(scope: IcrcScope, h: &mut [u8]) {
    let bth = h.len() - BTH_LEN;
    match scope {
        IcrcScope::RoceV1 => mask_grh(&mut h[..40]),
        IcrcScope::RoceV2Ipv6 => {
            mask_grh(&mut h[..40]);
            mask_udp(&mut h[40..48]);
        }
        IcrcScope::RoceV2Ipv4 => {
            h[1] = 0xff; // TOS
            h[8] = 0xff; // TTL
            h[10] = 0xff; // header checksum
            h[11] = 0xff;
            mask_udp(&mut h[bth - 8..bth]);
        }
        IcrcScope::Infiniband => {
            if h[1] & 3 == 3 {
                h[..8].fill(0xff);
                mask_grh(&mut h[8..48]);
            } else {
                h[0] |= 0xf0; // VL
            }
        }
    }
    h[bth + 4] = 0xff; // FECN, BECN, resv6
}

fn mask_grh(g: &mut [u8]) {
    g[0] |= 0x0f; // traffic class, high nibble
    g[1] = 0xff; // traffic class low nibble, flow label
    g[2] = 0xff;
    g[3] = 0xff;
    g[7] = 0xff; // hop limit
}

fn mask_udp(u: &mut [u8]) {
    u[6] = 0xff;
    u[7] = 0xff;
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

    #[test]
    fn seed_is_rxe_seed() {
        assert_eq!(crc32fast::hash(&[0xff; 8]), AFTER_MASKED_LRH);
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
    }
}
