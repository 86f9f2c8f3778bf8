//! The shape every header view shares, generated once.
//!
//! A view is a thin wrapper over any `T: AsRef<[u8]>`. `new_checked` verifies
//! the length once; after that no accessor or setter of that view panics.

/// Declares a view type `$name<T>` over a header of `$len` bytes.
macro_rules! header_view {
    ($(#[$doc:meta])* $name:ident, $header:expr, $len:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// The header length in bytes.
            pub const LEN: usize = $len;

            /// Wraps `buffer` without checking its length; accessors may panic
            /// on a short buffer. Use for emitting into a buffer you sized.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps `buffer` after checking it holds the whole header.
            pub fn new_checked(buffer: T) -> crate::Result<Self> {
                let v = Self::new_unchecked(buffer);
                v.check_len()?;
                Ok(v)
            }

            /// `Err(Truncated)` if the buffer is shorter than the header.
            pub fn check_len(&self) -> crate::Result<()> {
                crate::field::check($header, Self::LEN, self.buffer.as_ref().len())
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The header bytes.
            pub fn header_bytes(&self) -> &[u8] {
                &self.buffer.as_ref()[..Self::LEN]
            }
        }
    };
}

pub(crate) use header_view;
