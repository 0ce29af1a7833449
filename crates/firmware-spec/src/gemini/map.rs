//! The Gemini NIC address map, as seen through the emulated function's BAR 0.
//!
//! Every base, pitch and count below is a public fact from the Cray GPL header `gemini_hw.h`
//! ("Gemini Address Map", "Local Block", "Available HW Resources"), except where a region's
//! description says "(our choice)": the header gives the base of the ORB and SSID blocks but
//! not their entry pitch.
//!
//! The local block (`0x0 .. 0x610_0000`) is the kernel-only MMR space; the tables inside it
//! (NTT, BTE, MRT, MDD, CQ, ...) are listed separately. The user-mappable parts are the CQ
//! descriptor alias pages, the FMA descriptor pages and the FMA windows.

/// One region of the address map: `count` entries of `stride` bytes from `base`.
/// A region that is one block has `count == 1` and `stride` = its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapRegion {
    /// Short stable name (`"cq"`, `"fma_putwc"`, ...).
    pub name: &'static str,
    /// Byte offset of entry 0 from the start of the NIC address space (BAR 0).
    pub base: u64,
    /// Bytes per entry.
    pub stride: u64,
    /// Number of entries.
    pub count: u64,
    /// One line saying what the region holds and where the numbers come from.
    pub description: &'static str,
}

impl MapRegion {
    /// Total bytes covered: `stride * count` (saturating).
    pub const fn size(&self) -> u64 {
        self.stride.saturating_mul(self.count)
    }

    /// One past the last byte (saturating).
    pub const fn end(&self) -> u64 {
        self.base.saturating_add(self.size())
    }

    /// Whether `addr` falls inside the region.
    pub const fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr < self.end()
    }

    /// The address of entry `index`, or `None` past the end.
    pub const fn entry_addr(&self, index: u64) -> Option<u64> {
        if index >= self.count {
            return None;
        }
        Some(self.base + index * self.stride)
    }
}

/// 1 GiB: the size of one FMA window (`gemini_hw.h`: window offset by id = `id << 30`).
pub const FMA_WINDOW_SIZE: u64 = 1 << 30;
/// 4 KiB: the pitch of CQ descriptor alias pages and FMA descriptor pages (`id << 12`).
pub const DESC_PAGE_SIZE: u64 = 1 << 12;

/// Local block: kernel MMR space (`GHAL_LOCAL_BLOCK_OFFSET`, size `GHAL_LOCAL_BLOCK_SIZE`).
pub const LOCAL_BLOCK_BASE: u64 = 0x0;
/// Size of the local block.
pub const LOCAL_BLOCK_SIZE: u64 = 0x610_0000;
/// CQ descriptor user alias (`GHAL_CQ_DESC_USER_OFFSET`), 4 KiB per CQ.
pub const CQ_DESC_USER_BASE: u64 = 0x08_0000_0000;
/// FMA descriptor user alias (`GHAL_FMA_DESC_USER_OFFSET`), 4 KiB per descriptor.
pub const FMA_DESC_USER_BASE: u64 = 0x08_0040_0000;
/// FMA descriptors (`GHAL_FMA_DESC_OFFSET`), 4 KiB per descriptor.
pub const FMA_DESC_BASE: u64 = 0x08_0048_0000;
/// Offset of the privileged mask inside an FMA descriptor page (`GHAL_FMA_DESC_PRVMASK_OFFSET`).
pub const FMA_DESC_PRVMASK_OFFSET: u64 = 0x80;
/// OS PUT write-combining window (`GHAL_FMA_PUTWC_OS_OFFSET`).
pub const FMA_PUTWC_OS_BASE: u64 = 0x0d_0000_0000;
/// OS GET window (`GHAL_FMA_GET_OS_OFFSET`).
pub const FMA_GET_OS_BASE: u64 = 0x0e_0000_0000;
/// OS PUT uncached window (`GHAL_FMA_PUTUC_OS_OFFSET`).
pub const FMA_PUTUC_OS_BASE: u64 = 0x0f_0000_0000;
/// PUT write-combining window (`GHAL_FMA_PUTWC_OFFSET`), 1 GiB per FMA id.
pub const FMA_PUTWC_BASE: u64 = 0x10_0000_0000;
/// GET window (`GHAL_FMA_GET_OFFSET`), 1 GiB per FMA id.
pub const FMA_GET_BASE: u64 = 0x20_0000_0000;
/// PUT uncached window (`GHAL_FMA_PUTUC_OFFSET`), 1 GiB per FMA id.
pub const FMA_PUTUC_BASE: u64 = 0x30_0000_0000;
/// NTT bank 0 (`GHAL_NTT0_OFFSET`), 8 B per entry.
pub const NTT_BASE: u64 = 0x210_0000;
/// NTT bank 1 (`GHAL_NTT1_OFFSET`).
pub const NTT1_BASE: u64 = 0x211_0000;
/// NTT pitch (`GHAL_NTT_PITCH`).
pub const NTT_PITCH: u64 = 8;
/// Node id register (`GHAL_NODE_ID_OFFSET`).
pub const NODE_ID_OFFSET: u64 = 0x212_0000;
/// NTT configuration register (`GHAL_NTT_CONFIG`).
pub const NTT_CONFIG_OFFSET: u64 = 0x212_0008;
/// BTE TX descriptors (`GHAL_BTE_TX_OFFSET`), 64 B each.
pub const BTE_TX_BASE: u64 = 0x400_0000;
/// BTE TX descriptor pitch.
pub const BTE_TX_PITCH: u64 = 64;
/// BTE TX channel registers (`GHAL_BTE_TCHNL_OFFSET`), 64 B each.
pub const BTE_TX_CHANNEL_BASE: u64 = 0x402_0000;
/// MRT (`GHAL_MRT_OFFSET`), 4 B per entry.
pub const MRT_BASE: u64 = 0x440_0000;
/// MRT pitch (`GHAL_MRT_OFF_BYID`: `id << 2`).
pub const MRT_PITCH: u64 = 4;
/// MDD table (`GHAL_MDD_OFFSET`), 16 B per entry.
pub const MDD_BASE: u64 = 0x441_0000;
/// MDD pitch (`GHAL_MDD_OFF_BYID`: `id << 4`).
pub const MDD_PITCH: u64 = 16;
/// vMDH table (`GHAL_VMDH_OFFSET`).
pub const VMDH_BASE: u64 = 0x442_0000;
/// vMDH entry pitch (our choice: 256 entries in the 0x400 bytes before `MRT_PAGESIZE`).
pub const VMDH_PITCH: u64 = 4;
/// MRT page-size register (`GHAL_MRT_PAGESIZE_OFFSET`, 3-bit field).
pub const MRT_PAGESIZE_OFFSET: u64 = 0x442_0400;
/// CQ descriptors, kernel view (`GHAL_CQ_OFFSET`), 32 B each.
pub const CQ_BASE: u64 = 0x480_0000;
/// CQ descriptor pitch (`GHAL_CQ_OFF_BYID`: `id << 5`).
pub const CQ_PITCH: u64 = 32;
/// BTE RX descriptors (`GHAL_BTE_RX_OFFSET`), 8 B each.
pub const BTE_RX_BASE: u64 = 0x4c0_0000;
/// BTE RX pitch (`GHAL_BTE_RX_OFF_BYID`: `id << 3`).
pub const BTE_RX_PITCH: u64 = 8;
/// BTE RX channel registers (`GHAL_BTE_RCHNL_OFFSET`), 64 B each.
pub const BTE_RX_CHANNEL_BASE: u64 = 0x4c0_2000;
/// ORB block (`GHAL_ORB_OFFSET`).
pub const ORB_BASE: u64 = 0x500_0000;
/// ORB entry pitch (our choice: 1024 entries end before the scrub control at +0x8010).
pub const ORB_PITCH: u64 = 32;
/// SSID block (`GHAL_SSID_OFFSET`; scrub control at +0x28).
pub const SSID_BASE: u64 = 0x560_0000;
/// SSID block size (our choice; the next public block, RAT, is at 0x598_0000).
pub const SSID_BLOCK_SIZE: u64 = 0x1_0000;
/// RAT block (`GHAL_RAT_OFFSET`).
pub const RAT_BASE: u64 = 0x598_0000;
/// One past the highest address the map uses (end of the PUTUC windows): the BAR 0 size.
pub const ADDRESS_SPACE_SIZE: u64 = 0x40_0000_0000;

/// The whole public address map. [`decode`] returns the first region that contains an
/// address, so the tables inside the local block come before `local_block` itself.
pub static REGIONS: &[MapRegion] = &[
    MapRegion {
        name: "ntt",
        base: NTT_BASE,
        stride: NTT_PITCH,
        count: super::limits::NTT_ENTRIES,
        description: "node translation table bank 0, 8 B entries (gemini_hw.h GHAL_NTT0_OFFSET)",
    },
    MapRegion {
        name: "ntt1",
        base: NTT1_BASE,
        stride: NTT_PITCH,
        count: super::limits::NTT_ENTRIES,
        description: "node translation table bank 1 (gemini_hw.h GHAL_NTT1_OFFSET)",
    },
    MapRegion {
        name: "bte_tx",
        base: BTE_TX_BASE,
        stride: BTE_TX_PITCH,
        count: super::limits::BTE_TX_SLOTS,
        description: "BTE transmit descriptors, 64 B each; the last is reserved for HSS \
                      (gemini_hw.h GHAL_BTE_TX_OFFSET)",
    },
    MapRegion {
        name: "bte_tx_channel",
        base: BTE_TX_CHANNEL_BASE,
        stride: 64,
        count: super::limits::BTE_CHANNELS,
        description: "BTE transmit channel registers, 64 B each (gemini_hw.h GHAL_BTE_TCHNL_OFFSET)",
    },
    MapRegion {
        name: "mrt",
        base: MRT_BASE,
        stride: MRT_PITCH,
        count: super::limits::MRT_ENTRIES,
        description: "memory relocation table, 4 B entries (gemini_hw.h GHAL_MRT_OFFSET)",
    },
    MapRegion {
        name: "mdd",
        base: MDD_BASE,
        stride: MDD_PITCH,
        count: super::limits::MDD_ENTRIES,
        description: "memory domain descriptors, 16 B each (gemini_hw.h GHAL_MDD_OFFSET)",
    },
    MapRegion {
        name: "vmdh",
        base: VMDH_BASE,
        stride: VMDH_PITCH,
        count: super::limits::VMDH_ENTRIES,
        description: "virtual MDH table (base gemini_hw.h GHAL_VMDH_OFFSET; 4 B pitch our choice)",
    },
    MapRegion {
        name: "cq",
        base: CQ_BASE,
        stride: CQ_PITCH,
        count: super::limits::CQ_DESCRIPTORS,
        description: "CQ descriptors (kernel view), 32 B each (gemini_hw.h GHAL_CQ_OFFSET)",
    },
    MapRegion {
        name: "bte_rx",
        base: BTE_RX_BASE,
        stride: BTE_RX_PITCH,
        count: super::limits::BTE_RX_DESCRIPTORS,
        description: "BTE receive descriptors, 8 B each (gemini_hw.h GHAL_BTE_RX_OFFSET)",
    },
    MapRegion {
        name: "bte_rx_channel",
        base: BTE_RX_CHANNEL_BASE,
        stride: 64,
        count: super::limits::BTE_CHANNELS,
        description: "BTE receive channel registers, 64 B each (gemini_hw.h GHAL_BTE_RCHNL_OFFSET)",
    },
    MapRegion {
        name: "orb",
        base: ORB_BASE,
        stride: ORB_PITCH,
        count: super::limits::ORB_ENTRIES,
        description: "outstanding request buffer (base gemini_hw.h GHAL_ORB_OFFSET; \
                      32 B pitch our choice)",
    },
    MapRegion {
        name: "ssid",
        base: SSID_BASE,
        stride: SSID_BLOCK_SIZE,
        count: 1,
        description: "SSID block (base gemini_hw.h GHAL_SSID_OFFSET; size our choice)",
    },
    MapRegion {
        name: "local_block",
        base: LOCAL_BLOCK_BASE,
        stride: LOCAL_BLOCK_SIZE,
        count: 1,
        description: "local block, kernel MMRs (gemini_hw.h GHAL_LOCAL_BLOCK_OFFSET/SIZE)",
    },
    MapRegion {
        name: "cq_desc_user",
        base: CQ_DESC_USER_BASE,
        stride: DESC_PAGE_SIZE,
        count: super::limits::CQ_DESCRIPTORS,
        description: "CQ descriptor user alias, one 4 KiB page per CQ \
                      (gemini_hw.h GHAL_CQ_DESC_USER_OFFSET)",
    },
    MapRegion {
        name: "fma_desc_user",
        base: FMA_DESC_USER_BASE,
        stride: DESC_PAGE_SIZE,
        count: super::limits::FMA_TOTAL_DESCRIPTORS,
        description: "FMA descriptor user alias, 4 KiB each (gemini_hw.h GHAL_FMA_DESC_USER_OFFSET)",
    },
    MapRegion {
        name: "fma_desc",
        base: FMA_DESC_BASE,
        stride: DESC_PAGE_SIZE,
        count: super::limits::FMA_TOTAL_DESCRIPTORS,
        description: "FMA descriptors, 4 KiB each (gemini_hw.h GHAL_FMA_DESC_OFFSET)",
    },
    MapRegion {
        name: "fma_putwc_os",
        base: FMA_PUTWC_OS_BASE,
        stride: FMA_WINDOW_SIZE,
        count: super::limits::FMA_OS_DESCRIPTORS,
        description: "OS PUT write-combining windows, 1 GiB per OS FMA id \
                      (gemini_hw.h GHAL_FMA_PUTWC_OS_OFFSET)",
    },
    MapRegion {
        name: "fma_get_os",
        base: FMA_GET_OS_BASE,
        stride: FMA_WINDOW_SIZE,
        count: super::limits::FMA_OS_DESCRIPTORS,
        description: "OS GET windows, 1 GiB per OS FMA id (gemini_hw.h GHAL_FMA_GET_OS_OFFSET)",
    },
    MapRegion {
        name: "fma_putuc_os",
        base: FMA_PUTUC_OS_BASE,
        stride: FMA_WINDOW_SIZE,
        count: super::limits::FMA_OS_DESCRIPTORS,
        description: "OS PUT uncached windows, 1 GiB per OS FMA id \
                      (gemini_hw.h GHAL_FMA_PUTUC_OS_OFFSET)",
    },
    MapRegion {
        name: "fma_putwc",
        base: FMA_PUTWC_BASE,
        stride: FMA_WINDOW_SIZE,
        count: super::limits::FMA_DESCRIPTORS,
        description: "PUT write-combining windows, 1 GiB per FMA id \
                      (gemini_hw.h GHAL_FMA_PUTWC_OFFSET)",
    },
    MapRegion {
        name: "fma_get",
        base: FMA_GET_BASE,
        stride: FMA_WINDOW_SIZE,
        count: super::limits::FMA_DESCRIPTORS,
        description: "GET windows, 1 GiB per FMA id (gemini_hw.h GHAL_FMA_GET_OFFSET)",
    },
    MapRegion {
        name: "fma_putuc",
        base: FMA_PUTUC_BASE,
        stride: FMA_WINDOW_SIZE,
        count: super::limits::FMA_DESCRIPTORS,
        description: "PUT uncached windows, 1 GiB per FMA id (gemini_hw.h GHAL_FMA_PUTUC_OFFSET)",
    },
];

/// Find the region holding `addr`: `(region, entry index, byte offset inside the entry)`.
/// `None` for an address no region covers (a hole or past the map).
pub fn decode(addr: u64) -> Option<(&'static MapRegion, u64, u64)> {
    let r = REGIONS.iter().find(|r| r.contains(addr))?;
    let rel = addr - r.base;
    // `stride` is never 0 in REGIONS; checked division keeps this total anyway.
    let index = rel.checked_div(r.stride)?;
    let offset = rel.checked_rem(r.stride)?;
    Some((r, index, offset))
}

/// The region called `name`.
pub fn region(name: &str) -> Option<&'static MapRegion> {
    REGIONS.iter().find(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_known_addresses() {
        let (r, i, o) = decode(0x08_0000_3010).unwrap();
        assert_eq!((r.name, i, o), ("cq_desc_user", 3, 0x10));
        let (r, i, o) = decode(0x20_0000_0000 + 5 * (1 << 30) + 7).unwrap();
        assert_eq!((r.name, i, o), ("fma_get", 5, 7));
        let (r, i, o) = decode(CQ_BASE + 32 * 1023 + 31).unwrap();
        assert_eq!((r.name, i, o), ("cq", 1023, 31));
        let (r, i, o) = decode(0x100).unwrap();
        assert_eq!((r.name, i, o), ("local_block", 0, 0x100));
        assert!(decode(ADDRESS_SPACE_SIZE).is_none());
        assert!(decode(LOCAL_BLOCK_SIZE).is_none());
    }

    #[test]
    fn user_regions_do_not_overlap() {
        let mut outer: Vec<&MapRegion> = REGIONS
            .iter()
            .filter(|r| r.base >= LOCAL_BLOCK_SIZE)
            .collect();
        outer.sort_by_key(|r| r.base);
        for w in outer.windows(2) {
            assert!(
                w[0].end() <= w[1].base,
                "{} overlaps {}",
                w[0].name,
                w[1].name
            );
        }
        assert_eq!(outer.last().unwrap().end(), ADDRESS_SPACE_SIZE);
    }
}
