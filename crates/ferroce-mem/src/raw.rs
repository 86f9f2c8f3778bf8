//! The raw backing. Every `unsafe` here rests on the contract of
//! [`Backing::from_raw`], stated in the crate docs.
#![allow(unsafe_code)]

use std::fmt;
use std::ptr::NonNull;

/// A region's bytes: owned, or lent by the application.
pub struct Backing(Inner);

enum Inner {
    Owned(Box<[u8]>),
    Raw { ptr: NonNull<u8>, len: usize },
}

// SAFETY: a raw backing is, by the contract of `from_raw`, the only way its
// bytes are reached while it lives, so moving it to or sharing it with another
// thread is as sound as for the `Box<[u8]>` it stands for; the slices it lends
// follow `&`/`&mut` rules.
unsafe impl Send for Backing {}
// SAFETY: as for `Send`: `&Backing` lends only `&[u8]`.
unsafe impl Sync for Backing {}

impl Backing {
    /// Application-owned memory, used in place.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must be valid for reads and writes (one
    /// allocation, `len <= isize::MAX`) and must not be read or written by
    /// anything but this `Backing` until it is dropped or
    /// [`Self::into_raw`] returns the pointer. A null `ptr` is refused
    /// (`None`); `len` 0 takes any non-null pointer.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Option<Self> {
        let ptr = NonNull::new(ptr)?;
        if isize::try_from(len).is_err() {
            return None;
        }
        Some(Self(Inner::Raw { ptr, len }))
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Inner::Owned(b) => b,
            // SAFETY: valid for `len` bytes and not written elsewhere while
            // `self` lives (the contract of `from_raw`); `&self` rules out
            // `as_mut_slice` for the borrow's length.
            Inner::Raw { ptr, len } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Inner::Owned(b) => b,
            // SAFETY: as in `as_slice`; `&mut self` makes this borrow the only one.
            Inner::Raw { ptr, len } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Inner::Owned(b) => b.len(),
            Inner::Raw { len, .. } => *len,
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the application owns the bytes ([`Self::from_raw`]).
    pub fn is_raw(&self) -> bool {
        matches!(self.0, Inner::Raw { .. })
    }

    /// The owned bytes back, or `Err(self)` for a raw backing.
    pub fn into_box(self) -> Result<Box<[u8]>, Self> {
        match self.0 {
            Inner::Owned(b) => Ok(b),
            raw @ Inner::Raw { .. } => Err(Self(raw)),
        }
    }

    /// Ends a raw backing's loan: the pointer and length it was made from.
    /// `None` for an owned backing (which is dropped).
    pub fn into_raw(self) -> Option<(*mut u8, usize)> {
        match self.0 {
            Inner::Owned(_) => None,
            Inner::Raw { ptr, len } => Some((ptr.as_ptr(), len)),
        }
    }
}

impl From<Box<[u8]>> for Backing {
    fn from(b: Box<[u8]>) -> Self {
        Self(Inner::Owned(b))
    }
}

impl From<Vec<u8>> for Backing {
    fn from(v: Vec<u8>) -> Self {
        Self(Inner::Owned(v.into_boxed_slice()))
    }
}

impl fmt::Debug for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_raw() { "raw" } else { "owned" };
        write!(f, "Backing({kind}, {} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_round_trip() {
        let mut b = Backing::from(vec![1u8, 2, 3]);
        b.as_mut_slice()[1] = 9;
        assert_eq!(b.as_slice(), &[1, 9, 3]);
        assert_eq!(&*b.into_box().unwrap(), &[1, 9, 3]);
    }

    #[test]
    fn raw_writes_land_in_the_lent_memory() {
        let p = Box::into_raw(vec![0u8; 4].into_boxed_slice()).cast::<u8>();
        // SAFETY: a leaked box of 4 bytes, touched only through `b` until
        // `into_raw` returns it.
        let mut b = unsafe { Backing::from_raw(p, 4) }.unwrap();
        b.as_mut_slice().copy_from_slice(&[5, 6, 7, 8]);
        assert!(b.is_raw());
        let b = b.into_box().unwrap_err();
        let (p, len) = b.into_raw().unwrap();
        // SAFETY: the same allocation, no longer lent.
        let back = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) };
        assert_eq!(&*back, &[5, 6, 7, 8]);
    }

    #[test]
    fn null_is_refused() {
        // SAFETY: refused before any use.
        assert!(unsafe { Backing::from_raw(std::ptr::null_mut(), 0) }.is_none());
    }
}
