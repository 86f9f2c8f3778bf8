//! ACK Extended Transport Header (IBA vol. 1 §9.3.5), 4 bytes: a syndrome
//! byte and the 24-bit MSN. The syndrome says ACK (with a credit count), RNR
//! NAK (with a timer code) or NAK (with a code), IBA tables 43-45.

use core::fmt;

use crate::field::{Field, read_u24, write_u24};
use crate::view::header_view;
use crate::{Error, Header, Result};

const SYNDROME: usize = 0;
const MSN: Field = 1..4;

header_view!(
    /// A view over an AETH.
    Aeth,
    Header::Aeth,
    4
);

impl<T: AsRef<[u8]>> Aeth<T> {
    /// AETH's Syndrome byte, undecoded.
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[SYNDROME]
    }
    /// AETH's Syndrome, decoded (IBA 9.3.5, table 43).
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome_byte())
    }
    /// AETH's MSN: the responder's message sequence number, 24 bits.
    pub fn msn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Aeth<T> {
    /// Sets the Syndrome byte.
    pub fn set_syndrome(&mut self, s: Syndrome) {
        self.buffer.as_mut()[SYNDROME] = s.to_byte();
    }
    /// Sets the MSN to the low 24 bits of `msn`.
    pub fn set_msn(&mut self, msn: u32) {
        write_u24(self.buffer.as_mut(), MSN, msn & 0xff_ffff);
    }
}

/// A NAK code (IBA table 44).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// NAK code 0: PSN sequence error; the requester retries from the NAK's PSN.
    PsnSequenceError,
    /// NAK code 1: invalid request.
    InvalidRequest,
    /// NAK code 2: remote access error (bad R_Key, address or rights).
    RemoteAccessError,
    /// NAK code 3: remote operational error.
    RemoteOperationalError,
    /// NAK code 4: invalid RD request.
    InvalidRdRequest,
    /// Codes 5-31 are reserved.
    Reserved(u8),
}

impl NakCode {
    /// The NAK code of the low five bits of `c`.
    pub const fn from_code(c: u8) -> Self {
        match c & 0x1f {
            0 => Self::PsnSequenceError,
            1 => Self::InvalidRequest,
            2 => Self::RemoteAccessError,
            3 => Self::RemoteOperationalError,
            4 => Self::InvalidRdRequest,
            c => Self::Reserved(c),
        }
    }
    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        match self {
            Self::PsnSequenceError => 0,
            Self::InvalidRequest => 1,
            Self::RemoteAccessError => 2,
            Self::RemoteOperationalError => 3,
            Self::InvalidRdRequest => 4,
            Self::Reserved(c) => c & 0x1f,
        }
    }
    /// The upper-case name printed in dumps, e.g. `"REMOTE_ACCESS_ERROR"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::PsnSequenceError => "PSN_SEQUENCE_ERROR",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::RemoteAccessError => "REMOTE_ACCESS_ERROR",
            Self::RemoteOperationalError => "REMOTE_OPERATIONAL_ERROR",
            Self::InvalidRdRequest => "INVALID_RD_REQUEST",
            Self::Reserved(_) => "RESERVED_NAK_CODE",
        }
    }
}

/// The AETH syndrome, decoded (bit 7 is reserved and ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// ACK; `credits` is the 5-bit credit count (31 = invalid / unlimited).
    Ack {
        /// The credit count, 0-31.
        credits: u8,
    },
    /// Receiver not ready; `timer` is the 5-bit RNR timer code.
    RnrNak {
        /// The RNR timer code, 0-31 (see [`rnr_timer_us`]).
        timer: u8,
    },
    /// Type `10`: reserved by the IBA; `value` is the low five bits.
    Reserved {
        /// The low five bits, 0-31.
        value: u8,
    },
    /// Negative acknowledgement with the code saying why.
    Nak(NakCode),
}

impl Syndrome {
    /// Decodes a syndrome byte; bit 7 is ignored, any byte decodes.
    pub const fn from_byte(b: u8) -> Self {
        let low = b & 0x1f;
        match (b >> 5) & 0x3 {
            0 => Self::Ack { credits: low },
            1 => Self::RnrNak { timer: low },
            2 => Self::Reserved { value: low },
            _ => Self::Nak(NakCode::from_code(low)),
        }
    }
    /// Encodes the syndrome; values beyond five bits are masked, bit 7 is zero.
    pub const fn to_byte(self) -> u8 {
        match self {
            Self::Ack { credits } => credits & 0x1f,
            Self::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Self::Reserved { value } => 0x40 | (value & 0x1f),
            Self::Nak(c) => 0x60 | c.code(),
        }
    }
    /// `"ACK"`, `"RNR_NAK"`, `"NAK"` or `"RESERVED"`.
    pub const fn kind(self) -> &'static str {
        match self {
            Self::Ack { .. } => "ACK",
            Self::RnrNak { .. } => "RNR_NAK",
            Self::Reserved { .. } => "RESERVED",
            Self::Nak(_) => "NAK",
        }
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Ack { credits } => write!(f, "ACK credits={credits}"),
            Self::RnrNak { timer } => {
                write!(f, "RNR_NAK timer={timer} ({} us)", rnr_timer_us(timer))
            }
            Self::Reserved { value } => write!(f, "RESERVED({value})"),
            Self::Nak(c) => write!(f, "NAK {}", c.name()),
        }
    }
}

/// The minimal RNR NAK delay, in microseconds, for a 5-bit timer code
/// (IBA vol. 1 table 45; code 0 is the longest, 655.36 ms).
pub const fn rnr_timer_us(code: u8) -> u32 {
    const TABLE: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    TABLE[(code & 0x1f) as usize]
}

/// The validated content of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AethRepr {
    /// The Syndrome: ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// Reads an AETH; fails only if the buffer is shorter than 4 bytes.
    pub fn parse<T: AsRef<[u8]>>(v: &Aeth<T>) -> Result<Self> {
        v.check_len()?;
        Ok(Self {
            syndrome: v.syndrome(),
            msn: v.msn(),
        })
    }
    /// Writes the AETH; fails if the MSN does not fit 24 bits or the buffer is short.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Aeth<T>) -> Result<()> {
        if self.msn > 0xff_ffff {
            return Err(Error::FieldOverflow {
                field: "aeth.msn",
                value: self.msn.into(),
            });
        }
        v.check_len()?;
        v.set_syndrome(self.syndrome);
        v.set_msn(self.msn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_round_trip() {
        for b in 0u8..0x80 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b);
        }
        assert_eq!(Syndrome::from_byte(0x1f), Syndrome::Ack { credits: 31 });
        assert_eq!(Syndrome::from_byte(0x2e), Syndrome::RnrNak { timer: 14 });
        assert_eq!(
            Syndrome::from_byte(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(rnr_timer_us(14), 1_280);
        assert_eq!(rnr_timer_us(0), 655_360);
    }
}
