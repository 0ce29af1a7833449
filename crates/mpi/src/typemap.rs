//! General derived datatypes as byte layouts (MPI 4.1 §5.1): a type map reduced to the runs of
//! contiguous bytes one element of the type selects, with its lower bound, extent and true
//! extent. Built from the type constructors (`MPI_Type_contiguous`, `_vector`, `_hvector`,
//! `_indexed`, `_hindexed`, `_indexed_block`, `_create_struct`, `_create_resized`) and used to
//! pack the selected bytes of `count` elements into a contiguous message and to scatter a
//! message back (`MPI_Pack` / `MPI_Unpack`), as MPI libraries do for non-contiguous data.
//!
//! Offsets are relative to the buffer's origin (the address a C program passes), so they may be
//! negative; a byte slice covering [`Layout::span`] stands for the buffer.

use crate::datatype::Kind;
use transport::error::{Error, Result};

/// The bytes one element of a datatype selects, and its bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Runs of selected bytes: (offset from the origin, length), in type-map order, adjacent
    /// runs merged.
    blocks: Vec<(isize, usize)>,
    /// Selected bytes per element.
    size: usize,
    /// Lower and upper bound (the extent is `ub - lb`).
    lb: isize,
    ub: isize,
    /// Bounds of the bytes actually selected.
    true_lb: isize,
    true_ub: isize,
    /// The element kind when every basic element of the type has the same one (reductions
    /// and NIC atomics need it); `None` for mixed types.
    kind: Option<Kind>,
    /// Basic elements per element of the type.
    elements: usize,
}

impl Layout {
    /// A basic type: `size` bytes of `kind`.
    pub fn basic(kind: Kind) -> Self {
        let size = kind.size();
        Layout {
            blocks: if size == 0 { vec![] } else { vec![(0, size)] },
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            kind: Some(kind),
            elements: 1,
        }
    }

    /// A basic type made of `parts` (offset, kind) with the given extent (the pair types of
    /// `MPI_MINLOC`, such as `MPI_DOUBLE_INT`).
    pub fn basic_struct(parts: &[(isize, Kind)], extent: usize) -> Result<Self> {
        let types: Vec<Layout> = parts.iter().map(|&(_, k)| Layout::basic(k)).collect();
        let refs: Vec<&Layout> = types.iter().collect();
        let offs: Vec<isize> = parts.iter().map(|&(o, _)| o).collect();
        let s = Layout::structure(&vec![1; parts.len()], &offs, &refs)?;
        Layout::resized(&s, 0, extent as isize)
    }

    /// Selected bytes per element (`MPI_Type_size`).
    pub fn size(&self) -> usize {
        self.size
    }
    /// `MPI_Type_get_extent`'s lower bound.
    pub fn lb(&self) -> isize {
        self.lb
    }
    /// `MPI_Type_get_extent`'s extent.
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }
    /// `MPI_Type_get_true_extent`'s lower bound.
    pub fn true_lb(&self) -> isize {
        self.true_lb
    }
    /// `MPI_Type_get_true_extent`'s extent.
    pub fn true_extent(&self) -> isize {
        self.true_ub - self.true_lb
    }
    /// The uniform element kind, if any.
    pub fn kind(&self) -> Option<Kind> {
        self.kind
    }
    /// Basic elements per element (`MPI_Get_elements` of one element).
    pub fn elements(&self) -> usize {
        self.elements
    }
    /// The runs of selected bytes of one element.
    pub fn blocks(&self) -> &[(isize, usize)] {
        &self.blocks
    }

    /// Whether `count` elements are one run of bytes starting at the origin (no packing
    /// needed).
    pub fn is_contiguous(&self) -> bool {
        self.blocks.is_empty()
            || (self.blocks.len() == 1
                && self.blocks[0].0 == 0
                && self.lb == 0
                && self.extent() == self.size as isize)
    }

    /// The bytes `count` elements touch: (lowest offset from the origin, length).
    pub fn span(&self, count: usize) -> (isize, usize) {
        if count == 0 || self.size == 0 {
            return (0, 0);
        }
        let step = (count as isize - 1) * self.extent();
        let lo = self.true_lb + step.min(0);
        let hi = self.true_ub + step.max(0);
        (lo, (hi - lo) as usize)
    }

    /// Repeat `old` `count` times, `stride` bytes apart, as one layout with the given bounds
    /// (the shared part of every constructor): blocks of `blocklens[i]` elements at byte
    /// displacements `displs[i]`.
    fn blocks_of(old: &Layout, blocklens: &[usize], displs: &[isize]) -> Result<Self> {
        if blocklens.len() != displs.len() {
            return Err(Error::Arg(format!(
                "{} block lengths for {} displacements",
                blocklens.len(),
                displs.len()
            )));
        }
        let parts: Vec<(&Layout, usize, isize)> = blocklens
            .iter()
            .zip(displs)
            .map(|(&n, &d)| (old, n, d))
            .collect();
        Self::combine(&parts)
    }

    /// The layout of blocks (`type`, element count, byte displacement), in order.
    fn combine(parts: &[(&Layout, usize, isize)]) -> Result<Self> {
        let mut out = Layout {
            blocks: Vec::new(),
            size: 0,
            lb: 0,
            ub: 0,
            true_lb: 0,
            true_ub: 0,
            kind: None,
            elements: 0,
        };
        let mut bounds: Option<(isize, isize, isize, isize)> = None;
        let mut kinds: Option<Option<Kind>> = None;
        for &(t, n, d) in parts {
            if n == 0 {
                continue;
            }
            let ext = t.extent();
            let reps = n as isize;
            for i in 0..n {
                let base = d
                    .checked_add((i as isize).checked_mul(ext).ok_or_else(overflow)?)
                    .ok_or_else(overflow)?;
                for &(o, l) in &t.blocks {
                    out.push(base + o, l);
                }
            }
            out.size = out
                .size
                .checked_add(t.size.checked_mul(n).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            out.elements += t.elements * n;
            let last = (reps - 1) * ext;
            let (lb, ub) = (d + t.lb + last.min(0), d + t.ub + last.max(0));
            let (tlb, tub) = (d + t.true_lb + last.min(0), d + t.true_ub + last.max(0));
            bounds = Some(match bounds {
                None => (lb, ub, tlb, tub),
                Some((a, b, c, e)) => (a.min(lb), b.max(ub), c.min(tlb), e.max(tub)),
            });
            kinds = Some(match kinds {
                None => t.kind,
                Some(k) if k == t.kind => k,
                Some(_) => None,
            });
        }
        if let Some((lb, ub, tlb, tub)) = bounds {
            out.lb = lb;
            out.ub = ub;
            out.true_lb = tlb;
            out.true_ub = tub;
        }
        out.kind = kinds.flatten();
        Ok(out)
    }

    fn push(&mut self, off: isize, len: usize) {
        if len == 0 {
            return;
        }
        if let Some(last) = self.blocks.last_mut()
            && last.0 + last.1 as isize == off
        {
            last.1 += len;
            return;
        }
        self.blocks.push((off, len));
    }

    /// `MPI_Type_contiguous`.
    pub fn contiguous(count: usize, old: &Layout) -> Result<Self> {
        Self::blocks_of(old, &[count], &[0])
    }

    /// `MPI_Type_hvector`: `count` blocks of `blocklen` elements, `stride` bytes apart.
    pub fn hvector(count: usize, blocklen: usize, stride: isize, old: &Layout) -> Result<Self> {
        let displs: Vec<isize> = (0..count as isize).map(|i| i * stride).collect();
        Self::blocks_of(old, &vec![blocklen; count], &displs)
    }

    /// `MPI_Type_vector`: the stride counted in extents of `old`.
    pub fn vector(count: usize, blocklen: usize, stride: isize, old: &Layout) -> Result<Self> {
        let s = stride.checked_mul(old.extent()).ok_or_else(overflow)?;
        Self::hvector(count, blocklen, s, old)
    }

    /// `MPI_Type_create_hindexed`: displacements in bytes.
    pub fn hindexed(blocklens: &[usize], displs: &[isize], old: &Layout) -> Result<Self> {
        Self::blocks_of(old, blocklens, displs)
    }

    /// `MPI_Type_indexed`: displacements in extents of `old`.
    pub fn indexed(blocklens: &[usize], displs: &[isize], old: &Layout) -> Result<Self> {
        let d = displs
            .iter()
            .map(|&x| x.checked_mul(old.extent()).ok_or_else(overflow))
            .collect::<Result<Vec<_>>>()?;
        Self::blocks_of(old, blocklens, &d)
    }

    /// `MPI_Type_create_indexed_block`.
    pub fn indexed_block(blocklen: usize, displs: &[isize], old: &Layout) -> Result<Self> {
        Self::indexed(&vec![blocklen; displs.len()], displs, old)
    }

    /// `MPI_Type_create_struct`: block `i` is `blocklens[i]` elements of `types[i]` at byte
    /// displacement `displs[i]`.
    pub fn structure(blocklens: &[usize], displs: &[isize], types: &[&Layout]) -> Result<Self> {
        if blocklens.len() != displs.len() || displs.len() != types.len() {
            return Err(Error::Arg(format!(
                "a struct type of {} block lengths, {} displacements and {} types",
                blocklens.len(),
                displs.len(),
                types.len()
            )));
        }
        let parts: Vec<(&Layout, usize, isize)> = types
            .iter()
            .zip(blocklens)
            .zip(displs)
            .map(|((&t, &n), &d)| (t, n, d))
            .collect();
        Self::combine(&parts)
    }

    /// `MPI_Type_create_resized`: the same bytes with new bounds.
    pub fn resized(old: &Layout, lb: isize, extent: isize) -> Result<Self> {
        let ub = lb.checked_add(extent).ok_or_else(overflow)?;
        Ok(Layout {
            lb,
            ub,
            ..old.clone()
        })
    }

    /// The runs of selected bytes of `count` elements, in type-map order, a run that starts
    /// where the previous one ends merged into it (contiguous elements are one run, so packing
    /// `count` bytes is one copy, not `count`).
    fn runs(&self, count: usize) -> impl Iterator<Item = (isize, usize)> + '_ {
        let ext = self.extent();
        let whole = self.is_contiguous();
        let first = whole
            .then(|| (0, self.size * count))
            .filter(|&(_, l)| l > 0);
        let mut each = (0..if whole { 0 } else { count })
            .flat_map(move |i| {
                let base = i as isize * ext;
                self.blocks.iter().map(move |&(o, l)| (base + o, l))
            })
            .filter(|&(_, l)| l > 0);
        let mut cur: Option<(isize, usize)> = None;
        first.into_iter().chain(std::iter::from_fn(move || {
            for (o, l) in each.by_ref() {
                match cur {
                    Some((co, cl)) if co.checked_add_unsigned(cl) == Some(o) => {
                        cur = Some((co, cl + l));
                    }
                    Some(done) => {
                        cur = Some((o, l));
                        return Some(done);
                    }
                    None => cur = Some((o, l)),
                }
            }
            cur.take()
        }))
    }

    /// `buf[i]` is the byte at offset `i - origin`: the range of one run, checked.
    fn range(
        buf_len: usize,
        origin: isize,
        off: isize,
        len: usize,
    ) -> Result<std::ops::Range<usize>> {
        let start = origin
            .checked_add(off)
            .filter(|s| *s >= 0)
            .map(|s| s as usize);
        match start {
            Some(s) if s.checked_add(len).is_some_and(|e| e <= buf_len) => Ok(s..s + len),
            _ => Err(Error::Count(format!(
                "a datatype run of {len} bytes at offset {off} outside a buffer of {buf_len} bytes (origin {origin})"
            ))),
        }
    }

    /// The selected bytes of `count` elements of a buffer, packed (`MPI_Pack`). `buf[origin]`
    /// is the buffer's origin (`origin` may lie outside `buf`: for a type whose bytes all
    /// lie above or below the origin, `buf` covers [`span`](Self::span) only).
    pub fn pack(&self, buf: &[u8], origin: isize, count: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.size * count);
        for (off, len) in self.runs(count) {
            out.extend_from_slice(&buf[Self::range(buf.len(), origin, off, len)?]);
        }
        Ok(out)
    }

    /// Scatter `packed` into the selected bytes of `count` elements of `buf` (`MPI_Unpack`);
    /// a shorter `packed` fills the first elements only (a short message). Returns the bytes
    /// used.
    pub fn unpack(
        &self,
        packed: &[u8],
        buf: &mut [u8],
        origin: isize,
        count: usize,
    ) -> Result<usize> {
        let mut used = 0;
        for (off, len) in self.runs(count) {
            if used >= packed.len() {
                break;
            }
            let n = len.min(packed.len() - used);
            let r = Self::range(buf.len(), origin, off, n)?;
            buf[r].copy_from_slice(&packed[used..used + n]);
            used += n;
        }
        Ok(used)
    }

    /// Basic elements in `bytes` packed bytes of this type (`MPI_Get_elements`), if they end
    /// on an element boundary.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return Some(0);
        }
        let whole = bytes / self.size;
        let rest = bytes % self.size;
        if rest == 0 {
            return Some(whole * self.elements);
        }
        let k = self.kind?;
        rest.is_multiple_of(k.size())
            .then(|| whole * self.elements + rest / k.size())
    }
}

fn overflow() -> Error {
    Error::Count("datatype size or displacement overflows".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_bounds_and_pack_round_trip() {
        let int = Layout::basic(Kind::I32);
        let v = Layout::vector(3, 2, 4, &int).unwrap();
        assert_eq!(v.size(), 24);
        assert_eq!(v.extent(), 40);
        assert_eq!(v.blocks(), &[(0, 8), (16, 8), (32, 8)]);
        assert_eq!(v.kind(), Some(Kind::I32));
        assert!(!v.is_contiguous());
        let buf: Vec<u8> = (0..40).collect();
        let p = v.pack(&buf, 0, 1).unwrap();
        assert_eq!(&p[..8], &buf[0..8]);
        assert_eq!(&p[8..16], &buf[16..24]);
        let mut out = vec![0u8; 40];
        assert_eq!(v.unpack(&p, &mut out, 0, 1).unwrap(), 24);
        assert_eq!(&out[32..40], &buf[32..40]);
        assert_eq!(&out[8..16], &[0; 8]);
        assert!(v.pack(&buf[..39], 0, 1).is_err());
        assert_eq!(v.elements_in(24), Some(6));
        assert_eq!(v.elements_in(28), Some(7));
        assert_eq!(v.elements_in(30), None);
    }

    #[test]
    fn contiguous_merges_and_resized_moves_bounds() {
        let d = Layout::basic(Kind::F64);
        let c = Layout::contiguous(4, &d).unwrap();
        assert!(c.is_contiguous());
        assert_eq!((c.size(), c.extent(), c.blocks().len()), (32, 32, 1));
        let r = Layout::resized(&d, -8, 24).unwrap();
        assert_eq!(
            (r.lb(), r.extent(), r.true_lb(), r.true_extent()),
            (-8, 24, 0, 8)
        );
        assert_eq!(r.span(3), (0, 56));
        let two = Layout::contiguous(2, &r).unwrap();
        assert_eq!(two.blocks(), &[(0, 8), (24, 8)]);
        assert_eq!((two.lb(), two.extent()), (-8, 48));
    }

    #[test]
    fn struct_mixed_kinds_and_negative_displacements() {
        let i = Layout::basic(Kind::I32);
        let d = Layout::basic(Kind::F64);
        let s = Layout::structure(&[1, 2], &[0, 8], &[&i, &d]).unwrap();
        assert_eq!((s.size(), s.extent(), s.kind()), (20, 24, None));
        assert_eq!(s.blocks(), &[(0, 4), (8, 16)]);
        let h = Layout::hindexed(&[1, 1], &[8, -8], &i).unwrap();
        assert_eq!((h.lb(), h.extent(), h.span(1)), (-8, 20, (-8, 20)));
        let buf: Vec<u8> = (0..20).collect();
        // Origin at byte 8 of the slice.
        let p = h.pack(&buf, 8, 1).unwrap();
        assert_eq!(p, vec![16, 17, 18, 19, 0, 1, 2, 3]);
        // A type whose bytes lie far above the origin (absolute addresses): the slice holds
        // its span only, the origin lies before it.
        let far = Layout::hindexed(&[1], &[1000], &i).unwrap();
        assert_eq!(far.span(1), (1000, 4));
        assert_eq!(far.pack(&[9, 8, 7, 6], -1000, 1).unwrap(), vec![9, 8, 7, 6]);
        assert!(Layout::structure(&[1], &[0, 4], &[&i]).is_err());
    }

    #[test]
    fn indexed_and_indexed_block() {
        let i = Layout::basic(Kind::I32);
        let x = Layout::indexed(&[2, 1], &[3, 0], &i).unwrap();
        assert_eq!(x.blocks(), &[(12, 8), (0, 4)]);
        assert_eq!((x.lb(), x.extent(), x.size()), (0, 20, 12));
        let b = Layout::indexed_block(1, &[0, 2, 4], &i).unwrap();
        assert_eq!(b.blocks(), &[(0, 4), (8, 4), (16, 4)]);
        let pair = Layout::basic_struct(&[(0, Kind::F64), (8, Kind::I32)], 16).unwrap();
        assert_eq!((pair.size(), pair.extent()), (12, 16));
    }
}
