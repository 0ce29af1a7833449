//! Datatypes: the `Equivalence` trait (what rsmpi calls it) maps a Rust type onto an MPI
//! datatype; buffers of such types are what point-to-point and collectives move. Derived
//! datatypes: contiguous and vector layouts ([`Vector`]), packed and unpacked on the host, as
//! MPI libraries do for non-contiguous data without NIC gather/scatter.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use transport::error::{Error, Result};

/// The element kinds reductions and NIC atomics understand. User types are [`Kind::Bytes`]:
/// they move, but predefined reduction operations do not apply to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `MPI_INT8_T`.
    I8,
    /// `MPI_UINT8_T` / `MPI_BYTE`.
    U8,
    /// `MPI_INT16_T`.
    I16,
    /// `MPI_UINT16_T`.
    U16,
    /// `MPI_INT32_T`.
    I32,
    /// `MPI_UINT32_T`.
    U32,
    /// `MPI_INT64_T`.
    I64,
    /// `MPI_UINT64_T`.
    U64,
    /// `MPI_FLOAT`.
    F32,
    /// `MPI_DOUBLE`.
    F64,
    /// A user type of this many bytes (no predefined reductions).
    Bytes(usize),
}

impl Kind {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Kind::I8 | Kind::U8 => 1,
            Kind::I16 | Kind::U16 => 2,
            Kind::I32 | Kind::U32 | Kind::F32 => 4,
            Kind::I64 | Kind::U64 | Kind::F64 => 8,
            Kind::Bytes(n) => n,
        }
    }
}

/// A Rust type with an MPI datatype: plain data (any bit pattern valid, no padding), so a
/// buffer of it is its bytes. Implement it for a `#[repr(C)]` struct deriving zerocopy's
/// `FromBytes, IntoBytes, Immutable, KnownLayout` with `const KIND: Kind = Kind::Bytes(size)`.
pub trait Equivalence: FromBytes + IntoBytes + Immutable + KnownLayout + Copy + 'static {
    /// The element kind.
    const KIND: Kind;
}

macro_rules! equivalence {
    ($($t:ty => $k:ident),*) => {$(
        impl Equivalence for $t {
            const KIND: Kind = Kind::$k;
        }
    )*};
}
equivalence!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64,
    u64 => U64, f32 => F32, f64 => F64);

impl Equivalence for isize {
    const KIND: Kind = Kind::I64;
}
impl Equivalence for usize {
    const KIND: Kind = Kind::U64;
}

/// Something that can be sent: a value or a slice of [`Equivalence`] elements.
pub trait Buffer {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The element kind.
    fn kind(&self) -> Kind;
}

/// Something that can be received into.
pub trait BufferMut: Buffer {
    /// The bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl<T: Equivalence> Buffer for T {
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
    fn kind(&self) -> Kind {
        T::KIND
    }
}
impl<T: Equivalence> BufferMut for T {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_bytes()
    }
}
impl<T: Equivalence> Buffer for [T] {
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
    fn kind(&self) -> Kind {
        T::KIND
    }
}
impl<T: Equivalence> BufferMut for [T] {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_bytes()
    }
}
impl<T: Equivalence> Buffer for Vec<T> {
    fn bytes(&self) -> &[u8] {
        self.as_slice().as_bytes()
    }
    fn kind(&self) -> Kind {
        T::KIND
    }
}
impl<T: Equivalence> BufferMut for Vec<T> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice().as_mut_bytes()
    }
}

impl<T: Equivalence, const N: usize> Buffer for [T; N] {
    fn bytes(&self) -> &[u8] {
        self[..].as_bytes()
    }
    fn kind(&self) -> Kind {
        T::KIND
    }
}
impl<T: Equivalence, const N: usize> BufferMut for [T; N] {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self[..].as_mut_bytes()
    }
}

/// Bytes holding elements of a given kind (a buffer described by an MPI datatype rather than
/// a Rust type, as the C bindings have them): sends and reductions see `kind`.
#[derive(Debug)]
pub struct KindBytes<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// Their element kind.
    pub kind: Kind,
}

impl Buffer for KindBytes<'_> {
    fn bytes(&self) -> &[u8] {
        self.bytes
    }
    fn kind(&self) -> Kind {
        self.kind
    }
}

/// Writable bytes holding elements of a given kind.
#[derive(Debug)]
pub struct KindBytesMut<'a> {
    /// The bytes.
    pub bytes: &'a mut [u8],
    /// Their element kind.
    pub kind: Kind,
}

impl Buffer for KindBytesMut<'_> {
    fn bytes(&self) -> &[u8] {
        self.bytes
    }
    fn kind(&self) -> Kind {
        self.kind
    }
}

impl BufferMut for KindBytesMut<'_> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
}

/// Owned bytes holding elements of a given kind (a staged copy of a C buffer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindVec {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Their element kind.
    pub kind: Kind,
}

impl Buffer for KindVec {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    fn kind(&self) -> Kind {
        self.kind
    }
}

/// Elements of `T` from bytes (a whole number of elements; a trailing partial element is
/// dropped).
pub fn vec_from_bytes<T: Equivalence>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    bytes
        .chunks_exact(size)
        .filter_map(|c| T::read_from_bytes(c).ok())
        .collect()
}

/// One value of `T` from the front of `bytes`.
pub fn value_from_bytes<T: Equivalence>(bytes: &[u8]) -> Result<T> {
    T::read_from_prefix(bytes)
        .map(|(v, _)| v)
        .map_err(|_| Error::Count(format!("{} bytes do not hold one element", bytes.len())))
}

/// A vector datatype (`MPI_Type_vector`): `count` blocks of `blocklength` elements, block
/// starts `stride` elements apart. `MPI_Type_contiguous(n)` is `Vector::new(1, n, n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vector {
    /// Blocks.
    pub count: usize,
    /// Elements per block.
    pub blocklength: usize,
    /// Elements between block starts.
    pub stride: usize,
}

impl Vector {
    /// `MPI_Type_vector(count, blocklength, stride)`.
    pub fn new(count: usize, blocklength: usize, stride: usize) -> Self {
        Vector {
            count,
            blocklength,
            stride,
        }
    }

    /// `MPI_Type_contiguous(n)`.
    pub fn contiguous(n: usize) -> Self {
        Vector::new(1, n, n)
    }

    /// Elements of data the type selects.
    pub fn size(&self) -> usize {
        self.count * self.blocklength
    }

    /// Elements the type spans in the buffer (its extent).
    pub fn extent(&self) -> usize {
        if self.count == 0 {
            0
        } else {
            (self.count - 1) * self.stride + self.blocklength
        }
    }

    fn check<T>(&self, buf: &[T]) -> Result<()> {
        if buf.len() < self.extent() {
            return Err(Error::Count(format!(
                "a vector type spanning {} elements over a buffer of {}",
                self.extent(),
                buf.len()
            )));
        }
        Ok(())
    }

    /// The selected elements, packed (`MPI_Pack`).
    pub fn pack<T: Equivalence>(&self, buf: &[T]) -> Result<Vec<T>> {
        self.check(buf)?;
        let mut out = Vec::with_capacity(self.size());
        for b in 0..self.count {
            let s = b * self.stride;
            out.extend_from_slice(&buf[s..s + self.blocklength]);
        }
        Ok(out)
    }

    /// Scatter packed elements back into the layout (`MPI_Unpack`).
    pub fn unpack<T: Equivalence>(&self, packed: &[T], buf: &mut [T]) -> Result<()> {
        self.check(buf)?;
        if packed.len() < self.size() {
            return Err(Error::Count(format!(
                "{} packed elements for a type of {}",
                packed.len(),
                self.size()
            )));
        }
        for b in 0..self.count {
            let s = b * self.stride;
            buf[s..s + self.blocklength]
                .copy_from_slice(&packed[b * self.blocklength..(b + 1) * self.blocklength]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_pack_unpack_round_trip() {
        let v = Vector::new(3, 2, 4);
        let buf: Vec<i32> = (0..10).collect();
        let p = v.pack(&buf).unwrap();
        assert_eq!(p, vec![0, 1, 4, 5, 8, 9]);
        let mut out = vec![-1; 10];
        v.unpack(&p, &mut out).unwrap();
        assert_eq!(out, vec![0, 1, -1, -1, 4, 5, -1, -1, 8, 9]);
        assert!(v.pack(&buf[..9]).is_err());
        assert_eq!(Vector::contiguous(5).extent(), 5);
    }

    #[test]
    fn kind_bytes_carry_their_kind() {
        let x = [1i32, 2];
        let b = KindBytes {
            bytes: x.bytes(),
            kind: Kind::I32,
        };
        assert_eq!((b.bytes().len(), b.kind()), (8, Kind::I32));
        let mut y = [0u8; 4];
        let mut m = KindBytesMut {
            bytes: &mut y,
            kind: Kind::F32,
        };
        m.bytes_mut()[0] = 7;
        assert_eq!(m.kind(), Kind::F32);
        assert_eq!(y[0], 7);
        let v = KindVec {
            bytes: vec![0; 16],
            kind: Kind::F64,
        };
        assert_eq!((v.bytes().len(), v.kind()), (16, Kind::F64));
    }

    #[test]
    fn bytes_round_trip() {
        let x = vec![1.5f64, -2.0];
        assert_eq!(vec_from_bytes::<f64>(x.bytes()), x);
        assert_eq!(value_from_bytes::<u32>(&[1, 0, 0, 0, 9]).unwrap(), 1);
        assert!(value_from_bytes::<u64>(&[1]).is_err());
    }
}
