//! The PCI function model: a type-0 configuration space with BAR sizing and a capability
//! list, and an MSI-X table with its pending-bit array.
//!
//! Both are plain state machines that a device model embeds: its
//! [`crate::engine::DeviceModel::config_read`] / `config_write` delegate to
//! [`PciConfigSpace::read`] / [`PciConfigSpace::write`], and its MMIO handlers route the
//! table and PBA windows of its BAR to [`MsixTable`].
//!
//! Register layout and semantics follow the PCI Local Bus Specification 3.0 (§6.1 type-0
//! header, §6.2.5 base address registers, §6.7 capability list, §6.8.2 MSI-X) and the PCI
//! Express Base Specification (4 KiB extended configuration space).

use std::fmt;

use thiserror::Error;

use crate::bus::check_access;
use crate::mmio::MmioError;

/// Size of conventional configuration space.
pub const PCI_CONFIG_SIZE: usize = 256;
/// Size of PCI Express extended configuration space.
pub const PCIE_CONFIG_SIZE: usize = 4096;
/// Number of BAR registers in a type-0 header.
pub const NUM_BARS: usize = 6;

/// Byte offsets of type-0 header registers (PCI 3.0 §6.1).
pub mod reg {
    pub const VENDOR_ID: usize = 0x00;
    pub const DEVICE_ID: usize = 0x02;
    pub const COMMAND: usize = 0x04;
    pub const STATUS: usize = 0x06;
    pub const REVISION_ID: usize = 0x08;
    /// Programming interface, then sub-class, then base class (3 bytes).
    pub const CLASS_CODE: usize = 0x09;
    pub const CACHE_LINE_SIZE: usize = 0x0c;
    pub const LATENCY_TIMER: usize = 0x0d;
    pub const HEADER_TYPE: usize = 0x0e;
    pub const BIST: usize = 0x0f;
    pub const BAR0: usize = 0x10;
    pub const SUBSYSTEM_VENDOR_ID: usize = 0x2c;
    pub const SUBSYSTEM_ID: usize = 0x2e;
    pub const EXPANSION_ROM: usize = 0x30;
    pub const CAPABILITIES_POINTER: usize = 0x34;
    pub const INTERRUPT_LINE: usize = 0x3c;
    pub const INTERRUPT_PIN: usize = 0x3d;
    /// First byte available for capabilities.
    pub const CAPABILITIES_START: usize = 0x40;
}

/// Command register bits (PCI 3.0 §6.2.2).
pub mod command {
    pub const IO_SPACE: u16 = 1 << 0;
    pub const MEMORY_SPACE: u16 = 1 << 1;
    pub const BUS_MASTER: u16 = 1 << 2;
    pub const PARITY_ERROR_RESPONSE: u16 = 1 << 6;
    pub const SERR_ENABLE: u16 = 1 << 8;
    pub const INTX_DISABLE: u16 = 1 << 10;
}

/// Status register bits (PCI 3.0 §6.2.3).
pub mod status {
    pub const INTX_STATUS: u16 = 1 << 3;
    pub const CAPABILITIES_LIST: u16 = 1 << 4;
    pub const MASTER_DATA_PARITY_ERROR: u16 = 1 << 8;
    pub const SIGNALED_TARGET_ABORT: u16 = 1 << 11;
    pub const RECEIVED_TARGET_ABORT: u16 = 1 << 12;
    pub const RECEIVED_MASTER_ABORT: u16 = 1 << 13;
    pub const SIGNALED_SYSTEM_ERROR: u16 = 1 << 14;
    pub const DETECTED_PARITY_ERROR: u16 = 1 << 15;
    /// The error bits, which software clears by writing 1.
    pub const W1C: u16 = MASTER_DATA_PARITY_ERROR
        | SIGNALED_TARGET_ABORT
        | RECEIVED_TARGET_ABORT
        | RECEIVED_MASTER_ABORT
        | SIGNALED_SYSTEM_ERROR
        | DETECTED_PARITY_ERROR;
}

/// Capability IDs (PCI Code and ID Assignment Specification).
pub mod cap_id {
    pub const PCI_EXPRESS: u8 = 0x10;
    pub const MSIX: u8 = 0x11;
}

/// MSI-X capability layout (PCI 3.0 §6.8.2).
pub mod msix {
    /// Offset of Message Control inside the capability.
    pub const CONTROL: usize = 2;
    /// Offset of the Table Offset/BIR dword.
    pub const TABLE: usize = 4;
    /// Offset of the PBA Offset/BIR dword.
    pub const PBA: usize = 8;
    /// Capability length in bytes.
    pub const CAP_LEN: usize = 12;
    /// Message Control: table size minus one.
    pub const CTRL_TABLE_SIZE_MASK: u16 = 0x07ff;
    /// Message Control: function mask.
    pub const CTRL_FUNCTION_MASK: u16 = 1 << 14;
    /// Message Control: MSI-X enable.
    pub const CTRL_ENABLE: u16 = 1 << 15;
    /// Bytes per table entry.
    pub const ENTRY_SIZE: u64 = 16;
    /// Vector Control: per-vector mask bit.
    pub const VECTOR_MASKED: u32 = 1;
    /// Largest table (2048 entries).
    pub const MAX_VECTORS: u16 = 2048;
}

/// Why a configuration space could not be built as asked.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PciError {
    /// BAR index out of range (or a 64-bit BAR at index 5, which has no upper half).
    #[error("BAR index {bar} is not usable")]
    BadBarIndex { bar: u8 },
    /// The BAR (or the upper half a 64-bit BAR needs) is already defined.
    #[error("BAR {bar} is already in use")]
    BarInUse { bar: u8 },
    /// BAR size not a power of two of at least 16 bytes (at most 2 GiB for 32-bit BARs).
    #[error("BAR size {size:#x} is invalid")]
    BadBarSize { size: u64 },
    /// No room left in the 256-byte space for the capability.
    #[error("no room for a capability of {len} bytes")]
    NoCapabilitySpace { len: usize },
    /// The capability body and its write mask differ in length.
    #[error("capability body and write mask lengths differ")]
    BadCapability,
    /// MSI-X table size outside 1..=2048.
    #[error("MSI-X table size {size} is invalid")]
    BadMsixSize { size: u16 },
    /// MSI-X table or PBA misplaced (undefined BAR, unaligned, or past the BAR's end).
    #[error("MSI-X structure misplaced: {reason}")]
    BadMsixPlacement { reason: &'static str },
    /// The function already has an MSI-X capability.
    #[error("the function already has an MSI-X capability")]
    MsixPresent,
}

/// Identity of a PCI function.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct PciIds {
    pub vendor_id: u16,
    pub device_id: u16,
    pub revision: u8,
    /// 24-bit class code: base class << 16 | sub-class << 8 | programming interface.
    pub class_code: u32,
    pub subsystem_vendor_id: u16,
    pub subsystem_id: u16,
}

/// Kind of a memory BAR.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BarKind {
    /// 32-bit memory BAR (one register).
    Mem32,
    /// 64-bit memory BAR (two consecutive registers, low dword first).
    Mem64,
}

/// What a BAR decodes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BarConfig {
    /// Size in bytes: a power of two, at least 16.
    pub size: u64,
    pub kind: BarKind,
    pub prefetchable: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum BarSlot {
    Empty,
    Bar(BarConfig),
    /// Upper dword of the 64-bit BAR at the previous index.
    Upper,
}

/// Where the MSI-X table and PBA live and how large the table is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MsixConfig {
    /// Number of vectors, 1..=2048.
    pub table_size: u16,
    pub table_bar: u8,
    /// Offset of the table in its BAR (8-byte aligned).
    pub table_offset: u32,
    pub pba_bar: u8,
    /// Offset of the PBA in its BAR (8-byte aligned).
    pub pba_offset: u32,
}

impl MsixConfig {
    /// Bytes occupied by the table.
    pub fn table_bytes(&self) -> u64 {
        u64::from(self.table_size) * msix::ENTRY_SIZE
    }
    /// Bytes occupied by the PBA (one bit per vector, in qwords).
    pub fn pba_bytes(&self) -> u64 {
        u64::from(self.table_size).div_ceil(64) * 8
    }
}

/// MSI-X control bits as currently programmed in the capability.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct MsixControl {
    pub enabled: bool,
    pub function_mask: bool,
}

/// A type-0 configuration space: 256 bytes, or 4 KiB with PCIe extended space.
///
/// Each byte has a write mask (bits software may change) and a write-1-to-clear mask
/// (status error bits); everything else is read-only, so writes to identification registers
/// and hard-wired bits are ignored. BAR address bits below the BAR's size are read-only zero,
/// which yields the sizing protocol: write all-ones, read back `!(size - 1)` plus the flag bits.
#[derive(Clone)]
pub struct PciConfigSpace {
    data: Vec<u8>,
    wmask: Vec<u8>,
    w1c: Vec<u8>,
    bars: [BarSlot; NUM_BARS],
    next_cap: usize,
    last_cap: Option<usize>,
    msix_cap: Option<usize>,
}

impl fmt::Debug for PciConfigSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PciConfigSpace")
            .field(
                "vendor_id",
                &format_args!("{:#06x}", self.read_u16(reg::VENDOR_ID)),
            )
            .field(
                "device_id",
                &format_args!("{:#06x}", self.read_u16(reg::DEVICE_ID)),
            )
            .field("size", &self.data.len())
            .field("bars", &self.bars)
            .finish_non_exhaustive()
    }
}

impl PciConfigSpace {
    /// A function with identity `ids`, no BARs and no capabilities; `extended` selects the
    /// 4 KiB PCIe space.
    pub fn new(ids: PciIds, extended: bool) -> Self {
        let size = if extended {
            PCIE_CONFIG_SIZE
        } else {
            PCI_CONFIG_SIZE
        };
        let mut c = PciConfigSpace {
            data: vec![0; size],
            wmask: vec![0; size],
            w1c: vec![0; size],
            bars: [BarSlot::Empty; NUM_BARS],
            next_cap: reg::CAPABILITIES_START,
            last_cap: None,
            msix_cap: None,
        };
        c.put_u16(reg::VENDOR_ID, ids.vendor_id);
        c.put_u16(reg::DEVICE_ID, ids.device_id);
        c.data[reg::REVISION_ID] = ids.revision;
        let cc = ids.class_code.to_le_bytes();
        c.data[reg::CLASS_CODE..reg::CLASS_CODE + 3].copy_from_slice(&cc[..3]);
        c.put_u16(reg::SUBSYSTEM_VENDOR_ID, ids.subsystem_vendor_id);
        c.put_u16(reg::SUBSYSTEM_ID, ids.subsystem_id);
        // No I/O BARs, so I/O space enable is hard-wired to 0.
        let cmd_mask = command::MEMORY_SPACE
            | command::BUS_MASTER
            | command::PARITY_ERROR_RESPONSE
            | command::SERR_ENABLE
            | command::INTX_DISABLE;
        c.put_mask_u16(reg::COMMAND, cmd_mask);
        c.w1c[reg::STATUS..reg::STATUS + 2].copy_from_slice(&status::W1C.to_le_bytes());
        c.wmask[reg::CACHE_LINE_SIZE] = 0xff;
        c.wmask[reg::INTERRUPT_LINE] = 0xff;
        c
    }

    fn put_u16(&mut self, off: usize, v: u16) {
        self.data[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, off: usize, v: u32) {
        self.data[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put_mask_u16(&mut self, off: usize, m: u16) {
        self.wmask[off..off + 2].copy_from_slice(&m.to_le_bytes());
    }
    fn put_mask_u32(&mut self, off: usize, m: u32) {
        self.wmask[off..off + 4].copy_from_slice(&m.to_le_bytes());
    }
    fn read_u16(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.data[off], self.data[off + 1]])
    }
    fn read_u32_at(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.data[off..off + 4]);
        u32::from_le_bytes(b)
    }

    /// Size of the space in bytes (256 or 4096).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Set the interrupt pin (1 = INTA# .. 4 = INTD#, 0 = none). Read-only to software.
    pub fn set_interrupt_pin(&mut self, pin: u8) {
        self.data[reg::INTERRUPT_PIN] = pin;
    }

    /// Define BAR `bar` (a 64-bit BAR also takes `bar + 1`).
    pub fn set_bar(&mut self, bar: u8, cfg: BarConfig) -> Result<(), PciError> {
        let i = usize::from(bar);
        let wide = cfg.kind == BarKind::Mem64;
        if i >= NUM_BARS || (wide && i + 1 >= NUM_BARS) {
            return Err(PciError::BadBarIndex { bar });
        }
        if self.bars[i] != BarSlot::Empty {
            return Err(PciError::BarInUse { bar });
        }
        if wide && self.bars[i + 1] != BarSlot::Empty {
            return Err(PciError::BarInUse { bar: bar + 1 });
        }
        let max = if wide { 1u64 << 63 } else { 1u64 << 31 };
        if !cfg.size.is_power_of_two() || cfg.size < 16 || cfg.size > max {
            return Err(PciError::BadBarSize { size: cfg.size });
        }
        // PCI 3.0 §6.2.5.1: bit 0 = 0 (memory), bits 2:1 = type (00 32-bit, 10 64-bit),
        // bit 3 = prefetchable; address bits below the size are hard-wired to zero.
        let flags = if wide { 0b100 } else { 0 } | if cfg.prefetchable { 0b1000 } else { 0 };
        let addr_mask = !(cfg.size - 1);
        let off = reg::BAR0 + 4 * i;
        self.put_u32(off, flags);
        self.put_mask_u32(off, (addr_mask as u32) & !0xf);
        if wide {
            self.put_u32(off + 4, 0);
            self.put_mask_u32(off + 4, (addr_mask >> 32) as u32);
            self.bars[i + 1] = BarSlot::Upper;
        }
        self.bars[i] = BarSlot::Bar(cfg);
        Ok(())
    }

    /// The definition of BAR `bar`, if it starts a BAR.
    pub fn bar_config(&self, bar: u8) -> Option<BarConfig> {
        match self.bars.get(usize::from(bar)) {
            Some(BarSlot::Bar(c)) => Some(*c),
            _ => None,
        }
    }

    /// Size of BAR `bar` (0 if not implemented), as [`crate::engine::DeviceModel::bar_size`]
    /// reports it.
    pub fn bar_size(&self, bar: u8) -> u64 {
        self.bar_config(bar).map_or(0, |c| c.size)
    }

    /// The base address software programmed into BAR `bar` (flag bits removed).
    pub fn bar_address(&self, bar: u8) -> Option<u64> {
        let cfg = self.bar_config(bar)?;
        let off = reg::BAR0 + 4 * usize::from(bar);
        let lo = u64::from(self.read_u32_at(off) & !0xf);
        let hi = match cfg.kind {
            BarKind::Mem32 => 0,
            BarKind::Mem64 => u64::from(self.read_u32_at(off + 4)),
        };
        Some(hi << 32 | lo)
    }

    /// Append a capability with `id`, a body (the bytes after the ID and next-pointer bytes)
    /// and the body's write mask. Returns the capability's offset.
    pub fn add_capability(&mut self, id: u8, body: &[u8], wmask: &[u8]) -> Result<u8, PciError> {
        if body.len() != wmask.len() {
            return Err(PciError::BadCapability);
        }
        let len = (2 + body.len()).next_multiple_of(4);
        let off = self.next_cap;
        if off + len > PCI_CONFIG_SIZE {
            return Err(PciError::NoCapabilitySpace { len });
        }
        self.data[off] = id;
        self.data[off + 1] = 0;
        self.data[off + 2..off + 2 + body.len()].copy_from_slice(body);
        self.wmask[off + 2..off + 2 + body.len()].copy_from_slice(wmask);
        // Capability offsets are below 0x100, so they fit in the byte-wide pointers.
        let ptr = off as u8;
        match self.last_cap {
            None => self.data[reg::CAPABILITIES_POINTER] = ptr,
            Some(prev) => self.data[prev + 1] = ptr,
        }
        self.last_cap = Some(off);
        self.next_cap = off + len;
        let st = self.read_u16(reg::STATUS) | status::CAPABILITIES_LIST;
        self.put_u16(reg::STATUS, st);
        Ok(ptr)
    }

    /// Add the MSI-X capability (PCI 3.0 §6.8.2). The table and PBA must lie inside defined
    /// BARs, 8-byte aligned. Returns the capability's offset.
    pub fn add_msix(&mut self, cfg: MsixConfig) -> Result<u8, PciError> {
        if self.msix_cap.is_some() {
            return Err(PciError::MsixPresent);
        }
        if cfg.table_size == 0 || cfg.table_size > msix::MAX_VECTORS {
            return Err(PciError::BadMsixSize {
                size: cfg.table_size,
            });
        }
        let place = |bar: u8, offset: u32, bytes: u64, what| {
            let size = self.bar_size(bar);
            if size == 0 {
                return Err(PciError::BadMsixPlacement { reason: what });
            }
            if !offset.is_multiple_of(8) || u64::from(offset) + bytes > size {
                return Err(PciError::BadMsixPlacement { reason: what });
            }
            Ok(())
        };
        place(
            cfg.table_bar,
            cfg.table_offset,
            cfg.table_bytes(),
            "MSI-X table",
        )?;
        place(cfg.pba_bar, cfg.pba_offset, cfg.pba_bytes(), "MSI-X PBA")?;
        if cfg.table_bar == cfg.pba_bar {
            let t = (u64::from(cfg.table_offset), cfg.table_bytes());
            let p = (u64::from(cfg.pba_offset), cfg.pba_bytes());
            if t.0 < p.0 + p.1 && p.0 < t.0 + t.1 {
                return Err(PciError::BadMsixPlacement {
                    reason: "table and PBA overlap",
                });
            }
        }
        let mut body = [0u8; msix::CAP_LEN - 2];
        let ctrl = cfg.table_size - 1;
        body[0..2].copy_from_slice(&ctrl.to_le_bytes());
        let table = cfg.table_offset | u32::from(cfg.table_bar & 7);
        body[2..6].copy_from_slice(&table.to_le_bytes());
        let pba = cfg.pba_offset | u32::from(cfg.pba_bar & 7);
        body[6..10].copy_from_slice(&pba.to_le_bytes());
        let mut wmask = [0u8; msix::CAP_LEN - 2];
        let ctrl_mask = msix::CTRL_ENABLE | msix::CTRL_FUNCTION_MASK;
        wmask[0..2].copy_from_slice(&ctrl_mask.to_le_bytes());
        let off = self.add_capability(cap_id::MSIX, &body, &wmask)?;
        self.msix_cap = Some(usize::from(off));
        Ok(off)
    }

    /// Offset of the MSI-X capability, if present.
    pub fn msix_offset(&self) -> Option<u8> {
        self.msix_cap.map(|o| o as u8)
    }

    /// The MSI-X enable and function-mask bits, if the function has MSI-X.
    pub fn msix_control(&self) -> Option<MsixControl> {
        let off = self.msix_cap?;
        let ctrl = self.read_u16(off + msix::CONTROL);
        Some(MsixControl {
            enabled: ctrl & msix::CTRL_ENABLE != 0,
            function_mask: ctrl & msix::CTRL_FUNCTION_MASK != 0,
        })
    }

    /// The command register.
    pub fn command(&self) -> u16 {
        self.read_u16(reg::COMMAND)
    }
    /// The status register.
    pub fn status(&self) -> u16 {
        self.read_u16(reg::STATUS)
    }
    /// Whether the function decodes its memory BARs.
    pub fn memory_enabled(&self) -> bool {
        self.command() & command::MEMORY_SPACE != 0
    }
    /// Whether the function may master DMA.
    pub fn bus_master_enabled(&self) -> bool {
        self.command() & command::BUS_MASTER != 0
    }
    /// Device side: set status bits (e.g. [`status::RECEIVED_MASTER_ABORT`] after a failed
    /// DMA). Software clears the error bits by writing 1.
    pub fn set_status_bits(&mut self, bits: u16) {
        let st = self.status() | bits;
        self.put_u16(reg::STATUS, st);
    }

    /// Read configuration dword `reg` (byte offset `reg * 4`). Dwords past the implemented
    /// space read as 0 up to 4 KiB (an empty extended capability list) and all-ones beyond.
    pub fn read(&self, reg: u16) -> u32 {
        let off = usize::from(reg) * 4;
        if off + 4 <= self.data.len() {
            self.read_u32_at(off)
        } else if off < PCIE_CONFIG_SIZE {
            0
        } else {
            u32::MAX
        }
    }

    /// Write configuration dword `reg` (all four bytes enabled).
    pub fn write(&mut self, reg: u16, value: u32) {
        self.write_bytes(usize::from(reg) * 4, &value.to_le_bytes());
    }

    /// Read `data.len()` bytes at byte offset `offset` (bytes past the space read as 0).
    pub fn read_bytes(&self, offset: usize, data: &mut [u8]) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = offset
                .checked_add(i)
                .and_then(|o| self.data.get(o))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Write bytes at byte offset `offset`, honouring the write and write-1-to-clear masks.
    /// Bytes past the space are ignored.
    pub fn write_bytes(&mut self, offset: usize, data: &[u8]) {
        for (i, &v) in data.iter().enumerate() {
            let Some(o) = offset.checked_add(i) else {
                break;
            };
            if o >= self.data.len() {
                break;
            }
            let m = self.wmask[o];
            let c = self.w1c[o];
            self.data[o] = (self.data[o] & !m & !(v & c)) | (v & m);
        }
    }
}

/// One MSI-X table entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MsixEntry {
    /// Message address (bits 1:0 always zero).
    pub addr: u64,
    /// Message data.
    pub data: u32,
    /// Per-vector mask (Vector Control bit 0).
    pub masked: bool,
}

impl Default for MsixEntry {
    /// Entries come out of reset masked (PCI 3.0 §6.8.2.9).
    fn default() -> Self {
        MsixEntry {
            addr: 0,
            data: 0,
            masked: true,
        }
    }
}

/// What happened to a signalled vector.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MsixOutcome {
    /// The message was sent: write `data` to `addr`.
    Delivered { addr: u64, data: u32 },
    /// The vector or the function is masked: the pending bit is set, and the message goes
    /// out when it is unmasked.
    Pending,
    /// MSI-X is disabled: nothing is sent or remembered.
    Disabled,
    /// The vector is beyond the table.
    NoSuchVector,
}

/// A message sent on unmask of a pending vector.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MsixDelivery {
    pub vector: u16,
    pub addr: u64,
    pub data: u32,
}

/// The MSI-X table and pending-bit array of a function.
///
/// The enable and function-mask bits live in configuration space; after each configuration
/// write the device calls [`MsixTable::sync_control`] (or [`MsixTable::set_control`]), which
/// returns the pending messages that the change released. Table writes that unmask a pending
/// vector return its message the same way. The device raises those vectors (e.g. with
/// [`crate::engine::DeviceIo::interrupt`]) when it next runs.
#[derive(Clone, Debug)]
pub struct MsixTable {
    entries: Vec<MsixEntry>,
    pba: Vec<u64>,
    control: MsixControl,
}

impl MsixTable {
    /// A table of `size` vectors (1..=2048), all masked, none pending, MSI-X disabled.
    pub fn new(size: u16) -> Result<Self, PciError> {
        if size == 0 || size > msix::MAX_VECTORS {
            return Err(PciError::BadMsixSize { size });
        }
        Ok(MsixTable {
            entries: vec![MsixEntry::default(); usize::from(size)],
            pba: vec![0; usize::from(size).div_ceil(64)],
            control: MsixControl::default(),
        })
    }

    /// Number of vectors.
    pub fn len(&self) -> u16 {
        self.entries.len() as u16
    }
    /// Always false (a table has at least one vector); for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Size of the table window in bytes.
    pub fn table_bytes(&self) -> u64 {
        self.entries.len() as u64 * msix::ENTRY_SIZE
    }
    /// Size of the PBA window in bytes.
    pub fn pba_bytes(&self) -> u64 {
        self.pba.len() as u64 * 8
    }
    /// Entry `vector`.
    pub fn entry(&self, vector: u16) -> Option<MsixEntry> {
        self.entries.get(usize::from(vector)).copied()
    }
    /// Whether `vector`'s pending bit is set.
    pub fn is_pending(&self, vector: u16) -> bool {
        let v = usize::from(vector);
        self.pba
            .get(v / 64)
            .is_some_and(|w| w & (1u64 << (v % 64)) != 0)
    }
    /// The current enable / function-mask bits.
    pub fn control(&self) -> MsixControl {
        self.control
    }

    fn set_pending(&mut self, v: usize, on: bool) {
        if let Some(w) = self.pba.get_mut(v / 64) {
            if on {
                *w |= 1u64 << (v % 64);
            } else {
                *w &= !(1u64 << (v % 64));
            }
        }
    }

    fn deliverable(&self, v: usize) -> bool {
        self.control.enabled
            && !self.control.function_mask
            && self.entries.get(v).is_some_and(|e| !e.masked)
    }

    /// Send every pending message that is no longer masked, clearing its pending bit.
    fn release_pending(&mut self) -> Vec<MsixDelivery> {
        let mut out = Vec::new();
        if !self.control.enabled || self.control.function_mask {
            return out;
        }
        for v in 0..self.entries.len() {
            if self.is_pending(v as u16) && self.deliverable(v) {
                self.set_pending(v, false);
                let e = self.entries[v];
                out.push(MsixDelivery {
                    vector: v as u16,
                    addr: e.addr,
                    data: e.data,
                });
            }
        }
        out
    }

    /// Set the enable and function-mask bits; returns the messages released by the change.
    pub fn set_control(&mut self, control: MsixControl) -> Vec<MsixDelivery> {
        self.control = control;
        self.release_pending()
    }

    /// Take the enable and function-mask bits from `cfg`'s MSI-X capability (disabled if it
    /// has none); returns the messages released by the change.
    pub fn sync_control(&mut self, cfg: &PciConfigSpace) -> Vec<MsixDelivery> {
        self.set_control(cfg.msix_control().unwrap_or_default())
    }

    /// The device raises `vector`.
    pub fn signal(&mut self, vector: u16) -> MsixOutcome {
        let v = usize::from(vector);
        let Some(e) = self.entries.get(v).copied() else {
            return MsixOutcome::NoSuchVector;
        };
        if !self.control.enabled {
            return MsixOutcome::Disabled;
        }
        if self.control.function_mask || e.masked {
            self.set_pending(v, true);
            return MsixOutcome::Pending;
        }
        MsixOutcome::Delivered {
            addr: e.addr,
            data: e.data,
        }
    }

    fn check(&self, offset: u64, width: usize, size: u64) -> Result<(), MmioError> {
        if !matches!(width, 4 | 8) {
            return Err(MmioError::BadWidth { offset, width });
        }
        check_access(offset, width, size)
    }

    fn table_dword(&self, dw: usize) -> u32 {
        let e = &self.entries[dw / 4];
        match dw % 4 {
            0 => e.addr as u32,
            1 => (e.addr >> 32) as u32,
            2 => e.data,
            _ => u32::from(e.masked),
        }
    }

    /// CPU load from the table window (dword or qword, naturally aligned).
    pub fn table_read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        self.check(offset, data.len(), self.table_bytes())?;
        let dw = (offset / 4) as usize;
        for (i, chunk) in data.chunks_exact_mut(4).enumerate() {
            chunk.copy_from_slice(&self.table_dword(dw + i).to_le_bytes());
        }
        Ok(())
    }

    /// CPU store to the table window (dword or qword, naturally aligned). Returns the
    /// messages released if the store unmasked a pending vector.
    pub fn table_write(
        &mut self,
        offset: u64,
        data: &[u8],
    ) -> Result<Vec<MsixDelivery>, MmioError> {
        self.check(offset, data.len(), self.table_bytes())?;
        let dw = (offset / 4) as usize;
        let mut unmasked = false;
        for (i, chunk) in data.chunks_exact(4).enumerate() {
            let v = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let d = dw + i;
            let e = &mut self.entries[d / 4];
            match d % 4 {
                0 => e.addr = (e.addr & !0xffff_ffff) | u64::from(v & !3),
                1 => e.addr = (e.addr & 0xffff_ffff) | (u64::from(v) << 32),
                2 => e.data = v,
                _ => {
                    let masked = v & msix::VECTOR_MASKED != 0;
                    unmasked |= e.masked && !masked;
                    e.masked = masked;
                }
            }
        }
        Ok(if unmasked {
            self.release_pending()
        } else {
            Vec::new()
        })
    }

    /// CPU load from the PBA window (dword or qword, naturally aligned).
    pub fn pba_read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        self.check(offset, data.len(), self.pba_bytes())?;
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&self.pba[(offset / 8) as usize].to_le_bytes());
        let start = (offset % 8) as usize;
        data.copy_from_slice(&bytes[start..start + data.len()]);
        Ok(())
    }

    /// CPU store to the PBA window: validated, then ignored (the PBA is read-only).
    pub fn pba_write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        self.check(offset, data.len(), self.pba_bytes())
    }
}

/// Where a driver receives interrupts: the engine calls it for every vector a device raises.
pub trait InterruptSink: Send + Sync {
    /// Vector `vector` fired.
    fn interrupt(&self, vector: u16);
}

impl<F: Fn(u16) + Send + Sync> InterruptSink for F {
    fn interrupt(&self, vector: u16) {
        self(vector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> PciIds {
        PciIds {
            vendor_id: 0x17db,
            device_id: 0x0501,
            revision: 2,
            class_code: 0x02_00_00,
            subsystem_vendor_id: 0x17db,
            subsystem_id: 0x0001,
        }
    }

    #[test]
    fn identity_is_read_only() {
        let mut c = PciConfigSpace::new(ids(), false);
        assert_eq!(c.read(0), 0x0501_17db);
        c.write(0, 0xffff_ffff);
        assert_eq!(c.read(0), 0x0501_17db);
        assert_eq!(c.read(2), 0x0200_0002);
        assert_eq!(c.read(11), 0x0001_17db);
        // Beyond 256 bytes: zero up to 4 KiB, all-ones past it.
        assert_eq!(c.read(64), 0);
        assert_eq!(c.read(1024), u32::MAX);
        c.write(64, 5); // ignored, no panic
    }

    #[test]
    fn command_and_status_masks() {
        let mut c = PciConfigSpace::new(ids(), true);
        c.write(1, 0xffff_ffff);
        assert_eq!(
            c.command(),
            command::MEMORY_SPACE
                | command::BUS_MASTER
                | command::PARITY_ERROR_RESPONSE
                | command::SERR_ENABLE
                | command::INTX_DISABLE
        );
        assert!(c.memory_enabled() && c.bus_master_enabled());
        assert_eq!(c.status(), 0, "status error bits are W1C, not settable");
        c.set_status_bits(status::RECEIVED_MASTER_ABORT | status::SIGNALED_TARGET_ABORT);
        // Write 1 to one bit (keep command unchanged): only that bit clears.
        c.write(
            1,
            u32::from(c.command()) | u32::from(status::RECEIVED_MASTER_ABORT) << 16,
        );
        assert_eq!(c.status(), status::SIGNALED_TARGET_ABORT);
        c.write_bytes(reg::COMMAND, &[0]);
        assert!(!c.memory_enabled() && !c.bus_master_enabled());
        assert_ne!(
            c.command() & command::SERR_ENABLE,
            0,
            "byte write touched only byte 0"
        );
    }

    #[test]
    fn bar_config_errors() {
        let mut c = PciConfigSpace::new(ids(), false);
        let b64 = BarConfig {
            size: 1 << 20,
            kind: BarKind::Mem64,
            prefetchable: true,
        };
        assert_eq!(c.set_bar(5, b64), Err(PciError::BadBarIndex { bar: 5 }));
        c.set_bar(0, b64).unwrap();
        assert_eq!(c.set_bar(1, b64), Err(PciError::BarInUse { bar: 1 }));
        let bad = BarConfig {
            size: 3000,
            kind: BarKind::Mem32,
            prefetchable: false,
        };
        assert_eq!(c.set_bar(2, bad), Err(PciError::BadBarSize { size: 3000 }));
        assert_eq!(c.bar_size(0), 1 << 20);
        assert_eq!(c.bar_size(1), 0);
        assert_eq!(c.bar_config(1), None);
    }

    #[test]
    fn msix_signal_mask_unmask() {
        let mut t = MsixTable::new(3).unwrap();
        assert_eq!(t.signal(0), MsixOutcome::Disabled);
        assert!(!t.is_pending(0));
        assert!(
            t.set_control(MsixControl {
                enabled: true,
                function_mask: false
            })
            .is_empty()
        );
        // Entries reset masked.
        assert_eq!(t.signal(1), MsixOutcome::Pending);
        assert!(t.is_pending(1));
        assert_eq!(t.signal(3), MsixOutcome::NoSuchVector);
        t.table_write(16, &0xfee0_1000u64.to_le_bytes()).unwrap();
        t.table_write(24, &0x41u32.to_le_bytes()).unwrap();
        let d = t.table_write(28, &0u32.to_le_bytes()).unwrap();
        assert_eq!(
            d,
            vec![MsixDelivery {
                vector: 1,
                addr: 0xfee0_1000,
                data: 0x41
            }]
        );
        assert!(!t.is_pending(1));
        assert_eq!(
            t.signal(1),
            MsixOutcome::Delivered {
                addr: 0xfee0_1000,
                data: 0x41
            }
        );
    }
}
