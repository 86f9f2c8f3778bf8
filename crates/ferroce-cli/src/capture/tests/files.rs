//! Helpers for [`super`] that build capture files: pcap variants of the vectors, Linux
//! cooked frames, and pcapng written field by field.

use super::*;

/// The first five frames of valid.pcap, as a little-endian microsecond pcap.
pub(super) fn sample_pcap() -> Vec<u8> {
    let bytes = std::fs::read(vector("crafted/valid.pcap")).unwrap();
    let mut end = 24;
    for _ in 0..5 {
        end += 16 + u32::from_le_bytes(bytes[end + 8..end + 12].try_into().unwrap()) as usize;
    }
    bytes[..end].to_vec()
}

/// Rewrites a little-endian nanosecond pcap big-endian, in nanoseconds or (truncating)
/// microseconds.
pub(super) fn big_endian_pcap(le: &[u8], nanos: bool) -> Vec<u8> {
    assert_eq!(le[..4], [0x4D, 0x3C, 0xB2, 0xA1]);
    let word = |at: usize| u32::from_le_bytes(le[at..at + 4].try_into().unwrap());
    let magic: u32 = if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 };
    let mut out = magic.to_be_bytes().to_vec();
    out.extend(u16::from_le_bytes([le[4], le[5]]).to_be_bytes());
    out.extend(u16::from_le_bytes([le[6], le[7]]).to_be_bytes());
    for at in (8..24).step_by(4) {
        out.extend(word(at).to_be_bytes());
    }
    let mut at = 24;
    while at < le.len() {
        let frac = if nanos {
            word(at + 4)
        } else {
            word(at + 4) / 1000
        };
        for v in [word(at), frac, word(at + 8), word(at + 12)] {
            out.extend(v.to_be_bytes());
        }
        let len = word(at + 8) as usize;
        out.extend(&le[at + 16..at + 16 + len]);
        at += 16 + len;
    }
    out
}

/// Replaces each Ethernet header by a Linux cooked v1 or v2 header ("sent by us" for the
/// first MAC seen as a source, "to us" otherwise).
pub(super) fn to_linux_sll(frames: &[Frame], v2: bool) -> Vec<Frame> {
    let first_src = &frames[0].data[6..12];
    frames
        .iter()
        .map(|f| {
            let (src, protocol, rest) = (&f.data[6..12], &f.data[12..14], &f.data[14..]);
            let packet_type = if src == first_src { 4 } else { 0 };
            let mut address = [0u8; 8];
            address[..6].copy_from_slice(src);
            let mut data = Vec::new();
            if v2 {
                data.extend(protocol);
                data.extend([0, 0, 0, 0, 0, 2]); // reserved, interface index 2
                data.extend(1u16.to_be_bytes()); // ARPHRD_ETHER
                data.extend([packet_type, 6]);
            } else {
                data.extend(u16::from(packet_type).to_be_bytes());
                data.extend(1u16.to_be_bytes());
                data.extend(6u16.to_be_bytes());
            }
            data.extend(address);
            if !v2 {
                data.extend(protocol);
            }
            data.extend(rest);
            let link = if v2 {
                LinkType::LinuxSll2
            } else {
                LinkType::LinuxSll
            };
            Frame {
                orig_len: data.len() as u32,
                link,
                data,
                ..f.clone()
            }
        })
        .collect()
}

/// A pcapng file written field by field, in either byte order.
pub(super) struct PcapNg {
    big: bool,
    pub(super) out: Vec<u8>,
}

impl PcapNg {
    /// Starts a section (Section Header Block).
    pub(super) fn new(big: bool) -> Self {
        let mut ng = Self {
            big,
            out: Vec::new(),
        };
        ng.section(big);
        ng
    }

    fn section(&mut self, big: bool) {
        self.big = big;
        let mut body = Vec::new();
        self.put32(&mut body, 0x1A2B_3C4D);
        self.put16(&mut body, 1);
        self.put16(&mut body, 0);
        body.extend([0xFF; 8]); // section length -1: unspecified
        self.block(0x0A0D_0D0A, &body);
    }

    fn put16(&self, out: &mut Vec<u8>, v: u16) {
        out.extend(if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    pub(super) fn put32(&self, out: &mut Vec<u8>, v: u32) {
        out.extend(if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn pad(out: &mut Vec<u8>) {
        out.resize(out.len().next_multiple_of(4), 0);
    }

    pub(super) fn block(&mut self, block_type: u32, body: &[u8]) {
        let mut body = body.to_vec();
        Self::pad(&mut body);
        let len = 12 + body.len() as u32;
        let mut out = std::mem::take(&mut self.out);
        self.put32(&mut out, block_type);
        self.put32(&mut out, len);
        out.extend(body);
        self.put32(&mut out, len);
        self.out = out;
    }

    fn options(&self, body: &mut Vec<u8>, options: &[(u16, &[u8])], end: bool) {
        for (code, value) in options {
            self.put16(body, *code);
            self.put16(body, value.len() as u16);
            body.extend(*value);
            Self::pad(body);
        }
        if end && !options.is_empty() {
            body.extend([0; 4]);
        }
    }

    pub(super) fn idb(&mut self, linktype: u16, snaplen: u32, options: &[(u16, &[u8])]) {
        let mut body = Vec::new();
        self.put16(&mut body, linktype);
        self.put16(&mut body, 0);
        self.put32(&mut body, snaplen);
        self.options(&mut body, options, true);
        self.block(1, &body);
    }

    fn epb_with(&mut self, iface: u32, ticks: u64, data: &[u8], orig: u32, opts: &[(u16, &[u8])]) {
        let mut body = Vec::new();
        for v in [
            iface,
            (ticks >> 32) as u32,
            ticks as u32,
            data.len() as u32,
            orig,
        ] {
            self.put32(&mut body, v);
        }
        body.extend(data);
        Self::pad(&mut body);
        // No end-of-options marker: the pcapng spec lets readers do without it.
        self.options(&mut body, opts, false);
        self.block(PCAPNG_ENHANCED_PACKET_BLOCK, &body);
    }

    pub(super) fn epb(&mut self, iface: u32, ticks: u64, data: &[u8], orig: u32) {
        self.epb_with(iface, ticks, data, orig, &[]);
    }

    fn spb(&mut self, orig: u32, data: &[u8]) {
        let mut body = Vec::new();
        self.put32(&mut body, orig);
        body.extend(data);
        self.block(PCAPNG_SIMPLE_PACKET_BLOCK, &body);
    }

    fn packet_block(&mut self, iface: u16, ticks: u64, data: &[u8], orig: u32) {
        let mut body = Vec::new();
        self.put16(&mut body, iface);
        self.put16(&mut body, 0);
        for v in [(ticks >> 32) as u32, ticks as u32, data.len() as u32, orig] {
            self.put32(&mut body, v);
        }
        body.extend(data);
        self.block(PCAPNG_PACKET_BLOCK, &body);
    }
}

/// A two-section pcapng (little-endian, then big-endian) exercising every packet block
/// type, per-interface link types, `if_tsresol` (10^-6, 10^-9, 2^-10, 10^-3) and
/// `if_tsoffset`, with blocks that carry no packet in between; and the frames it holds.
pub(super) fn sample_pcapng() -> (Vec<u8>, Vec<Frame>) {
    let ipv4 = {
        let mut p = vec![
            0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
        ];
        p.extend([0xC0, 0x00, 0x12, 0xB7, 0, 20, 0, 0]); // UDP to port 4791
        p.extend([0; 12]);
        p
    };
    let ethernet: Vec<u8> = (0..72).collect();
    let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6];
    sll2.extend([0; 8]);
    sll2.extend(&ipv4);
    let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend(&ipv4);

    let mut ng = PcapNg::new(false);
    ng.idb(1, 64, &[]); // Ethernet, default resolution: microseconds
    ng.idb(101, 0, &[(9, &[9]), (2, b"raw0")]); // raw IP, nanoseconds
    let offset = 1000i64.to_le_bytes();
    ng.idb(276, 65535, &[(9, &[0x8A]), (14, &offset)]); // SLL2, 2^-10 s, +1000 s
    ng.epb(0, 1_700_000_000_123_456, &ethernet, 72);
    ng.block(0x0BAD, b"custom block"); // Custom Block: PEN "cust", 8 bytes
    ng.spb(100, &ethernet[..64]); // cut to the interface's snaplen
    let mut nrb = Vec::new();
    ng.put16(&mut nrb, 1);
    ng.put16(&mut nrb, 14);
    nrb.extend(b"\x7f\0\0\x01localhost\0");
    PcapNg::pad(&mut nrb);
    nrb.extend([0; 4]);
    ng.block(4, &nrb); // Name Resolution Block
    ng.spb(61, &ethernet[..61]); // followed by 3 bytes of padding
    ng.packet_block(1, 1_700_000_001_000_000_001, &ipv4, 40);
    ng.epb(2, 1024 * 1_700_000_002 + 1, &sll2, sll2.len() as u32);
    ng.epb_with(
        1,
        1_700_000_001_500_000_000,
        &ipv4[..30],
        40,
        &[(1, b"\xFF\xFE")],
    );
    let mut isb = Vec::new();
    for v in [0, 0, 0] {
        ng.put32(&mut isb, v);
    }
    ng.block(5, &isb); // Interface Statistics Block
    ng.section(true);
    ng.idb(113, 0, &[(9, &[3])]); // Linux SLL, milliseconds
    ng.epb(0, 1_700_000_003_500, &sll, sll.len() as u32);

    let frame = |number, timestamp, orig_len, link, data: &[u8]| Frame {
        number,
        timestamp,
        orig_len,
        link,
        data: data.to_vec(),
    };
    let expected = vec![
        frame(
            1,
            Duration::new(1_700_000_000, 123_456_000),
            72,
            LinkType::Ethernet,
            &ethernet,
        ),
        frame(3, Duration::ZERO, 100, LinkType::Ethernet, &ethernet[..64]),
        frame(4, Duration::ZERO, 61, LinkType::Ethernet, &ethernet[..61]),
        frame(
            5,
            Duration::new(1_700_000_001, 1),
            40,
            LinkType::RawIp,
            &ipv4,
        ),
        // 1/1024 s = 976562.5 ns, truncated as Wireshark does.
        frame(
            6,
            Duration::new(1_700_001_002, 976_562),
            40 + 20,
            LinkType::LinuxSll2,
            &sll2,
        ),
        frame(
            7,
            Duration::new(1_700_000_001, 500_000_000),
            40,
            LinkType::RawIp,
            &ipv4[..30],
        ),
        frame(
            8,
            Duration::new(1_700_000_003, 500_000_000),
            56,
            LinkType::LinuxSll,
            &sll,
        ),
    ];
    (ng.out, expected)
}
