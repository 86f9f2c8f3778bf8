//! Byte ranges and big-endian accessors shared by the header views.
//!
//! Every accessor here indexes a slice whose length the caller's `check_len`
//! has already verified; they are the only place the views touch raw bytes.

/// A byte range inside a header.
pub(crate) type Field = core::ops::Range<usize>;

#[inline]
pub(crate) fn read_u16(b: &[u8], f: Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

#[inline]
pub(crate) fn read_u24(b: &[u8], f: Field) -> u32 {
    u32::from_be_bytes([0, b[f.start], b[f.start + 1], b[f.start + 2]])
}

#[inline]
pub(crate) fn read_u32(b: &[u8], f: Field) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    u32::from_be_bytes(a)
}

#[inline]
pub(crate) fn read_u64(b: &[u8], f: Field) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[f]);
    u64::from_be_bytes(a)
}

pub(crate) fn write_u16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn write_u24(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes()[1..]);
}

pub(crate) fn write_u32(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn write_u64(b: &mut [u8], f: Field, v: u64) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Returns `Err(Truncated)` unless `len >= needed`.
#[inline]
pub(crate) fn check(header: crate::Header, needed: usize, len: usize) -> crate::Result<()> {
    if len < needed {
        Err(crate::Error::Truncated {
            header,
            needed,
            available: len,
        })
    } else {
        Ok(())
    }
}
