//! Little-endian bit-field access on byte buffers: bit `n` is bit `n % 8` of byte `n / 8`.
//! This is the numbering the public Cassini headers and `csr_defs.json` use (`field@bit:width`).

/// Read `width` (1..=64) bits starting at bit `offset`. Bits past the end of `buf` read as 0.
pub fn get_bits(buf: &[u8], offset: usize, width: usize) -> u64 {
    debug_assert!((1..=64).contains(&width));
    let mut v = 0u64;
    for i in 0..width.min(64) {
        let bit = offset + i;
        let byte = bit / 8;
        if byte < buf.len() && (buf[byte] >> (bit % 8)) & 1 == 1 {
            v |= 1 << i;
        }
    }
    v
}

/// Write the low `width` (1..=64) bits of `value` starting at bit `offset`; higher bits of
/// `value` are ignored. Bits past the end of `buf` are dropped.
pub fn set_bits(buf: &mut [u8], offset: usize, width: usize, value: u64) {
    debug_assert!((1..=64).contains(&width));
    for i in 0..width.min(64) {
        let bit = offset + i;
        let byte = bit / 8;
        if byte >= buf.len() {
            break;
        }
        let mask = 1u8 << (bit % 8);
        if (value >> i) & 1 == 1 {
            buf[byte] |= mask;
        } else {
            buf[byte] &= !mask;
        }
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
}
