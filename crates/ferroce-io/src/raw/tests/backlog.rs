//! The receive backlog by priority (what PFC's XOFF/XON decisions read),
//! and receives that take only part of the ring.

use super::*;

/// Sends 10 frames on priority 3, 5 on priority 5 and 4 untagged from a
/// to b, then checks b's backlog before and while it is taken.
fn backlog_by_priority(tag: &str, frame_by_frame: bool) {
    let Some(pair) = Pair::new(tag) else {
        return;
    };
    let mut a = open_in(&pair.a, Vec::new());
    let mut cfg = RawConfig::new(IFACE);
    cfg.rx_frame_by_frame = frame_by_frame;
    cfg.rx_frames = 64;
    let mut b = Pair::run_in(&pair.b, || RawBackend::open(&cfg).unwrap());
    let mut builder = FrameBuilder::default();
    let t = transport(1, 200);
    let tags = [(10, Some(3)), (5, Some(5)), (4, None)];
    for (count, pcp) in tags {
        let spec = FrameSpec {
            dst_mac: b.mac(),
            src_mac: a.mac(),
            vlan: pcp.map(|pcp| VlanTag {
                pcp,
                dei: false,
                vid: 0,
            }),
            l3: l3s()[0],
        };
        for _ in 0..count {
            assert!(a.queue(|slot| builder.build(&spec, &t, slot).unwrap()));
        }
    }
    a.flush().unwrap();
    // Everything arrives (and a V3 block is handed over after 1 ms).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.rx_backlog(usize::MAX), [4, 0, 0, 10, 0, 5, 0, 0]);
    // Looking takes nothing.
    assert_eq!(b.rx_backlog(usize::MAX), [4, 0, 0, 10, 0, 5, 0, 0]);
    let mut got = Count(0);
    if frame_by_frame {
        // Three frames taken: the first three of priority 3.
        assert_eq!(b.recv_at_most(3, &mut got), 3);
        assert_eq!(b.rx_backlog(usize::MAX), [4, 0, 0, 7, 0, 5, 0, 0]);
        assert_eq!(
            b.rx_backlog(2),
            [0, 0, 0, 2, 0, 0, 0, 0],
            "looks 2 slots ahead"
        );
    }
    b.recv(&mut got);
    assert_eq!(got.0, 19);
    assert_eq!(b.rx_backlog(usize::MAX), [0; 8]);
}

#[test]
fn the_frame_ring_backlog_counts_by_priority() {
    backlog_by_priority("pf-backlog-v2", true);
}

#[test]
fn the_block_ring_backlog_counts_by_priority() {
    backlog_by_priority("pf-backlog-v3", false);
}
