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

/// Where one frame lies in a block or slot, as its header says: data from
/// `start` for `snap` bytes, `cut` if the ring kept less than the frame
/// (`snap < len`), and the 802.1Q TCI the kernel took off.
#[derive(Debug, Clone, Copy)]
struct FrameAt {
    start: usize,
    snap: usize,
    cut: bool,
    vlan: Option<u16>,
}

/// The frame whose `struct tpacket3_hdr` is at `at` in `block`, and the
/// offset of the next one (0: none), if the header lies inside the block.
fn frame_in_block(block: &[u8], at: usize) -> Option<(FrameAt, usize)> {
    let h = block.get(at..at.checked_add(v3::HEADER_LEN)?)?;
    let status = u32_at(h, v3::STATUS)?;
    let snap = u32_at(h, v3::SNAPLEN)?;
    let frame = FrameAt {
        start: at + usize::from(u16_at(h, v3::MAC)?),
        snap: snap as usize,
        cut: snap < u32_at(h, v3::LEN)?,
        vlan: (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(u32_at(h, v3::VLAN_TCI)? as u16),
    };
    Some((frame, u32_at(h, v3::NEXT_OFFSET)? as usize))
}

/// Calls `f` with each frame's place in one filled block, in order, until
/// a header lies outside the block; returns how many. (`walk_block`
/// walks the same way, lending each frame.)
fn frames_of_block(block: &[u8], mut f: impl FnMut(FrameAt)) -> usize {
    let count = u32_at(block, v3::NUM_PKTS).unwrap_or(0);
    let mut at = u32_at(block, v3::FIRST_PKT).unwrap_or(0) as usize;
    let mut n = 0;
    for _ in 0..count {
        let Some((frame, next)) = frame_in_block(block, at) else {
            break;
        };
        f(frame);
        n += 1;
        if next == 0 {
            break;
        }
        at += next;
    }
    n
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
    // The walk of `frames_of_block`, lending each frame as it goes (a
    // header is read, then its frame lent, then the next header read).
    let count = u32_at(block, v3::NUM_PKTS).unwrap_or(0);
    let mut at = u32_at(block, v3::FIRST_PKT).unwrap_or(0) as usize;
    let mut n = 0;
    for _ in 0..count {
        let Some((frame, next)) = frame_in_block(block, at) else {
            break;
        };
        let Some(data) = lend(block, frame, prefix) else {
            break;
        };
        f(data, frame.vlan, frame.cut);
        n += 1;
        if next == 0 {
            break;
        }
        at += next;
    }
    n
}

/// The 802.1Q TCI of each frame of one filled block, without taking it.
pub(super) fn vlans_of_block(block: &[u8], f: &mut impl FnMut(Option<u16>)) -> usize {
    frames_of_block(block, |frame| f(frame.vlan))
}

/// `frame`'s bytes in `buf`, with the `prefix` bytes before it, if they
/// lie inside.
fn lend(buf: &mut [u8], frame: FrameAt, prefix: usize) -> Option<&mut [u8]> {
    let end = frame.start.checked_add(frame.snap)?;
    buf.get_mut(frame.start.checked_sub(prefix)?..end)
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

/// The frame of one filled TPACKET_V2 slot, if its header is whole.
fn frame_in_slot(slot: &[u8]) -> Option<FrameAt> {
    let status = u32_at(slot, v2::STATUS)?;
    let snap = u32_at(slot, v2::SNAPLEN)?;
    Some(FrameAt {
        start: usize::from(u16_at(slot, v2::MAC)?),
        snap: snap as usize,
        cut: snap < u32_at(slot, v2::LEN)?,
        vlan: (status & libc::TP_STATUS_VLAN_VALID != 0).then_some(u16_at(slot, v2::VLAN_TCI)?),
    })
}

/// Hands the frame of one filled TPACKET_V2 slot to `f`, with the `prefix`
/// bytes before it (checked like the block walk: a frame outside the slot
/// is skipped); returns 1 or 0.
pub(super) fn walk_slot(
    slot: &mut [u8],
    prefix: usize,
    f: &mut impl FnMut(&mut [u8], Option<u16>, bool),
) -> usize {
    let Some(frame) = frame_in_slot(slot) else {
        return 0;
    };
    let Some(data) = lend(slot, frame, prefix) else {
        return 0;
    };
    f(data, frame.vlan, frame.cut);
    1
}

/// The 802.1Q TCI of the frame of one filled slot, without taking it.
pub(super) fn vlan_of_slot(slot: &[u8], f: &mut impl FnMut(Option<u16>)) -> usize {
    frame_in_slot(slot).map_or(0, |frame| {
        f(frame.vlan);
        1
    })
}

#[cfg(test)]
#[path = "block_tests.rs"]
mod tests;
