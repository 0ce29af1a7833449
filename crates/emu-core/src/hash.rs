//! A small multiplicative hasher for tables keyed by a few integers (flows, sequence ids,
//! transaction tags) on the packet path: no need for the DoS resistance that the default
//! SipHash pays for on every lookup.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Folds each integer written into the state with a rotate, xor and multiply.
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A `HashMap` with [`IntHasher`]; make one with `IntMap::default()`.
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_stay_distinct_and_are_found() {
        let mut m: IntMap<(u32, u16), u32> = IntMap::default();
        for a in 0..200u32 {
            for b in 0..5u16 {
                m.insert((a, b), a * 10 + u32::from(b));
            }
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get(&(17, 3)), Some(&173));
        assert_eq!(m.remove(&(199, 4)), Some(1994));
        assert_eq!(m.get(&(199, 4)), None);
    }

    #[test]
    fn the_hash_depends_on_order_and_value() {
        let h = |xs: &[u32]| {
            let mut s = IntHasher::default();
            for &x in xs {
                s.write_u32(x);
            }
            s.finish()
        };
        assert_ne!(h(&[1, 2]), h(&[2, 1]));
        assert_ne!(h(&[1]), h(&[2]));
    }
}
