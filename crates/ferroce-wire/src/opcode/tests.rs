//! Tests of the opcode table: its meaning columns and names against each other.

use super::table::{E, NAMES};
use super::*;
use ExtHeader::*;

/// The meaning columns against the names, read independently.
#[test]
fn meanings_agree_with_names() {
    for o in Opcode::all() {
        let i = o.info().unwrap();
        let n = i.operation;
        let position = if n.contains("FIRST") {
            Position::First
        } else if n.contains("MIDDLE") {
            Position::Middle
        } else if n.contains("LAST") {
            Position::Last
        } else {
            Position::Only
        };
        assert_eq!(i.position, position, "{}", i.name);
        let kind = match n {
            _ if n.starts_with("SEND") => Kind::Send,
            _ if n.starts_with("RDMA_WRITE") => Kind::Write,
            "RDMA_READ_REQUEST" => Kind::ReadRequest,
            _ if n.starts_with("RDMA_READ_RESPONSE") => Kind::ReadResponse,
            "COMPARE_SWAP" | "FETCH_ADD" => Kind::Atomic,
            "ACKNOWLEDGE" => Kind::Ack,
            "ATOMIC_ACKNOWLEDGE" => Kind::AtomicAck,
            "FLUSH" => Kind::Flush,
            "ATOMIC_WRITE" => Kind::AtomicWrite,
            "RESYNC" => Kind::Resync,
            "CNP" => Kind::Cnp,
            _ => panic!("{n}"),
        };
        assert_eq!(i.kind, kind, "{}", i.name);
        assert_eq!(i.immediate, n.contains("IMMEDIATE"), "{}", i.name);
        assert_eq!(i.invalidate, n.contains("INVALIDATE"), "{}", i.name);
        let consumes = (kind == Kind::Send && position.starts())
            || (kind == Kind::Write && n.contains("IMMEDIATE"));
        assert_eq!(i.consumes_recv, consumes, "{}", i.name);
        assert_eq!(
            i.response,
            n.contains("RESPONSE") || n.contains("ACKNOWLEDGE")
        );
    }
}

#[test]
fn an_operation_moves_between_transports() {
    let uc = Opcode::RC_SEND_FIRST.in_transport(Transport::Uc);
    assert_eq!(uc.name(), Some("UC_SEND_FIRST"));
    let ud = Opcode::RC_SEND_ONLY_WITH_IMMEDIATE.in_transport(Transport::Ud);
    assert_eq!(ud, Opcode::UD_SEND_ONLY_WITH_IMMEDIATE);
    assert_eq!(
        Opcode::RC_RDMA_READ_REQUEST
            .in_transport(Transport::Uc)
            .info(),
        None
    );
}

#[test]
fn names_agree_with_operations() {
    for o in Opcode::all() {
        let info = o.info().unwrap();
        assert!(!info.name.is_empty(), "{:#x}", o.0);
        assert!(
            info.name.starts_with(info.transport.name()),
            "{}",
            info.name
        );
        assert_eq!(
            info.name,
            format!("{}_{}", info.transport.name(), info.operation).replace("CNP_CNP", "CNP")
        );
    }
    for c in 0..=255u8 {
        assert_eq!(
            NAMES[c as usize].is_empty(),
            Opcode(c).info().is_none(),
            "{c:#x}"
        );
    }
}

#[test]
fn known_layouts() {
    let h = |c: u8| Opcode(c).info().unwrap().headers;
    assert_eq!(h(0x0b), E.with(Reth).with(ImmDt));
    assert_eq!(h(0x12).offset(AtomicAckEth), Some(4));
    assert_eq!(h(0x4b).offset(Reth), Some(12));
    assert_eq!(h(0x4b).len(), 4 + 8 + 16 + 4);
    assert_eq!(h(0x51), E.with(Rdeth).with(Aeth));
    assert_eq!(h(0xaa).iter().collect::<Vec<_>>(), vec![Xrceth, Reth]);
    assert_eq!(h(0xb2), E.with(Aeth).with(AtomicAckEth));
    assert_eq!(h(0x1c).iter().collect::<Vec<_>>(), vec![Feth, Reth]);
    assert_eq!(h(0x81).len(), 16);
    for o in Opcode::all() {
        let i = o.info().unwrap();
        assert_eq!(i.headers_len, i.headers.len());
        for e in ExtHeader::ALL {
            assert_eq!(i.offset(e), i.headers.offset(e), "{o} {e:?}");
        }
    }
    assert_eq!(h(0x65).iter().collect::<Vec<_>>(), vec![Deth, ImmDt]);
}

#[test]
fn unknown_opcodes() {
    for c in [
        0x15, 0x18, 0x1e, 0x1f, 0x2c, 0x30, 0x56, 0x60, 0x66, 0x80, 0xb5, 0xc0, 0xff,
    ] {
        assert!(Opcode(c).info().is_none(), "{c:#x}");
    }
    // 85 = RC 25 + UC 12 + RD 22 + UD 2 + CNP 1 + XRC 23 (0xb5 reserved).
    assert_eq!(Opcode::all().count(), 25 + 12 + 22 + 2 + 1 + 23);
}
