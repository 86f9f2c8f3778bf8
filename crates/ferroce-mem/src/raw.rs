//! The raw backing. Every `unsafe` here rests on the contract stated in
//! the crate docs: a `Backing`'s bytes are valid for reads and writes for
//! its whole life, and are reached only through volatile or atomic
//! accesses, never as `&[u8]`/`&mut [u8]` while they are shared.
#![allow(unsafe_code)]

use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use vm_memory::volatile_memory::Error as VolatileError;
use vm_memory::{VolatileMemory, VolatileSlice};

/// A region's bytes: owned, or lent by the application. All access goes
/// through `&self` and copies or atomics, as a device's DMA would.
pub struct Backing {
    ptr: NonNull<u8>,
    len: usize,
    /// Whether the bytes are a `Box<[u8]>` this backing frees (else lent).
    owned: bool,
}

/// Why an access to a backing was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The range is not inside the backing.
    OutOfRange,
    /// An 8-byte atomic at an address that is not a multiple of 8.
    Misaligned,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OutOfRange => "range outside the memory",
            Self::Misaligned => "8-byte atomic at an address not a multiple of 8",
        })
    }
}

impl std::error::Error for Fault {}

// SAFETY: the bytes are reached only through `&self` methods that copy
// with volatile accesses or use atomics (the crate contract), so sharing
// a backing between threads, or moving it, races no more than a device
// writing host memory does; the owned box is freed once, on drop.
unsafe impl Send for Backing {}
// SAFETY: as for `Send`.
unsafe impl Sync for Backing {}

impl Backing {
    /// Application-owned memory, used in place.
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must be valid for reads and writes (one
    /// allocation, `len <= isize::MAX`) until this `Backing` is dropped or
    /// [`Self::into_raw`] returns the pointer. Anything else that reads or
    /// writes them meanwhile does so as a device would: with volatile or
    /// atomic accesses, or from outside Rust (the C program that lent
    /// them); no `&[u8]`/`&mut [u8]` over them may live meanwhile. Which
    /// value a racing read sees is the application's business (as with
    /// `ibv_reg_mr`); it is never undefined behaviour of this crate's.
    /// A null `ptr` is refused (`None`); `len` 0 takes any non-null pointer.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Option<Self> {
        let ptr = NonNull::new(ptr)?;
        if isize::try_from(len).is_err() {
            return None;
        }
        Some(Self {
            ptr,
            len,
            owned: false,
        })
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the application owns the bytes ([`Self::from_raw`]).
    pub fn is_raw(&self) -> bool {
        !self.owned
    }

    /// All the bytes, as a volatile view: the one place a pointer becomes
    /// something safe code reads and writes.
    pub fn volatile(&self) -> VolatileSlice<'_> {
        // SAFETY: `len` bytes at `ptr` are valid for reads and writes while
        // `self` lives (an owned box, or the contract of `from_raw`), the
        // view borrows `self`, and every other access to them is volatile
        // or atomic (the crate contract).
        unsafe { VolatileSlice::new(self.ptr.as_ptr(), self.len) }
    }

    /// `len` bytes at `offset`, as a volatile view.
    pub fn slice(&self, offset: usize, len: usize) -> Result<VolatileSlice<'_>, Fault> {
        let end = offset.checked_add(len).ok_or(Fault::OutOfRange)?;
        if end > self.len {
            return Err(Fault::OutOfRange);
        }
        self.volatile()
            .subslice(offset, len)
            .map_err(|_| Fault::OutOfRange)
    }

    /// Copies `out.len()` bytes at `offset` out.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), Fault> {
        self.slice(offset, out.len())?.copy_to(out);
        Ok(())
    }

    /// Copies `data` in at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), Fault> {
        self.slice(offset, data.len())?.copy_from(data);
        Ok(())
    }

    /// Runs `f` on the aligned 8 bytes at `offset` as an atomic (a
    /// host-order `u64`), vm-memory's atomic reference into the view.
    fn with_atomic<R>(&self, offset: usize, f: impl FnOnce(&AtomicU64) -> R) -> Result<R, Fault> {
        if offset.checked_add(8).is_none_or(|end| end > self.len) {
            return Err(Fault::OutOfRange);
        }
        let whole = self.volatile();
        match whole.get_atomic_ref::<AtomicU64>(offset) {
            Ok(cell) => Ok(f(cell)),
            Err(VolatileError::Misaligned { .. }) => Err(Fault::Misaligned),
            Err(_) => Err(Fault::OutOfRange),
        }
    }

    /// Atomically adds `add` to the 8 bytes at `offset` (a host-order
    /// `u64`), wrapping; the value before.
    pub fn fetch_add(&self, offset: usize, add: u64) -> Result<u64, Fault> {
        self.with_atomic(offset, |a| a.fetch_add(add, Ordering::SeqCst))
    }

    /// Atomically replaces the 8 bytes at `offset` by `swap` if they equal
    /// `compare`; the value before, either way.
    pub fn compare_swap(&self, offset: usize, compare: u64, swap: u64) -> Result<u64, Fault> {
        self.with_atomic(offset, |a| {
            match a.compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(v) | Err(v) => v,
            }
        })
    }

    /// Atomically loads the 8 bytes at `offset`.
    pub fn load_u64(&self, offset: usize) -> Result<u64, Fault> {
        self.with_atomic(offset, |a| a.load(Ordering::SeqCst))
    }

    /// Atomically stores `value` in the 8 bytes at `offset`.
    pub fn store_u64(&self, offset: usize, value: u64) -> Result<(), Fault> {
        self.with_atomic(offset, |a| a.store(value, Ordering::SeqCst))
    }

    /// The owned bytes back, or `Err(self)` for a raw backing.
    pub fn into_box(self) -> Result<Box<[u8]>, Self> {
        if !self.owned {
            return Err(self);
        }
        let me = ManuallyDrop::new(self);
        let slice = std::ptr::slice_from_raw_parts_mut(me.ptr.as_ptr(), me.len);
        // SAFETY: an owned backing is a `Box<[u8]>` turned into its raw
        // parts (`From<Box<[u8]>>`); `me` is not dropped, so it is
        // rebuilt once, and `self` moved in leaves no view of it.
        Ok(unsafe { Box::from_raw(slice) })
    }

    /// Ends a raw backing's loan: the pointer and length it was made from.
    /// `None` for an owned backing (which is dropped).
    pub fn into_raw(self) -> Option<(*mut u8, usize)> {
        if self.owned {
            return None;
        }
        Some((self.ptr.as_ptr(), self.len))
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if self.owned {
            let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
            // SAFETY: as in `into_box`: the box's raw parts, rebuilt once.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl From<Box<[u8]>> for Backing {
    fn from(b: Box<[u8]>) -> Self {
        let len = b.len();
        let ptr = NonNull::from(Box::leak(b)).cast::<u8>();
        Self {
            ptr,
            len,
            owned: true,
        }
    }
}

impl From<Vec<u8>> for Backing {
    fn from(v: Vec<u8>) -> Self {
        Self::from(v.into_boxed_slice())
    }
}

impl fmt::Debug for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_raw() { "raw" } else { "owned" };
        write!(f, "Backing({kind}, {} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests;
