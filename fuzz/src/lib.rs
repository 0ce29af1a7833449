//! Fixtures of the fuzz targets: emulated NICs set up the way the crates' own tests set them
//! up (a sender and a target with event queues, command queues, PtlTEs, registered memory),
//! and a raw frame source on a spare fabric port. Every fixture is built afresh for each
//! input, so a crash replays from its input alone.

pub mod cassini;
pub mod gemini;
pub mod injector;

/// Reads little-endian values off the front of a fuzz input; past the end it yields zeros.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    /// The next byte (0 once the input is used up).
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    /// The next 2 bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// The next 4 bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }
    /// The next 8 bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    /// Up to `n` bytes.
    pub fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    /// True once everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
