//! The Cassini CSR map: every control/status register with its offset, entry size, entry count
//! and fields (bit offset, width, access class, reset value).
//!
//! The table is generated at build time by `build.rs` from the vendored
//! `data/cassini/csr_defs.json` (HewlettPackard/shs-cassini-headers, BSD-2-Clause option; see
//! `data/cassini/LICENSE-cassini-csr.md` and `docs/cassini-csr.md`).
//!
//! Offsets are relative to the CSR region, which starts at [`CSR_BASE`] in BAR0.
//!
//! Two kinds of entries live in the table:
//! - **registers**: at least one field carries an access class (`SRW HRO`, ...). These are
//!   what a register file stores and what [`CsrMap::at_offset`] decodes to.
//! - **views**: no field has an access class. They name the parts of storage that a register
//!   already covers: the per-block counter names (`c_cq_cntrs`, ...) laid over the flat
//!   `*_sts_event_cnts` arrays, or alternative layouts of a table entry (`c_me_entry` and
//!   `c_ule_entry` over `c_lpe_sts_list_entries`, `c_trig_cmd_ms` over
//!   `c_cq_dbg_trig_cmd_ms`). [`CsrMap::covering`] lists them.
//!
//! Names prefixed `c1_` exist only on Cassini 1, `c2_` and `ss2_` only on Cassini 2
//! ([`Csr::revision`]); both revisions sometimes use the same offsets with different layouts,
//! so offset decoding is per [`Generation`] ([`CsrMap`]).
//!
//! ```
//! use firmware_spec::cassini::csr::{self, fields};
//! use firmware_spec::cassini::pci::Generation;
//!
//! let ptl = csr::C_LPE_CFG_PTL_TABLE;
//! assert_eq!(ptl.offset, 0x981_0000);
//! let mut entry = ptl.reset_bytes();
//! fields::c_lpe_cfg_ptl_table::EQ_HANDLE.set(&mut entry, 17);
//! assert_eq!(ptl.field("eq_handle").map(|f| f.get(&entry)), Some(17));
//!
//! let hit = csr::at_offset(Generation::Cassini1, ptl.entry_offset(3).unwrap() + 8).unwrap();
//! assert_eq!((hit.csr.name, hit.entry, hit.byte), ("c_lpe_cfg_ptl_table", 3, 8));
//! ```

use core::cmp::Ordering;

use crate::bits;
pub use crate::cassini::pci::{CSR_BASE, CSR_SIZE, Generation};

/// Software access class of a field (first token of the JSON access string).
///
/// The public data names the classes but does not define them; meanings below marked
/// "inferred" come from the registers that use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwAccess {
    /// `SRW`: software read/write.
    Srw,
    /// `SRO`: software read-only.
    Sro,
    /// `SWO`: software write-only (inferred; used by `init` strobes of counter blocks).
    Swo,
    /// `SRW1`: software reads; writing 1 clears the bit (error-flag registers `*_err_flg`).
    Srw1,
    /// `SRW1C`: software reads; writing 1 clears the bit (status bits set by hardware).
    Srw1c,
    /// `SWS`: software write strobe: a write triggers an action (inferred; `*_msc_shadow_action`).
    Sws,
    /// `SRWS`: software read/write with a strobe side effect (inferred).
    Srws,
    /// `SRDW`: software read/write; used by the error mask registers (meaning of `D` not public).
    Srdw,
    /// `SDWS`: software write strobe; used by the `*_err_clr` registers (meaning of `D` not public).
    Sdws,
    /// No access class given: the field belongs to a view (see the module docs).
    Unspecified,
}

impl SwAccess {
    /// The token as spelled in `csr_defs.json` (`"SRW"`, ...); `"-"` for [`SwAccess::Unspecified`].
    pub const fn as_str(self) -> &'static str {
        match self {
            SwAccess::Srw => "SRW",
            SwAccess::Sro => "SRO",
            SwAccess::Swo => "SWO",
            SwAccess::Srw1 => "SRW1",
            SwAccess::Srw1c => "SRW1C",
            SwAccess::Sws => "SWS",
            SwAccess::Srws => "SRWS",
            SwAccess::Srdw => "SRDW",
            SwAccess::Sdws => "SDWS",
            SwAccess::Unspecified => "-",
        }
    }

    /// Whether a software write changes or acts on the field (everything but `SRO` and views).
    pub const fn sw_writable(self) -> bool {
        !matches!(self, SwAccess::Sro | SwAccess::Unspecified)
    }

    /// Whether writing 1 to a bit clears it (`SRW1`, `SRW1C`).
    pub const fn write_one_to_clear(self) -> bool {
        matches!(self, SwAccess::Srw1 | SwAccess::Srw1c)
    }
}

/// Hardware access class of a field (second token of the JSON access string).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HwAccess {
    /// `HRO`: hardware only reads the field (configuration).
    Hro,
    /// `HRW`: hardware reads and writes the field.
    Hrw,
    /// `HWO`: hardware only writes the field (status).
    Hwo,
    /// `HDWO`: hardware writes (used by `*_err_first_flg`; meaning of `D` not public).
    Hdwo,
    /// `HNA`: hardware does not access the field (`c_mb_dbg_scratch`).
    Hna,
    /// No hardware class given (a view field, or an access string with only a SW token).
    Unspecified,
}

impl HwAccess {
    /// The token as spelled in `csr_defs.json` (`"HRO"`, ...); `"-"` for [`HwAccess::Unspecified`].
    pub const fn as_str(self) -> &'static str {
        match self {
            HwAccess::Hro => "HRO",
            HwAccess::Hrw => "HRW",
            HwAccess::Hwo => "HWO",
            HwAccess::Hdwo => "HDWO",
            HwAccess::Hna => "HNA",
            HwAccess::Unspecified => "-",
        }
    }
}

/// One field of a CSR entry. Bits are numbered little-endian across the entry's bytes
/// (bit `n` is bit `n % 8` of byte `n / 8`), as in `csr_defs.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name, lower case as in the JSON.
    pub name: &'static str,
    /// Offset of the lowest bit inside the entry.
    pub bit: u32,
    /// Width in bits. Register fields are 1..=64 bits; view fields (counter arrays) can be wider.
    pub width: u32,
    /// Software access class.
    pub sw: SwAccess,
    /// Hardware access class.
    pub hw: HwAccess,
    /// Reset value (0 for view fields, which have none). Always fits in `width` bits.
    pub reset: u64,
}

impl Field {
    /// Bit offset one past the field's highest bit.
    pub const fn end_bit(&self) -> u32 {
        self.bit + self.width
    }

    /// Whether the field has an access class (is part of a register rather than a view).
    pub const fn is_register_field(&self) -> bool {
        !matches!(self.sw, SwAccess::Unspecified)
    }

    /// Read the field from one entry's bytes. Fields wider than 64 bits (only view counter
    /// arrays) return their low 64 bits. Bits beyond `entry` read as 0.
    pub fn get(&self, entry: &[u8]) -> u64 {
        bits::get_bits(entry, self.bit as usize, self.width.min(64) as usize)
    }

    /// Write `value` (truncated to the field width) into one entry's bytes; the other bits are
    /// unchanged. Fields wider than 64 bits get `value` zero-extended. Bits beyond `entry` are
    /// dropped.
    pub fn set(&self, entry: &mut [u8], value: u64) {
        let mut bit = self.bit as usize;
        let mut left = self.width as usize;
        let mut v = value;
        while left > 0 {
            let w = left.min(64);
            bits::set_bits(entry, bit, w, v);
            v = 0;
            bit += w;
            left -= w;
        }
    }

    /// Mask of the field's value bits (all ones for fields of 64 bits or more).
    pub const fn value_mask(&self) -> u64 {
        bits::mask(self.width)
    }
}

/// Hardware block that hosts a CSR offset.
///
/// Block bases come from the public block table (`csr_defs.json` README / `cassini.md` §1.2);
/// each block window is taken as 8 MiB (the spacing of the bases; every CSR of the JSON lies in
/// one). [`Block::Netsim`] is our name for the last 4 KiB page of the CSR region, which holds
/// the netsim-only `nicsim_*` registers (`nicsim_nic_id` at 0x27ff_f060).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Block {
    /// Command queues (includes TOU).
    Cq,
    /// Packet connection tracking.
    Pct,
    /// High-speed network interface.
    Hni,
    /// HNI physical/MAC/LLR layer (`c1_hni_pml_*`, `ss2_port_pml_*`).
    HniPml,
    /// Receive message unit.
    Rmu,
    /// Inbound transfer engine.
    Ixe,
    /// Address translation unit.
    Atu,
    /// Event engine.
    Ee,
    /// PARBS (PCIe arbiter).
    Parbs,
    /// List processing engine.
    Lpe,
    /// Message state table.
    Mst,
    /// Outbound transfer engine.
    Oxe,
    /// Management block.
    Mb,
    /// PCIe interface.
    Pi,
    /// PCIe interface, IP-dependent part.
    PiIpd,
    /// Netsim-only registers (not a hardware block; see the type docs).
    Netsim,
}

/// Size of each block's window in the CSR region (see [`Block`]).
pub const BLOCK_WINDOW: u64 = 0x80_0000;
/// Start of the netsim-only page in the CSR region (see [`Block::Netsim`]).
pub const NETSIM_PAGE: u64 = 0x27ff_f000;

impl Block {
    /// Every block, in address order.
    pub const ALL: [Block; 16] = [
        Block::Cq,
        Block::Pct,
        Block::Hni,
        Block::HniPml,
        Block::Rmu,
        Block::Ixe,
        Block::Atu,
        Block::Ee,
        Block::Parbs,
        Block::Lpe,
        Block::Mst,
        Block::Oxe,
        Block::Mb,
        Block::Pi,
        Block::PiIpd,
        Block::Netsim,
    ];

    /// Base offset inside the CSR region.
    pub const fn base(self) -> u64 {
        match self {
            Block::Cq => 0x0,
            Block::Pct => 0x80_0000,
            Block::Hni => 0x100_0000,
            Block::HniPml => 0x180_0000,
            Block::Rmu => 0x200_0000,
            Block::Ixe => 0x280_0000,
            Block::Atu => 0x800_0000,
            Block::Ee => 0x880_0000,
            Block::Parbs => 0x900_0000,
            Block::Lpe => 0x980_0000,
            Block::Mst => 0xa00_0000,
            Block::Oxe => 0xa80_0000,
            Block::Mb => 0x1000_0000,
            Block::Pi => 0x1080_0000,
            Block::PiIpd => 0x1100_0000,
            Block::Netsim => NETSIM_PAGE,
        }
    }

    /// Size of the block's window.
    pub const fn window(self) -> u64 {
        match self {
            Block::Netsim => CSR_SIZE - NETSIM_PAGE,
            _ => BLOCK_WINDOW,
        }
    }

    /// Upper-case name (`"CQ"`, `"HNI_PML"`, ..., `"NETSIM"`).
    pub const fn name(self) -> &'static str {
        match self {
            Block::Cq => "CQ",
            Block::Pct => "PCT",
            Block::Hni => "HNI",
            Block::HniPml => "HNI_PML",
            Block::Rmu => "RMU",
            Block::Ixe => "IXE",
            Block::Atu => "ATU",
            Block::Ee => "EE",
            Block::Parbs => "PARBS",
            Block::Lpe => "LPE",
            Block::Mst => "MST",
            Block::Oxe => "OXE",
            Block::Mb => "MB",
            Block::Pi => "PI",
            Block::PiIpd => "PI_IPD",
            Block::Netsim => "NETSIM",
        }
    }

    /// The block whose window contains `csr_offset`, if any.
    pub fn of(csr_offset: u64) -> Option<Block> {
        Block::ALL
            .into_iter()
            .find(|b| csr_offset >= b.base() && csr_offset - b.base() < b.window())
    }
}

impl core::fmt::Display for Block {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// One CSR: `entries` entries of `size` bytes each, starting at `offset` in the CSR region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Csr {
    /// Name, lower case as in the JSON (`c_lpe_cfg_ptl_table`).
    pub name: &'static str,
    /// Offset of entry 0 relative to the CSR region ([`CSR_BASE`] in BAR0).
    pub offset: u64,
    /// Bytes per entry (the stride between entries).
    pub size: u32,
    /// Bytes of each entry that the hardware structure uses (`__struct_size`; equals `size`
    /// unless the structure is padded to a power of two).
    pub struct_size: u32,
    /// Number of entries (1 for a plain register).
    pub entries: u32,
    /// Fields, sorted by bit offset.
    pub fields: &'static [Field],
}

impl Csr {
    /// Total bytes spanned (`size × entries`).
    pub const fn span(&self) -> u64 {
        self.size as u64 * self.entries as u64
    }

    /// One past the last byte, relative to the CSR region.
    pub const fn end(&self) -> u64 {
        self.offset + self.span()
    }

    /// Offset of entry `i` relative to the CSR region, or `None` if `i >= entries`.
    pub const fn entry_offset(&self, i: u32) -> Option<u64> {
        if i < self.entries {
            Some(self.offset + i as u64 * self.size as u64)
        } else {
            None
        }
    }

    /// Offset of entry `i` in BAR0 (`CSR_BASE + entry_offset(i)`).
    pub const fn bar0_offset(&self, i: u32) -> Option<u64> {
        match self.entry_offset(i) {
            Some(o) => Some(CSR_BASE + o),
            None => None,
        }
    }

    /// The field called `name` (ASCII case-insensitive).
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// Whether this is a register (some field has an access class) rather than a view.
    pub fn is_register(&self) -> bool {
        self.fields.iter().any(Field::is_register_field)
    }

    /// One entry's reset image: `size` bytes with every register field at its reset value.
    pub fn reset_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.size as usize];
        for f in self.fields.iter().filter(|f| f.is_register_field()) {
            f.set(&mut b, f.reset);
        }
        b
    }

    /// The block hosting this CSR (by offset).
    pub fn block(&self) -> Block {
        // Every CSR in the table lies inside a block window (checked by the tests).
        Block::of(self.offset).unwrap_or(Block::Netsim)
    }

    /// The only Cassini generation that has this CSR (`c1_` → Cassini 1, `c2_`/`ss2_` →
    /// Cassini 2), or `None` if every revision has it.
    pub fn revision(&self) -> Option<Generation> {
        if self.name.starts_with("c1_") {
            Some(Generation::Cassini1)
        } else if self.name.starts_with("c2_") || self.name.starts_with("ss2_") {
            Some(Generation::Cassini2)
        } else {
            None
        }
    }

    /// Whether generation `g` has this CSR.
    pub fn applies_to(&self, g: Generation) -> bool {
        self.revision().is_none_or(|r| r == g)
    }

    /// Whether this CSR exists only on HPE's simulator (`nicsim_*`, platform NETSIM).
    pub fn netsim_only(&self) -> bool {
        self.name.starts_with("nicsim_")
    }
}

/// A decoded CSR-region offset: entry `entry` of `csr`, byte `byte` inside that entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsrHit {
    /// The register.
    pub csr: &'static Csr,
    /// Entry index (`< csr.entries`).
    pub entry: u32,
    /// Byte offset inside the entry (`< csr.size`).
    pub byte: u32,
}

impl CsrHit {
    fn new(csr: &'static Csr, off: u64) -> Option<CsrHit> {
        if off < csr.offset || off >= csr.end() {
            return None;
        }
        let rel = off - csr.offset;
        let size = u64::from(csr.size);
        Some(CsrHit {
            csr,
            entry: u32::try_from(rel / size).ok()?,
            byte: u32::try_from(rel % size).ok()?,
        })
    }
}

/// The register map one Cassini generation decodes: common registers plus that generation's
/// `c1_`/`c2_`/`ss2_` registers, with no two overlapping (checked at build time). A
/// revision-specific register that duplicates a common one (same offset and layout) is
/// represented by the common one.
#[derive(Debug)]
pub struct CsrMap {
    generation: Generation,
    regs: &'static [u16],
}

/// The Cassini 1 register map.
pub static CASSINI1: CsrMap = CsrMap {
    generation: Generation::Cassini1,
    regs: &REGS_C1,
};
/// The Cassini 2 register map.
pub static CASSINI2: CsrMap = CsrMap {
    generation: Generation::Cassini2,
    regs: &REGS_C2,
};

/// The register map of generation `g`.
pub fn map(g: Generation) -> &'static CsrMap {
    match g {
        Generation::Cassini1 => &CASSINI1,
        Generation::Cassini2 => &CASSINI2,
    }
}

impl CsrMap {
    /// The generation this map decodes for.
    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// The registers of this map, sorted by offset.
    pub fn registers(&self) -> impl ExactSizeIterator<Item = &'static Csr> + use<> {
        self.regs.iter().map(|&i| &CSRS[usize::from(i)])
    }

    /// Decode a CSR-region offset to (register, entry, byte in entry) by binary search.
    /// `None` for offsets no register covers (most of the region is unpopulated).
    pub fn at_offset(&self, csr_offset: u64) -> Option<CsrHit> {
        let idx = self
            .regs
            .partition_point(|&i| CSRS[usize::from(i)].end() <= csr_offset);
        let csr = &CSRS[usize::from(*self.regs.get(idx)?)];
        CsrHit::new(csr, csr_offset)
    }

    /// Every CSR of this generation (registers and views) covering `csr_offset`.
    pub fn covering(&self, csr_offset: u64) -> impl Iterator<Item = CsrHit> + use<> {
        let g = self.generation;
        CSRS.iter()
            .filter(move |c| c.applies_to(g))
            .filter_map(move |c| CsrHit::new(c, csr_offset))
    }
}

/// [`CsrMap::at_offset`] on generation `g`'s map.
pub fn at_offset(g: Generation, csr_offset: u64) -> Option<CsrHit> {
    map(g).at_offset(csr_offset)
}

fn cmp_ignore_case(a: &str, b: &str) -> Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

/// The CSR called `name` (ASCII case-insensitive: `C_MB_STS_REV` finds `c_mb_sts_rev`).
pub fn lookup(name: &str) -> Option<&'static Csr> {
    BY_NAME
        .binary_search_by(|&i| cmp_ignore_case(CSRS[usize::from(i)].name, name))
        .ok()
        .map(|k| &CSRS[usize::from(BY_NAME[k])])
}

/// Every CSR (registers and views of both generations), sorted by offset then name.
pub fn all() -> &'static [Csr] {
    &CSRS
}

include!(concat!(env!("OUT_DIR"), "/cassini_csr.rs"));

#[cfg(test)]
mod tests;
