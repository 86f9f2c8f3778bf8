//! Segmentation offload across the veth: trains sent as super-frames
//! arrive whole and are cut by the receiver; with the sending device
//! unable to take them whole, the kernel cuts
//! them before they leave and the receiver sees ordinary frames. Either
//! way every packet's ICRC checks in full, IPv4 Identification included.
//! The sending device is made unable to take them whole by a
//! `gso_max_size` below a super-frame (Linux then segments in software;
//! `gso_max_segs` does not do it: the kernel counts the segments of a
//! packet socket's super-frame only later).

use super::netns::{B4, B6, IFACE, Pair, ip};
use super::{l3s, open_in, receive};
use crate::raw::RawStats;
use crate::raw::frame::{FrameBuilder, FrameSpec, L3};
use ferroce_wire::{Opcode, samples};

/// `count` SEND_MIDDLE packets with 1024 bytes of payload (the last 100),
/// consecutive PSNs from `psn`.
fn train(psn: u32, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let n = if i + 1 == count { 100 } else { 1024 };
            let t = samples::transport(Opcode::RC_SEND_MIDDLE, psn + i as u32, n);
            let mut buf = vec![0; t.buffer_len()];
            let payload: Vec<u8> = (0..n).map(|k| (k ^ i) as u8).collect();
            let used = t.emit(&mut buf, &payload).unwrap();
            buf.truncate(used);
            buf
        })
        .collect()
}

/// Sends trains of 40 packets over IPv4 and IPv6 from a to b; returns
/// b's counters after it took them all, and checks what b delivered.
fn trains_cross(pair: &Pair) -> RawStats {
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![B4.into(), B6.into()]);
    assert!(a.gso(), "this kernel refused virtio-net headers");
    let mut builder = FrameBuilder::new(0xfff0); // Identifications wrap
    let mut sent = Vec::new();
    for (k, l3) in l3s().into_iter().take(2).enumerate() {
        assert!(matches!(l3, L3::V2Ipv4 { .. } | L3::V2Ipv6 { .. }));
        let spec = FrameSpec {
            dst_mac: b.mac(),
            src_mac: a.mac(),
            vlan: None,
            l3,
        };
        for round in 0..3 {
            let packets = train(1000 * (k as u32 * 3 + round), 40);
            let n = packets.len();
            assert!(a.queue_train(n, |slot| {
                builder
                    .build_train(&spec, packets.iter().map(Vec::as_slice), slot)
                    .ok()
            }));
            sent.extend(packets);
        }
    }
    a.flush().unwrap();
    let got = receive(&mut b, sent.len());
    let s = b.stats();
    assert_eq!(got.0.len(), sent.len(), "received {s:?}");
    for (t, (_, _, _, bytes)) in sent.iter().zip(&got.0) {
        assert_eq!(bytes[..bytes.len() - 4], t[..t.len() - 4]);
    }
    let tx = a.stats();
    assert_eq!(
        (tx.tx_frames, tx.tx_gso_frames, tx.tx_gso_segments),
        (6, 6, 240)
    );
    assert_eq!(
        (s.rx_bad_icrc, s.rx_malformed, s.rx_bad_gso, s.rx_truncated),
        (0, 0, 0, 0)
    );
    s
}

#[test]
fn trains_cross_a_veth_whole_and_are_cut_by_the_receiver() {
    let Some(pair) = Pair::new("gs-whole") else {
        return;
    };
    let s = trains_cross(&pair);
    assert_eq!(
        (s.rx_gso_frames, s.rx_gso_segments, s.rx_roce),
        (6, 240, 240)
    );
}

#[test]
fn the_kernel_cuts_trains_a_device_cannot_take_whole() {
    let Some(pair) = Pair::new("gs-kernel") else {
        return;
    };
    ip(&["-n", &pair.a, "link", "set", IFACE, "gso_max_size", "1500"]);
    let s = trains_cross(&pair);
    // The kernel's segments, each checked in full: its Identifications
    // and lengths are the ones the sender computed the ICRCs for.
    assert_eq!((s.rx_gso_frames, s.rx_roce), (0, 240));
}

/// A super-frame whose segment size lies (the kernel checks only that 64
/// segments would cover it) crosses the veth whole; the receiver cuts it
/// where the header says, every piece fails its checks and is counted,
/// and nothing is delivered or panics.
#[test]
fn a_super_frame_with_a_lying_segment_size_is_counted_not_delivered() {
    let Some(pair) = Pair::new("gs-lying") else {
        return;
    };
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![B4.into()]);
    let spec = FrameSpec {
        dst_mac: b.mac(),
        src_mac: a.mac(),
        vlan: None,
        l3: l3s()[0],
    };
    let packets = train(7, 20);
    let mut builder = FrameBuilder::new(1);
    for lie in [-100i32, -4, 4, 900] {
        assert!(a.queue_train(packets.len(), |slot| {
            let (n, hdr) = builder
                .build_train(&spec, packets.iter().map(Vec::as_slice), slot)
                .ok()?;
            let gso_size = (i32::from(hdr.gso_size) + lie) as u16;
            Some((n, crate::raw::vnet::VnetHdr { gso_size, ..hdr }))
        }));
    }
    a.flush().unwrap();
    let mut got = super::Collect::default();
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        b.recv(&mut got);
    }
    let s = b.stats();
    assert_eq!((got.0.len(), s.rx_roce), (0, 0), "{s:?}");
    assert_eq!(s.rx_gso_frames, 4, "{s:?}");
    assert!(s.rx_bad_icrc + s.rx_malformed >= s.rx_gso_segments, "{s:?}");
}

/// With segmentation offload off (as when the kernel refuses virtio-net
/// headers) trains are refused, the counters say so, and frames go one by
/// one as before.
#[test]
fn without_virtio_headers_trains_are_refused_and_frames_still_go() {
    let Some(pair) = Pair::new("gs-off") else {
        return;
    };
    let mut cfg = crate::raw::RawConfig::new(IFACE);
    cfg.gso = false;
    let mut a = Pair::run_in(&pair.a, || crate::raw::RawBackend::open(&cfg).unwrap());
    let mut b = open_in(&pair.b, vec![B4.into()]);
    assert!(!a.gso() && !a.stats().gso && b.stats().gso);
    let spec = FrameSpec {
        dst_mac: b.mac(),
        src_mac: a.mac(),
        vlan: None,
        l3: l3s()[0],
    };
    let packets = train(1, 3);
    let mut builder = FrameBuilder::new(1);
    let mut built = false;
    assert!(!a.queue_train(packets.len(), |_| {
        built = true;
        None
    }));
    assert!(!built, "a train was built with offload off");
    for p in &packets {
        assert!(a.queue(|slot| builder.build(&spec, p, slot).unwrap()));
    }
    a.flush().unwrap();
    let got = receive(&mut b, packets.len());
    assert_eq!(got.0.len(), 3, "{:?}", b.stats());
    assert_eq!(a.stats().tx_gso_frames, 0);
}
