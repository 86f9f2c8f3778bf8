//! The InfiniBand transport part of a packet: BTH, the extension headers the
//! opcode calls for, payload, pad and ICRC. For RoCE v2 this is the whole UDP
//! payload; for RoCE v1 it is everything after the GRH.
//!
//! [`TransportPacket::new_checked`] validates, in this order: the BTH is
//! present, four ICRC bytes follow it, TVer is 0, the opcode is known, every
//! extension header is whole, PadCnt fits in what is left, and opcodes that
//! carry no payload carry none. After that no accessor panics.
//!
//! The ICRC itself is not checked here: it covers the network headers too
//! (see [`crate::icrc`] and [`crate::roce`]).

use crate::aeth::{Aeth, AethRepr};
use crate::atomic_eth::{AtomicAckEth, AtomicEth, AtomicEthRepr};
use crate::bth::{Bth, BthRepr};
use crate::deth::{Deth, DethRepr, Rdeth, check_u24};
use crate::field::{read_u32, write_u32};
use crate::reth::{Reth, RethRepr};
use crate::{Error, ExtHeader, ExtSet, Header, OpcodeInfo, Result};

/// BTH length.
pub const BTH_LEN: usize = 12;
/// ICRC length.
pub const ICRC_LEN: usize = 4;

/// A view over BTH .. ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TransportPacket<T> {
    /// Wraps without checking; accessors may panic. For emitting only.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps after the checks listed in the module docs.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The structural checks listed in the module docs.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < BTH_LEN {
            return Err(Error::Truncated {
                header: Header::Bth,
                needed: BTH_LEN,
                available: b.len(),
            });
        }
        if b.len() < BTH_LEN + ICRC_LEN {
            return Err(Error::Truncated {
                header: Header::Icrc,
                needed: BTH_LEN + ICRC_LEN,
                available: b.len(),
            });
        }
        let bth = Bth::new_unchecked(b);
        if bth.tver() != 0 {
            return Err(Error::BadVersion {
                field: "bth.tver",
                value: bth.tver(),
            });
        }
        let info = bth.opcode().info().ok_or(Error::UnknownOpcode {
            opcode: bth.opcode().0,
        })?;
        let body = b.len() - BTH_LEN - ICRC_LEN;
        if body < info.headers_len {
            return Err(truncated_ext(info, body));
        }
        let rest = body - info.headers_len;
        let pad = bth.pad_count();
        if usize::from(pad) > rest {
            return Err(Error::PadExceedsPayload {
                pad,
                available: rest,
            });
        }
        if !info.payload && rest > 0 {
            return Err(Error::UnexpectedPayload {
                opcode: bth.opcode().0,
                len: rest,
            });
        }
        Ok(())
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The whole transport, BTH through ICRC.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The BTH.
    pub fn bth(&self) -> Bth<&[u8]> {
        Bth::new_unchecked(&self.b()[..BTH_LEN])
    }

    /// The opcode's table entry (known to exist once checked).
    pub fn info(&self) -> &'static OpcodeInfo {
        // Only a view made with `new_unchecked` over an unknown opcode has no
        // entry; treat it as an opcode with no headers rather than panic.
        self.bth()
            .opcode()
            .info()
            .unwrap_or(&crate::opcode::UNKNOWN_INFO)
    }

    /// The bytes of extension header `h`, if the opcode carries it.
    pub fn ext(&self, h: ExtHeader) -> Option<&[u8]> {
        let off = BTH_LEN + self.info().offset(h)?;
        Some(&self.b()[off..off + h.wire_len()])
    }

    /// The RDETH (RD only), if the opcode carries it.
    pub fn rdeth(&self) -> Option<Rdeth<&[u8]>> {
        self.ext(ExtHeader::Rdeth).map(Rdeth::new_unchecked)
    }
    /// The DETH (UD and RD), if the opcode carries it.
    pub fn deth(&self) -> Option<Deth<&[u8]>> {
        self.ext(ExtHeader::Deth).map(Deth::new_unchecked)
    }
    /// The XRCETH (XRC requests), if the opcode carries it; it has the RDETH's shape.
    pub fn xrceth(&self) -> Option<Rdeth<&[u8]>> {
        self.ext(ExtHeader::Xrceth).map(Rdeth::new_unchecked)
    }
    /// FETH, as its 32 raw bits (placement type in bits 0-3, selectivity in 4-5).
    pub fn feth(&self) -> Option<u32> {
        self.ext(ExtHeader::Feth).map(|b| read_u32(b, 0..4))
    }
    /// The RETH (RDMA WRITE FIRST/ONLY, READ request, FLUSH, ATOMIC WRITE), if carried.
    pub fn reth(&self) -> Option<Reth<&[u8]>> {
        self.ext(ExtHeader::Reth).map(Reth::new_unchecked)
    }
    /// The AtomicETH (COMPARE SWAP, FETCH ADD), if carried.
    pub fn atomic_eth(&self) -> Option<AtomicEth<&[u8]>> {
        self.ext(ExtHeader::AtomicEth).map(AtomicEth::new_unchecked)
    }
    /// The AETH (ACK, READ response FIRST/LAST/ONLY, ATOMIC ACK), if carried.
    pub fn aeth(&self) -> Option<Aeth<&[u8]>> {
        self.ext(ExtHeader::Aeth).map(Aeth::new_unchecked)
    }
    /// The AtomicAckETH (ATOMIC ACKNOWLEDGE), if carried.
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEth<&[u8]>> {
        self.ext(ExtHeader::AtomicAckEth)
            .map(AtomicAckEth::new_unchecked)
    }
    /// Immediate data, big-endian as on the wire.
    pub fn imm(&self) -> Option<u32> {
        self.ext(ExtHeader::ImmDt).map(|b| read_u32(b, 0..4))
    }
    /// The R_Key to invalidate.
    pub fn ieth(&self) -> Option<u32> {
        self.ext(ExtHeader::Ieth).map(|b| read_u32(b, 0..4))
    }
    /// The 16 reserved bytes of a CNP.
    pub fn cnp_reserved(&self) -> Option<&[u8]> {
        self.ext(ExtHeader::CnpReserved)
    }

    fn payload_start(&self) -> usize {
        BTH_LEN + self.info().headers_len
    }

    fn icrc_start(&self) -> usize {
        self.b().len() - ICRC_LEN
    }

    /// The payload, pad excluded.
    pub fn payload(&self) -> &[u8] {
        let end = self.icrc_start() - usize::from(self.bth().pad_count());
        &self.b()[self.payload_start()..end]
    }

    /// The pad bytes.
    pub fn pad(&self) -> &[u8] {
        let end = self.icrc_start();
        &self.b()[end - usize::from(self.bth().pad_count())..end]
    }

    /// Everything the ICRC covers of the transport: BTH .. pad.
    pub fn without_icrc(&self) -> &[u8] {
        &self.b()[..self.icrc_start()]
    }

    /// The four ICRC bytes as they are on the wire.
    pub fn icrc_bytes(&self) -> [u8; 4] {
        let s = self.icrc_start();
        let mut a = [0; 4];
        a.copy_from_slice(&self.b()[s..s + 4]);
        a
    }

    /// The ICRC as a value: the wire bytes read little-endian (see [`crate::icrc`]).
    pub fn icrc(&self) -> u32 {
        u32::from_le_bytes(self.icrc_bytes())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TransportPacket<T> {
    /// The payload, writable (pad excluded).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.payload_start();
        let end = self.icrc_start() - usize::from(self.bth().pad_count());
        &mut self.buffer.as_mut()[start..end]
    }

    /// Stores the ICRC value (written least-significant byte first).
    pub fn set_icrc(&mut self, icrc: u32) {
        let s = self.icrc_start();
        self.buffer.as_mut()[s..s + 4].copy_from_slice(&icrc.to_le_bytes());
    }
}

/// The error for a body too short for the opcode's headers: names the first
/// header that does not fit.
#[cold]
fn truncated_ext(info: &OpcodeInfo, body: usize) -> Error {
    let mut off = 0;
    for h in info.headers.iter() {
        if off + h.wire_len() > body {
            return Error::Truncated {
                header: h.header(),
                needed: h.wire_len(),
                available: body - off,
            };
        }
        off += h.wire_len();
    }
    Error::Truncated {
        header: Header::Bth,
        needed: info.headers_len,
        available: body,
    }
}

/// The validated content of the transport part, payload excluded.
///
/// Each `Option` holds a header exactly when the opcode carries it; `emit`
/// refuses a mismatch. The CNP's reserved bytes are emitted as zeros and not
/// kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportRepr {
    /// The BTH.
    pub bth: BthRepr,
    /// RDETH: EE context.
    pub rdeth: Option<u32>,
    /// DETH: Q_Key and source QP.
    pub deth: Option<DethRepr>,
    /// XRCETH: XRC SRQ number.
    pub xrceth: Option<u32>,
    /// FETH raw bits.
    pub feth: Option<u32>,
    /// RETH: remote address, R_Key and DMA length.
    pub reth: Option<RethRepr>,
    /// AtomicETH: remote address, R_Key and operands.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH: syndrome and MSN.
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH: original remote data.
    pub atomic_ack: Option<u64>,
    /// ImmDt: the immediate data.
    pub imm: Option<u32>,
    /// IETH: the R_Key to invalidate.
    pub ieth: Option<u32>,
    /// Payload length, pad excluded.
    pub payload_len: usize,
}

impl TransportRepr {
    /// A repr with just a BTH and no extension header, for `payload_len`
    /// bytes; the pad count is set so that payload + pad is a multiple of 4.
    pub fn new(bth: BthRepr, payload_len: usize) -> Self {
        let mut bth = bth;
        bth.pad_count = pad_for(payload_len);
        Self {
            bth,
            rdeth: None,
            deth: None,
            xrceth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            payload_len,
        }
    }

    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(p: &TransportPacket<T>) -> Result<Self> {
        p.check_len()?;
        let bth = BthRepr::parse(&p.bth())?;
        Ok(Self {
            bth,
            rdeth: p.rdeth().map(|v| v.value()),
            deth: p.deth().map(|v| DethRepr::parse(&v)).transpose()?,
            xrceth: p.xrceth().map(|v| v.value()),
            feth: p.feth(),
            reth: p.reth().map(|v| RethRepr::parse(&v)).transpose()?,
            atomic_eth: p
                .atomic_eth()
                .map(|v| AtomicEthRepr::parse(&v))
                .transpose()?,
            aeth: p.aeth().map(|v| AethRepr::parse(&v)).transpose()?,
            atomic_ack: p.atomic_ack_eth().map(|v| v.orig()),
            imm: p.imm(),
            ieth: p.ieth(),
            payload_len: p.payload().len(),
        })
    }

    /// The extension headers this repr holds.
    pub fn ext_set(&self) -> ExtSet {
        let mut s = ExtSet::EMPTY;
        let present = [
            (ExtHeader::Rdeth, self.rdeth.is_some()),
            (ExtHeader::Deth, self.deth.is_some()),
            (ExtHeader::Xrceth, self.xrceth.is_some()),
            (ExtHeader::Feth, self.feth.is_some()),
            (ExtHeader::Reth, self.reth.is_some()),
            (ExtHeader::AtomicEth, self.atomic_eth.is_some()),
            (ExtHeader::Aeth, self.aeth.is_some()),
            (ExtHeader::AtomicAckEth, self.atomic_ack.is_some()),
            (ExtHeader::ImmDt, self.imm.is_some()),
            (ExtHeader::Ieth, self.ieth.is_some()),
        ];
        for (h, p) in present {
            if p {
                s = s.with(h);
            }
        }
        s
    }

    /// BTH .. ICRC length for this repr.
    pub fn buffer_len(&self) -> usize {
        let headers = self.bth.opcode.info().map_or(0, |i| i.headers_len);
        BTH_LEN + headers + self.payload_len + usize::from(self.bth.pad_count) + ICRC_LEN
    }

    /// Checks that the headers match the opcode and the payload is allowed.
    fn check_layout(&self) -> Result<&'static OpcodeInfo> {
        let op = self.bth.opcode;
        let info = op.info().ok_or(Error::UnknownOpcode { opcode: op.0 })?;
        let want = info.headers;
        let have = self.ext_set();
        for h in ExtHeader::ALL {
            if h == ExtHeader::CnpReserved {
                continue;
            }
            if want.contains(h) != have.contains(h) {
                return Err(Error::LayoutMismatch {
                    opcode: op.0,
                    header: h.header(),
                });
            }
        }
        if !info.payload && self.payload_len + usize::from(self.bth.pad_count) > 0 {
            return Err(Error::UnexpectedPayload {
                opcode: op.0,
                len: self.payload_len,
            });
        }
        Ok(info)
    }

    /// Writes BTH, extension headers, `payload` and zero pad bytes into the
    /// first [`buffer_len`](Self::buffer_len) bytes of `buf`, leaving the ICRC
    /// bytes zero for the caller to fill once the network headers are known.
    /// `payload.len()` must equal `payload_len`. Returns the length written.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize> {
        if payload.len() != self.payload_len {
            return Err(Error::BadLength {
                field: "payload",
                claimed: self.payload_len,
                actual: payload.len(),
            });
        }
        let at = self.emit_headers(buf)?;
        buf[at.clone()].copy_from_slice(payload);
        Ok(self.buffer_len())
    }

    /// Writes everything but the payload: the headers, zero pad bytes and
    /// a zero ICRC, into the first [`buffer_len`](Self::buffer_len) bytes of
    /// `buf`. Returns where the payload goes, for the caller to fill in
    /// place (a gather straight from registered memory); those bytes are
    /// left as they were.
    pub fn emit_headers(&self, buf: &mut [u8]) -> Result<core::ops::Range<usize>> {
        let info = self.check_layout()?;
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        let buf = &mut buf[..len];
        self.bth
            .emit(&mut Bth::new_unchecked(&mut buf[..BTH_LEN]))?;
        for h in info.headers.iter() {
            let off = BTH_LEN + info.offset(h).unwrap_or(0);
            self.emit_ext(h, &mut buf[off..off + h.wire_len()])?;
        }
        let start = BTH_LEN + info.headers_len;
        buf[start + self.payload_len..].fill(0);
        Ok(start..start + self.payload_len)
    }

    fn emit_ext(&self, h: ExtHeader, b: &mut [u8]) -> Result<()> {
        match h {
            ExtHeader::Rdeth => emit_u24(b, "rdeth.eecnxt", self.rdeth),
            ExtHeader::Xrceth => emit_u24(b, "xrceth.xrcsrq", self.xrceth),
            ExtHeader::Deth => emit_opt(self.deth, |r| r.emit(&mut Deth::new_unchecked(b))),
            ExtHeader::Feth => emit_opt(self.feth, |v| {
                write_u32(b, 0..4, v);
                Ok(())
            }),
            ExtHeader::Reth => emit_opt(self.reth, |r| r.emit(&mut Reth::new_unchecked(b))),
            ExtHeader::AtomicEth => emit_opt(self.atomic_eth, |r| {
                r.emit(&mut AtomicEth::new_unchecked(b))
            }),
            ExtHeader::Aeth => emit_opt(self.aeth, |r| r.emit(&mut Aeth::new_unchecked(b))),
            ExtHeader::AtomicAckEth => emit_opt(self.atomic_ack, |v| {
                AtomicAckEth::new_unchecked(b).set_orig(v);
                Ok(())
            }),
            ExtHeader::ImmDt => emit_opt(self.imm, |v| {
                write_u32(b, 0..4, v);
                Ok(())
            }),
            ExtHeader::Ieth => emit_opt(self.ieth, |v| {
                write_u32(b, 0..4, v);
                Ok(())
            }),
            ExtHeader::CnpReserved => {
                b.fill(0);
                Ok(())
            }
        }
    }
}

fn emit_opt<V>(v: Option<V>, f: impl FnOnce(V) -> Result<()>) -> Result<()> {
    // `check_layout` has matched every Option to the opcode already.
    v.map_or(Ok(()), f)
}

fn emit_u24(b: &mut [u8], field: &'static str, v: Option<u32>) -> Result<()> {
    emit_opt(v, |v| {
        check_u24(field, v)?;
        Rdeth::new_unchecked(b).set_value(v);
        Ok(())
    })
}

/// The pad count that makes `payload_len` a multiple of four.
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - payload_len % 4) % 4) as u8
}
