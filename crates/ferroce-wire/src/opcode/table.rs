//! The per-opcode table data: each operation's headers and meaning, how each
//! transport adds its own headers, and the full names, built at compile time.

use super::{ExtHeader, ExtSet, Kind, OpcodeInfo, Position, Transport};

// The operation is the low five bits; the same operation exists in several
// transports. `Op` is that low part plus its headers.
struct Op {
    name: &'static str,
    kind: Kind,
    position: Position,
    headers: ExtSet,
    payload: bool,
}

pub(super) const E: ExtSet = ExtSet::EMPTY;

const fn op(
    name: &'static str,
    kind: Kind,
    position: Position,
    headers: ExtSet,
    payload: bool,
) -> Option<Op> {
    Some(Op {
        name,
        kind,
        position,
        headers,
        payload,
    })
}

const fn ops(low: u8) -> Option<Op> {
    use ExtHeader::*;
    use Kind::*;
    use Position::*;
    match low {
        0x00 => op("SEND_FIRST", Send, First, E, true),
        0x01 => op("SEND_MIDDLE", Send, Middle, E, true),
        0x02 => op("SEND_LAST", Send, Last, E, true),
        0x03 => op("SEND_LAST_WITH_IMMEDIATE", Send, Last, E.with(ImmDt), true),
        0x04 => op("SEND_ONLY", Send, Only, E, true),
        0x05 => op("SEND_ONLY_WITH_IMMEDIATE", Send, Only, E.with(ImmDt), true),
        0x06 => op("RDMA_WRITE_FIRST", Write, First, E.with(Reth), true),
        0x07 => op("RDMA_WRITE_MIDDLE", Write, Middle, E, true),
        0x08 => op("RDMA_WRITE_LAST", Write, Last, E, true),
        0x09 => op(
            "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            Write,
            Last,
            E.with(ImmDt),
            true,
        ),
        0x0A => op("RDMA_WRITE_ONLY", Write, Only, E.with(Reth), true),
        0x0B => op(
            "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            Write,
            Only,
            E.with(Reth).with(ImmDt),
            true,
        ),
        0x0C => op("RDMA_READ_REQUEST", ReadRequest, Only, E.with(Reth), false),
        0x0D => op(
            "RDMA_READ_RESPONSE_FIRST",
            ReadResponse,
            First,
            E.with(Aeth),
            true,
        ),
        0x0E => op("RDMA_READ_RESPONSE_MIDDLE", ReadResponse, Middle, E, true),
        0x0F => op(
            "RDMA_READ_RESPONSE_LAST",
            ReadResponse,
            Last,
            E.with(Aeth),
            true,
        ),
        0x10 => op(
            "RDMA_READ_RESPONSE_ONLY",
            ReadResponse,
            Only,
            E.with(Aeth),
            true,
        ),
        0x11 => op("ACKNOWLEDGE", Ack, Only, E.with(Aeth), false),
        0x12 => op(
            "ATOMIC_ACKNOWLEDGE",
            AtomicAck,
            Only,
            E.with(Aeth).with(AtomicAckEth),
            false,
        ),
        0x13 => op("COMPARE_SWAP", Atomic, Only, E.with(AtomicEth), false),
        0x14 => op("FETCH_ADD", Atomic, Only, E.with(AtomicEth), false),
        0x16 => op("SEND_LAST_WITH_INVALIDATE", Send, Last, E.with(Ieth), true),
        0x17 => op("SEND_ONLY_WITH_INVALIDATE", Send, Only, E.with(Ieth), true),
        0x1C => op("FLUSH", Flush, Only, E.with(Feth).with(Reth), false),
        0x1D => op("ATOMIC_WRITE", AtomicWrite, Only, E.with(Reth), true),
        _ => None,
    }
}

const fn build(code: u8) -> Option<OpcodeInfo> {
    use ExtHeader::*;
    let low = code & 0x1f;
    let (transport, o) = match code >> 5 {
        0 => match ops(low) {
            Some(o) => (Transport::Rc, o),
            None => return None,
        },
        1 if low <= 0x0b => match ops(low) {
            Some(o) => (Transport::Uc, o),
            None => return None,
        },
        2 if low <= 0x14 => match ops(low) {
            Some(o) => {
                let pre = if o.kind.is_response() {
                    E.with(Rdeth)
                } else {
                    E.with(Rdeth).with(Deth)
                };
                let headers = ExtSet(pre.0 | o.headers.0);
                (Transport::Rd, Op { headers, ..o })
            }
            None => return None,
        },
        2 if low == 0x15 => (
            Transport::Rd,
            Op {
                name: "RESYNC",
                kind: Kind::Resync,
                position: Position::Only,
                headers: E.with(Rdeth).with(Deth),
                payload: false,
            },
        ),
        3 if low == 0x04 || low == 0x05 => match ops(low) {
            Some(o) => {
                let headers = ExtSet(o.headers.0 | Deth.bit());
                (Transport::Ud, Op { headers, ..o })
            }
            None => return None,
        },
        4 if low == 0x01 => (
            Transport::Cnp,
            Op {
                name: "CNP",
                kind: Kind::Cnp,
                position: Position::Only,
                headers: E.with(CnpReserved),
                payload: false,
            },
        ),
        5 if low <= 0x17 => match ops(low) {
            Some(o) => {
                let headers = if o.kind.is_response() {
                    o.headers
                } else {
                    ExtSet(o.headers.0 | Xrceth.bit())
                };
                (Transport::Xrc, Op { headers, ..o })
            }
            None => return None,
        },
        _ => return None,
    };
    let headers = o.headers;
    let mut offsets = [u8::MAX; 11];
    let mut i = 0;
    while i < ExtHeader::ALL.len() {
        if let Some(off) = headers.offset(ExtHeader::ALL[i]) {
            offsets[i] = off as u8;
        }
        i += 1;
    }
    let immediate = headers.contains(ImmDt);
    let consumes_recv = match o.kind {
        Kind::Send => o.position.starts(),
        Kind::Write => immediate,
        _ => false,
    };
    Some(OpcodeInfo {
        name: NAMES[code as usize],
        operation: o.name,
        transport,
        headers,
        payload: o.payload,
        response: o.kind.is_response(),
        kind: o.kind,
        position: o.position,
        immediate,
        invalidate: headers.contains(Ieth),
        consumes_recv,
        headers_len: headers.len(),
        offsets,
    })
}

pub(super) const TABLE: [Option<OpcodeInfo>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = build(i as u8);
        i += 1;
    }
    t
};

/// Full opcode names indexed by code; `""` where the code is unknown. A const
/// fn cannot concatenate strings, so they are spelled out; the tests check
/// them against the transport and operation of each entry.
pub(super) const NAMES: [&str; 256] = {
    let mut n = [""; 256];
    let rc = [
        "RC_SEND_FIRST",
        "RC_SEND_MIDDLE",
        "RC_SEND_LAST",
        "RC_SEND_LAST_WITH_IMMEDIATE",
        "RC_SEND_ONLY",
        "RC_SEND_ONLY_WITH_IMMEDIATE",
        "RC_RDMA_WRITE_FIRST",
        "RC_RDMA_WRITE_MIDDLE",
        "RC_RDMA_WRITE_LAST",
        "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "RC_RDMA_WRITE_ONLY",
        "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "RC_RDMA_READ_REQUEST",
        "RC_RDMA_READ_RESPONSE_FIRST",
        "RC_RDMA_READ_RESPONSE_MIDDLE",
        "RC_RDMA_READ_RESPONSE_LAST",
        "RC_RDMA_READ_RESPONSE_ONLY",
        "RC_ACKNOWLEDGE",
        "RC_ATOMIC_ACKNOWLEDGE",
        "RC_COMPARE_SWAP",
        "RC_FETCH_ADD",
        "",
        "RC_SEND_LAST_WITH_INVALIDATE",
        "RC_SEND_ONLY_WITH_INVALIDATE",
        "",
        "",
        "",
        "",
        "RC_FLUSH",
        "RC_ATOMIC_WRITE",
    ];
    let uc = [
        "UC_SEND_FIRST",
        "UC_SEND_MIDDLE",
        "UC_SEND_LAST",
        "UC_SEND_LAST_WITH_IMMEDIATE",
        "UC_SEND_ONLY",
        "UC_SEND_ONLY_WITH_IMMEDIATE",
        "UC_RDMA_WRITE_FIRST",
        "UC_RDMA_WRITE_MIDDLE",
        "UC_RDMA_WRITE_LAST",
        "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "UC_RDMA_WRITE_ONLY",
        "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    ];
    let rd = [
        "RD_SEND_FIRST",
        "RD_SEND_MIDDLE",
        "RD_SEND_LAST",
        "RD_SEND_LAST_WITH_IMMEDIATE",
        "RD_SEND_ONLY",
        "RD_SEND_ONLY_WITH_IMMEDIATE",
        "RD_RDMA_WRITE_FIRST",
        "RD_RDMA_WRITE_MIDDLE",
        "RD_RDMA_WRITE_LAST",
        "RD_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "RD_RDMA_WRITE_ONLY",
        "RD_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "RD_RDMA_READ_REQUEST",
        "RD_RDMA_READ_RESPONSE_FIRST",
        "RD_RDMA_READ_RESPONSE_MIDDLE",
        "RD_RDMA_READ_RESPONSE_LAST",
        "RD_RDMA_READ_RESPONSE_ONLY",
        "RD_ACKNOWLEDGE",
        "RD_ATOMIC_ACKNOWLEDGE",
        "RD_COMPARE_SWAP",
        "RD_FETCH_ADD",
        "RD_RESYNC",
    ];
    let xrc = [
        "XRC_SEND_FIRST",
        "XRC_SEND_MIDDLE",
        "XRC_SEND_LAST",
        "XRC_SEND_LAST_WITH_IMMEDIATE",
        "XRC_SEND_ONLY",
        "XRC_SEND_ONLY_WITH_IMMEDIATE",
        "XRC_RDMA_WRITE_FIRST",
        "XRC_RDMA_WRITE_MIDDLE",
        "XRC_RDMA_WRITE_LAST",
        "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "XRC_RDMA_WRITE_ONLY",
        "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
        "XRC_RDMA_READ_REQUEST",
        "XRC_RDMA_READ_RESPONSE_FIRST",
        "XRC_RDMA_READ_RESPONSE_MIDDLE",
        "XRC_RDMA_READ_RESPONSE_LAST",
        "XRC_RDMA_READ_RESPONSE_ONLY",
        "XRC_ACKNOWLEDGE",
        "XRC_ATOMIC_ACKNOWLEDGE",
        "XRC_COMPARE_SWAP",
        "XRC_FETCH_ADD",
        "",
        "XRC_SEND_LAST_WITH_INVALIDATE",
        "XRC_SEND_ONLY_WITH_INVALIDATE",
    ];
    let mut i = 0;
    while i < rc.len() {
        n[i] = rc[i];
        i += 1;
    }
    i = 0;
    while i < uc.len() {
        n[0x20 + i] = uc[i];
        i += 1;
    }
    i = 0;
    while i < rd.len() {
        n[0x40 + i] = rd[i];
        i += 1;
    }
    n[0x64] = "UD_SEND_ONLY";
    n[0x65] = "UD_SEND_ONLY_WITH_IMMEDIATE";
    n[0x81] = "CNP";
    i = 0;
    while i < xrc.len() {
        n[0xa0 + i] = xrc[i];
        i += 1;
    }
    n
};
