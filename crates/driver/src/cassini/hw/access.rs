//! BAR0 CSR access ([`CassHw`], the `cass_dev` of this driver): entries read and written as
//! naturally aligned 64-bit accesses, lowest qword first; fields read and updated through
//! the generated CSR map.

use std::sync::Arc;

use emu_core::mmio::{Mmio, MmioError};
use firmware_spec::cassini::csr::{Csr, Field};
use firmware_spec::cassini::pci::Generation;
use thiserror::Error;

use crate::mem::MemError;

/// Why a hardware access failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HwError {
    /// A BAR access failed (the device refused it or is gone).
    #[error("MMIO access to {csr}[{index}] failed: {source}")]
    Mmio {
        /// The register.
        csr: &'static str,
        /// Its entry.
        index: u32,
        /// The MMIO error.
        source: MmioError,
    },
    /// An entry index beyond the register's entries.
    #[error("{csr} has no entry {index}")]
    NoEntry {
        /// The register.
        csr: &'static str,
        /// The entry asked for.
        index: u32,
    },
    /// A field the contract names is missing from the CSR map.
    #[error("{csr} has no field {field}")]
    NoField {
        /// The register.
        csr: &'static str,
        /// The field.
        field: String,
    },
    /// Host memory (page tables, rings) could not be reached.
    #[error(transparent)]
    Memory(#[from] MemError),
}

/// A field that lies inside qword `index` of an entry, taken from that qword's value.
pub(super) fn field_of_qword(field: &Field, index: u32, qw: u64) -> u64 {
    let shift = field.bit.saturating_sub(index * 64);
    (qw >> shift) & mask(field.width)
}

/// Bytes of a CSR qword.
const QW: u64 = 8;

pub(super) fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// BAR0 access plus the chip generation: the `cass_dev` of this driver.
#[derive(Clone)]
pub struct CassHw {
    bar: Arc<dyn Mmio>,
    generation: Generation,
}

impl std::fmt::Debug for CassHw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CassHw")
            .field("bar_size", &self.bar.size())
            .field("generation", &self.generation)
            .finish()
    }
}

impl CassHw {
    /// Hardware access over BAR0 of a device of `generation`.
    pub fn new(bar: Arc<dyn Mmio>, generation: Generation) -> Self {
        CassHw { bar, generation }
    }

    /// The BAR0 handle.
    pub fn bar(&self) -> &Arc<dyn Mmio> {
        &self.bar
    }

    /// The chip generation.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    pub(super) fn qword_offset(csr: &Csr, index: u32, qw: u32) -> Result<u64, HwError> {
        let base = csr.bar0_offset(index).ok_or(HwError::NoEntry {
            csr: csr.name,
            index,
        })?;
        Ok(base + u64::from(qw) * QW)
    }

    /// Read qword `qw` of entry `index`.
    pub fn read_qword(&self, csr: &Csr, index: u32, qw: u32) -> Result<u64, HwError> {
        let off = Self::qword_offset(csr, index, qw)?;
        self.bar.read_u64(off).map_err(|source| HwError::Mmio {
            csr: csr.name,
            index,
            source,
        })
    }

    /// Write qword `qw` of entry `index`.
    pub fn write_qword(&self, csr: &Csr, index: u32, qw: u32, value: u64) -> Result<(), HwError> {
        let off = Self::qword_offset(csr, index, qw)?;
        self.bar
            .write_u64(off, value)
            .map_err(|source| HwError::Mmio {
                csr: csr.name,
                index,
                source,
            })
    }

    pub(super) fn qwords(csr: &Csr) -> u32 {
        csr.size.div_ceil(8)
    }

    /// Read entry `index` (all its bytes).
    pub fn read_entry(&self, csr: &Csr, index: u32) -> Result<Vec<u8>, HwError> {
        let mut out = Vec::with_capacity(csr.size as usize);
        for qw in 0..Self::qwords(csr) {
            out.extend_from_slice(&self.read_qword(csr, index, qw)?.to_le_bytes());
        }
        out.truncate(csr.size as usize);
        Ok(out)
    }

    /// Write entry `index`, lowest qword first.
    pub fn write_entry(&self, csr: &Csr, index: u32, bytes: &[u8]) -> Result<(), HwError> {
        for (qw, chunk) in bytes.chunks(8).enumerate() {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_qword(csr, index, qw as u32, u64::from_le_bytes(b))?;
        }
        Ok(())
    }

    /// Read one field of entry `index`.
    pub fn read_field(&self, csr: &Csr, index: u32, field: &Field) -> Result<u64, HwError> {
        let first = field.bit / 64;
        let last = (field.end_bit() - 1) / 64;
        let mut bytes = vec![0u8; csr.size as usize];
        for qw in first..=last {
            let v = self.read_qword(csr, index, qw)?;
            let at = (qw * 8) as usize;
            if let Some(dst) = bytes.get_mut(at..at + 8) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
        }
        Ok(field.get(&bytes))
    }

    /// Read-modify-write the qwords holding `fields`, setting each to its value.
    pub fn update_fields(
        &self,
        csr: &Csr,
        index: u32,
        fields: &[(&Field, u64)],
    ) -> Result<(), HwError> {
        let mut bytes = self.read_entry(csr, index)?;
        let mut touched = vec![false; Self::qwords(csr) as usize];
        for (fld, v) in fields {
            fld.set(&mut bytes, *v);
            for qw in fld.bit / 64..=(fld.end_bit() - 1) / 64 {
                if let Some(t) = touched.get_mut(qw as usize) {
                    *t = true;
                }
            }
        }
        for (qw, t) in touched.iter().enumerate() {
            if *t {
                let at = qw * 8;
                let mut b = [0u8; 8];
                b.copy_from_slice(&bytes[at..at + 8]);
                self.write_qword(csr, index, qw as u32, u64::from_le_bytes(b))?;
            }
        }
        Ok(())
    }

    /// Write entry `index` as its reset image with `fields` set.
    pub fn write_fields(
        &self,
        csr: &Csr,
        index: u32,
        fields: &[(&Field, u64)],
    ) -> Result<(), HwError> {
        let mut bytes = csr.reset_bytes();
        for (fld, v) in fields {
            fld.set(&mut bytes, *v);
        }
        self.write_entry(csr, index, &bytes)
    }

    /// Put entry `index` back to its reset image.
    pub fn reset_entry(&self, csr: &Csr, index: u32) -> Result<(), HwError> {
        self.write_entry(csr, index, &csr.reset_bytes())
    }

    pub(super) fn field_named(csr: &'static Csr, name: &str) -> Result<&'static Field, HwError> {
        csr.field(name).ok_or_else(|| HwError::NoField {
            csr: csr.name,
            field: name.to_string(),
        })
    }
}
