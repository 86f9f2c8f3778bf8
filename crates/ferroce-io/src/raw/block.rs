//! Walking one filled TPACKET_V3 receive block: the frames the kernel
//! put in it, each after its `struct tpacket3_hdr` (and the one frame of a
//! TPACKET_V2 slot). The offsets and lengths
//! come from the kernel but are checked like input: a frame that would lie
//! outside the block ends the walk, nothing panics.

/// Layout of a TPACKET_V3 block and of each frame header in it
/// (`struct tpacket_hdr_v1`, `struct tpacket3_hdr`), in host byte order.
pub(super) mod v3 {
    pub(super) const NUM_PKTS: usize = 12;
    pub(super) const FIRST_PKT: usize = 16;
    pub(super) const NEXT_OFFSET: usize = 0;
    pub(super) const SNAPLEN: usize = 12;
    pub(super) const LEN: usize = 16;
    pub(super) const STATUS: usize = 20;
    pub(super) const MAC: usize = 24;
    pub(super) const VLAN_TCI: usize = 32;
    pub(super) const HEADER_LEN: usize = 48;
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Walks one filled block: calls `f` for each frame, with the `prefix`
/// bytes before it (a virtio-net header, or none); returns how many.
/// The offsets come from the kernel but are checked like input: a frame
/// outside the block ends the walk.
pub(super) fn walk_block(
    block: &mut [u8],
    prefix: usize,
    f: &mut impl FnMut(&mut [u8], Option<u16>, bool),
) -> usize {
    let count = u32_at(block, v3::NUM_PKTS).unwrap_or(0);
    let mut at = u32_at(block, v3::FIRST_PKT).unwrap_or(0) as usize;
    let mut n = 0;
    for _ in 0..count {
        let Some(h) = block.get(at..at + v3::HEADER_LEN) else {
            break;
        };
        let (Some(snap), Some(len), Some(status), Some(mac), Some(tci), Some(next)) = (
            u32_at(h, v3::SNAPLEN),
            u32_at(h, v3::LEN),
            u32_at(h, v3::STATUS),
            u16_at(h, v3::MAC),
            u32_at(h, v3::VLAN_TCI),
            u32_at(h, v3::NEXT_OFFSET),
        ) else {
            break;
        };
        let start = at + usize::from(mac);
        let Some(data) = start
            .checked_sub(prefix)
            .and_then(|from| block.get_mut(from..start + snap as usize))
        else {
            break;
        };
        let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(tci as u16);
        f(data, vlan, snap < len);
        n += 1;
        if next == 0 {
            break;
        }
        at += next as usize;
    }
    n
}

/// Layout of a TPACKET_V2 receive slot (`struct tpacket2_hdr`), in host
/// byte order.
pub(super) mod v2 {
    pub(super) const STATUS: usize = 0;
    pub(super) const LEN: usize = 4;
    pub(super) const SNAPLEN: usize = 8;
    pub(super) const MAC: usize = 12;
    pub(super) const VLAN_TCI: usize = 24;
}

/// Hands the frame of one filled TPACKET_V2 slot to `f`, with the `prefix`
/// bytes before it (checked like the block walk: a frame outside the slot
/// is skipped); returns 1 or 0.
pub(super) fn walk_slot(
    slot: &mut [u8],
    prefix: usize,
    f: &mut impl FnMut(&mut [u8], Option<u16>, bool),
) -> usize {
    let (Some(status), Some(len), Some(snap), Some(mac), Some(tci)) = (
        u32_at(slot, v2::STATUS),
        u32_at(slot, v2::LEN),
        u32_at(slot, v2::SNAPLEN),
        u16_at(slot, v2::MAC),
        u16_at(slot, v2::VLAN_TCI),
    ) else {
        return 0;
    };
    let start = usize::from(mac);
    let Some(data) = start
        .checked_sub(prefix)
        .and_then(|from| slot.get_mut(from..start + snap as usize))
    else {
        return 0;
    };
    let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(tci);
    f(data, vlan, snap < len);
    1
}

#[cfg(test)]
#[path = "block_tests.rs"]
mod tests;
