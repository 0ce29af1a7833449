//! Node translation table (NTT): logical PE → physical NIC address.
//!
//! Public: `ghal_ntt_desc_t`, `ghal_ntt_config_t`, `GHAL_NTT*` offsets (`gemini_hw.h`);
//! `gni_ntt_entry_t`, `gni_ntt_descriptor_t` (`gni_pub.h`). Our reading: logical index `k`
//! uses entry `k >> 1`, field `nic_pe0` for even `k` and `nic_pe1` for odd `k` (the header
//! calls them "Physical NIC n" and "n+1").

use super::layout::bit_format;
use super::limits::{NTT_ENTRIES, PE_MASK};

bit_format! {
    /// `ghal_ntt_desc_t`: one 8-byte NTT entry (`GHAL_NTT0_OFFSET + 8*id`).
    pub struct NttEntry, 8, {
        /// Physical NIC address of logical PE 2n.
        nic_pe0: 0, 18;
        /// Physical NIC address of logical PE 2n+1.
        nic_pe1: 18, 18;
        /// ECC check bits.
        check_bits: 36, 8;
        /// ECC syndrome.
        syndrome: 44, 8;
        /// Write the check bits as given.
        wr_checkbits: 63, 1;
    }
}

bit_format! {
    /// `ghal_ntt_config_t` (`GHAL_NTT_CONFIG`).
    pub struct NttConfig, 8, {
        /// Granularity of NTT0.
        gran_ntt0: 0, 4;
        /// Write the NTT0 granularity.
        write_grn_ntt0: 4, 1;
        /// Granularity of NTT1.
        gran_ntt1: 8, 4;
        /// Write the NTT1 granularity.
        write_grn_ntt1: 12, 1;
    }
}

/// `GHAL_NTT_ADDR_MASK_WRBOTH`: address bit that writes both NTT banks.
pub const ADDR_MASK_WRBOTH: u64 = 0x8000;
/// Logical PEs one NTT can name (two per entry).
pub const LOGICAL_PES: u64 = NTT_ENTRIES * 2;

impl NttEntry {
    /// The physical PE for logical slot `odd` (false: `nic_pe0`, true: `nic_pe1`).
    pub const fn pe(&self, odd: bool) -> u32 {
        (if odd { self.nic_pe1 } else { self.nic_pe0 }) as u32 & PE_MASK
    }
}

/// `(entry index, odd)` of logical PE `k`, or `None` past the table.
pub const fn slot_of(k: u64) -> Option<(u64, bool)> {
    if k >= LOGICAL_PES {
        None
    } else {
        Some((k >> 1, k & 1 == 1))
    }
}

/// `gni_ntt_entry_t`: one entry of a `GNI_ConfigureNTT` table (v2 form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NttConfigEntry {
    /// Block address.
    pub blck_addr: u32,
    /// Replacement address.
    pub rplc_addr: u32,
    /// Replacement size.
    pub rplc_size: u8,
}

/// `gni_ntt_descriptor_t`: arguments of `GNI_ConfigureNTT`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NttDescriptor {
    /// Size of the NTT group.
    pub group_size: u32,
    /// NTT granularity.
    pub granularity: u8,
    /// New NTT values (physical PE per logical PE).
    pub table: Vec<u32>,
    /// Flags (unused).
    pub flags: u8,
}

#[cfg(test)]
mod tests {
    use super::super::layout::check_table;
    use super::*;

    #[test]
    fn entry_layout_and_slots() {
        check_table(NttEntry::FIELDS, NttEntry::SIZE).unwrap();
        check_table(NttConfig::FIELDS, NttConfig::SIZE).unwrap();
        let e = NttEntry {
            nic_pe0: 0x3FFFF,
            nic_pe1: 0x12345,
            ..Default::default()
        };
        let v = u64::from_le_bytes(e.encode().unwrap());
        assert_eq!(v, 0x3FFFF | (0x12345 << 18));
        assert_eq!(e.pe(true), 0x12345);
        assert_eq!(slot_of(5), Some((2, true)));
        assert_eq!(slot_of(LOGICAL_PES), None);
    }
}
