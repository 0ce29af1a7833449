//! The node translation table: logical PE -> physical PE.
//!
//! Layout `ghal_ntt_desc_t` (`firmware_spec::gemini::ntt::NttEntry`); logical PE `k` uses
//! entry `k >> 1`, `nic_pe0` for even `k`, `nic_pe1` for odd `k`. Bank 0 translates; bank 1
//! and the config register are stored only (docs/gemini-programming.md).

use crate::fault::Fault;
use emu_core::sparse::SparseTable;
use firmware_spec::gemini::limits::NTT_ENTRIES;
use firmware_spec::gemini::ntt::{NttEntry, slot_of};

/// Both NTT banks and the configuration register.
#[derive(Clone, Debug)]
pub struct Ntt {
    /// The banks, stored sparsely (an entry nobody wrote reads 0 and does not translate).
    bank0: SparseTable<u64>,
    bank1: SparseTable<u64>,
    written: SparseTable<bool>,
    /// `NTT_CONFIG` as last written.
    pub config: u64,
}

impl Default for Ntt {
    fn default() -> Self {
        Ntt {
            bank0: SparseTable::new(NTT_ENTRIES as usize, 0),
            bank1: SparseTable::new(NTT_ENTRIES as usize, 0),
            written: SparseTable::new(NTT_ENTRIES as usize, false),
            config: 0,
        }
    }
}

impl Ntt {
    /// Entries of both banks backed by storage (0 at reset; see `emu_core::sparse`).
    pub fn allocated_entries(&self) -> usize {
        self.bank0.allocated_entries()
            + self.bank1.allocated_entries()
            + self.written.allocated_entries()
    }

    /// Raw entry `index` of `bank` (0 past the table).
    pub fn read(&self, bank: u8, index: u32) -> u64 {
        let t = if bank == 0 { &self.bank0 } else { &self.bank1 };
        t.get(index as usize).copied().unwrap_or(0)
    }

    /// Store raw entry `index` of `bank`.
    pub fn write(&mut self, bank: u8, index: u32, v: u64) {
        let i = index as usize;
        if bank == 0 {
            if self.bank0.set(i, v).is_ok() {
                let _ = self.written.set(i, true);
            }
        } else if let Ok(e) = self.bank1.get_mut(i) {
            *e = v;
        }
    }

    /// Physical PE of logical PE `logical`.
    pub fn translate(&self, logical: u64) -> Result<u32, Fault> {
        let (index, odd) = slot_of(logical).ok_or(Fault::PeOutsideGroup)?;
        let i = index as usize;
        if !self.written.get(i).copied().unwrap_or(false) {
            return Err(Fault::NttUnset);
        }
        let raw = self.bank0.get(i).copied().unwrap_or(0);
        let e = NttEntry::decode(&raw.to_le_bytes()).map_err(|_| Fault::NttUnset)?;
        Ok(e.pe(odd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_even_and_odd_slots() {
        let mut n = Ntt::default();
        assert_eq!(n.translate(4), Err(Fault::NttUnset));
        let e = NttEntry {
            nic_pe0: 10,
            nic_pe1: 11,
            ..Default::default()
        };
        n.write(0, 2, u64::from_le_bytes(e.encode().unwrap()));
        assert_eq!(n.translate(4), Ok(10));
        assert_eq!(n.translate(5), Ok(11));
        assert_eq!(n.translate(u64::MAX), Err(Fault::PeOutsideGroup));
        n.write(1, 2, 77);
        assert_eq!(n.read(1, 2), 77);
        assert_eq!(n.read(0, 99_999), 0);
    }
}
