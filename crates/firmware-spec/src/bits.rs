//! Little-endian bit-field access on byte buffers: bit `n` is bit `n % 8` of byte `n / 8`.
//! This is the numbering the public Cassini headers and `csr_defs.json` use (`field@bit:width`).

/// Read `width` (1..=64) bits starting at bit `offset`. Bits past the end of `buf` read as 0.
pub fn get_bits(buf: &[u8], offset: usize, width: usize) -> u64 {
    debug_assert!((1..=64).contains(&width));
    let width = width.min(64);
    let (start, shift) = (offset / 8, offset % 8);
    // A field of up to 64 bits at any bit offset spans at most 9 bytes.
    let nbytes = (shift + width).div_ceil(8);
    let mut acc = 0u128;
    for i in 0..nbytes {
        if let Some(&b) = buf.get(start + i) {
            acc |= u128::from(b) << (8 * i);
        }
    }
    ((acc >> shift) as u64) & mask(width as u32)
}

/// Write the low `width` (1..=64) bits of `value` starting at bit `offset`; higher bits of
/// `value` are ignored. Bits past the end of `buf` are dropped.
pub fn set_bits(buf: &mut [u8], offset: usize, width: usize, value: u64) {
    debug_assert!((1..=64).contains(&width));
    let width = width.min(64);
    let (start, shift) = (offset / 8, offset % 8);
    let nbytes = (shift + width).div_ceil(8);
    let m = u128::from(mask(width as u32)) << shift;
    let v = u128::from(value & mask(width as u32)) << shift;
    for i in 0..nbytes {
        let Some(b) = buf.get_mut(start + i) else {
            break;
        };
        let bm = (m >> (8 * i)) as u8;
        *b = (*b & !bm) | ((v >> (8 * i)) as u8 & bm);
    }
}

/// A mask of the low `width` bits (`width` 0..=64).
pub const fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_positions() {
        let mut b = [0u8; 16];
        set_bits(&mut b, 4, 4, 0xA);
        assert_eq!(b[0], 0xA0);
        set_bits(&mut b, 61, 6, 0x3F);
        assert_eq!(b[7], 0xE0);
        assert_eq!(b[8], 0x07);
        assert_eq!(get_bits(&b, 61, 6), 0x3F);
        assert_eq!(get_bits(&b, 4, 4), 0xA);
    }

    proptest! {
        #[test]
        fn roundtrip(off in 0usize..192, w in 1usize..=64, v: u64) {
            let mut b = [0u8; 32];
            set_bits(&mut b, off, w, v);
            prop_assert_eq!(get_bits(&b, off, w), v & mask(w as u32));
            // Nothing outside the field changed.
            let mut c = [0u8; 32];
            set_bits(&mut c, off, w, v);
            set_bits(&mut c, off, w, 0);
            prop_assert!(c.iter().all(|&x| x == 0));
        }
    }

    /// The bit-by-bit definition the word-wise implementation must agree with.
    fn ref_set(buf: &mut [u8], offset: usize, width: usize, value: u64) {
        for i in 0..width {
            let bit = offset + i;
            if bit / 8 >= buf.len() {
                break;
            }
            let m = 1u8 << (bit % 8);
            if (value >> i) & 1 == 1 {
                buf[bit / 8] |= m;
            } else {
                buf[bit / 8] &= !m;
            }
        }
    }

    proptest! {
        #[test]
        fn matches_bitwise_reference_including_truncation(
            init in proptest::collection::vec(any::<u8>(), 0..24),
            off in 0usize..200,
            w in 1usize..=64,
            v: u64,
        ) {
            let mut a = init.clone();
            let mut b = init.clone();
            set_bits(&mut a, off, w, v);
            ref_set(&mut b, off, w, v);
            prop_assert_eq!(&a, &b);
            let mut expect = 0u64;
            for i in 0..w {
                let bit = off + i;
                if bit / 8 < init.len() && (init[bit / 8] >> (bit % 8)) & 1 == 1 {
                    expect |= 1 << i;
                }
            }
            prop_assert_eq!(get_bits(&init, off, w), expect);
        }
    }
}
