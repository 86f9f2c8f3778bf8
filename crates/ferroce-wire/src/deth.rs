//! The extension headers that name a queue or a context: DETH (IBA vol. 1
//! §9.3.2, 8 bytes: Q_Key, reserved byte, source QP), RDETH (§9.3.1, 4 bytes:
//! reserved byte, EE context) and XRCETH (Annex A14, 4 bytes: reserved byte,
//! XRC SRQ number). Reserved bytes are ignored on parse and written as zero.

use crate::field::{Field, read_u24, read_u32, write_u24, write_u32};
use crate::view::header_view;
use crate::{Error, Header, Result};

const QKEY: Field = 0..4;
const DETH_RESERVED: usize = 4;
const SRC_QP: Field = 5..8;
const LOW24: Field = 1..4;

header_view!(
    /// A view over a DETH.
    Deth,
    Header::Deth,
    8
);

impl<T: AsRef<[u8]>> Deth<T> {
    /// DETH's Q_Key: the queue key the destination UD QP checks.
    pub fn qkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), QKEY)
    }
    /// The reserved byte (should be zero).
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[DETH_RESERVED]
    }
    /// DETH's SrcQP: the sender's QP number, 24 bits.
    pub fn src_qp(&self) -> u32 {
        read_u24(self.buffer.as_ref(), SRC_QP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Deth<T> {
    /// Sets the Q_Key.
    pub fn set_qkey(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), QKEY, v);
    }
    /// Sets the source QP; the reserved byte becomes zero.
    pub fn set_src_qp(&mut self, v: u32) {
        self.buffer.as_mut()[DETH_RESERVED] = 0;
        write_u24(self.buffer.as_mut(), SRC_QP, v & 0xff_ffff);
    }
}

/// The content of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DethRepr {
    /// Q_Key: the queue key.
    pub qkey: u32,
    /// SrcQP: the sender's QP number, below 2^24.
    pub src_qp: u32,
}

impl DethRepr {
    /// Reads a DETH; the reserved byte is ignored. Fails only if the buffer is shorter than 8 bytes.
    pub fn parse<T: AsRef<[u8]>>(v: &Deth<T>) -> Result<Self> {
        v.check_len()?;
        Ok(Self {
            qkey: v.qkey(),
            src_qp: v.src_qp(),
        })
    }
    /// Writes the DETH with a zero reserved byte; fails if the source QP does not fit 24 bits or the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Deth<T>) -> Result<()> {
        check_u24("deth.src_qp", self.src_qp)?;
        v.check_len()?;
        v.set_qkey(self.qkey);
        v.set_src_qp(self.src_qp);
        Ok(())
    }
}

header_view!(
    /// A view over an RDETH or an XRCETH: a reserved byte and a 24-bit number
    /// (the EE context, or the XRC SRQ).
    Rdeth,
    Header::Rdeth,
    4
);

impl<T: AsRef<[u8]>> Rdeth<T> {
    /// The 24-bit number: EE context (RDETH) or XRC SRQ (XRCETH).
    pub fn value(&self) -> u32 {
        read_u24(self.buffer.as_ref(), LOW24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Rdeth<T> {
    /// Sets the 24-bit number to the low 24 bits of `v`; the reserved byte becomes zero.
    pub fn set_value(&mut self, v: u32) {
        self.buffer.as_mut()[0] = 0;
        write_u24(self.buffer.as_mut(), LOW24, v & 0xff_ffff);
    }
}

/// The XRCETH has the RDETH's shape.
pub type Xrceth<T> = Rdeth<T>;

pub(crate) fn check_u24(field: &'static str, v: u32) -> Result<()> {
    if v > 0xff_ffff {
        Err(Error::FieldOverflow {
            field,
            value: v.into(),
        })
    } else {
        Ok(())
    }
}
