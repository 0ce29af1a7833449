//! CQ descriptors: the ring of [`super::cqe::Cqe`] entries in host memory and its indices.
//!
//! Public: `ghal_cq_desc_t` (`gemini_hw.h`), 32-byte pitch at `GHAL_CQ_OFFSET`; user space
//! writes the read index at offset 0 of its 4 KiB CQ alias page (`GHAL_CQ_READ_INDEX_OFFSET`,
//! `GHAL_CQ_WRITE_RDINDEX`); an entry with source 0 is not yet written.
//! Our reading: indices count entries (8 bytes each); the ring holds `max_index + 1` entries;
//! the NIC writes entry `wr_index` at `base_addr + 8 * wr_index`.

use super::layout::bit_format;

bit_format! {
    /// `ghal_cq_desc_t` (24 of the 32 bytes of a CQ descriptor slot).
    pub struct CqDescriptor, 24, {
        /// Read index (software consumer).
        rd_index: 0, 29;
        /// Write index (NIC producer).
        wr_index: 32, 29;
        /// Highest index of the ring.
        max_index: 64, 29;
        /// Entries before an interrupt (`GNI_CqCreate` delay count).
        irq_thresh_index: 96, 13;
        /// Interrupt request index.
        irq_req_index: 112, 5;
        /// CQ enabled.
        enable: 117, 1;
        /// Host address of the ring (48 bits).
        base_addr: 128, 48;
        /// Interrupt requested.
        irq_req: 176, 1;
    }
}

/// `GHAL_CQ_READ_INDEX_OFFSET`: offset of the read index in the user alias page.
pub const USER_READ_INDEX_OFFSET: u64 = 0;
/// Bytes of one CQ entry.
pub const ENTRY_SIZE: u64 = 8;
/// Largest ring (29-bit indices).
pub const MAX_ENTRIES: u64 = 1 << 29;

const INDEX_MASK: u64 = MAX_ENTRIES - 1;

impl CqDescriptor {
    /// Entries in the ring (`max_index + 1`, fields taken at their 29-bit width).
    pub const fn entries(&self) -> u64 {
        (self.max_index & INDEX_MASK) + 1
    }

    /// Host address of entry `index` (wrapping inside the ring).
    pub const fn entry_addr(&self, index: u64) -> u64 {
        self.base_addr
            .wrapping_add(ENTRY_SIZE * (index % self.entries()))
    }

    /// Entries written and not yet consumed.
    pub const fn pending(&self) -> u64 {
        let n = self.entries();
        ((self.wr_index & INDEX_MASK) % n + n - (self.rd_index & INDEX_MASK) % n) % n
    }

    /// Whether the NIC has no room for another entry (one slot kept empty).
    pub const fn is_full(&self) -> bool {
        self.pending() + 1 == self.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_arithmetic() {
        super::super::layout::check_table(CqDescriptor::FIELDS, CqDescriptor::SIZE).unwrap();
        let d = CqDescriptor {
            base_addr: 0x1000,
            max_index: 7,
            rd_index: 6,
            wr_index: 2,
            ..Default::default()
        };
        assert_eq!(d.entries(), 8);
        assert_eq!(d.pending(), 4);
        assert_eq!(d.entry_addr(9), 0x1008);
        assert!(!d.is_full());
        assert!(
            CqDescriptor {
                max_index: 3,
                rd_index: 1,
                wr_index: 0,
                ..d
            }
            .is_full()
        );
    }
}
