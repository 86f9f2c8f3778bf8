//! The PFC state machine on a fake clock (nanoseconds), and hostile PFC
//! frames through the receive parser.

use super::*;
use crate::raw::frame::{RxFrame, parse_rx};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn pfc_frame(enabled: u8, quanta: [u16; 8]) -> MacControlRepr {
    MacControlRepr::Pfc { enabled, quanta }
}

fn one(p: usize, q: u16) -> MacControlRepr {
    let mut quanta = [0; 8];
    quanta[p] = q;
    pfc_frame(1 << p, quanta)
}

#[test]
fn pause_lasts_quanta_at_link_speed() {
    // 1000 quanta at 1 Gbit/s: 512,000 bit times = 512 µs.
    let mut pfc = Pfc::new(PfcConfig::default(), 1_000);
    pfc.on_frame(&one(3, 1000), 0);
    assert!(pfc.is_paused(3, 511 * US));
    assert_eq!(pfc.next_resume(), Some(512 * US));
    assert!(!pfc.is_paused(3, 512 * US));
    assert_eq!(pfc.next_resume(), None);
    let s = pfc.stats(10 * MS);
    assert_eq!((s.rx_pause[3], s.paused_us[3]), (1, 512));
    // The same quanta at 100 Gbit/s: 5.12 µs.
    let mut fast = Pfc::new(PfcConfig::default(), 100_000);
    fast.on_frame(&one(3, 1000), 0);
    assert!(fast.is_paused(3, 5 * US));
    assert!(!fast.is_paused(3, 6 * US));
}

#[test]
fn configured_speed_wins_over_the_interface() {
    let cfg = PfcConfig {
        link_mbps: Some(1_000),
        ..PfcConfig::default()
    };
    let mut pfc = Pfc::new(cfg, 100_000);
    assert_eq!(pfc.link_mbps(), 1_000);
    pfc.on_frame(&one(0, 1), 0);
    assert_eq!(pfc.next_resume(), Some(512));
}

#[test]
fn xon_resumes_at_once_and_counts_time_to_it() {
    let mut pfc = Pfc::new(PfcConfig::default(), 10_000);
    pfc.on_frame(&one(3, u16::MAX), 0);
    assert!(pfc.is_paused(3, 100 * US));
    pfc.on_frame(&one(3, 0), 200 * US);
    assert!(!pfc.is_paused(3, 200 * US));
    let s = pfc.stats(MS);
    assert_eq!((s.rx_pause[3], s.rx_resume[3], s.paused_us[3]), (1, 1, 200));
}

#[test]
fn priorities_are_independent() {
    let mut pfc = Pfc::new(PfcConfig::default(), 1_000);
    pfc.on_frame(&one(3, 100), 0);
    for p in (0..8).filter(|&p| p != 3) {
        assert!(!pfc.is_paused(p, 1), "priority {p} stopped by a pause of 3");
    }
    pfc.on_frame(&one(5, 1000), 10 * US);
    // 3 ends at 51.2 µs, 5 runs on; an XON for 3 leaves 5 paused.
    assert!(!pfc.is_paused(3, 60 * US));
    assert!(pfc.is_paused(5, 60 * US));
    pfc.on_frame(&one(3, 0), 70 * US);
    assert!(pfc.is_paused(5, 70 * US));
}

#[test]
fn a_disabled_priority_is_counted_not_paused() {
    let cfg = PfcConfig {
        priorities: 1 << 3,
        ..PfcConfig::default()
    };
    let mut pfc = Pfc::new(cfg, 1_000);
    pfc.on_frame(&one(4, 1000), 0);
    assert!(!pfc.is_paused(4, 1));
    assert_eq!(pfc.stats(1).rx_pause[4], 1);
}

#[test]
fn a_refresh_replaces_the_pause_time() {
    let mut pfc = Pfc::new(PfcConfig::default(), 1_000);
    pfc.on_frame(&one(3, 1000), 0); // to 512 µs
    pfc.on_frame(&one(3, 1000), 400 * US); // to 912 µs
    assert!(pfc.is_paused(3, 900 * US));
    assert!(!pfc.is_paused(3, 912 * US));
    // One pause of 912 µs, not two.
    assert_eq!(pfc.stats(MS).paused_us[3], 912);
}

#[test]
fn backlog_sends_xoff_refresh_and_xon() {
    let cfg = PfcConfig {
        xoff: 64,
        xon: 16,
        pause_quanta: 1000, // 512 µs at 1 Gbit/s: refresh after 256 µs
        ..PfcConfig::default()
    };
    let mut pfc = Pfc::new(cfg, 1_000);
    let mut backlog = [0u32; 8];
    backlog[3] = 63;
    assert_eq!(pfc.observe_backlog(&backlog, 0), None);
    backlog[3] = 64;
    assert_eq!(pfc.observe_backlog(&backlog, 0), Some(one(3, 1000)));
    // Still high, before the refresh time: nothing; after: XOFF again.
    assert_eq!(pfc.observe_backlog(&backlog, 255 * US), None);
    backlog[3] = 20; // between XON and XOFF: stays paused, refreshed
    assert_eq!(pfc.observe_backlog(&backlog, 256 * US), Some(one(3, 1000)));
    backlog[3] = 16;
    assert_eq!(pfc.observe_backlog(&backlog, 300 * US), Some(one(3, 0)));
    assert_eq!(pfc.observe_backlog(&backlog, 900 * US), None);
    let s = pfc.stats(MS);
    assert_eq!((s.tx_pause[3], s.tx_resume[3]), (2, 1));
}

#[test]
fn one_frame_names_every_priority_that_changed() {
    let cfg = PfcConfig {
        priorities: 0b1010_1000,
        xoff: 10,
        xon: 2,
        ..PfcConfig::default()
    };
    let mut pfc = Pfc::new(cfg, 10_000);
    let backlog = [10u32; 8];
    let Some(MacControlRepr::Pfc { enabled, quanta }) = pfc.observe_backlog(&backlog, 0) else {
        panic!("no XOFF");
    };
    assert_eq!(enabled, 0b1010_1000, "only the enabled priorities");
    assert_eq!(quanta[3], u16::MAX);
    assert_eq!(quanta[0], 0);
}

#[test]
fn thresholds_are_checked() {
    let ok = PfcConfig::default();
    assert_eq!(ok.check(512), Ok(()));
    assert!(ok.check(128).unwrap_err().contains("receive ring"));
    let bad = PfcConfig { xon: 200, ..ok };
    assert!(bad.check(512).unwrap_err().contains("XON"));
}

/// A MAC control frame from 02:00:00:00:00:01 with `body` after the
/// ethertype.
fn raw_frame(body: &[u8]) -> Vec<u8> {
    let mut f = vec![0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x88, 0x08];
    f.extend_from_slice(body);
    f
}

#[test]
fn hostile_frames_do_not_panic_or_pause_wrongly() {
    let mut pfc = Pfc::new(PfcConfig::default(), 10_000);
    let mut all_max = vec![0x01, 0x01, 0xff, 0xff];
    all_max.extend([0xff; 16]);
    let cases: Vec<Vec<u8>> = vec![
        raw_frame(&[]),                       // no opcode
        raw_frame(&[0x01]),                   // half an opcode
        raw_frame(&[0x01, 0x01, 0x00, 0x08]), // PFC cut after the vector
        raw_frame(&[0x00, 0x01]),             // PAUSE without its time
        raw_frame(&[0x12, 0x34, 0xff, 0xff]), // an unknown opcode
        raw_frame(&[0x00, 0x01, 0xff, 0xff]), // 802.3x PAUSE
        raw_frame(&all_max),                  // every class (and reserved bits), 0xffff
    ];
    for (i, f) in cases.iter().enumerate() {
        // Frames too short for their opcode are refused by the parser
        // (the backend counts them as malformed); the rest reach `Pfc`.
        if let Ok(RxFrame::MacControl { repr, .. }) = parse_rx(f, None) {
            pfc.on_frame(&repr, i as u64);
        }
    }
    let s = pfc.stats(0);
    assert_eq!(s.rx_link_pause, 1, "the PAUSE counted, not honoured");
    assert_eq!(s.rx_pause, [1; 8], "only the all-classes frame paused");
    // 65535 quanta at 10 Gbit/s: 3,355,392 ns from when it came (t = 6).
    assert!((0..8).all(|p| pfc.is_paused(p, 3_355_397)));
    assert!((0..8).all(|p| !pfc.is_paused(p, 3_355_398)));
}
