//! The one mechanism every Gemini binary format is defined with: a struct of `u64` fields
//! plus a table of `(name, bit offset, width)` over a little-endian byte image (bit `n` is
//! bit `n % 8` of byte `n / 8`, so bit 64 is bit 0 of the second qword, matching the C
//! bit-field layout of the public headers on x86-64). Encoding and decoding go through
//! [`crate::bits`].

use thiserror::Error;

/// One field of a binary format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Field name as in the Rust struct.
    pub name: &'static str,
    /// Offset of the lowest bit from bit 0 of the image.
    pub offset: usize,
    /// Width in bits (1..=64).
    pub width: usize,
}

impl Field {
    /// The largest value the field holds.
    pub const fn max(&self) -> u64 {
        crate::bits::mask(self.width as u32)
    }
}

/// Why a Gemini format could not be encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FormatError {
    /// The input buffer is shorter than the format.
    #[error("{format}: need {need} bytes, got {got}")]
    Short {
        /// Format name.
        format: &'static str,
        /// Bytes the format needs.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// A list of field values has the wrong length.
    #[error("{format}: need {need} field values, got {got}")]
    FieldCount {
        /// Format name.
        format: &'static str,
        /// Fields of the format.
        need: usize,
        /// Values given.
        got: usize,
    },
    /// A field value does not fit its width.
    #[error("{format}.{field}: value {value:#x} exceeds {width} bits")]
    Overflow {
        /// Format name.
        format: &'static str,
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
        /// Field width.
        width: usize,
    },
    /// A field holds a value with no meaning (an unknown enum code, a bad CRC, ...).
    #[error("{format}.{field}: invalid value {value:#x}")]
    Invalid {
        /// Format name.
        format: &'static str,
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
    },
}

/// What every format defined with `bit_format!` offers, for generic code (register dumps,
/// golden tests).
pub trait BitFormat: Sized + Copy + PartialEq + core::fmt::Debug {
    /// Format name.
    const NAME: &'static str;
    /// Bytes of the image.
    const BYTES: usize;
    /// The field table.
    fn fields() -> &'static [Field];
    /// Field values in table order.
    fn to_values(&self) -> Vec<u64>;
    /// Build from field values in table order; errors if the count is wrong or a value
    /// does not fit.
    fn from_values(values: &[u64]) -> Result<Self, FormatError>;
    /// Encode into a byte vector of `BYTES`.
    fn encode_vec(&self) -> Result<Vec<u8>, FormatError>;
    /// Decode from the first `BYTES` bytes.
    fn decode_slice(buf: &[u8]) -> Result<Self, FormatError>;
}

/// Check that a field table is well formed: widths 1..=64, inside `size` bytes, no overlap.
/// Returns the first problem as text. Used by the unit tests of every format.
pub fn check_table(fields: &[Field], size: usize) -> Result<(), String> {
    let mut used = vec![false; size * 8];
    for f in fields {
        if f.width == 0 || f.width > 64 {
            return Err(format!("{}: width {}", f.name, f.width));
        }
        if f.offset + f.width > size * 8 {
            return Err(format!("{}: ends past {} bytes", f.name, size));
        }
        for (b, slot) in used.iter_mut().enumerate().skip(f.offset).take(f.width) {
            if *slot {
                return Err(format!("{}: bit {} overlaps", f.name, b));
            }
            *slot = true;
        }
    }
    Ok(())
}

/// Define a binary format: a struct with one `pub u64` per field, its `FIELDS` table and
/// `SIZE`, `encode` (errors when a value does not fit) and `decode` (errors on a short
/// buffer; bits outside every field are ignored, as hardware ignores unused bits).
macro_rules! bit_format {
    (
        $(#[$meta:meta])*
        pub struct $name:ident, $size:expr, {
            $( $(#[$fmeta:meta])* $field:ident : $off:expr , $width:expr ; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: u64, )*
        }

        impl $name {
            /// Size of the byte image.
            pub const SIZE: usize = $size;
            /// The field table: `(name, bit offset, width)`.
            pub const FIELDS: &'static [$crate::gemini::layout::Field] = &[
                $( $crate::gemini::layout::Field {
                    name: stringify!($field), offset: $off, width: $width
                }, )*
            ];

            /// Encode into the little-endian byte image; unused bits are 0.
            pub fn encode(&self) -> Result<[u8; $size], $crate::gemini::layout::FormatError> {
                let mut out = [0u8; $size];
                $(
                    if self.$field > $crate::bits::mask($width) {
                        return Err($crate::gemini::layout::FormatError::Overflow {
                            format: stringify!($name),
                            field: stringify!($field),
                            value: self.$field,
                            width: $width,
                        });
                    }
                    $crate::bits::set_bits(&mut out, $off, $width, self.$field);
                )*
                Ok(out)
            }

            /// Decode from the first `SIZE` bytes of `buf`.
            pub fn decode(buf: &[u8]) -> Result<Self, $crate::gemini::layout::FormatError> {
                if buf.len() < $size {
                    return Err($crate::gemini::layout::FormatError::Short {
                        format: stringify!($name),
                        need: $size,
                        got: buf.len(),
                    });
                }
                Ok(Self { $( $field: $crate::bits::get_bits(buf, $off, $width), )* })
            }
        }

        impl $crate::gemini::layout::BitFormat for $name {
            const NAME: &'static str = stringify!($name);
            const BYTES: usize = $size;

            fn fields() -> &'static [$crate::gemini::layout::Field] {
                Self::FIELDS
            }

            fn to_values(&self) -> Vec<u64> {
                vec![ $( self.$field, )* ]
            }

            fn from_values(values: &[u64]) -> Result<Self, $crate::gemini::layout::FormatError> {
                let mut it = values.iter().copied();
                let v = Self { $( $field: it.next().unwrap_or(u64::MAX), )* };
                if values.len() != Self::FIELDS.len() {
                    return Err($crate::gemini::layout::FormatError::FieldCount {
                        format: stringify!($name),
                        need: Self::FIELDS.len(),
                        got: values.len(),
                    });
                }
                v.encode()?;
                Ok(v)
            }

            fn encode_vec(&self) -> Result<Vec<u8>, $crate::gemini::layout::FormatError> {
                Ok(self.encode()?.to_vec())
            }

            fn decode_slice(buf: &[u8]) -> Result<Self, $crate::gemini::layout::FormatError> {
                Self::decode(buf)
            }
        }
    };
}

pub(crate) use bit_format;

/// Read little-endian qword `index` of a byte image (missing bytes read as 0).
pub fn qword(buf: &[u8], index: usize) -> u64 {
    crate::bits::get_bits(buf, index * 64, 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    bit_format! {
        /// Test format.
        pub struct Demo, 16, {
            /// a
            a: 0, 4;
            /// b
            b: 60, 8;
            /// c
            c: 127, 1;
        }
    }

    #[test]
    fn demo_roundtrip_and_errors() {
        let d = Demo {
            a: 0xA,
            b: 0x5C,
            c: 1,
        };
        let bytes = d.encode().unwrap();
        assert_eq!(bytes[0], 0x0A);
        assert_eq!(bytes[7], 0xC0);
        assert_eq!(bytes[8], 0x05);
        assert_eq!(bytes[15], 0x80);
        assert_eq!(Demo::decode(&bytes).unwrap(), d);
        assert_eq!(qword(&bytes, 1), 0x8000_0000_0000_0005);
        assert!(matches!(
            Demo { a: 0x10, ..d }.encode(),
            Err(FormatError::Overflow { field: "a", .. })
        ));
        assert!(matches!(
            Demo::decode(&bytes[..15]),
            Err(FormatError::Short {
                need: 16,
                got: 15,
                ..
            })
        ));
        check_table(Demo::FIELDS, Demo::SIZE).unwrap();
        assert!(
            check_table(
                &[
                    Field {
                        name: "x",
                        offset: 0,
                        width: 4
                    },
                    Field {
                        name: "y",
                        offset: 3,
                        width: 1
                    }
                ],
                1
            )
            .is_err()
        );
    }
}
