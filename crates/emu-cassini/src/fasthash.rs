//! A small, fast hasher for the device's internal lookup tables (translation cache, RMU
//! cache, messages in flight), whose keys are a few integers chosen by the model itself. It
//! is an FxHash-style multiply-rotate mix: not DoS resistant, which these tables do not need,
//! and deterministic across runs (iteration order never drives a decision in the model).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher state.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// A `HashMap` using [`FastHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_hash_apart_and_maps_work() {
        let h = |k: (u16, u64)| {
            use std::hash::BuildHasher;
            BuildHasherDefault::<FastHasher>::default().hash_one(k)
        };
        assert_ne!(h((1, 2)), h((2, 1)));
        assert_ne!(h((0, 0x1000)), h((0, 0x1001)));
        let mut m: FastMap<(u16, u64), u32> = FastMap::default();
        for i in 0..1000u64 {
            m.insert((3, i), i as u32);
        }
        assert_eq!(m.get(&(3, 999)), Some(&999));
        assert_eq!(m.len(), 1000);
    }
}
