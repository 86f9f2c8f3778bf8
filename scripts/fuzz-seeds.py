#!/usr/bin/env python3
"""Build the seed corpus of the `parse` fuzz target from classic pcap files.

Each frame becomes one file, named by the SHA-1 of its content: a selector byte
for the capture's link type (0 Ethernet, 1 Linux cooked v1, 2 Linux cooked v2,
3 raw IP; the order of `LinkType` in fuzz/fuzz_targets/parse.rs) followed by
the captured bytes. Frames of other link types are skipped. Reads classic pcap
in both byte orders, with microsecond or nanosecond timestamps (not pcapng).

Sources, unless files are given on the command line: every *.pcap under
$FERROCE_SHARED/vectors (default: ../shared beside the repository) and
captures/sample.pcap. Output: fuzz/corpus/parse/ unless --out is given.
Standard library only.

    scripts/fuzz-seeds.py [--out DIR] [--clean] [PCAP ...]
"""

import argparse
import hashlib
import os
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# pcap LINKTYPE_* -> selector byte of the fuzz target.
SELECTORS = {
    1: 0,  # Ethernet
    113: 1,  # Linux cooked capture v1
    276: 2,  # Linux cooked capture v2
    101: 3,  # raw IP
    228: 3,  # raw IPv4
    229: 3,  # raw IPv6
}

MAGICS = {
    b"\xd4\xc3\xb2\xa1": "<",  # little-endian, microseconds
    b"\x4d\x3c\xb2\xa1": "<",  # little-endian, nanoseconds
    b"\xa1\xb2\xc3\xd4": ">",  # big-endian, microseconds
    b"\xa1\xb2\x3c\x4d": ">",  # big-endian, nanoseconds
}


def frames(path):
    """Yields (linktype, frame bytes) for each record of a classic pcap file."""
    data = path.read_bytes()
    if len(data) < 24 or data[:4] not in MAGICS:
        raise ValueError(f"{path}: not a classic pcap file")
    endian = MAGICS[data[:4]]
    linktype = struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF
    off = 24
    while off + 16 <= len(data):
        _sec, _frac, incl, _orig = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        if off + incl > len(data):
            print(f"{path}: truncated record at byte {off - 16}", file=sys.stderr)
            break
        yield linktype, data[off : off + incl]
        off += incl


def default_sources():
    shared = Path(os.environ.get("FERROCE_SHARED", REPO.parent / "shared"))
    out = sorted((shared / "vectors").rglob("*.pcap"))
    if not out:
        print(f"fuzz-seeds: no *.pcap under {shared / 'vectors'}", file=sys.stderr)
    sample = REPO / "captures" / "sample.pcap"
    if sample.is_file():
        out.append(sample)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "fuzz" / "corpus" / "parse")
    ap.add_argument("--clean", action="store_true", help="delete the files in --out first")
    ap.add_argument("pcaps", nargs="*", type=Path)
    args = ap.parse_args()

    sources = args.pcaps or default_sources()
    if not sources:
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    if args.clean:
        for old in args.out.iterdir():
            if old.is_file():
                old.unlink()
    written = seen = skipped = 0
    names = set()
    for path in sources:
        try:
            records = list(frames(path))
        except (OSError, ValueError) as e:
            print(f"fuzz-seeds: {e}", file=sys.stderr)
            return 1
        for linktype, frame in records:
            seen += 1
            selector = SELECTORS.get(linktype)
            if selector is None:
                skipped += 1
                continue
            blob = bytes([selector]) + frame
            name = hashlib.sha1(blob).hexdigest()
            if name in names:
                continue
            names.add(name)
            target = args.out / name
            if not target.exists():
                target.write_bytes(blob)
                written += 1
    total = sum(f.stat().st_size for f in args.out.iterdir() if f.is_file())
    print(
        f"fuzz-seeds: {seen} frames from {len(sources)} files, {len(names)} distinct, "
        f"{written} new, {skipped} of other link types; {args.out}: "
        f"{sum(1 for f in args.out.iterdir() if f.is_file())} files, {total} bytes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
