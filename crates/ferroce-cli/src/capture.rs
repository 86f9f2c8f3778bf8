//! Packet capture files for `ferroce dump`: read classic pcap and pcapng, write classic pcap.
//!
//! Contract:
//! * [`FrameReader`] yields every packet record of a file or stream in file order, holding
//!   one record at a time (memory stays bounded whatever the capture's size); records are
//!   numbered from 1 exactly like Wireshark's `frame.number`. Non-RoCE packets count; so do
//!   the few pcapng blocks without a packet that Wireshark lists as frames (custom, systemd
//!   journal and Sysdig event blocks), which are not returned: numbers then skip them.
//!   The format is chosen by magic number:
//!   classic pcap in either byte order with micro- or nanosecond timestamps, or pcapng with
//!   any number of sections and interfaces, each interface with its own link type,
//!   `if_tsresol` and `if_tsoffset`; Enhanced, Simple and (obsolete) Packet Blocks are read.
//!   A Simple Packet Block has no timestamp: its frame gets [`Duration::ZERO`].
//! * Link types 1 (Ethernet), 113 (Linux cooked v1), 276 (Linux cooked v2), 101, 228 and
//!   229 (raw IP) are accepted; a packet on any other link type is an error naming it.
//! * [`write_pcap`] writes a little-endian classic pcap with nanosecond timestamps and a
//!   snapshot length of [`WRITE_SNAPLEN`]; `orig_len` of every record is its data length.
//! * Any malformed, truncated or foreign file gives a [`CaptureError`] naming the file and
//!   the fault; no input makes these functions panic.
//!
//! `pcap-file` 2 supplies the file header, record and block framing, the section byte order
//! and the Interface Description Blocks. Its packet-level conveniences are bypassed where
//! they differ from Wireshark: `PcapPacket` rejects `orig_len > snaplen` (every capture taken
//! with a short snaplen), `EnhancedPacketBlock::timestamp` is the raw tick count whatever
//! the interface's `if_tsresol`, a `SimplePacketBlock`'s data includes the block padding,
//! and a malformed packet-block option (say, a comment that is not UTF-8) would reject the
//! packet. So packet blocks are decoded here from their fixed fields; options are ignored.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

mod reader;

pub(crate) use reader::FrameReader;

/// Snapshot length written by [`write_pcap`] (tcpdump's default; Wireshark's limit for
/// Ethernet). Longer frames are refused.
pub(crate) const WRITE_SNAPLEN: u32 = 262_144;

const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xA1, 0xB2, 0xC3, 0xD4], // big-endian, microseconds
    [0xD4, 0xC3, 0xB2, 0xA1], // little-endian, microseconds
    [0xA1, 0xB2, 0x3C, 0x4D], // big-endian, nanoseconds
    [0x4D, 0x3C, 0xB2, 0xA1], // little-endian, nanoseconds
];
/// pcapng Section Header Block type; the same bytes in both byte orders.
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

const PCAPNG_PACKET_BLOCK: u32 = 0x0000_0002;
const PCAPNG_SIMPLE_PACKET_BLOCK: u32 = 0x0000_0003;
const PCAPNG_ENHANCED_PACKET_BLOCK: u32 = 0x0000_0006;
/// pcapng blocks that Wireshark (4.0) lists as frames although they hold no packet: Custom
/// Blocks (both kinds), systemd Journal Export Blocks and Sysdig event blocks. They take a
/// frame number but are not returned.
const PCAPNG_NUMBERED_NON_PACKETS: [u32; 6] = [
    0x0000_0BAD,
    0x4000_0BAD,
    0x0000_0009,
    0x0000_0204,
    0x0000_0216,
    0x0000_0221,
];

pub(crate) use ferroce_wire::LinkType;

/// Maps a pcap / pcapng link-type number; `None` for the ones this module does not read:
/// 1 Ethernet, 113 Linux cooked v1, 276 Linux cooked v2, 101/228/229 raw IP.
fn link_from_number(linktype: u32) -> Option<LinkType> {
    match linktype {
        1 => Some(LinkType::Ethernet),
        113 => Some(LinkType::LinuxSll),
        276 => Some(LinkType::LinuxSll2),
        101 | 228 | 229 => Some(LinkType::RawIp),
        _ => None,
    }
}

/// The link-type number written to a file.
fn link_number(link: LinkType) -> u32 {
    match link {
        LinkType::Ethernet => 1,
        LinkType::LinuxSll => 113,
        LinkType::LinuxSll2 => 276,
        LinkType::RawIp => 101,
    }
}

/// One packet record of a capture file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// 1-based position among the file's packet records; equals Wireshark's `frame.number`.
    pub(crate) number: u64,
    /// Capture time since the Unix epoch (zero for a pcapng Simple Packet Block).
    pub(crate) timestamp: Duration,
    /// Length of the packet on the wire; more than `data.len()` if the capture cut it short.
    pub(crate) orig_len: u32,
    /// Framing of `data`.
    pub(crate) link: LinkType,
    /// The captured bytes, starting with the link-layer header.
    pub(crate) data: Vec<u8>,
}

/// A capture file could not be read or written.
#[derive(Debug)]
pub(crate) struct CaptureError {
    /// The file concerned.
    pub(crate) path: PathBuf,
    /// What is wrong with it.
    pub(crate) kind: CaptureErrorKind,
}

/// What went wrong, without the file name.
#[derive(Debug)]
pub(crate) enum CaptureErrorKind {
    /// Opening, reading or writing the file failed.
    Io(io::Error),
    /// The file starts with neither a pcap nor a pcapng magic number (`head`: its first
    /// bytes, at most 4).
    NotACapture { head: Vec<u8> },
    /// `what`, starting at byte `offset`, runs past the end of the file.
    Truncated { what: String, offset: u64 },
    /// `what`, starting at byte `offset`, is inconsistent (`detail` says how).
    Malformed {
        what: String,
        offset: u64,
        detail: String,
    },
    /// A packet record uses a link type this module does not read.
    UnsupportedLinkType(u32),
    /// A pcapng packet block refers to an interface the section has not described.
    UnknownInterface { interface_id: u32, offset: u64 },
    /// [`write_pcap`]: frame `index` (0-based) cannot be stored in a classic pcap.
    Unwritable { index: usize, detail: String },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path.display())?;
        match &self.kind {
            CaptureErrorKind::Io(e) => write!(f, "{e}"),
            CaptureErrorKind::NotACapture { head } if head.is_empty() => {
                f.write_str("not a pcap or pcapng file (the file is empty)")
            }
            CaptureErrorKind::NotACapture { head } => {
                f.write_str("not a pcap or pcapng file (it starts with")?;
                for b in head {
                    write!(f, " {b:02x}")?;
                }
                f.write_str(")")
            }
            CaptureErrorKind::Truncated { what, offset } => {
                write!(
                    f,
                    "truncated: {what} at byte {offset} runs past the end of the file"
                )
            }
            CaptureErrorKind::Malformed {
                what,
                offset,
                detail,
            } => write!(f, "malformed {what} at byte {offset}: {detail}"),
            CaptureErrorKind::UnsupportedLinkType(n) => write!(
                f,
                "unsupported link type {n} (readable: 1 Ethernet, 113 Linux SLL, \
                 276 Linux SLL2, 101/228/229 raw IP)"
            ),
            CaptureErrorKind::UnknownInterface {
                interface_id,
                offset,
            } => write!(
                f,
                "malformed pcapng: the packet block at byte {offset} names interface \
                 {interface_id}, which no Interface Description Block of its section defines"
            ),
            CaptureErrorKind::Unwritable { index, detail } => {
                write!(f, "cannot write frame {index} (0-based): {detail}")
            }
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CaptureErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Reads every packet record of the pcap or pcapng file at `path` (all in
/// memory: for tests; `dump` streams with [`FrameReader`]).
#[cfg(test)]
pub(crate) fn read_frames(path: &Path) -> Result<Vec<Frame>, CaptureError> {
    let err = |kind| CaptureError {
        path: path.to_path_buf(),
        kind,
    };
    let file = File::open(path).map_err(|e| err(CaptureErrorKind::Io(e)))?;
    FrameReader::new(file)
        .collect::<Result<_, _>>()
        .map_err(err)
}

/// [`read_frames`] on a file's contents.
#[cfg(test)]
fn parse_capture(bytes: &[u8]) -> Result<Vec<Frame>, CaptureErrorKind> {
    FrameReader::new(bytes).collect()
}

/// Writes `frames` (timestamp since the Unix epoch, bytes starting with the `link` header)
/// as a classic pcap at `path`, replacing any file there.
pub(crate) fn write_pcap(
    path: &Path,
    link: LinkType,
    frames: &[(Duration, &[u8])],
) -> Result<(), CaptureError> {
    let err = |kind| CaptureError {
        path: path.to_path_buf(),
        kind,
    };
    // Check everything before creating the file, so that a refused frame leaves no file.
    for (index, (timestamp, data)) in frames.iter().enumerate() {
        let detail = if timestamp.as_secs() > u64::from(u32::MAX) {
            format!("timestamp {timestamp:?} is past the pcap limit (2106-02-07)")
        } else if data.len() > WRITE_SNAPLEN as usize {
            format!(
                "{} bytes is more than the snapshot length {WRITE_SNAPLEN}",
                data.len()
            )
        } else {
            continue;
        };
        return Err(err(CaptureErrorKind::Unwritable { index, detail }));
    }
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen: WRITE_SNAPLEN,
        datalink: DataLink::from(link_number(link)),
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
    };
    let io_err = |e: PcapError| match e {
        PcapError::IoError(e) => err(CaptureErrorKind::Io(e)),
        other => err(CaptureErrorKind::Io(io::Error::other(other))),
    };
    let file = File::create(path).map_err(|e| err(CaptureErrorKind::Io(e)))?;
    let mut writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(io_err)?;
    for (timestamp, data) in frames {
        // Cannot fail: the length was checked against WRITE_SNAPLEN above.
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        writer
            .write_packet(&PcapPacket::new(*timestamp, len, data))
            .map_err(io_err)?;
    }
    writer
        .into_writer()
        .into_inner()
        .map(drop) // flushed; the file is closed here
        .map_err(|e| err(CaptureErrorKind::Io(e.into_error())))
}

/// Maps a `pcap-file` parse error on `what`, which starts at byte `offset`.
fn pcap_file_error(e: PcapError, what: String, offset: u64) -> CaptureErrorKind {
    match e {
        PcapError::IncompleteBuffer => CaptureErrorKind::Truncated { what, offset },
        PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            CaptureErrorKind::Truncated { what, offset }
        }
        PcapError::IoError(e) => CaptureErrorKind::Io(e),
        PcapError::InvalidInterfaceId(interface_id) => CaptureErrorKind::UnknownInterface {
            interface_id,
            offset,
        },
        other => CaptureErrorKind::Malformed {
            what,
            offset,
            detail: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::process::Command;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop (also when a test fails).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(test: &str) -> Self {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("ferroce-capture-{test}-{}-{n}", std::process::id()));
            std::fs::create_dir(&dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
            Self(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `shared/vectors/<rel>`; `shared` is `$FERROCE_SHARED`, else `../shared` beside the repo.
    fn vector(rel: &str) -> PathBuf {
        let shared = std::env::var_os("FERROCE_SHARED").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
            PathBuf::from,
        );
        let path = shared.join("vectors").join(rel);
        assert!(
            path.exists(),
            "{} is missing: set FERROCE_SHARED to the shared/ directory (scripts/test.sh does)",
            path.display()
        );
        path
    }

    fn rxe_vectors() -> Vec<PathBuf> {
        let dir = vector("rxe");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension() == Some(OsStr::new("pcap")))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no *.pcap in {}", dir.display());
        files
    }

    /// Runs `editcap`, `mergecap` or `tshark` and returns its stdout. A missing tool fails the
    /// test: these checks must run in CI, not be skipped.
    fn wireshark_tool<S: AsRef<OsStr>>(tool: &str, args: &[S]) -> String {
        let out = Command::new(tool).args(args).output().unwrap_or_else(|e| {
            panic!(
                "cannot run `{tool}` ({e}); run scripts/setup-test-deps.sh \
                 (installs the Debian packages tshark and wireshark-common)"
            )
        });
        let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
        assert!(
            out.status.success(),
            "`{tool} {}` failed: {}",
            shown.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// One line per frame: number, epoch time with 9 decimals (empty: no timestamp),
    /// wire length, captured length.
    type View = Vec<(u64, String, u32, u32)>;

    fn tshark_view(path: &Path) -> View {
        let fields = [
            "frame.number",
            "frame.time_epoch",
            "frame.len",
            "frame.cap_len",
        ];
        let mut args = vec!["-n", "-r", path.to_str().unwrap(), "-T", "fields"];
        for field in fields {
            args.extend(["-e", field]);
        }
        wireshark_tool("tshark", &args)
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                assert_eq!(f.len(), 4, "tshark line {line:?}");
                let time = f[1].to_owned();
                (
                    f[0].parse().unwrap(),
                    time,
                    f[2].parse().unwrap(),
                    f[3].parse().unwrap(),
                )
            })
            .collect()
    }

    /// Our frames as [`tshark_view`] shows them; `untimed` frames (Simple Packet Blocks) have
    /// no time, as in tshark.
    fn our_view(frames: &[Frame], untimed: &[u64]) -> View {
        frames
            .iter()
            .map(|f| {
                let time = if untimed.contains(&f.number) {
                    assert_eq!(f.timestamp, Duration::ZERO);
                    String::new()
                } else {
                    let t = f.timestamp;
                    format!("{}.{:09}", t.as_secs(), t.subsec_nanos())
                };
                let cap_len = u32::try_from(f.data.len()).unwrap();
                (f.number, time, f.orig_len, cap_len)
            })
            .collect()
    }

    fn read(path: &Path) -> Vec<Frame> {
        read_frames(path).unwrap_or_else(|e| panic!("{e}"))
    }

    fn assert_numbered(frames: &[Frame]) {
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.number, i as u64 + 1);
        }
    }

    /// Frames with the link type and data of `frames`, numbered afresh.
    fn renumbered(frames: impl IntoIterator<Item = Frame>) -> Vec<Frame> {
        frames
            .into_iter()
            .enumerate()
            .map(|(i, f)| Frame {
                number: i as u64 + 1,
                ..f
            })
            .collect()
    }

    fn as_records(frames: &[Frame]) -> Vec<(Duration, &[u8])> {
        frames.iter().map(|f| (f.timestamp, &f.data[..])).collect()
    }

    #[test]
    fn write_then_read_back() {
        let dir = TempDir::new("roundtrip");
        let big = vec![0xA5; WRITE_SNAPLEN as usize];
        let records: Vec<(Duration, &[u8])> = vec![
            (Duration::ZERO, b""),
            (Duration::new(1, 500_000_000), &[0x45]),
            (Duration::new(1_700_000_000, 123_456_789), &[7; 60]),
            (Duration::new(u64::from(u32::MAX), 999_999_999), &big),
        ];
        for link in [
            LinkType::Ethernet,
            LinkType::LinuxSll,
            LinkType::LinuxSll2,
            LinkType::RawIp,
        ] {
            let path = dir.file(&format!("{link:?}.pcap"));
            write_pcap(&path, link, &records).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(
                bytes[..4],
                [0x4D, 0x3C, 0xB2, 0xA1],
                "little-endian ns magic"
            );
            assert_eq!(bytes[16..20], WRITE_SNAPLEN.to_le_bytes());
            assert_eq!(bytes[20..24], link_number(link).to_le_bytes());
            let frames = read(&path);
            assert_eq!(frames.len(), records.len());
            for (i, (frame, (timestamp, data))) in frames.iter().zip(&records).enumerate() {
                let expected = Frame {
                    number: i as u64 + 1,
                    timestamp: *timestamp,
                    orig_len: data.len() as u32,
                    link,
                    data: data.to_vec(),
                };
                assert_eq!(*frame, expected);
            }
            assert_eq!(our_view(&frames, &[]), tshark_view(&path), "{link:?}");
        }
        let empty = dir.file("empty.pcap");
        write_pcap(&empty, LinkType::Ethernet, &[]).unwrap();
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 24);
        assert_eq!(read(&empty), []);
    }

    #[test]
    fn write_refuses_what_pcap_cannot_hold() {
        let dir = TempDir::new("refuse");
        let path = dir.file("x.pcap");
        let big = vec![0; WRITE_SNAPLEN as usize + 1];
        let too_long: Vec<(Duration, &[u8])> =
            vec![(Duration::ZERO, b"ok"), (Duration::ZERO, &big)];
        let e = write_pcap(&path, LinkType::Ethernet, &too_long).unwrap_err();
        assert!(
            matches!(e.kind, CaptureErrorKind::Unwritable { index: 1, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("x.pcap"), "{e}");
        assert!(!path.exists(), "a refused write must not leave a file");
        let too_late = [(Duration::from_secs(1 << 32), &b"x"[..])];
        let e = write_pcap(&path, LinkType::Ethernet, &too_late).unwrap_err();
        assert!(
            matches!(e.kind, CaptureErrorKind::Unwritable { index: 0, .. }),
            "{e}"
        );
        let e = write_pcap(&dir.file("no/such/dir.pcap"), LinkType::Ethernet, &[]).unwrap_err();
        assert!(matches!(e.kind, CaptureErrorKind::Io(_)), "{e}");
    }

    #[test]
    fn reads_crafted_valid_pcap() {
        let path = vector("crafted/valid.pcap");
        let frames = read(&path);
        assert_eq!(frames.len(), 165);
        assert_numbered(&frames);
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.link, LinkType::Ethernet);
            assert_eq!(f.timestamp, Duration::from_secs(1_700_000_000 + i as u64));
            assert_eq!(f.orig_len as usize, f.data.len());
        }
        assert_eq!(frames[0].data.len(), 314);
        assert_eq!(our_view(&frames, &[]), tshark_view(&path));
    }

    #[test]
    fn reads_rxe_vectors() {
        let counts = [
            ("atomic_bw.pcap", 81),
            ("rc_pingpong.pcap", 230),
            ("rc_pingpong_ipv6.pcap", 36),
            ("read_bw.pcap", 122),
            ("rping.pcap", 65),
            ("ud_pingpong.pcap", 53),
            ("write_bw.pcap", 121),
        ];
        for path in rxe_vectors() {
            let frames = read(&path);
            let name = path.file_name().unwrap().to_str().unwrap();
            if let Some((_, n)) = counts.iter().find(|(file, _)| *file == name) {
                assert_eq!(frames.len(), *n, "{name}");
            }
            assert_numbered(&frames);
            assert!(
                frames.iter().all(|f| f.link == LinkType::Ethernet),
                "{name}"
            );
            assert_eq!(our_view(&frames, &[]), tshark_view(&path), "{name}");
        }
    }

    /// `editcap -F pcapng` copies (one interface, microsecond `if_tsresol`) read the same.
    #[test]
    fn pcapng_copies_read_the_same() {
        let dir = TempDir::new("pcapng");
        let mut inputs = vec![vector("crafted/valid.pcap"), vector("crafted/invalid.pcap")];
        inputs.extend(rxe_vectors());
        for input in inputs {
            let copy = dir.file("copy.pcapng");
            wireshark_tool(
                "editcap",
                &[
                    OsStr::new("-F"),
                    "pcapng".as_ref(),
                    input.as_os_str(),
                    copy.as_os_str(),
                ],
            );
            assert_eq!(std::fs::read(&copy).unwrap()[..4], PCAPNG_MAGIC);
            assert_eq!(read(&copy), read(&input), "{}", input.display());
        }
    }

    /// Nanosecond pcap, big-endian pcap, and a pcapng whose two interfaces have different
    /// link types and timestamp resolutions.
    #[test]
    fn nanosecond_big_endian_and_multi_interface_files() {
        let dir = TempDir::new("mixed");
        let input = vector("rxe/ud_pingpong.pcap");
        let original = read(&input);

        // editcap shifts every timestamp by 123 ns in a nanosecond pcap.
        let ns = dir.file("ns.pcap");
        let args = [
            OsStr::new("-F"),
            "nsecpcap".as_ref(),
            "-t".as_ref(),
            "0.000000123".as_ref(),
        ];
        wireshark_tool(
            "editcap",
            &[&args[..], &[input.as_os_str(), ns.as_os_str()]].concat(),
        );
        assert_eq!(std::fs::read(&ns).unwrap()[..4], [0x4D, 0x3C, 0xB2, 0xA1]);
        let shifted: Vec<Frame> = original
            .iter()
            .map(|f| Frame {
                timestamp: f.timestamp + Duration::from_nanos(123),
                ..f.clone()
            })
            .collect();
        assert_eq!(read(&ns), shifted);

        // The same records, big-endian, both resolutions.
        for (nanos, file) in [(true, "be-ns.pcap"), (false, "be-us.pcap")] {
            let path = dir.file(file);
            std::fs::write(&path, big_endian_pcap(&std::fs::read(&ns).unwrap(), nanos)).unwrap();
            let frames = read(&path);
            let expected = if nanos { &shifted } else { &original };
            assert_eq!(frames, *expected, "{file}");
            assert_eq!(our_view(&frames, &[]), tshark_view(&path), "{file}");
        }

        // Interface 0: Ethernet, microseconds; interface 1: Linux SLL, nanoseconds.
        let sll = dir.file("sll.pcap");
        let sll_frames = to_linux_sll(&shifted, false);
        write_pcap(&sll, LinkType::LinuxSll, &as_records(&sll_frames)).unwrap();
        let merged = dir.file("merged.pcapng");
        let args = [
            OsStr::new("-a"),
            "-F".as_ref(),
            "pcapng".as_ref(),
            "-w".as_ref(),
        ];
        let files = [merged.as_os_str(), input.as_os_str(), sll.as_os_str()];
        wireshark_tool("mergecap", &[&args[..], &files[..]].concat());
        let frames = read(&merged);
        assert_eq!(
            frames,
            renumbered(original.iter().cloned().chain(sll_frames))
        );
        assert_eq!(our_view(&frames, &[]), tshark_view(&merged));
    }

    /// Linux cooked captures (SLL, SLL2) of valid.pcap: written, read back, and decoded by
    /// tshark exactly as the Ethernet original above the link layer.
    #[test]
    fn linux_cooked_captures() {
        let dir = TempDir::new("sll");
        let input = vector("crafted/valid.pcap");
        let ethernet = read(&input);
        let protocols = |path: &Path| -> Vec<String> {
            let args = [
                "-n",
                "-r",
                path.to_str().unwrap(),
                "-T",
                "fields",
                "-e",
                "frame.protocols",
            ];
            wireshark_tool("tshark", &args)
                .lines()
                .map(|l| l.split_once(':').map_or("", |(_, above)| above).to_owned())
                .collect()
        };
        let reference = protocols(&input);
        assert!(reference.iter().all(|p| p.contains("infiniband")));
        for (v2, link) in [(false, LinkType::LinuxSll), (true, LinkType::LinuxSll2)] {
            let path = dir.file(&format!("{link:?}.pcap"));
            let cooked = to_linux_sll(&ethernet, v2);
            write_pcap(&path, link, &as_records(&cooked)).unwrap();
            assert_eq!(read(&path), cooked);
            assert_eq!(protocols(&path), reference, "{link:?}");
        }
    }

    #[test]
    fn hand_built_pcapng() {
        let dir = TempDir::new("handmade");
        let path = dir.file("h.pcapng");
        let (bytes, expected) = sample_pcapng();
        std::fs::write(&path, bytes).unwrap();
        let frames = read(&path);
        assert_eq!(frames, expected);
        // Frames 3 and 4 are Simple Packet Blocks. Wireshark shows the custom block as
        // frame 2; it is not a packet.
        let mut wireshark = tshark_view(&path);
        assert_eq!(wireshark.remove(1), (2, String::new(), 8, 8));
        assert_eq!(our_view(&frames, &[3, 4]), wireshark);
    }

    #[test]
    fn errors_name_the_file_and_the_fault() {
        let dir = TempDir::new("errors");
        let check = |name: &str, bytes: &[u8], wanted: &str| {
            let path = dir.file(name);
            std::fs::write(&path, bytes).unwrap();
            let e = read_frames(&path).unwrap_err();
            let message = e.to_string();
            assert!(
                message.starts_with(&path.display().to_string()),
                "{message}"
            );
            assert!(message.contains(wanted), "{message:?} lacks {wanted:?}");
            e.kind
        };
        let e = read_frames(&dir.file("absent.pcap")).unwrap_err();
        assert!(matches!(e.kind, CaptureErrorKind::Io(_)) && e.to_string().contains("absent.pcap"));

        check(
            "empty.pcap",
            b"",
            "not a pcap or pcapng file (the file is empty)",
        );
        check(
            "text.pcap",
            b"hello world",
            "not a pcap or pcapng file (it starts with 68 65 6c 6c)",
        );

        let pcap = sample_pcap();
        check(
            "short-header.pcap",
            &pcap[..20],
            "truncated: pcap file header at byte 0",
        );
        let cut = pcap.len() - 1;
        let last = 5;
        check(
            "cut.pcap",
            &pcap[..cut],
            &format!("truncated: packet record {last} at byte"),
        );
        let mut other_link = pcap.clone();
        other_link[20..24].copy_from_slice(&147u32.to_le_bytes());
        let kind = check("link147.pcap", &other_link, "unsupported link type 147");
        assert!(matches!(kind, CaptureErrorKind::UnsupportedLinkType(147)));

        let mut ng = PcapNg::new(false);
        ng.idb(147, 0, &[]);
        ng.epb(0, 0, &[1, 2, 3], 3);
        check("link147.pcapng", &ng.out, "unsupported link type 147");

        let mut ng = PcapNg::new(true);
        ng.idb(1, 0, &[]);
        ng.epb(1, 0, &[1, 2, 3], 3);
        let kind = check("iface.pcapng", &ng.out, "names interface 1");
        assert!(matches!(
            kind,
            CaptureErrorKind::UnknownInterface {
                interface_id: 1,
                ..
            }
        ));

        let mut ng = PcapNg::new(false);
        ng.idb(1, 0, &[]);
        let mut body = Vec::new();
        for v in [0, 0, 0, 9, 9] {
            ng.put32(&mut body, v); // captured length 9, but no data follows
        }
        ng.block(PCAPNG_ENHANCED_PACKET_BLOCK, &body);
        check(
            "overrun.pcapng",
            &ng.out,
            "malformed pcapng packet block (frame 1) at byte 48",
        );

        let (ng, _) = sample_pcapng();
        check(
            "cut.pcapng",
            &ng[..ng.len() - 2],
            "truncated: pcapng block at byte",
        );
    }

    /// Every prefix of a file reads as a prefix of its frames when it ends on a record
    /// boundary, and as a truncation error otherwise.
    #[test]
    fn truncated_files_are_errors() {
        let pcap = sample_pcap();
        let mut boundaries = vec![24];
        while let Some(&at) = boundaries.last().filter(|&&at| at < pcap.len()) {
            let incl_len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap());
            boundaries.push(at + 16 + incl_len as usize);
        }
        let (ng, _) = sample_pcapng();
        let mut ng_boundaries = vec![0];
        while let Some(&at) = ng_boundaries.last().filter(|&&at| at < ng.len()) {
            let le = u32::from_le_bytes(ng[at + 4..at + 8].try_into().unwrap());
            let len = if le % 4 == 0 && le as usize <= ng.len() - at {
                le
            } else {
                le.swap_bytes()
            };
            ng_boundaries.push(at + len as usize);
        }
        for (bytes, boundaries) in [(pcap, boundaries), (ng, ng_boundaries)] {
            let all = parse_capture(&bytes).unwrap();
            for cut in 0..bytes.len() {
                match parse_capture(&bytes[..cut]) {
                    Ok(frames) => {
                        assert!(
                            boundaries.contains(&cut),
                            "cut {cut} read as {} frames",
                            frames.len()
                        );
                        assert_eq!(frames, all[..frames.len()]);
                    }
                    Err(CaptureErrorKind::NotACapture { .. }) => assert!(cut < 4),
                    Err(CaptureErrorKind::Truncated { .. }) => {
                        assert!(!boundaries.contains(&cut), "cut {cut}")
                    }
                    Err(other) => panic!("cut {cut}: {other:?}"),
                }
            }
        }
    }

    /// Random corruption never panics (the result itself may be anything).
    #[test]
    fn corrupted_files_never_panic() {
        let (ng, _) = sample_pcapng();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for original in [sample_pcap(), ng] {
            for _ in 0..20_000 {
                let mut bytes = original.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % bytes.len() as u64) as usize;
                    bytes[at] = match next() % 4 {
                        0 => 0,
                        1 => 0xFF,
                        _ => next() as u8,
                    };
                }
                let len = bytes.len() - (next() % 3 == 0) as usize * (next() % 16) as usize;
                let _ = parse_capture(&bytes[..len]);
            }
        }
    }

    // ---- helpers that build files ----

    /// The first five frames of valid.pcap, as a little-endian microsecond pcap.
    fn sample_pcap() -> Vec<u8> {
        let bytes = std::fs::read(vector("crafted/valid.pcap")).unwrap();
        let mut end = 24;
        for _ in 0..5 {
            end += 16 + u32::from_le_bytes(bytes[end + 8..end + 12].try_into().unwrap()) as usize;
        }
        bytes[..end].to_vec()
    }

    /// Rewrites a little-endian nanosecond pcap big-endian, in nanoseconds or (truncating)
    /// microseconds.
    fn big_endian_pcap(le: &[u8], nanos: bool) -> Vec<u8> {
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
    fn to_linux_sll(frames: &[Frame], v2: bool) -> Vec<Frame> {
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
    struct PcapNg {
        big: bool,
        out: Vec<u8>,
    }

    impl PcapNg {
        /// Starts a section (Section Header Block).
        fn new(big: bool) -> Self {
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

        fn put32(&self, out: &mut Vec<u8>, v: u32) {
            out.extend(if self.big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            });
        }

        fn pad(out: &mut Vec<u8>) {
            out.resize(out.len().next_multiple_of(4), 0);
        }

        fn block(&mut self, block_type: u32, body: &[u8]) {
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

        fn idb(&mut self, linktype: u16, snaplen: u32, options: &[(u16, &[u8])]) {
            let mut body = Vec::new();
            self.put16(&mut body, linktype);
            self.put16(&mut body, 0);
            self.put32(&mut body, snaplen);
            self.options(&mut body, options, true);
            self.block(1, &body);
        }

        fn epb_with(
            &mut self,
            iface: u32,
            ticks: u64,
            data: &[u8],
            orig: u32,
            opts: &[(u16, &[u8])],
        ) {
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

        fn epb(&mut self, iface: u32, ticks: u64, data: &[u8], orig: u32) {
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
    fn sample_pcapng() -> (Vec<u8>, Vec<Frame>) {
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
}
