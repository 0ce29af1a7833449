//! The one mechanism every Cassini binary format (command, event, status block) is defined
//! with: a `layout!`-generated struct plus a table of `(name, bit offset, width)` over a
//! little-endian byte image. Bit `n` is bit `n % 8` of byte `n / 8`, which is where gcc puts
//! the bit-fields of `cassini_user_defs.h` on x86-64, so offsets read straight from the
//! public headers (`field@bit:width` in our notes) are used unchanged.
//!
//! Encoding and decoding go through [`crate::bits`]. Decoding validates what the hardware
//! would reject (a short buffer, an unknown enum code, a constant header field that does not
//! match the format) and returns a typed [`FormatError`], never panics. Reserved bits are
//! ignored on decode and written as zero on encode.

use thiserror::Error;

/// A raw value that names no variant of a hardware enumeration (`TryFrom<u8>` error of every
/// Cassini enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{kind}: unknown value {value}")]
pub struct UnknownValue {
    /// The C enumeration, e.g. `c_dma_op`.
    pub kind: &'static str,
    /// The offending raw value.
    pub value: u64,
}

/// Why bytes could not be decoded as (or a value encoded into) a Cassini format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FormatError {
    /// The input is shorter than the format.
    #[error("{format}: need {need} bytes, got {got}")]
    Truncated {
        /// C struct name of the format.
        format: &'static str,
        /// Bytes the format needs.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// The output buffer is too small for the encoding.
    #[error("{format}: output buffer of {got} bytes, need {need}")]
    BufferTooSmall {
        /// C struct name of the format.
        format: &'static str,
        /// Bytes the encoding needs.
        need: usize,
        /// Bytes available.
        got: usize,
    },
    /// A field holds a code with no meaning.
    #[error(transparent)]
    Unknown(#[from] UnknownValue),
    /// A field that is fixed for this format (command type, size, opcode, event size,
    /// length) holds another value.
    #[error("{format}.{field}: expected {expected}, found {found}")]
    Mismatch {
        /// C struct name of the format.
        format: &'static str,
        /// Field name.
        field: &'static str,
        /// The value the format requires.
        expected: u64,
        /// The value found.
        found: u64,
    },
    /// A (command type, opcode) pair that names no command format of this queue type.
    #[error("unsupported {queue} command: cmd_type {cmd_type}, opcode {opcode}")]
    UnsupportedCommand {
        /// `"transmit"`, `"target"` or `"embedded"`.
        queue: &'static str,
        /// Raw `c_cmd.cmd_type`.
        cmd_type: u8,
        /// Raw `c_cmd.opcode`.
        opcode: u8,
    },
    /// A (size, type) pair that names no event format.
    #[error("unsupported event: event_size {event_size}, event_type {event_type}")]
    UnsupportedEvent {
        /// Raw `event_size`.
        event_size: u8,
        /// Raw `event_type`.
        event_type: u8,
    },
    /// An event slot that holds no (complete) event: `event_size` 0 or return code
    /// `C_RC_NO_EVENT`.
    #[error("no event")]
    NoEvent,
    /// A length field or payload is out of range for the format.
    #[error("{format}: bad length {length} (allowed {min}..={max})")]
    BadLength {
        /// C struct name of the format.
        format: &'static str,
        /// The offending length.
        length: usize,
        /// Smallest allowed.
        min: usize,
        /// Largest allowed.
        max: usize,
    },
}

/// A Rust type stored in a bit-field: its raw encoding and, for enumerations, the raw values
/// that are valid.
pub trait Field: Sized + Copy {
    /// The raw values that decode successfully, or `None` if every value of the field's
    /// width does.
    const RAW_VALUES: Option<&'static [u64]>;
    /// The raw bits to store (higher bits than the field's width are dropped on store).
    fn to_raw(self) -> u64;
    /// The value from raw bits (already limited to the field's width).
    fn from_raw(raw: u64) -> Result<Self, UnknownValue>;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const RAW_VALUES: Option<&'static [u64]> = None;
            fn to_raw(self) -> u64 {
                self as u64
            }
            fn from_raw(raw: u64) -> Result<Self, UnknownValue> {
                // The decoder passes at most `width` bits, and every field declared with this
                // type is at most as wide as the type.
                Ok(raw as $t)
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

impl Field for bool {
    const RAW_VALUES: Option<&'static [u64]> = None;
    fn to_raw(self) -> u64 {
        self as u64
    }
    fn from_raw(raw: u64) -> Result<Self, UnknownValue> {
        Ok(raw != 0)
    }
}

/// How a field of a format is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Fixed by the format (e.g. `cmd_type` of a DMA command); checked on decode.
    Const(u64),
    /// Computed from other fields (e.g. `cmd_size` of a CT command); checked on decode.
    Derived,
    /// A struct field; `Some(values)` lists the valid raw values of an enumeration.
    Value(Option<&'static [u64]>),
}

/// One field of a binary format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDesc {
    /// Field name as in the C struct and the Rust struct.
    pub name: &'static str,
    /// Offset of the lowest bit from bit 0 of the image.
    pub offset: usize,
    /// Width in bits (1..=64).
    pub width: usize,
    /// Constant, derived or value.
    pub kind: FieldKind,
}

/// A fixed-size Cassini format defined by a field table.
pub trait Layout: Sized {
    /// The C struct the format comes from.
    const NAME: &'static str;
    /// Size of the byte image.
    const SIZE: usize;
    /// Every field, constants and derived fields first.
    const FIELDS: &'static [FieldDesc];
    /// Store every field (and constant) into `buf`; other bits are left as they are. Bits
    /// past the end of `buf` are dropped: pass at least [`Layout::SIZE`] bytes.
    fn write_to(&self, buf: &mut [u8]);
    /// Decode from the first [`Layout::SIZE`] bytes of `bytes` (later bytes are ignored).
    fn read_from(bytes: &[u8]) -> Result<Self, FormatError>;

    /// Encode into the first [`Layout::SIZE`] bytes of `out`, zeroing reserved bits.
    fn encode_into(&self, out: &mut [u8]) -> Result<(), FormatError> {
        let Some(dst) = out.get_mut(..Self::SIZE) else {
            return Err(FormatError::BufferTooSmall {
                format: Self::NAME,
                need: Self::SIZE,
                got: out.len(),
            });
        };
        dst.fill(0);
        self.write_to(dst);
        Ok(())
    }

    /// Encode into a new vector of [`Layout::SIZE`] bytes.
    fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; Self::SIZE];
        self.write_to(&mut v);
        v
    }
}

/// Whether a field of `width` bits at bit `offset` is well formed in a `size`-byte image
/// (used by `layout!` at compile time).
pub const fn fits(offset: usize, width: usize, size: usize) -> bool {
    width >= 1 && width <= 64 && offset + width <= size * 8
}

/// Check that `bytes` holds at least `need` bytes of `format`.
pub(crate) fn need(format: &'static str, bytes: &[u8], need: usize) -> Result<(), FormatError> {
    if bytes.len() < need {
        Err(FormatError::Truncated {
            format,
            need,
            got: bytes.len(),
        })
    } else {
        Ok(())
    }
}

/// Define a fixed-size format: the struct (all fields `pub`), its [`Layout`] impl with the
/// field table, and inherent `encode() -> [u8; SIZE]` / `decode(&[u8])`.
///
/// ```text
/// layout! {
///     /// doc
///     pub struct Name("c_struct_name", SIZE_IN_BYTES) {
///         /// doc
///         field[offset:width]: Type,
///     }
///     consts { name[offset:width] = value }
///     derived { name[offset:width] = |s: &Self| -> u64 expression }
/// }
/// ```
macro_rules! layout {
    (
        $(#[$smeta:meta])*
        $vis:vis struct $name:ident ($cname:literal, $size:literal) {
            $( $(#[$fmeta:meta])* $fname:ident [$foff:literal : $fw:literal] : $fty:ty ),* $(,)?
        }
        consts { $( $kname:ident [$koff:literal : $kw:literal] = $kval:expr ),* $(,)? }
        derived { $( $dname:ident [$doff:literal : $dw:literal] = $dexpr:expr ),* $(,)? }
    ) => {
        $(#[$smeta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        $vis struct $name {
            $( $(#[$fmeta])* pub $fname: $fty, )*
        }

        const _: () = {
            $( assert!($crate::cassini::layout::fits($foff, $fw, $size)); )*
            $( assert!($crate::cassini::layout::fits($koff, $kw, $size)); )*
            $( assert!($crate::cassini::layout::fits($doff, $dw, $size)); )*
        };

        impl $crate::cassini::layout::Layout for $name {
            const NAME: &'static str = $cname;
            const SIZE: usize = $size;
            const FIELDS: &'static [$crate::cassini::layout::FieldDesc] = &[
                $( $crate::cassini::layout::FieldDesc {
                    name: stringify!($kname),
                    offset: $koff,
                    width: $kw,
                    kind: $crate::cassini::layout::FieldKind::Const(($kval) as u64),
                }, )*
                $( $crate::cassini::layout::FieldDesc {
                    name: stringify!($dname),
                    offset: $doff,
                    width: $dw,
                    kind: $crate::cassini::layout::FieldKind::Derived,
                }, )*
                $( $crate::cassini::layout::FieldDesc {
                    name: stringify!($fname),
                    offset: $foff,
                    width: $fw,
                    kind: $crate::cassini::layout::FieldKind::Value(
                        <$fty as $crate::cassini::layout::Field>::RAW_VALUES,
                    ),
                }, )*
            ];

            fn write_to(&self, buf: &mut [u8]) {
                $( $crate::bits::set_bits(buf, $koff, $kw, ($kval) as u64); )*
                $( $crate::bits::set_bits(buf, $doff, $dw, ($dexpr)(self) as u64); )*
                $( $crate::bits::set_bits(
                    buf,
                    $foff,
                    $fw,
                    $crate::cassini::layout::Field::to_raw(self.$fname),
                ); )*
            }

            fn read_from(bytes: &[u8]) -> Result<Self, $crate::cassini::layout::FormatError> {
                // Constants first (where the input covers them): a command with the wrong
                // size or opcode is a mismatch even when fewer bytes follow it.
                $(
                    let found = $crate::bits::get_bits(bytes, $koff, $kw);
                    if $koff + $kw <= bytes.len() * 8 && found != ($kval) as u64 {
                        return Err($crate::cassini::layout::FormatError::Mismatch {
                            format: $cname,
                            field: stringify!($kname),
                            expected: ($kval) as u64,
                            found,
                        });
                    }
                )*
                $crate::cassini::layout::need($cname, bytes, $size)?;
                let v = Self {
                    $( $fname: <$fty as $crate::cassini::layout::Field>::from_raw(
                        $crate::bits::get_bits(bytes, $foff, $fw),
                    )?, )*
                };
                $(
                    let found = $crate::bits::get_bits(bytes, $doff, $dw);
                    let expected = ($dexpr)(&v) as u64;
                    if found != expected {
                        return Err($crate::cassini::layout::FormatError::Mismatch {
                            format: $cname,
                            field: stringify!($dname),
                            expected,
                            found,
                        });
                    }
                )*
                Ok(v)
            }
        }

        impl $name {
            /// Size of the byte image.
            pub const SIZE: usize = $size;

            /// Encode into a byte image (reserved bits zero).
            pub fn encode(&self) -> [u8; $size] {
                let mut b = [0u8; $size];
                $crate::cassini::layout::Layout::write_to(self, &mut b);
                b
            }

            /// Decode from the first bytes of `bytes` (later bytes are ignored).
            pub fn decode(bytes: &[u8]) -> Result<Self, $crate::cassini::layout::FormatError> {
                <Self as $crate::cassini::layout::Layout>::read_from(bytes)
            }
        }
    };
}
pub(crate) use layout;

/// Define a hardware enumeration: `#[repr(u8)]`, `TryFrom<u8>` (error [`UnknownValue`]),
/// `From<Self> for u8`, `ALL`, `name()`, `Default` (the first variant) and [`Field`].
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($cname:literal) {
            $( $(#[$vmeta:meta])* $var:ident = $val:literal => $s:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $var = $val, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$var, )+ ];

            /// The C enumerator name without its prefix (as `cxi_*_to_str` prints it).
            pub const fn name(self) -> &'static str {
                match self { $( $name::$var => $s, )+ }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::ALL[0]
            }
        }

        impl TryFrom<u8> for $name {
            type Error = $crate::cassini::layout::UnknownValue;
            fn try_from(v: u8) -> Result<Self, $crate::cassini::layout::UnknownValue> {
                match v {
                    $( $val => Ok($name::$var), )+
                    _ => Err($crate::cassini::layout::UnknownValue { kind: $cname, value: v as u64 }),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(v: $name) -> u8 {
                v as u8
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::cassini::layout::Field for $name {
            const RAW_VALUES: Option<&'static [u64]> = Some(&[ $( $val, )+ ]);
            fn to_raw(self) -> u64 {
                self as u64
            }
            fn from_raw(raw: u64) -> Result<Self, $crate::cassini::layout::UnknownValue> {
                u8::try_from(raw)
                    .ok()
                    .and_then(|b| Self::try_from(b).ok())
                    .ok_or($crate::cassini::layout::UnknownValue { kind: $cname, value: raw })
            }
        }
    };
}
pub(crate) use c_enum;

/// Define a set of single-bit flags over an integer (the `CXI_*`/`C_LE_*` `#define`s):
/// a `Copy` newtype with the named constants, set operations and [`Field`].
macro_rules! c_flags {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident : $t:ty {
            $( $(#[$fmeta:meta])* const $flag:ident = $val:expr; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        $vis struct $name(pub $t);

        impl $name {
            $( $(#[$fmeta])* pub const $flag: $name = $name($val); )+

            /// Every named flag with its name.
            pub const NAMED: &'static [(&'static str, $name)] = &[ $( (stringify!($flag), $name::$flag), )+ ];

            /// No flag set.
            pub const fn empty() -> Self {
                $name(0)
            }

            /// Every named flag set.
            pub const fn all() -> Self {
                $name(0 $( | $val )+)
            }

            /// The raw bits.
            pub const fn bits(self) -> $t {
                self.0
            }

            /// Whether every bit of `other` is set in `self`.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether no bit is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// `self` with the bits of `other` set or cleared.
            pub const fn with(self, other: Self, on: bool) -> Self {
                if on { $name(self.0 | other.0) } else { $name(self.0 & !other.0) }
            }

            /// Bits set that name no flag.
            pub const fn unknown_bits(self) -> $t {
                self.0 & !Self::all().0
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                $name(self.0 | rhs.0)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) {
                self.0 |= rhs.0;
            }
        }

        impl core::ops::BitAnd for $name {
            type Output = Self;
            fn bitand(self, rhs: Self) -> Self {
                $name(self.0 & rhs.0)
            }
        }

        impl core::ops::Sub for $name {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self {
                $name(self.0 & !rhs.0)
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                let mut first = true;
                for (n, v) in Self::NAMED {
                    if self.contains(*v) && !v.is_empty() {
                        if !first {
                            f.write_str(" | ")?;
                        }
                        f.write_str(n)?;
                        first = false;
                    }
                }
                if self.unknown_bits() != 0 {
                    if !first {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{:#x}", self.unknown_bits())?;
                }
                f.write_str(")")
            }
        }

        impl $crate::cassini::layout::Field for $name {
            const RAW_VALUES: Option<&'static [u64]> = None;
            fn to_raw(self) -> u64 {
                self.0 as u64
            }
            fn from_raw(raw: u64) -> Result<Self, $crate::cassini::layout::UnknownValue> {
                Ok($name(raw as $t))
            }
        }
    };
}
pub(crate) use c_flags;

#[cfg(test)]
mod tests {
    use super::*;

    /// Check a field table: widths 1..=64, inside `size` bytes, no overlap.
    pub(crate) fn check_table(fields: &[FieldDesc], size: usize) {
        let mut used = vec![false; size * 8];
        for f in fields {
            assert!((1..=64).contains(&f.width), "{}: width {}", f.name, f.width);
            assert!(f.offset + f.width <= size * 8, "{}: past the end", f.name);
            for (b, u) in used.iter_mut().enumerate().skip(f.offset).take(f.width) {
                assert!(!*u, "{}: bit {} overlaps", f.name, b);
                *u = true;
            }
        }
    }

    layout! {
        /// A test format.
        struct Demo("demo", 8) {
            /// a
            a[8:4]: u8,
            /// b
            b[12:1]: bool,
            /// c
            c[32:32]: u32,
        }
        consts { k[0:8] = 0xA5 }
        derived { d[16:8] = |s: &Self| s.a as u64 + 1 }
    }

    #[test]
    fn demo_layout() {
        check_table(Demo::FIELDS, Demo::SIZE);
        let d = Demo {
            a: 3,
            b: true,
            c: 0xdead_beef,
        };
        let e = d.encode();
        assert_eq!(e, [0xA5, 0x13, 4, 0, 0xef, 0xbe, 0xad, 0xde]);
        assert_eq!(Demo::decode(&e), Ok(d));
        let mut bad = e;
        bad[0] = 0;
        assert!(matches!(
            Demo::decode(&bad),
            Err(FormatError::Mismatch { field: "k", .. })
        ));
        let mut bad = e;
        bad[2] = 9;
        assert!(matches!(
            Demo::decode(&bad),
            Err(FormatError::Mismatch { field: "d", .. })
        ));
        assert!(matches!(
            Demo::decode(&e[..7]),
            Err(FormatError::Truncated {
                need: 8,
                got: 7,
                ..
            })
        ));
        let mut small = [0u8; 4];
        assert!(d.encode_into(&mut small).is_err());
    }
}
