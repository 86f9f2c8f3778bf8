//! A capture of frames received across the veth, checked as `ferroce dump
//! --check` checks and by tshark.

use std::time::{Duration, Instant};

use ferroce_wire::ethernet::VlanTag;
use ferroce_wire::{Opcode, samples};

use super::netns::{B4, B6, Pair};
use super::{l3s, open_in};
use crate::raw::frame::{FrameBuilder, FrameSpec};

/// A classic pcap (Ethernet, microseconds) of `frames`.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    const MAGIC: u32 = 0xa1b2_c3d4;
    const LINKTYPE_ETHERNET: u32 = 1;
    let mut out = Vec::new();
    for w in [
        MAGIC.to_le_bytes().to_vec(),
        2u16.to_le_bytes().to_vec(),
        4u16.to_le_bytes().to_vec(),
    ] {
        out.extend(w);
    }
    for v in [0u32, 0, 65_535, LINKTYPE_ETHERNET] {
        out.extend(v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for v in [1_767_225_600u32, i as u32, f.len() as u32, f.len() as u32] {
            out.extend(v.to_le_bytes());
        }
        out.extend(f);
    }
    out
}

/// A received frame as a capture shows it: the tag the kernel took off
/// put back after the MAC addresses (as libpcap does).
fn with_tag(frame: &[u8], tci: Option<u16>) -> Vec<u8> {
    let mut f = frame.to_vec();
    if let Some(tci) = tci {
        let tag = [0x81, 0x00, (tci >> 8) as u8, tci as u8];
        f.splice(12..12, tag);
    }
    f
}

#[test]
fn a_capture_of_received_frames_decodes_clean() {
    let Some(pair) = Pair::new("capture") else {
        return;
    };
    let mut a = open_in(&pair.a, vec![]);
    let mut b = open_in(&pair.b, vec![B4.into(), B6.into()]);
    let mut builder = FrameBuilder::new(100);
    let mut want = 0;
    for l3 in l3s() {
        for vlan in [
            None,
            Some(VlanTag {
                pcp: 5,
                dei: false,
                vid: 0,
            }),
        ] {
            let spec = FrameSpec {
                dst_mac: b.mac(),
                src_mac: a.mac(),
                vlan,
                l3,
            };
            for op in [
                Opcode::RC_SEND_ONLY,
                Opcode::RC_RDMA_WRITE_ONLY,
                Opcode::RC_ACKNOWLEDGE,
            ] {
                let t = samples::transport(op, want, 48);
                let mut tb = vec![0; t.buffer_len()];
                let payload = vec![0x5a; t.payload_len];
                let n = t.emit(&mut tb, &payload).unwrap();
                assert!(a.queue(|slot| builder.build(&spec, &tb[..n], slot).unwrap()));
                want += 1;
            }
        }
    }
    a.flush().unwrap();
    let mut frames = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while frames.len() < want as usize && Instant::now() < deadline {
        b.recv_frames(|f, tci, _| frames.push(with_tag(f, tci)));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(frames.len(), want as usize);
    // What `ferroce dump --check` judges: every frame RoCE, well formed,
    // its ICRC right.
    for (i, f) in frames.iter().enumerate() {
        let p = ferroce_wire::locate(ferroce_wire::LinkType::Ethernet, f)
            .unwrap_or_else(|| panic!("frame {i} is not RoCE"))
            .parse()
            .unwrap_or_else(|e| panic!("frame {i}: {e}"));
        assert!(p.icrc_ok(), "frame {i}: bad ICRC");
    }
    let dir = std::env::var_os("FERROCE_RAW_CAPTURE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("ferroce-raw-veth-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap(&frames)).unwrap();
    tshark_agrees(&path, want as usize);
    if std::env::var_os("FERROCE_RAW_CAPTURE_DIR").is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

/// tshark decodes every frame of `path` as InfiniBand over RoCE (v1:
/// eth.type 0x8915; v2: udp 4791), with a BTH opcode, a VLAN priority where
/// tagged, and no malformed packet or expert message but the one expected.
fn tshark_agrees(path: &std::path::Path, frames: usize) {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-n", "-T", "fields", "-E", "separator=/t"])
        .args([
            "-e",
            "frame.protocols",
            "-e",
            "infiniband.bth.opcode",
            "-e",
            "vlan.priority",
        ])
        .args(["-e", "_ws.malformed", "-e", "_ws.expert.message"])
        .output()
        .expect("tshark is needed (scripts/setup-test-deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), frames, "{text}");
    for (i, line) in lines.iter().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        assert!(cols[0].contains("infiniband"), "frame {i}: {line}");
        assert!(!cols[1].is_empty(), "frame {i}: no opcode: {line}");
        // Frames 3..6, 9..12, 15..18 were sent with PCP 5.
        let tagged = (i / 3) % 2 == 1;
        assert_eq!(cols[2], if tagged { "5" } else { "" }, "frame {i}: {line}");
        assert_eq!(
            cols.get(3).copied().unwrap_or(""),
            "",
            "frame {i} malformed: {line}"
        );
        // The one expert message expected: IPv6 UDP checksum 0, which rxe
        // sends too (RFC 6935 allows it for tunnels; tshark flags it).
        let ipv6 = cols[0].contains("ipv6");
        let messages = cols.get(4).copied().unwrap_or("");
        let expected = if ipv6 {
            "Illegal checksum value (0)"
        } else {
            ""
        };
        assert_eq!(messages, expected, "frame {i}: {line}");
    }
}
