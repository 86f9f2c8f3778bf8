//! `dump`'s line for a MAC control frame: 802.1Qbb PFC (the priorities it
//! pauses and for how long) or 802.3x PAUSE, as RoCE's lossless fabrics
//! send them.
//!
//! A pause time is in quanta of 512 bit times; its length in time depends
//! on the link's speed, which classic pcap does not carry, so it is shown
//! in µs only when `--link-mbps` or the pcapng interface's `if_speed` gives
//! the speed.

use ferroce_wire::LinkType;
use ferroce_wire::pfc::{self, MacControlRepr};

use crate::capture::Frame;

/// The text line for `frame` if it is a MAC control frame on Ethernet;
/// `None` for anything else. A MAC control frame too short for its opcode
/// is still shown, with the reason.
pub(super) fn text_line(frame: &Frame, t: f64, link_mbps: Option<u32>) -> Option<String> {
    if frame.link != LinkType::Ethernet {
        return None;
    }
    if !is_mac_control(&frame.data) {
        return None;
    }
    let (src, body) = match pfc::parse_frame(&frame.data) {
        Ok(None) => return None,
        Ok(Some((eth, repr))) => (mac(eth.src), describe(&repr, link_mbps)),
        Err(e) => (src_of(&frame.data), format!("MAC control, malformed: {e}")),
    };
    Some(format!(
        "{:>5} {:>11.6} {src} → {} {body}",
        frame.number,
        t,
        mac(pfc::DST_MAC_CONTROL)
    ))
}

/// Whether the ethertype (after at most one tag) says MAC control, even if
/// the rest is too short to parse.
fn is_mac_control(data: &[u8]) -> bool {
    let et = |at: usize| {
        data.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    match et(12) {
        Some(pfc::ETHERTYPE_MAC_CONTROL) => true,
        Some(0x8100) => et(16) == Some(pfc::ETHERTYPE_MAC_CONTROL),
        _ => false,
    }
}

fn src_of(data: &[u8]) -> String {
    data.get(6..12)
        .and_then(|b| <[u8; 6]>::try_from(b).ok())
        .map_or_else(|| "?".into(), mac)
}

fn describe(repr: &MacControlRepr, link_mbps: Option<u32>) -> String {
    let time = |q: u16| match link_mbps.and_then(|s| pfc::quanta_to_micros(q, s)) {
        Some(us) => format!("{q} quanta ({us:.3} µs)"),
        None => format!("{q} quanta"),
    };
    match *repr {
        MacControlRepr::Pause { quanta } => format!("PAUSE {}", time(quanta)),
        MacControlRepr::Pfc { .. } => {
            let entries = repr.entries();
            if entries.is_empty() {
                return "PFC no priority enabled".into();
            }
            let list: Vec<String> = entries
                .into_iter()
                .map(|(p, q)| format!("P{}={}", p.unwrap_or(0), time(q)))
                .collect();
            format!("PFC {}", list.join(" "))
        }
        MacControlRepr::Other { opcode } => format!("MAC control opcode {opcode:#06x}"),
    }
}

fn mac(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn frame_of(data: Vec<u8>) -> Frame {
        Frame {
            number: 3,
            timestamp: Duration::ZERO,
            orig_len: data.len() as u32,
            link: LinkType::Ethernet,
            data,
        }
    }

    #[test]
    fn pfc_lists_enabled_priorities_in_quanta_and_micros() {
        let repr = MacControlRepr::Pfc {
            enabled: 0b1000_0010,
            quanta: [9, 1000, 0, 0, 0, 0, 0, 0xffff],
        };
        let f = frame_of(pfc::frame([2, 0, 0, 0, 0, 0x0a], &repr));
        let line = text_line(&f, 0.5, Some(1000)).unwrap();
        assert!(
            line.ends_with(
                "02:00:00:00:00:0a → 01:80:c2:00:00:01 PFC P1=1000 quanta (512.000 µs) \
                 P7=65535 quanta (33553.920 µs)"
            ),
            "{line}"
        );
        let line = text_line(&f, 0.5, None).unwrap();
        assert!(
            line.ends_with("PFC P1=1000 quanta P7=65535 quanta"),
            "{line}"
        );
    }

    #[test]
    fn pause_short_and_foreign_frames() {
        let f = frame_of(pfc::frame([2; 6], &MacControlRepr::Pause { quanta: 3 }));
        assert!(
            text_line(&f, 0.0, None)
                .unwrap()
                .ends_with("PAUSE 3 quanta")
        );
        let mut short = pfc::frame([2; 6], &MacControlRepr::Pause { quanta: 3 });
        short.truncate(15);
        let line = text_line(&frame_of(short), 0.0, None).unwrap();
        assert!(line.contains("MAC control, malformed"), "{line}");
        let mut ip = pfc::frame([2; 6], &MacControlRepr::Pause { quanta: 3 });
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(text_line(&frame_of(ip), 0.0, None), None);
    }
}
