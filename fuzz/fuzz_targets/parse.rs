//! Fuzzes the packet parser of ferroce-wire. The first input byte selects the
//! link type (0 Ethernet, 1 Linux cooked v1, 2 Linux cooked v2, 3 raw IP;
//! taken modulo 4, as scripts/fuzz-seeds.py writes it) and the rest is the
//! frame. The frame goes through `locate`, `Located::transport_guess`,
//! `Located::parse`, the ICRC check and `RoceRepr::parse`; a parsed repr is
//! emitted again with the frame's own payload and must parse back to the same
//! repr (its length fields filled in, as `emit` writes them) with a good ICRC.
//! The same bytes also go to `TransportPacket::new_checked` +
//! `TransportRepr::parse` (with the same round trip) and to `Mad::parse` (with
//! an emit/parse round trip), and so does the payload of a parsed frame.
//!
//! Any panic is a bug: ferroce-wire promises that no function panics on any
//! input bytes.
#![no_main]

use core::fmt::{self, Write};

use ferroce_wire::mad::{CmMessage, MAD_LEN, Mad};
use ferroce_wire::{
    LinkType, Located, RoceRepr, RoceVersion, TransportPacket, TransportRepr, locate,
};
use libfuzzer_sys::fuzz_target;

/// The link type of each selector value (modulo 4).
const LINKS: [LinkType; 4] = [
    LinkType::Ethernet,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::RawIp,
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let link = LINKS[usize::from(selector) % LINKS.len()];
    roce(link, frame);
    transport(frame);
    mad(frame);
});

/// The whole-frame path: locate, parse, ICRC, repr, and the emit round trip.
fn roce(link: LinkType, frame: &[u8]) {
    let Some(located) = locate(link, frame) else {
        return;
    };
    transport(located.transport_guess());
    let parsed = match located.parse() {
        Ok(f) => f,
        Err(e) => return show(&e),
    };
    let _ = parsed.icrc_ok();
    if let Err(e) = parsed.verify_icrc() {
        show(&e);
    }
    touch(&parsed.transport);
    mad(parsed.transport.payload());
    match RoceRepr::parse(&parsed) {
        Ok(repr) => round_trip(&repr, parsed.transport.payload()),
        Err(e) => show(&e),
    }
}

/// Emits `repr` with `payload` into a fresh buffer and checks that the bytes
/// parse back to the same repr, with the lengths `emit` fills in, and that
/// their ICRC verifies.
fn round_trip(repr: &RoceRepr, payload: &[u8]) {
    let len = repr.buffer_len();
    let mut buf = vec![0u8; len];
    match repr.emit(&mut buf, payload) {
        Ok(n) => assert_eq!(n, len, "emit wrote {n} bytes, buffer_len says {len}"),
        // The only refusal a parsed repr may meet: too big for the 16-bit
        // length fields (not reachable with libFuzzer's default -max_len).
        Err(e) if len > 0xffff => return show(&e),
        Err(e) => panic!("emit refused a parsed repr: {e}\n{repr:?}"),
    }
    let mut expected = *repr;
    expected.fill_lengths();
    let version = repr.network.version();
    let located = match (repr.ethernet, version) {
        (Some(_), _) => locate(LinkType::Ethernet, &buf),
        // A GRH alone does not say it is RoCE v1: no link type can find it.
        (None, RoceVersion::V1) => Some(Located {
            version,
            ethernet: None,
            l3: &buf,
        }),
        (None, _) => locate(LinkType::RawIp, &buf),
    };
    let Some(located) = located else {
        panic!("emitted frame is not RoCE\n{repr:?}\n{buf:02x?}");
    };
    assert_eq!(located.version, version, "emitted frame changed version");
    let again = match located.parse() {
        Ok(f) => f,
        Err(e) => panic!("emitted frame does not parse: {e}\n{repr:?}\n{buf:02x?}"),
    };
    let back = match RoceRepr::parse(&again) {
        Ok(r) => r,
        Err(e) => panic!("emitted frame's repr does not parse: {e}\n{repr:?}\n{buf:02x?}"),
    };
    assert_eq!(back, expected, "emit/parse round trip changed the repr");
    assert_eq!(again.transport.payload(), payload, "payload changed");
    assert!(
        again.icrc_ok(),
        "emitted frame has a bad ICRC: {:?}\n{buf:02x?}",
        again.verify_icrc()
    );
}

/// The transport alone: `new_checked`, every accessor, `TransportRepr::parse`
/// and its emit/parse round trip.
fn transport(bytes: &[u8]) {
    let packet = match TransportPacket::new_checked(bytes) {
        Ok(p) => p,
        Err(e) => return show(&e),
    };
    touch(&packet);
    let repr = match TransportRepr::parse(&packet) {
        Ok(r) => r,
        Err(e) => return show(&e),
    };
    let payload = packet.payload();
    let mut buf = vec![0u8; repr.buffer_len()];
    let n = match repr.emit(&mut buf, payload) {
        Ok(n) => n,
        Err(e) => panic!("emit refused a parsed transport repr: {e}\n{repr:?}"),
    };
    assert_eq!(n, buf.len(), "transport emit length");
    let again = match TransportPacket::new_checked(&buf[..]) {
        Ok(p) => p,
        Err(e) => panic!("emitted transport does not check: {e}\n{repr:?}\n{buf:02x?}"),
    };
    match TransportRepr::parse(&again) {
        Ok(back) => assert_eq!(back, repr, "transport emit/parse round trip"),
        Err(e) => panic!("emitted transport does not parse: {e}\n{repr:?}\n{buf:02x?}"),
    }
    assert_eq!(again.payload(), payload, "transport payload changed");
}

/// Reads every field of a checked transport view: none may panic.
fn touch<T: AsRef<[u8]>>(p: &TransportPacket<T>) {
    let bth = p.bth();
    let _ = (bth.opcode(), bth.pad_count(), bth.tver(), bth.dest_qp());
    let _ = (bth.psn(), bth.resv6(), bth.resv7(), p.info().name);
    let _ = (p.rdeth().map(|v| v.value()), p.xrceth().map(|v| v.value()));
    let _ = p.deth().map(|v| (v.qkey(), v.src_qp(), v.reserved()));
    let _ = p.reth().map(|v| (v.va(), v.rkey(), v.dma_len()));
    let _ = p
        .atomic_eth()
        .map(|v| (v.va(), v.rkey(), v.swap_add(), v.compare()));
    let _ = p.aeth().map(|v| (v.syndrome(), v.msn()));
    let _ = p.atomic_ack_eth().map(|v| v.orig());
    let _ = (p.feth(), p.imm(), p.ieth(), p.cnp_reserved());
    let _ = (p.payload(), p.pad(), p.without_icrc(), p.icrc());
    if let Some(aeth) = p.aeth() {
        let _ = write!(Sink, "{}", aeth.syndrome());
    }
}

/// `Mad::parse`, and for a MAD that parses, emit over a copy of the input
/// (the class data of a non-CM MAD is the caller's) and parse back.
fn mad(bytes: &[u8]) {
    let mad = match Mad::parse(bytes) {
        Ok(m) => m,
        Err(e) => return show(&e),
    };
    let _ = mad.header.attribute_name();
    if let Some(cm) = &mad.cm {
        let _ = (cm.name(), cm.local_comm_id(), cm.remote_comm_id());
        let _ = cm.private_data();
        match cm {
            CmMessage::Req(req) => {
                let _ = req.ip_cm();
            }
            CmMessage::Rej(rej) => {
                let _ = rej.ari_bytes();
            }
            _ => {}
        }
    }
    let mut buf = [0u8; MAD_LEN];
    buf.copy_from_slice(&bytes[..MAD_LEN]);
    if let Err(e) = mad.emit(&mut buf) {
        panic!("emit refused a parsed MAD: {e}\n{mad:?}");
    }
    match Mad::parse(&buf) {
        Ok(back) => assert_eq!(back, mad, "MAD emit/parse round trip"),
        Err(e) => panic!("emitted MAD does not parse: {e}\n{mad:?}"),
    }
}

/// Formats an error both ways (Display and Debug must not panic either).
fn show(e: &ferroce_wire::Error) {
    let _ = write!(Sink, "{e} {e:?}");
}

/// A `fmt::Write` that drops what it is given: formatting without allocating.
struct Sink;

impl Write for Sink {
    fn write_str(&mut self, _: &str) -> fmt::Result {
        Ok(())
    }
}
