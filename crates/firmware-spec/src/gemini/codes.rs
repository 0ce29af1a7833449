//! Macros for numeric code enums and flag sets, and the error they decode with.

use thiserror::Error;

/// A number that is not one of the codes of its kind (or carries bits outside a flag set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{kind}: unknown value {value:#x}")]
pub struct UnknownCode {
    /// The enum or flag set being decoded.
    pub kind: &'static str,
    /// The offending value (for flag sets: the unknown bits).
    pub value: u64,
}

/// Define a C-like enum with explicit codes, `ALL`, `code()` and `TryFrom<repr>`.
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $var:ident = $val:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr($repr)]
        pub enum $name {
            $( $(#[$vmeta])* $var = $val, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$var, )* ];

            /// The numeric code.
            pub const fn code(self) -> $repr {
                self as $repr
            }
        }

        impl TryFrom<$repr> for $name {
            type Error = $crate::gemini::codes::UnknownCode;

            fn try_from(v: $repr) -> Result<Self, $crate::gemini::codes::UnknownCode> {
                $( if v == $val { return Ok($name::$var); } )*
                Err($crate::gemini::codes::UnknownCode { kind: stringify!($name), value: v as u64 })
            }
        }

        impl From<$name> for $repr {
            fn from(v: $name) -> $repr {
                v as $repr
            }
        }
    };
}

/// Define a flag set: a transparent newtype over the integer with named constants,
/// `KNOWN`, `contains`, `|`, and a strict `from_bits` that rejects unknown bits.
macro_rules! flag_set {
    (
        $(#[$meta:meta])*
        pub struct $name:ident : $repr:ty {
            $( $(#[$fmeta:meta])* const $flag:ident = $val:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $repr);

        impl $name {
            $( $(#[$fmeta])* pub const $flag: $name = $name($val); )*

            /// Every defined bit.
            pub const KNOWN: $repr = 0 $( | $val )*;

            /// No flag set.
            pub const fn empty() -> Self {
                $name(0)
            }

            /// The raw value.
            pub const fn bits(self) -> $repr {
                self.0
            }

            /// Whether every bit of `other` is set in `self`.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any bit of `other` is set in `self`.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            /// Both sets together.
            pub const fn union(self, other: Self) -> Self {
                $name(self.0 | other.0)
            }

            /// Accept `v` only if it has no bit outside [`Self::KNOWN`].
            pub fn from_bits(v: $repr) -> Result<Self, $crate::gemini::codes::UnknownCode> {
                let unknown = v & !Self::KNOWN;
                if unknown != 0 {
                    return Err($crate::gemini::codes::UnknownCode {
                        kind: stringify!($name),
                        value: unknown as u64,
                    });
                }
                Ok($name(v))
            }
        }

        impl core::ops::BitOr for $name {
            type Output = $name;

            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }
    };
}

pub(crate) use code_enum;
pub(crate) use flag_set;
