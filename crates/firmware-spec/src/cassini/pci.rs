//! Cassini PCI identity and BAR0 layout.
//!
//! Sources (facts only): `cass_core.h` (PCI ids, BAR sizes), `cassini_user_defs.h`
//! (`C_MEMORG_*`, launch/TOU/EE page sizes, `C_PLATFORM_*`), `cxi-abi.h`
//! (`enum cassini_version`), `csr_defs.json` (`c_mb_sts_rev`, `nicsim_nic_id`).

use crate::bits;

/// PCI vendor id of Cray Inc. (Cassini 1).
pub const VENDOR_CRAY: u16 = 0x17db;
/// PCI vendor id of Hewlett Packard Enterprise (Cassini 2).
pub const VENDOR_HPE: u16 = 0x1590;
/// Cassini 1 device id (PF and VF share it; `cass_core.h`).
pub const DEVICE_CASSINI1: u16 = 0x0501;
/// Cassini 2 physical function device id.
pub const DEVICE_CASSINI2_PF: u16 = 0x0371;
/// Cassini 2 virtual function device id.
pub const DEVICE_CASSINI2_VF: u16 = 0x0372;
/// SR-IOV virtual functions per device (`C_NUM_VFS`).
pub const NUM_VFS: u16 = 64;

/// Cassini chip generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Generation {
    /// Cassini 1 (Cray vendor id).
    Cassini1,
    /// Cassini 2 (HPE vendor id).
    Cassini2,
}

/// PCI function kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    /// Physical function.
    Pf,
    /// SR-IOV virtual function.
    Vf,
}

/// A PCI vendor/device id pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PciId {
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
}

/// The PCI id of a generation's function.
pub const fn pci_id(g: Generation, f: Function) -> PciId {
    match (g, f) {
        (Generation::Cassini1, _) => PciId {
            vendor: VENDOR_CRAY,
            device: DEVICE_CASSINI1,
        },
        (Generation::Cassini2, Function::Pf) => PciId {
            vendor: VENDOR_HPE,
            device: DEVICE_CASSINI2_PF,
        },
        (Generation::Cassini2, Function::Vf) => PciId {
            vendor: VENDOR_HPE,
            device: DEVICE_CASSINI2_VF,
        },
    }
}

/// Identify a PCI id as a Cassini, as the driver's id table does. For Cassini 1 the function
/// kind is `None`: PF and VF share the id and are told apart by BAR0 size
/// ([`function_from_bar0_size`]).
pub const fn identify(id: PciId) -> Option<(Generation, Option<Function>)> {
    match (id.vendor, id.device) {
        (VENDOR_CRAY, DEVICE_CASSINI1) => Some((Generation::Cassini1, None)),
        (VENDOR_HPE, DEVICE_CASSINI2_PF) => Some((Generation::Cassini2, Some(Function::Pf))),
        (VENDOR_HPE, DEVICE_CASSINI2_VF) => Some((Generation::Cassini2, Some(Function::Vf))),
        _ => None,
    }
}

/// BAR0 size of a physical function (`MMIO_BAR_LEN_PF`, 2 GiB).
pub const BAR0_SIZE_PF: u64 = 2 << 30;
/// BAR0 size of a virtual function (512 MiB).
pub const BAR0_SIZE_VF: u64 = 512 << 20;

/// PF if BAR0 is at least [`BAR0_SIZE_PF`], else VF (libcxi `devinfo.c` sets `is_vf` when
/// `resource0` is smaller than 2 GiB).
pub const fn function_from_bar0_size(size: u64) -> Function {
    if size >= BAR0_SIZE_PF {
        Function::Pf
    } else {
        Function::Vf
    }
}

/// BAR0 size of a function kind.
pub const fn bar0_size(f: Function) -> u64 {
    match f {
        Function::Pf => BAR0_SIZE_PF,
        Function::Vf => BAR0_SIZE_VF,
    }
}

// ---- BAR0 map (`cassini_user_defs.h` C_MEMORG_*; cassini.md §1.2) ----

/// Transmit CQ launch pages (`C_CQ_LAUNCH_TXQ_BASE`).
pub const CQ_LAUNCH_TXQ_BASE: u64 = 0x0000_0000;
/// Target CQ launch pages (`C_CQ_LAUNCH_TGT_BASE`); target CQ `n` is launch index `1024 + n`.
pub const CQ_LAUNCH_TGT_BASE: u64 = 0x0400_0000;
/// Bytes per CQ launch page (`C_CQ_LAUNCH_PAGE_SIZE`).
pub const CQ_LAUNCH_PAGE_SIZE: u64 = 0x1_0000;
/// Transmit CQs (`C_NUM_TRANSMIT_CQS`).
pub const NUM_TXQS: u64 = 1024;
/// Target CQs (`C_NUM_TARGET_CQS`).
pub const NUM_TGQS: u64 = 512;
/// CT doorbell pages of the TOU (`C_MEMORG_CQ_TOU`).
pub const TOU_BASE: u64 = 0x0800_0000;
/// Bytes per CT doorbell page (`C_TOU_LAUNCH_PAGE_SIZE`).
pub const TOU_LAUNCH_PAGE_SIZE: u64 = 0x1_0000;
/// Counting events (`C_NUM_CTS`).
pub const NUM_CTS: u64 = 2048;
/// EQ software-state pages of the EE (`C_MEMORG_EE`).
pub const EE_SW_STATE_BASE: u64 = 0x1000_0000;
/// Bytes per EQ software-state page (`C_EE_SW_STATE_PAGE_SIZE`).
pub const EE_SW_STATE_PAGE_SIZE: u64 = 0x1_0000;
/// Event queues (`C_NUM_EQS`).
pub const NUM_EQS: u64 = 2048;
/// CSR region (`C_MEMORG_CSR`); `csr_defs.json` offsets are relative to it.
pub const CSR_BASE: u64 = 0x4000_0000;
/// Size of the CSR region.
pub const CSR_SIZE: u64 = 0x2800_0000;

/// Kind of a BAR0 region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bar0Kind {
    /// Transmit CQ launch pages (write pointer + low-latency windows).
    TxCqLaunch,
    /// Target CQ launch pages.
    TgtCqLaunch,
    /// CT doorbell pages.
    CtDoorbell,
    /// EQ software-state pages (`c_ee_cfg_eq_sw_state`, the read pointer).
    EqSwState,
    /// The CSR region.
    Csr,
}

/// One region of BAR0: `count` pages of `stride` bytes starting at `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar0RegionDesc {
    /// Short name.
    pub name: &'static str,
    /// Region kind.
    pub kind: Bar0Kind,
    /// Offset in BAR0.
    pub base: u64,
    /// Bytes per page (the whole size for the CSR region).
    pub stride: u64,
    /// Number of pages (1 for the CSR region).
    pub count: u64,
    /// What the region holds.
    pub description: &'static str,
}

impl Bar0RegionDesc {
    /// Total bytes.
    pub const fn size(&self) -> u64 {
        self.stride * self.count
    }
    /// One past the last byte.
    pub const fn end(&self) -> u64 {
        self.base + self.size()
    }
}

/// The populated regions of BAR0, in address order. Everything else reads as unmapped.
pub static BAR0_REGIONS: [Bar0RegionDesc; 5] = [
    Bar0RegionDesc {
        name: "tx_cq_launch",
        kind: Bar0Kind::TxCqLaunch,
        base: CQ_LAUNCH_TXQ_BASE,
        stride: CQ_LAUNCH_PAGE_SIZE,
        count: NUM_TXQS,
        description: "transmit CQ launch pages: write pointer at +0, low-latency windows",
    },
    Bar0RegionDesc {
        name: "tgt_cq_launch",
        kind: Bar0Kind::TgtCqLaunch,
        base: CQ_LAUNCH_TGT_BASE,
        stride: CQ_LAUNCH_PAGE_SIZE,
        count: NUM_TGQS,
        description: "target CQ launch pages (launch index 1024 + n)",
    },
    Bar0RegionDesc {
        name: "ct_doorbell",
        kind: Bar0Kind::CtDoorbell,
        base: TOU_BASE,
        stride: TOU_LAUNCH_PAGE_SIZE,
        count: NUM_CTS,
        description: "TOU counting-event doorbell pages",
    },
    Bar0RegionDesc {
        name: "eq_sw_state",
        kind: Bar0Kind::EqSwState,
        base: EE_SW_STATE_BASE,
        stride: EE_SW_STATE_PAGE_SIZE,
        count: NUM_EQS,
        description: "EE event-queue software-state pages (c_ee_cfg_eq_sw_state)",
    },
    Bar0RegionDesc {
        name: "csr",
        kind: Bar0Kind::Csr,
        base: CSR_BASE,
        stride: CSR_SIZE,
        count: 1,
        description: "control/status registers (csr_defs.json offsets are relative to here)",
    },
];

/// A decoded BAR0 offset. Indices are 0-based per kind; `off` is the byte inside the page
/// (inside the CSR region for [`Bar0Region::Csr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bar0Region {
    /// Transmit CQ `cq`'s launch page.
    TxCqLaunch {
        /// Transmit CQ index (0..1024).
        cq: u32,
        /// Byte in the page.
        off: u32,
    },
    /// Target CQ `cq`'s launch page.
    TgtCqLaunch {
        /// Target CQ index (0..512).
        cq: u32,
        /// Byte in the page.
        off: u32,
    },
    /// Counting event `ct`'s doorbell page.
    CtDoorbell {
        /// CT index (0..2048).
        ct: u32,
        /// Byte in the page.
        off: u32,
    },
    /// Event queue `eq`'s software-state page.
    EqSwState {
        /// EQ index (0..2048).
        eq: u32,
        /// Byte in the page.
        off: u32,
    },
    /// The CSR region, at CSR offset `off` (decode further with `csr::at_offset`).
    Csr {
        /// Offset relative to [`CSR_BASE`].
        off: u64,
    },
    /// Nothing is mapped at this offset.
    Unmapped,
}

/// Decode a BAR0 offset into its region. A VF's BAR0 ends at [`BAR0_SIZE_VF`], which holds the
/// launch, doorbell and EQ pages but no CSRs; checking the access against the BAR size is the
/// caller's job.
pub fn decode_bar0(offset: u64) -> Bar0Region {
    let Some(r) = BAR0_REGIONS
        .iter()
        .find(|r| offset >= r.base && offset < r.end())
    else {
        return Bar0Region::Unmapped;
    };
    let rel = offset - r.base;
    // Page indices (< 2048) and in-page offsets (< 64 KiB) always fit in u32.
    let idx = u32::try_from(rel / r.stride).unwrap_or(u32::MAX);
    let off = u32::try_from(rel % r.stride).unwrap_or(u32::MAX);
    match r.kind {
        Bar0Kind::TxCqLaunch => Bar0Region::TxCqLaunch { cq: idx, off },
        Bar0Kind::TgtCqLaunch => Bar0Region::TgtCqLaunch { cq: idx, off },
        Bar0Kind::CtDoorbell => Bar0Region::CtDoorbell { ct: idx, off },
        Bar0Kind::EqSwState => Bar0Region::EqSwState { eq: idx, off },
        Bar0Kind::Csr => Bar0Region::Csr { off: rel },
    }
}

// ---- Revision and platform (`c_mb_sts_rev`) ----

/// Chip revision as the driver reports it (`enum cassini_version`, cxi-abi.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CassiniVersion {
    /// `CASSINI_1_0`: Cassini 1, `rev` 1.
    Cassini1_0 = 0x11,
    /// `CASSINI_1_1`: Cassini 1, `rev` 2.
    Cassini1_1 = 0x12,
    /// `CASSINI_2_0`: Cassini 2, `rev` 1.
    Cassini2_0 = 0x21,
}

impl CassiniVersion {
    /// The enum value (`0x11`, `0x12`, `0x21`).
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// Decode a `cassini_version` value.
    pub const fn from_value(v: u8) -> Option<CassiniVersion> {
        match v {
            0x11 => Some(CassiniVersion::Cassini1_0),
            0x12 => Some(CassiniVersion::Cassini1_1),
            0x21 => Some(CassiniVersion::Cassini2_0),
            _ => None,
        }
    }

    /// The generation.
    pub const fn generation(self) -> Generation {
        match self {
            CassiniVersion::Cassini1_0 | CassiniVersion::Cassini1_1 => Generation::Cassini1,
            CassiniVersion::Cassini2_0 => Generation::Cassini2,
        }
    }

    /// The `rev` field of `c_mb_sts_rev` for this version.
    pub const fn rev(self) -> u16 {
        match self {
            CassiniVersion::Cassini1_0 | CassiniVersion::Cassini2_0 => 1,
            CassiniVersion::Cassini1_1 => 2,
        }
    }

    /// The version a device reports from its generation and `rev` field.
    pub const fn from_rev(g: Generation, rev: u16) -> Option<CassiniVersion> {
        match (g, rev) {
            (Generation::Cassini1, 1) => Some(CassiniVersion::Cassini1_0),
            (Generation::Cassini1, 2) => Some(CassiniVersion::Cassini1_1),
            (Generation::Cassini2, 1) => Some(CassiniVersion::Cassini2_0),
            _ => None,
        }
    }
}

/// The platform a device reports in `c_mb_sts_rev.platform` (`C_PLATFORM_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Platform {
    /// Real silicon.
    Asic = 0,
    /// HPE's netsim simulator.
    Netsim = 1,
    /// Z1 emulation platform.
    Z1 = 2,
    /// FPGA.
    Fpga = 3,
}

impl Platform {
    /// Decode a 4-bit platform value.
    pub const fn from_value(v: u8) -> Option<Platform> {
        match v {
            0 => Some(Platform::Asic),
            1 => Some(Platform::Netsim),
            2 => Some(Platform::Z1),
            3 => Some(Platform::Fpga),
            _ => None,
        }
    }

    /// Whether the upstream driver accepts this platform (`is_supported()`: ASIC, Z1, NETSIM).
    pub const fn driver_supported(self) -> bool {
        !matches!(self, Platform::Fpga)
    }
}

/// Offset of `c_mb_sts_rev` in the CSR region (`csr_defs.json`).
pub const MB_STS_REV_OFFSET: u64 = 0x1000_4008;
/// Offset of the netsim-only `nicsim_nic_id` (MAC/NID under NETSIM) in the CSR region
/// (`csr_defs.json`).
pub const NICSIM_NIC_ID_OFFSET: u64 = 0x27ff_f060;

/// The 64-bit `c_mb_sts_rev` register: `rev[0:16]`, `device_id[16:32]`, `vendor_id[32:48]`,
/// `proto[48:60]`, `platform[60:64]` (`csr_defs.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MbStsRev {
    /// Revision within the generation (see [`CassiniVersion::rev`]).
    pub rev: u16,
    /// PCI device id.
    pub device_id: u16,
    /// PCI vendor id.
    pub vendor_id: u16,
    /// Protocol version (12 bits).
    pub proto: u16,
    /// Platform (4 bits, [`Platform`]).
    pub platform: u8,
}

impl MbStsRev {
    /// `rev` field: bit offset and width.
    pub const REV: (u32, u32) = (0, 16);
    /// `device_id` field: bit offset and width.
    pub const DEVICE_ID: (u32, u32) = (16, 16);
    /// `vendor_id` field: bit offset and width.
    pub const VENDOR_ID: (u32, u32) = (32, 16);
    /// `proto` field: bit offset and width.
    pub const PROTO: (u32, u32) = (48, 12);
    /// `platform` field: bit offset and width.
    pub const PLATFORM: (u32, u32) = (60, 4);

    /// The value a device of `version` on `platform` reports (PF id; proto 0).
    pub const fn new(version: CassiniVersion, platform: Platform) -> MbStsRev {
        let id = pci_id(version.generation(), Function::Pf);
        MbStsRev {
            rev: version.rev(),
            device_id: id.device,
            vendor_id: id.vendor,
            proto: 0,
            platform: platform as u8,
        }
    }

    /// Decode the register value.
    pub const fn from_u64(v: u64) -> MbStsRev {
        MbStsRev {
            rev: v as u16,
            device_id: (v >> 16) as u16,
            vendor_id: (v >> 32) as u16,
            proto: ((v >> 48) & bits::mask(12)) as u16,
            platform: (v >> 60) as u8,
        }
    }

    /// Encode the register value (`proto` and `platform` truncated to their widths).
    pub const fn to_u64(self) -> u64 {
        self.rev as u64
            | (self.device_id as u64) << 16
            | (self.vendor_id as u64) << 32
            | ((self.proto as u64) & bits::mask(12)) << 48
            | ((self.platform as u64) & bits::mask(4)) << 60
    }

    /// The chip version, if the ids and `rev` name one.
    pub const fn version(self) -> Option<CassiniVersion> {
        match identify(PciId {
            vendor: self.vendor_id,
            device: self.device_id,
        }) {
            Some((g, _)) => CassiniVersion::from_rev(g, self.rev),
            None => None,
        }
    }

    /// The platform, if known.
    pub const fn platform(self) -> Option<Platform> {
        Platform::from_value(self.platform)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert_eq!(
            pci_id(Generation::Cassini1, Function::Vf),
            PciId {
                vendor: 0x17db,
                device: 0x0501
            }
        );
        assert_eq!(pci_id(Generation::Cassini2, Function::Pf).device, 0x0371);
        assert_eq!(pci_id(Generation::Cassini2, Function::Vf).device, 0x0372);
        assert_eq!(pci_id(Generation::Cassini2, Function::Vf).vendor, 0x1590);
        for g in [Generation::Cassini1, Generation::Cassini2] {
            for f in [Function::Pf, Function::Vf] {
                let (g2, f2) = identify(pci_id(g, f)).unwrap();
                assert_eq!(g2, g);
                assert!(f2.is_none_or(|x| x == f));
            }
        }
        assert_eq!(
            identify(PciId {
                vendor: 0x17db,
                device: 0x0371
            }),
            None
        );
    }

    #[test]
    fn bar_sizes() {
        assert_eq!(BAR0_SIZE_PF, 2_147_483_648);
        assert_eq!(BAR0_SIZE_VF, 536_870_912);
        assert_eq!(function_from_bar0_size(BAR0_SIZE_PF), Function::Pf);
        assert_eq!(function_from_bar0_size(BAR0_SIZE_PF - 1), Function::Vf);
        assert_eq!(function_from_bar0_size(BAR0_SIZE_VF), Function::Vf);
        assert_eq!(bar0_size(Function::Vf), BAR0_SIZE_VF);
        // The CSR region fits in a PF's BAR0 but not in a VF's.
        const { assert!(CSR_BASE + CSR_SIZE <= BAR0_SIZE_PF) };
        const { assert!(CSR_BASE >= BAR0_SIZE_VF) };
        // Every page region fits in a VF's BAR0.
        for r in BAR0_REGIONS.iter().filter(|r| r.kind != Bar0Kind::Csr) {
            assert!(r.end() <= BAR0_SIZE_VF, "{}", r.name);
        }
    }

    #[test]
    fn regions_sorted_and_disjoint() {
        for w in BAR0_REGIONS.windows(2) {
            assert!(w[0].end() <= w[1].base, "{} / {}", w[0].name, w[1].name);
        }
        // Target launch page n is the driver's launch index 1024 + n from the TX base.
        assert_eq!(
            CQ_LAUNCH_TXQ_BASE + CQ_LAUNCH_PAGE_SIZE * 1024,
            CQ_LAUNCH_TGT_BASE
        );
        assert_eq!(BAR0_REGIONS[2].end(), 0x1000_0000);
        assert_eq!(BAR0_REGIONS[3].end(), 0x1800_0000);
        assert_eq!(BAR0_REGIONS[4].end(), 0x6800_0000);
    }

    #[test]
    fn decode_boundaries() {
        use Bar0Region::*;
        let k = 0x1_0000u64;
        let cases: &[(u64, Bar0Region)] = &[
            (0, TxCqLaunch { cq: 0, off: 0 }),
            (k - 1, TxCqLaunch { cq: 0, off: 0xffff }),
            (k, TxCqLaunch { cq: 1, off: 0 }),
            (
                0x0400_0000 - 1,
                TxCqLaunch {
                    cq: 1023,
                    off: 0xffff,
                },
            ),
            (0x0400_0000, TgtCqLaunch { cq: 0, off: 0 }),
            (0x0400_0000 + 5 * k + 8, TgtCqLaunch { cq: 5, off: 8 }),
            (
                0x0600_0000 - 1,
                TgtCqLaunch {
                    cq: 511,
                    off: 0xffff,
                },
            ),
            (0x0600_0000, Unmapped),
            (0x0800_0000 - 1, Unmapped),
            (0x0800_0000, CtDoorbell { ct: 0, off: 0 }),
            (
                0x1000_0000 - 1,
                CtDoorbell {
                    ct: 2047,
                    off: 0xffff,
                },
            ),
            (0x1000_0000, EqSwState { eq: 0, off: 0 }),
            (0x1000_0000 + 7 * k, EqSwState { eq: 7, off: 0 }),
            (
                0x1800_0000 - 1,
                EqSwState {
                    eq: 2047,
                    off: 0xffff,
                },
            ),
            (0x1800_0000, Unmapped),
            (0x4000_0000 - 1, Unmapped),
            (0x4000_0000, Csr { off: 0 }),
            (0x4000_0000 + 0x981_0000, Csr { off: 0x981_0000 }),
            (0x6800_0000 - 1, Csr { off: 0x27ff_ffff }),
            (0x6800_0000, Unmapped),
            (BAR0_SIZE_PF - 1, Unmapped),
            (u64::MAX, Unmapped),
        ];
        for &(off, want) in cases {
            assert_eq!(decode_bar0(off), want, "offset {off:#x}");
        }
    }

    #[test]
    fn versions_and_platforms() {
        assert_eq!(CassiniVersion::Cassini1_0.value(), 0x11);
        assert_eq!(CassiniVersion::Cassini1_1.value(), 0x12);
        assert_eq!(CassiniVersion::Cassini2_0.value(), 0x21);
        for v in [
            CassiniVersion::Cassini1_0,
            CassiniVersion::Cassini1_1,
            CassiniVersion::Cassini2_0,
        ] {
            assert_eq!(CassiniVersion::from_value(v.value()), Some(v));
            assert_eq!(CassiniVersion::from_rev(v.generation(), v.rev()), Some(v));
        }
        assert_eq!(CassiniVersion::from_value(0x22), None);
        assert_eq!(Platform::Asic as u8, 0);
        assert_eq!(Platform::Netsim as u8, 1);
        assert_eq!(Platform::Z1 as u8, 2);
        assert_eq!(Platform::Fpga as u8, 3);
        assert_eq!(Platform::from_value(4), None);
        assert!(Platform::Netsim.driver_supported());
        assert!(!Platform::Fpga.driver_supported());
    }

    #[test]
    fn mb_sts_rev_golden() {
        // Reset value of c_mb_sts_rev in csr_defs.json: rev 2, device 0x0501, vendor 0x17db,
        // proto 0, platform 0 -> a Cassini 1.1 ASIC.
        let v: u64 = 2 | 0x0501 << 16 | 0x17db << 32;
        let r = MbStsRev::from_u64(v);
        assert_eq!(r, MbStsRev::new(CassiniVersion::Cassini1_1, Platform::Asic));
        assert_eq!(r.version(), Some(CassiniVersion::Cassini1_1));
        assert_eq!(r.platform(), Some(Platform::Asic));
        assert_eq!(r.to_u64(), v);

        let n = MbStsRev::new(CassiniVersion::Cassini2_0, Platform::Netsim);
        assert_eq!(n.to_u64(), 1 | 0x0371 << 16 | 0x1590 << 32 | 1 << 60);
        let mut p = n;
        p.proto = 0xabc;
        assert_eq!(MbStsRev::from_u64(p.to_u64()), p);
        assert_eq!(bits::get_bits(&p.to_u64().to_le_bytes(), 48, 12), 0xabc);
    }
}
