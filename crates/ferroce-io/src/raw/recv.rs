//! The receive half of [`RawBackend`]: walking the ring, cutting
//! super-frames ([`vnet::split`]) and checking each frame, every drop
//! counted.

use super::block::{vlan_of_slot, vlans_of_block, walk_block, walk_slot};
use super::frame::{self, RxDrop, RxFrame};
use super::vnet::{self, VNET_HDR_LEN, VnetHdr};
use super::{RawBackend, RawReceiver, RawStats, Rx, qos};

impl RawBackend {
    /// Hands every frame of every filled block to `f` (frame bytes, the
    /// 802.1Q TCI the kernel took off, whether the ring cut it short), and
    /// returns the blocks to the kernel; returns the number of frames. A
    /// super-frame (see [`vnet`]) comes whole.
    pub fn recv_frames(&mut self, f: impl FnMut(&[u8], Option<u16>, bool)) -> usize {
        self.recv_frames_at_most(usize::MAX, f)
    }

    /// [`recv_frames`](Self::recv_frames) from at most `max` slots (frames
    /// of the V2 ring, blocks of the V3 one); the rest stay in the ring.
    pub fn recv_frames_at_most(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], Option<u16>, bool),
    ) -> usize {
        self.walk(max, |_, data, tci, cut, _| f(data, tci, cut))
    }

    /// The number of slots (frames, or blocks of the V3 ring) in the
    /// receive ring.
    pub fn rx_slots(&self) -> usize {
        match &self.rx {
            Rx::Blocks(r) => r.blocks(),
            Rx::Frames(r) => r.frames(),
        }
    }

    /// The receive backlog: frames the kernel has written to the ring and
    /// nobody has taken yet, by 802.1Q priority (untagged: 0), looking at
    /// no more than `max` slots ahead. Nothing is taken.
    pub fn rx_backlog(&self, max: usize) -> [u32; 8] {
        let mut backlog = [0u32; 8];
        let mut count = |tci: Option<u16>| backlog[usize::from(qos::priority_of(tci))] += 1;
        let slots = self.rx_slots();
        for k in 0..slots.min(max) {
            let at = (self.next_block + k) % slots;
            let seen = match &self.rx {
                Rx::Blocks(r) => r.peek_block(at, |b| vlans_of_block(b, &mut count)),
                Rx::Frames(r) => r.peek_frame(at, |s| vlan_of_slot(s, &mut count)),
            };
            if seen.is_none() {
                break;
            }
        }
        backlog
    }

    /// [`recv_frames`](Self::recv_frames), with each frame's virtio-net
    /// header (all zero without one): a super-frame's says how to cut it.
    pub fn recv_frames_vnet(
        &mut self,
        mut f: impl FnMut(&[u8], Option<u16>, bool, VnetHdr),
    ) -> usize {
        self.walk(usize::MAX, |_, data, tci, cut, hdr| f(data, tci, cut, hdr))
    }

    /// Walks the filled part of the ring, at most `max` slots, lending
    /// each frame (the ring's own bytes, writable: a super-frame is cut in
    /// place).
    /// `f` is also lent the counters (a caller polling an empty ring in
    /// a tight loop used to copy them in and out on every call).
    fn walk(
        &mut self,
        max: usize,
        mut f: impl FnMut(&mut RawStats, &mut [u8], Option<u16>, bool, VnetHdr),
    ) -> usize {
        let prefix = if self.vnet_rx { VNET_HDR_LEN } else { 0 };
        let slots = self.rx_slots();
        let Self {
            rx,
            next_block,
            stats,
            ..
        } = self;
        let mut each = |data: &mut [u8], tci: Option<u16>, cut: bool| {
            let (head, frame) = data.split_at_mut(prefix.min(data.len()));
            let hdr = <&[u8; VNET_HDR_LEN]>::try_from(&*head)
                .map_or_else(|_| VnetHdr::default(), VnetHdr::parse);
            f(stats, frame, tci, cut, hdr);
        };
        let mut n = 0;
        for _ in 0..slots.min(max) {
            let at = *next_block;
            let walked = match rx {
                Rx::Blocks(r) => r.with_block(at, |b| walk_block(b, prefix, &mut each)),
                Rx::Frames(r) => r.with_frame(at, |s| walk_slot(s, prefix, &mut each)),
            };
            let Some(count) = walked else { break };
            n += count;
            *next_block = (at + 1) % slots;
        }
        self.stats.rx_frames += n as u64;
        n
    }

    /// Receives what the ring holds: each frame parsed and checked, RoCE
    /// and MAC control handed to `rx`, the rest counted and dropped; a
    /// super-frame is cut into its frames first ([`vnet::split`]), each
    /// checked on its own. Returns the number of frames taken from the ring.
    pub fn recv(&mut self, rx: &mut impl RawReceiver) -> usize {
        self.recv_at_most(usize::MAX, rx)
    }

    /// [`recv`](Self::recv) from at most `max` slots of the ring (see
    /// [`recv_frames_at_most`](Self::recv_frames_at_most)).
    pub fn recv_at_most(&mut self, max: usize, rx: &mut impl RawReceiver) -> usize {
        self.walk(max, |stats, data, tci, cut, hdr| {
            if cut {
                stats.rx_truncated += 1;
            } else if !hdr.is_gso() {
                take_frame(stats, rx, data, tci, false);
            } else {
                let cut_up = vnet::split(&hdr, data, |segment, guess| {
                    take_frame(stats, rx, segment, tci, guess)
                });
                match cut_up {
                    Ok(segments) => {
                        stats.rx_gso_frames += 1;
                        stats.rx_gso_segments += segments as u64;
                    }
                    Err(e) => {
                        tracing::trace!(?e, "super-frame dropped");
                        stats.rx_bad_gso += 1;
                    }
                }
            }
        })
    }
}

/// Parses and checks one frame, hands it to `rx` or counts its drop;
/// false if its ICRC failed. With `guess` (a segment whose header is one
/// guess of two, see [`vnet::split`]) a failed ICRC is not counted.
fn take_frame(
    stats: &mut RawStats,
    rx: &mut impl RawReceiver,
    data: &[u8],
    tci: Option<u16>,
    guess: bool,
) -> bool {
    match frame::parse_rx_with(data, tci, |mac, qp| rx.accepts(mac, qp)) {
        Err(RxDrop::BadIcrc) => {
            stats.rx_bad_icrc += u64::from(!guess);
            return false;
        }
        Ok(RxFrame::Roce(p)) => {
            stats.rx_roce += 1;
            rx.deliver(&p);
        }
        Ok(RxFrame::MacControl { src, repr }) => {
            stats.rx_mac_control += 1;
            rx.mac_control(src, repr);
        }
        Err(drop) => {
            tracing::trace!(?drop, "raw frame dropped");
            match drop {
                RxDrop::NotRoce => stats.rx_not_roce += 1,
                RxDrop::Malformed(_) => stats.rx_malformed += 1,
                RxDrop::BadIcrc => {}
                RxDrop::Unwanted => stats.rx_unwanted += 1,
            }
        }
    }
    true
}
