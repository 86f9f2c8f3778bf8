//! `ferroce dump`: one line (or one JSON object) per RoCE packet of a capture.
//!
//! The capture is read as a stream, one frame at a time, so memory stays
//! the same for a capture of any size (or an endless one on a pipe).
//! Frames that are not RoCE are skipped silently, as tshark's display filter
//! `infiniband` would. A malformed RoCE packet is printed with the reason;
//! `--check` turns any malformed packet or bad ICRC into exit status 1.
//! MAC control frames (802.1Qbb PFC, 802.3x PAUSE) get a line of their own
//! in text mode ([`pfc`]); they are not RoCE and `--check` does not judge them.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::PathBuf;

use clap::Args;
use ferroce_wire::aeth::Syndrome;
use ferroce_wire::bth::Bth;
use ferroce_wire::mad::{CmMessage, Mad};
use ferroce_wire::roce::{Located, RoceFrame};
use ferroce_wire::{Error, Network, RoceVersion, TransportPacket};
use serde_json::{Map, Value, json};

use crate::capture::{CaptureError, CaptureErrorKind, Frame, FrameReader};
use crate::error::Error as CliError;

mod gso;
mod pfc;

/// Arguments of `ferroce dump`.
#[derive(Debug, Args)]
pub(crate) struct DumpArgs {
    /// A pcap or pcapng file (Ethernet, Linux cooked v1/v2 or raw IP);
    /// `-` reads standard input (e.g. `tcpdump -w - | ferroce dump -`).
    file: PathBuf,
    /// Print one JSON object per RoCE packet (the peercheck OURS.jsonl schema).
    #[arg(long)]
    json: bool,
    /// Exit with status 1 if any RoCE packet is malformed or has a bad ICRC.
    #[arg(long)]
    check: bool,
    /// Print nothing per packet; only the summary on standard error.
    #[arg(long, short)]
    quiet: bool,
    /// The captured link's speed in Mbit/s, to show PFC and PAUSE times in
    /// µs as well as in quanta (512 bit times each); without it, a pcapng
    /// interface's `if_speed` is used when it has one.
    #[arg(long, value_name = "MBPS", value_parser = clap::value_parser!(u32).range(1..))]
    link_mbps: Option<u32>,
}

/// Counts for the summary line.
#[derive(Debug, Default)]
struct Tally {
    frames: usize,
    roce: usize,
    malformed: usize,
    bad_icrc: usize,
    mac_control: usize,
    /// Super-frames cut into their packets, and the packets.
    super_frames: usize,
    segments: usize,
}

pub(crate) fn run(args: &DumpArgs) -> Result<bool, CliError> {
    let stdin = args.file.as_os_str() == "-";
    let name = if stdin {
        "standard input".into()
    } else {
        args.file.display().to_string()
    };
    let source: Box<dyn Read> = if stdin {
        Box::new(io::stdin().lock())
    } else {
        let file = File::open(&args.file).map_err(|e| CaptureError {
            path: args.file.clone(),
            kind: CaptureErrorKind::Io(e),
        })?;
        Box::new(file)
    };
    // Read a chunk at a time, one frame decoded at a time: memory stays
    // the same whatever the capture's length.
    let mut frames = FrameReader::new(source);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut tally = Tally::default();
    let mut first_ts = None;
    while let Some(frame) = frames.next() {
        let frame = frame.map_err(|kind| CaptureError {
            path: name.clone().into(),
            kind,
        })?;
        tally.frames += 1;
        let first_ts = *first_ts.get_or_insert(frame.timestamp);
        let t = frame.timestamp.saturating_sub(first_ts).as_secs_f64();
        // The speed given, else the one the pcapng interface declares.
        let speed = args.link_mbps.or_else(|| {
            let mbps = frames.link_speed_bps()? / 1_000_000;
            u32::try_from(mbps).ok()
        });
        if let Some(line) = pfc::text_line(&frame, t, speed) {
            tally.mac_control += 1;
            if !args.quiet && !args.json && writeln!(out, "{line}").is_err() {
                return Ok(true);
            }
            continue;
        }
        if report(args, &mut out, &mut tally, &frame, t).is_err() {
            // Reader went away (e.g. `| head`): stop quietly.
            return Ok(true);
        }
    }
    let _ = out.flush();
    if tally.mac_control > 0 {
        eprintln!(
            "{name}: {} MAC control (PFC/PAUSE) frames",
            tally.mac_control
        );
    }
    if tally.super_frames > 0 {
        eprintln!(
            "{name}: {} segmentation-offload super-frames, cut into {} packets",
            tally.super_frames, tally.segments
        );
    }
    eprintln!(
        "{name}: {} frames, {} RoCE, {} malformed, {} bad ICRC",
        tally.frames, tally.roce, tally.malformed, tally.bad_icrc
    );
    Ok(!args.check || (tally.malformed == 0 && tally.bad_icrc == 0))
}

/// Judges, counts and prints one captured frame if it is RoCE; a
/// super-frame (see [`gso`]) as the packets it carries, each marked
/// `[GSO i/n]` (JSON: `"gso": [i, n]`). Fails only if the output is gone.
fn report(
    args: &DumpArgs,
    out: &mut impl Write,
    tally: &mut Tally,
    frame: &Frame,
    t: f64,
) -> io::Result<()> {
    let Some(located) = ferroce_wire::locate(frame.link, &frame.data) else {
        return Ok(());
    };
    let suspect = match judge(frame, located) {
        Verdict::Parsed { icrc_ok, .. } => !icrc_ok,
        Verdict::Malformed(Error::CaptureTruncated { .. }) => false,
        Verdict::Malformed(_) => true,
    };
    if suspect && let Some(cut) = gso::segments(frame, &located) {
        tally.super_frames += 1;
        let n = cut.len();
        for (i, data) in cut.into_iter().enumerate() {
            let segment = Frame {
                orig_len: data.len() as u32,
                data,
                ..*frame
            };
            let located = ferroce_wire::locate(segment.link, &segment.data)
                .expect("a segment that checked is RoCE");
            tally.segments += 1;
            show(args, out, tally, &segment, t, located, Some((i + 1, n)))?;
        }
        return Ok(());
    }
    show(args, out, tally, frame, t, located, None)
}

/// Counts and prints one RoCE packet (`part`: its place in a super-frame).
fn show(
    args: &DumpArgs,
    out: &mut impl Write,
    tally: &mut Tally,
    frame: &Frame,
    t: f64,
    located: Located<'_>,
    part: Option<(usize, usize)>,
) -> io::Result<()> {
    tally.roce += 1;
    let verdict = judge(frame, located);
    match &verdict {
        Verdict::Malformed(_) => tally.malformed += 1,
        Verdict::Parsed { icrc_ok: false, .. } => tally.bad_icrc += 1,
        Verdict::Parsed { .. } => {}
    }
    if args.quiet {
        return Ok(());
    }
    let line = if args.json {
        let mut record = json_record(frame, located, &verdict);
        if let (Some((i, n)), Some(m)) = (part, record.as_object_mut()) {
            m.insert("gso".into(), json!([i, n]));
        }
        record.to_string()
    } else {
        let mut line = text_line(frame, t, located, &verdict);
        if let Some((i, n)) = part {
            line.push_str(&format!(" [GSO {i}/{n}]"));
        }
        line
    };
    writeln!(out, "{line}")
}

enum Verdict<'a> {
    Parsed { frame: RoceFrame<'a>, icrc_ok: bool },
    Malformed(Error),
}

fn judge<'a>(frame: &Frame, located: Located<'a>) -> Verdict<'a> {
    if frame.data.len() < frame.orig_len as usize {
        return Verdict::Malformed(Error::CaptureTruncated {
            captured: frame.data.len(),
            on_wire: frame.orig_len as usize,
        });
    }
    match located.parse() {
        Ok(f) => Verdict::Parsed {
            icrc_ok: f.icrc_ok(),
            frame: f,
        },
        Err(e) => Verdict::Malformed(e),
    }
}

fn endpoints(located: Located<'_>, verdict: &Verdict<'_>) -> (String, String) {
    if let Verdict::Parsed { frame, .. } = verdict {
        return match frame.network {
            Network::V1 { grh } => (grh.src.to_string(), grh.dst.to_string()),
            Network::V2Ipv4 { ip, udp } => (
                format!("{}:{}", ip.src, udp.src_port),
                format!("{}:{}", ip.dst, udp.dst_port),
            ),
            Network::V2Ipv6 { ip, udp } => (
                format!("[{}]:{}", ip.src, udp.src_port),
                format!("[{}]:{}", ip.dst, udp.dst_port),
            ),
        };
    }
    // Best effort for a malformed packet: the raw address bytes, if present.
    let l3 = located.l3;
    match located.version {
        RoceVersion::V2Ipv4 if l3.len() >= 20 => (
            std::net::Ipv4Addr::new(l3[12], l3[13], l3[14], l3[15]).to_string(),
            std::net::Ipv4Addr::new(l3[16], l3[17], l3[18], l3[19]).to_string(),
        ),
        _ => ("?".into(), "?".into()),
    }
}

fn version_label(v: RoceVersion) -> &'static str {
    match v {
        RoceVersion::V1 => "RoCEv1",
        RoceVersion::V2Ipv4 => "RoCEv2",
        RoceVersion::V2Ipv6 => "RoCEv2/IPv6",
    }
}

fn text_line(frame: &Frame, t: f64, located: Located<'_>, verdict: &Verdict<'_>) -> String {
    let (src, dst) = endpoints(located, verdict);
    let mut s = format!(
        "{:>5} {:>11.6} {src} → {dst} {}",
        frame.number,
        t,
        version_label(located.version)
    );
    match verdict {
        Verdict::Parsed { frame: f, icrc_ok } => {
            let p = &f.transport;
            s.push_str(&qos_text(f));
            s.push_str(&transport_text(p));
            s.push_str(if *icrc_ok { " ICRC ok" } else { " ICRC BAD" });
            if !icrc_ok {
                s.push_str(&format!(
                    " (carries {:08x}, computed {:08x})",
                    p.icrc().swap_bytes(),
                    f.computed_icrc().swap_bytes()
                ));
            }
            if let Some(cm) = cm_text(p) {
                s.push_str(" | ");
                s.push_str(&cm);
            }
        }
        Verdict::Malformed(e) => {
            // Show what the BTH says, if there is one, then why it is bad.
            if let Ok(b) = Bth::new_checked(located.transport_guess()) {
                s.push_str(&format!(
                    " {} QP={:#08x} PSN={}",
                    b.opcode(),
                    b.dest_qp(),
                    b.psn()
                ));
            }
            s.push_str(&format!(" MALFORMED: {e}"));
        }
    }
    s
}

fn transport_text(p: &TransportPacket<&[u8]>) -> String {
    let bth = p.bth();
    let mut s = format!(
        " {} QP={:#08x} PSN={}",
        bth.opcode(),
        bth.dest_qp(),
        bth.psn()
    );
    for (flag, name) in [
        (bth.solicited(), "SE"),
        (bth.ack_req(), "AckReq"),
        (bth.mig_req(), "MigReq"),
        (bth.fecn(), "FECN"),
        (bth.becn(), "BECN"),
    ] {
        if flag {
            s.push(' ');
            s.push_str(name);
        }
    }
    if bth.pkey() != 0xffff {
        s.push_str(&format!(" P_Key={:#06x}", bth.pkey()));
    }
    if let Some(r) = p.rdeth() {
        s.push_str(&format!(" EECnxt={:#x}", r.value()));
    }
    if let Some(d) = p.deth() {
        s.push_str(&format!(" Q_Key={:#x} SrcQP={:#x}", d.qkey(), d.src_qp()));
    }
    if let Some(x) = p.xrceth() {
        s.push_str(&format!(" XRCSRQ={:#x}", x.value()));
    }
    if let Some(f) = p.feth() {
        s.push_str(&format!(" FETH={f:#010x}"));
    }
    if let Some(r) = p.reth() {
        s.push_str(&format!(
            " VA={:#x} R_Key={:#x} DMALen={}",
            r.va(),
            r.rkey(),
            r.dma_len()
        ));
    }
    if let Some(a) = p.atomic_eth() {
        s.push_str(&format!(
            " VA={:#x} R_Key={:#x} SwapAdd={:#x} Compare={:#x}",
            a.va(),
            a.rkey(),
            a.swap_add(),
            a.compare()
        ));
    }
    if let Some(a) = p.aeth() {
        s.push_str(&format!(" {} MSN={}", a.syndrome(), a.msn()));
    }
    if let Some(a) = p.atomic_ack_eth() {
        s.push_str(&format!(" Orig={:#x}", a.orig()));
    }
    if let Some(i) = p.imm() {
        s.push_str(&format!(" Imm={i:#010x}"));
    }
    if let Some(i) = p.ieth() {
        s.push_str(&format!(" Inval_R_Key={i:#x}"));
    }
    if p.info().payload {
        s.push_str(&format!(" len={}", p.payload().len()));
        if bth.pad_count() != 0 {
            s.push_str(&format!(" pad={}", bth.pad_count()));
        }
    }
    s
}

/// VLAN priority and IP DSCP/ECN, when not the defaults: what PFC and ECN act on.
fn qos_text(f: &RoceFrame<'_>) -> String {
    let mut s = String::new();
    if let Some(tag) = f.ethernet.and_then(|e| e.vlan) {
        s.push_str(&format!(" VLAN={} PCP={}", tag.vid, tag.pcp));
    }
    let (dscp, ecn) = match f.network {
        Network::V1 { grh } => (grh.dscp(), grh.ecn()),
        Network::V2Ipv4 { ip, .. } => (ip.dscp, ip.ecn),
        Network::V2Ipv6 { ip, .. } => (ip.dscp(), ip.ecn()),
    };
    if dscp != 0 {
        s.push_str(&format!(" DSCP={dscp}"));
    }
    s.push_str(match ecn {
        1 => " ECT(1)",
        2 => " ECT(0)",
        3 => " ECN=CE",
        _ => "",
    });
    s
}

/// The CM message of a MAD sent to QP1, as text.
fn cm_text(p: &TransportPacket<&[u8]>) -> Option<String> {
    if p.bth().dest_qp() != 1 || p.deth().is_none() {
        return None;
    }
    let mad = Mad::parse(p.payload()).ok()?;
    let h = mad.header;
    let Some(cm) = mad.cm else {
        return Some(format!(
            "MAD class={:#04x} method={:#04x} attr={:#06x} TID={:#x}",
            h.mgmt_class, h.method, h.attribute_id, h.transaction_id
        ));
    };
    Some(match cm {
        CmMessage::Req(r) => {
            let mut s = format!(
                "CM REQ comm_id={:#x} ServiceID={:#018x} QPN={:#x} PSN={} MTU={} retry={} rnr_retry={}",
                r.local_comm_id,
                r.service_id,
                r.local_qpn,
                r.starting_psn,
                r.path_packet_mtu,
                r.retry_count,
                r.rnr_retry_count
            );
            if let Some(ip) = r.ip_cm() {
                s.push_str(&format!(
                    " ip_cm {}:{} → {}:{}",
                    ip.source_ip, ip.source_port, ip.destination_ip, ip.destination_port
                ));
            }
            s
        }
        CmMessage::Rep(r) => format!(
            "CM REP comm_id={:#x}/{:#x} QPN={:#x} PSN={}",
            r.local_comm_id, r.remote_comm_id, r.local_qpn, r.starting_psn
        ),
        CmMessage::Rtu(r) => format!(
            "CM RTU comm_id={:#x}/{:#x}",
            r.local_comm_id, r.remote_comm_id
        ),
        CmMessage::Rej(r) => format!(
            "CM REJ comm_id={:#x}/{:#x} reason={}",
            r.local_comm_id, r.remote_comm_id, r.reason
        ),
        CmMessage::Dreq(r) => format!(
            "CM DREQ comm_id={:#x}/{:#x} remote_QPN={:#x}",
            r.local_comm_id, r.remote_comm_id, r.remote_qpn
        ),
        CmMessage::Drep(r) => format!(
            "CM DREP comm_id={:#x}/{:#x}",
            r.local_comm_id, r.remote_comm_id
        ),
        CmMessage::Mra(r) => format!(
            "CM MRA comm_id={:#x}/{:#x} timeout={}",
            r.local_comm_id, r.remote_comm_id, r.service_timeout
        ),
    })
}

fn json_record(frame: &Frame, located: Located<'_>, verdict: &Verdict<'_>) -> Value {
    let mut m = Map::new();
    m.insert("frame".into(), json!(frame.number));
    m.insert("roce".into(), json!(located.version.name()));
    let (src, dst) = endpoints(located, verdict);
    m.insert("src".into(), json!(src));
    m.insert("dst".into(), json!(dst));
    match verdict {
        Verdict::Malformed(e) => {
            m.insert("error".into(), json!(format!("{}: {e}", e.code())));
        }
        Verdict::Parsed { frame: f, icrc_ok } => {
            transport_json(&f.transport, &mut m);
            m.insert("icrc".into(), json!(hex(&f.transport.icrc_bytes())));
            m.insert("icrc_ok".into(), json!(icrc_ok));
        }
    }
    Value::Object(m)
}

fn transport_json(p: &TransportPacket<&[u8]>, m: &mut Map<String, Value>) {
    let b = p.bth();
    let op = b.opcode();
    m.insert("opcode".into(), json!(op.0));
    m.insert("opcode_name".into(), json!(op.to_string()));
    for (k, v) in [
        ("se", u32::from(b.solicited())),
        ("migreq", u32::from(b.mig_req())),
        ("padcnt", u32::from(b.pad_count())),
        ("tver", u32::from(b.tver())),
        ("pkey", u32::from(b.pkey())),
        ("fecn", u32::from(b.fecn())),
        ("becn", u32::from(b.becn())),
        ("dqpn", b.dest_qp()),
        ("ackreq", u32::from(b.ack_req())),
        ("psn", b.psn().value()),
    ] {
        m.insert(k.into(), json!(v));
    }
    if let Some(r) = p.rdeth() {
        m.insert("rdeth".into(), json!({"eecnxt": r.value()}));
    }
    if let Some(d) = p.deth() {
        m.insert("deth".into(), json!({"qkey": d.qkey(), "sqpn": d.src_qp()}));
    }
    if let Some(x) = p.xrceth() {
        m.insert("xrceth".into(), json!({"xrcsrq": x.value()}));
    }
    if let Some(r) = p.reth() {
        m.insert(
            "reth".into(),
            json!({"va": r.va(), "rkey": r.rkey(), "len": r.dma_len()}),
        );
    }
    if let Some(a) = p.atomic_eth() {
        m.insert(
            "atomic".into(),
            json!({"va": a.va(), "rkey": a.rkey(), "swap": a.swap_add(), "compare": a.compare()}),
        );
    }
    if let Some(a) = p.aeth() {
        let syn = a.syndrome();
        let mut o = json!({"syndrome": a.syndrome_byte(), "msn": a.msn(), "type": syn.kind()});
        match syn {
            Syndrome::Ack { credits } => o["credit_count"] = json!(credits),
            Syndrome::RnrNak { timer } => o["rnr_timer"] = json!(timer),
            Syndrome::Nak(code) => o["nak_code"] = json!(code.code()),
            Syndrome::Reserved { .. } => {}
        }
        m.insert("aeth".into(), o);
    }
    if let Some(a) = p.atomic_ack_eth() {
        m.insert("atomic_ack".into(), json!({"orig": a.orig()}));
    }
    if let Some(i) = p.imm() {
        m.insert("imm".into(), json!(i));
    }
    if let Some(i) = p.ieth() {
        m.insert("ieth".into(), json!(i));
    }
    m.insert("payload_len".into(), json!(p.payload().len()));
    if let Some(cm) = cm_text(p) {
        m.insert("cm".into(), json!(cm));
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
