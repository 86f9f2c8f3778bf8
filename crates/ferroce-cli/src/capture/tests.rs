//! Tests of [`super`]: reading and writing checked against the shared vectors and
//! against `tshark`, `editcap` and `mergecap`; errors, truncation and corruption.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

mod files;
use files::*;

/// A fresh directory under the system temp dir, removed on drop (also when a test fails).
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("ferroce-capture-{test}-{}-{n}", std::process::id()));
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
    let too_long: Vec<(Duration, &[u8])> = vec![(Duration::ZERO, b"ok"), (Duration::ZERO, &big)];
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

/// `if_speed` (option 8 of an Interface Description Block) is reported
/// with each frame of its interface; classic pcap has none.
#[test]
fn pcapng_interface_speed_is_reported() {
    const IF_SPEED: u16 = 8;
    let mut ng = PcapNg::new(false);
    let speed = 25_000_000_000u64.to_le_bytes();
    ng.idb(1, 0, &[(IF_SPEED, &speed)]);
    ng.idb(1, 0, &[]);
    ng.epb(0, 0, &[0xaa; 60], 60);
    ng.epb(1, 0, &[0xbb; 60], 60);
    let mut r = FrameReader::new(&ng.out[..]);
    assert!(r.next().unwrap().is_ok());
    assert_eq!(r.link_speed_bps(), Some(25_000_000_000));
    assert!(r.next().unwrap().is_ok());
    assert_eq!(r.link_speed_bps(), None);
    let classic = sample_pcap();
    let mut pcap = FrameReader::new(&classic[..]);
    assert!(pcap.next().unwrap().is_ok());
    assert_eq!(pcap.link_speed_bps(), None);
}
