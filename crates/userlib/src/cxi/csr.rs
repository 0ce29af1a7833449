//! CSR and hardware counter reads (`cxil_map_csr`, `cxil_read_csr`, `cxil_write_csr`,
//! `cxil_read_cntr`): the CSR region mapped through the driver's `MAP_CSRS` token
//! (privileged), accessed with 64-bit loads and stores. Register layouts come from
//! `firmware_spec::cassini::csr`; a counter is read by its public name at the offset its
//! block's `c_*_cntrs` view gives (56-bit values in the `*_sts_event_cnts` arrays).

use std::sync::Arc;

use driver::cassini::Opcode;
use driver::cassini::uapi::{As, NoArgCmd};
use driver::pci::Mmio;
use firmware_spec::cassini::csr::{self, Csr};
use firmware_spec::cassini::pci::Generation;

use super::devinfo::DevShared;
use super::error::{CxiError, Result};

/// Width of a hardware counter value (`cnt[0:56]` of the event-count arrays).
pub const CNTR_BITS: u32 = 56;

/// One hardware counter: its block view and name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The block's counter view (`c_cq_cntrs`, `c_lpe_cntrs`, ...).
    pub view: &'static str,
    /// The counter (`success_tx_cntr`, ...).
    pub name: &'static str,
    /// CSR-region offset of its 8-byte slot.
    pub offset: u64,
}

/// Every counter of `generation`: each 64-bit slot of every `c*_cntrs` view.
pub fn counters(generation: Generation) -> Vec<Counter> {
    let mut out = Vec::new();
    for c in csr::all()
        .iter()
        .filter(|c| c.name.ends_with("_cntrs") && c.applies_to(generation))
    {
        for f in c.fields {
            if f.width == 64 && f.bit.is_multiple_of(64) {
                out.push(Counter {
                    view: c.name,
                    name: f.name,
                    offset: c.offset + u64::from(f.bit / 8),
                });
            }
        }
    }
    out
}

/// The mapped CSR region of a device.
pub struct Csrs {
    win: Arc<dyn Mmio>,
    generation: Generation,
    _dev: Arc<DevShared>,
}

impl std::fmt::Debug for Csrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Csrs")
            .field("generation", &self.generation)
            .field("size", &format_args!("{:#x}", self.win.size()))
            .finish()
    }
}

impl Csrs {
    pub(crate) fn map(dev: &Arc<DevShared>) -> Result<Csrs> {
        let win = match dev.csr.get() {
            Some(w) => Arc::clone(w),
            None => {
                let r = dev
                    .client
                    .call(&As::<{ Opcode::MapCsrs as u32 }, _>(NoArgCmd::default()))?;
                let win = dev
                    .client
                    .mmap_token(&r.csr)?
                    .mmio()
                    .ok_or(CxiError::Mapping("CSR region"))?;
                Arc::clone(dev.csr.get_or_init(|| win))
            }
        };
        let generation = if dev.info.cassini_version >= 0x20 {
            Generation::Cassini2
        } else {
            Generation::Cassini1
        };
        Ok(Csrs {
            win,
            generation,
            _dev: Arc::clone(dev),
        })
    }

    /// The chip generation whose CSR map applies.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// `cxil_read_csr`: read `buf.len()` bytes (a multiple of 8) at CSR-region offset
    /// `offset` (8-aligned) with 64-bit loads.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if !offset.is_multiple_of(8) || !buf.len().is_multiple_of(8) {
            return Err(CxiError::Invalid("CSR accesses are 8-byte aligned"));
        }
        for (i, q) in buf.chunks_exact_mut(8).enumerate() {
            self.win.read(offset + 8 * i as u64, q)?;
        }
        Ok(())
    }

    /// One 64-bit CSR load.
    pub fn read_u64(&self, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// `cxil_write_csr`: write `data` (a multiple of 8 bytes) at `offset` with 64-bit stores.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        if !offset.is_multiple_of(8) || !data.len().is_multiple_of(8) {
            return Err(CxiError::Invalid("CSR accesses are 8-byte aligned"));
        }
        for (i, q) in data.chunks_exact(8).enumerate() {
            self.win.write(offset + 8 * i as u64, q)?;
        }
        Ok(())
    }

    /// Entry `i` of `csr` (its `size` bytes).
    pub fn read_entry(&self, csr: &Csr, i: u32) -> Result<Vec<u8>> {
        let off = csr
            .entry_offset(i)
            .ok_or(CxiError::Invalid("CSR entry out of range"))?;
        let mut b = vec![0u8; (csr.size as usize).next_multiple_of(8)];
        self.read(off, &mut b)?;
        b.truncate(csr.size as usize);
        Ok(b)
    }

    /// Field `field` of entry `i` of the CSR called `name`.
    pub fn read_field(&self, name: &str, i: u32, field: &str) -> Result<u64> {
        let c = csr::lookup(name).ok_or(CxiError::Invalid("no such CSR"))?;
        let f = c
            .field(field)
            .ok_or(CxiError::Invalid("no such CSR field"))?;
        Ok(f.get(&self.read_entry(c, i)?))
    }

    /// `cxil_read_cntr`: the hardware counter called `name` (`success_tx_cntr`,
    /// `c_cq_cntrs.success_tx_cntr`, ...).
    pub fn read_cntr(&self, name: &str) -> Result<u64> {
        let (view, cname) = match name.split_once('.') {
            Some((v, n)) => (Some(v), n),
            None => (None, name),
        };
        let c = counters(self.generation)
            .into_iter()
            .find(|c| {
                c.name.eq_ignore_ascii_case(cname)
                    && view.is_none_or(|v| c.view.eq_ignore_ascii_case(v))
            })
            .ok_or(CxiError::Invalid("no such counter"))?;
        self.read_counter(&c)
    }

    /// Read one [`Counter`].
    pub fn read_counter(&self, c: &Counter) -> Result<u64> {
        Ok(self.read_u64(c.offset)? & ((1u64 << CNTR_BITS) - 1))
    }
}
