//! Base Transport Header (IBA vol. 1 §9.2), 12 bytes, present in every
//! RoCE and InfiniBand transport packet.
//!
//! ```text
//!  0       OpCode
//!  1       SE | MigReq | PadCnt(2) | TVer(4)
//!  2..4    P_Key
//!  4       FECN | BECN | Resv6      (masked out of the ICRC)
//!  5..8    DestQP (24 bits)
//!  8       AckReq | Resv7
//!  9..12   PSN (24 bits)
//! ```

use crate::field::{Field, read_u16, read_u24, write_u16, write_u24};
use crate::view::header_view;
use crate::{Error, Header, Opcode, Psn, Result};

mod field {
    use super::Field;
    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const PKEY: Field = 2..4;
    pub(super) const BECN_FECN: usize = 4;
    pub(super) const DEST_QP: Field = 5..8;
    pub(super) const ACKREQ: usize = 8;
    pub(super) const PSN: Field = 9..12;
}

header_view!(
    /// A view over a BTH.
    Bth,
    Header::Bth,
    12
);

impl<T: AsRef<[u8]>> Bth<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// BTH's OpCode: the transport service and operation .
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[field::OPCODE])
    }
    /// BTH's SE bit: the responder raises a solicited event on completion.
    pub fn solicited(&self) -> bool {
        self.b()[field::FLAGS] & 0x80 != 0
    }
    /// BTH's MigReq bit: the sender's path migration state.
    pub fn mig_req(&self) -> bool {
        self.b()[field::FLAGS] & 0x40 != 0
    }
    /// BTH's PadCnt: the bytes of pad after the payload, 0-3 (IBA 9.2).
    pub fn pad_count(&self) -> u8 {
        (self.b()[field::FLAGS] >> 4) & 0x3
    }
    /// BTH's TVer: the transport header version, 0 in IBA 1.x.
    pub fn tver(&self) -> u8 {
        self.b()[field::FLAGS] & 0xf
    }
    /// BTH's P_Key: the partition key.
    pub fn pkey(&self) -> u16 {
        read_u16(self.b(), field::PKEY)
    }
    /// BTH's FECN bit: forward congestion notification, set by an IB switch (RoCE v2 marks IP ECN instead).
    pub fn fecn(&self) -> bool {
        self.b()[field::BECN_FECN] & 0x80 != 0
    }
    /// BTH's BECN bit: congestion reported back to the sender.
    pub fn becn(&self) -> bool {
        self.b()[field::BECN_FECN] & 0x40 != 0
    }
    /// The six reserved bits after BECN (should be zero).
    pub fn resv6(&self) -> u8 {
        self.b()[field::BECN_FECN] & 0x3f
    }
    /// BTH's DestQP: the destination queue pair number, 24 bits.
    pub fn dest_qp(&self) -> u32 {
        read_u24(self.b(), field::DEST_QP)
    }
    /// BTH's AckReq bit: the requester asks for an acknowledgement.
    pub fn ack_req(&self) -> bool {
        self.b()[field::ACKREQ] & 0x80 != 0
    }
    /// The seven reserved bits after AckReq (should be zero).
    pub fn resv7(&self) -> u8 {
        self.b()[field::ACKREQ] & 0x7f
    }
    /// BTH's PSN: the packet sequence number, 24 bits.
    pub fn psn(&self) -> Psn {
        Psn::new(read_u24(self.b(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the OpCode.
    pub fn set_opcode(&mut self, v: Opcode) {
        self.bm()[field::OPCODE] = v.0;
    }
    /// Sets SE, MigReq, PadCnt and TVer together.
    pub fn set_flags(&mut self, se: bool, mig_req: bool, pad: u8, tver: u8) {
        self.bm()[field::FLAGS] =
            (u8::from(se) << 7) | (u8::from(mig_req) << 6) | ((pad & 3) << 4) | (tver & 0xf);
    }
    /// Sets PadCnt to the low two bits of `pad`; the other bits of the byte are kept.
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = &mut self.bm()[field::FLAGS];
        *b = (*b & !0x30) | ((pad & 3) << 4);
    }
    /// Sets the P_Key.
    pub fn set_pkey(&mut self, v: u16) {
        write_u16(self.bm(), field::PKEY, v);
    }
    /// Sets FECN and BECN; the reserved bits become zero.
    pub fn set_ecn(&mut self, fecn: bool, becn: bool) {
        self.bm()[field::BECN_FECN] = (u8::from(fecn) << 7) | (u8::from(becn) << 6);
    }
    /// Sets DestQP to the low 24 bits of `v`; the six reserved bits before it become zero.
    pub fn set_dest_qp(&mut self, v: u32) {
        write_u24(self.bm(), field::DEST_QP, v & 0xff_ffff);
        self.bm()[4] &= 0xc0;
    }
    /// Sets AckReq and the PSN; the reserved bits become zero.
    pub fn set_ack_req_psn(&mut self, ack_req: bool, psn: Psn) {
        self.bm()[field::ACKREQ] = u8::from(ack_req) << 7;
        write_u24(self.bm(), field::PSN, psn.value());
    }
}

/// The validated content of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BthRepr {
    /// OpCode: transport service and operation.
    pub opcode: Opcode,
    /// SE: raise a solicited event at the responder.
    pub solicited: bool,
    /// MigReq: the sender's path migration state.
    pub mig_req: bool,
    /// PadCnt: pad bytes after the payload, 0-3.
    pub pad_count: u8,
    /// P_Key: the partition key.
    pub pkey: u16,
    /// FECN: forward congestion notification, set on the way to the receiver.
    pub fecn: bool,
    /// BECN: backward congestion notification, returned to the sender.
    pub becn: bool,
    /// DestQP: destination QP number, below 2^24.
    pub dest_qp: u32,
    /// AckReq: the requester asks for an acknowledgement.
    pub ack_req: bool,
    /// PSN: the packet sequence number.
    pub psn: Psn,
}

impl BthRepr {
    /// Parses a BTH. Rejects a TVer other than 0 and an unknown opcode; the
    /// reserved bits are ignored (IBA: "ignored by the receiver").
    pub fn parse<T: AsRef<[u8]>>(bth: &Bth<T>) -> Result<Self> {
        bth.check_len()?;
        if bth.tver() != 0 {
            return Err(Error::BadVersion {
                field: "bth.tver",
                value: bth.tver(),
            });
        }
        if bth.opcode().info().is_none() {
            return Err(Error::UnknownOpcode {
                opcode: bth.opcode().0,
            });
        }
        Ok(Self {
            opcode: bth.opcode(),
            solicited: bth.solicited(),
            mig_req: bth.mig_req(),
            pad_count: bth.pad_count(),
            pkey: bth.pkey(),
            fecn: bth.fecn(),
            becn: bth.becn(),
            dest_qp: bth.dest_qp(),
            ack_req: bth.ack_req(),
            psn: bth.psn(),
        })
    }

    /// Writes the BTH; reserved bits are written as zero. Fails if the
    /// destination QP does not fit 24 bits or the pad count 2 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bth: &mut Bth<T>) -> Result<()> {
        if self.dest_qp > 0xff_ffff {
            return Err(Error::FieldOverflow {
                field: "bth.dest_qp",
                value: self.dest_qp.into(),
            });
        }
        if self.pad_count > 3 {
            return Err(Error::FieldOverflow {
                field: "bth.pad_count",
                value: self.pad_count.into(),
            });
        }
        bth.check_len()?;
        bth.set_opcode(self.opcode);
        bth.set_flags(self.solicited, self.mig_req, self.pad_count, 0);
        bth.set_pkey(self.pkey);
        bth.set_ecn(self.fecn, self.becn);
        bth.set_dest_qp(self.dest_qp);
        bth.set_ack_req_psn(self.ack_req, self.psn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An RC SEND ONLY shaped like rxe's rc_pingpong traffic: SE=0, pad 0,
    // P_Key 0xffff, QP 0x11, AckReq, PSN 0x2c3616.
    const RXE: [u8; 12] = [
        0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x2c, 0x36, 0x16,
    ];

    #[test]
    fn decodes_fields() {
        let v = Bth::new_checked(&RXE[..]).unwrap();
        let r = BthRepr::parse(&v).unwrap();
        assert_eq!(r.opcode, Opcode::RC_SEND_ONLY);
        assert_eq!(r.pkey, 0xffff);
        assert_eq!(r.dest_qp, 0x11);
        assert!(r.ack_req);
        assert_eq!(r.psn, Psn::new(0x2c3616));
        let mut out = [0u8; 12];
        r.emit(&mut Bth::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, RXE);
    }

    #[test]
    fn rejects_bad_tver_and_short() {
        let mut b = RXE;
        b[1] = 1;
        assert_eq!(
            BthRepr::parse(&Bth::new_unchecked(&b[..])),
            Err(Error::BadVersion {
                field: "bth.tver",
                value: 1
            })
        );
        assert!(matches!(
            Bth::new_checked(&RXE[..11]),
            Err(Error::Truncated {
                header: Header::Bth,
                needed: 12,
                available: 11
            })
        ));
    }
}
