//! Memory domain descriptors (MDD), the memory relocation table (MRT), the vMDH table and
//! the uGNI memory handle.
//!
//! Public: `ghal_mdd_desc_t`, `GHAL_MDD_MODE_*`, `GHAL_MRT_ENCODE/DECODE`, the MRT page-size
//! codes (`gemini_hw.h`, `ghal_pub.h`); `gni_mem_hndl_v1_t` / `_v2_t`, `GNI_MEMHNDL_*` flags
//! and the handle CRC (`gni_priv.h`, as carried by the libfabric GNI provider).
//!
//! Our reading (documented in `docs/gemini-formats.md`): the vMDH entry layout, and how an
//! MRT-enabled MDD translates (MRT index = `(mem_base << 12 + offset) >> page_shift`).

use super::codes::{UnknownCode, flag_set};
use super::layout::{FormatError, bit_format};

bit_format! {
    /// `ghal_mdd_desc_t`: one memory domain descriptor (16 bytes at `GHAL_MDD_OFFSET + 16*id`).
    pub struct MddDescriptor, 16, {
        /// Protection tag allowed to use the domain.
        ptag: 0, 8;
        /// Bits 47:12 of the base address.
        mem_base: 12, 36;
        /// Translate through the MRT.
        mrt_enable: 56, 1;
        /// `MddModes` bits.
        modes: 64, 12;
        /// Bits 47:12 of the highest valid address.
        max_base: 76, 36;
        /// CQ handle for remote events into this domain (0 = none).
        cqh: 118, 10;
    }
}

flag_set! {
    /// `GHAL_MDD_MODE_*`.
    pub struct MddModes: u16 {
        /// `GHAL_MDD_MODE_COHERENT`
        const COHERENT = 0x0001;
        /// `GHAL_MDD_MODE_P_PASPW`: relaxed ordering for posted writes.
        const P_PASSPW = 0x0002;
        /// `GHAL_MDD_MODE_NP_PASSPW`: relaxed ordering for non-posted requests.
        const NP_PASSPW = 0x0004;
        /// `GHAL_MDD_MODE_FLUSH`: HT flush before the network response.
        const FLUSH = 0x0008;
        /// `GHAL_MDD_MODE_VALID`: entry enabled.
        const VALID = 0x0010;
        /// `GHAL_MDD_MODE_WRITABLE`: writes allowed.
        const WRITABLE = 0x0020;
    }
}

impl MddDescriptor {
    /// `modes`, checked.
    pub fn modes(&self) -> Result<MddModes, UnknownCode> {
        MddModes::from_bits(self.modes as u16)
    }

    /// Whether the entry is valid.
    pub fn is_valid(&self) -> bool {
        self.modes & MddModes::VALID.0 as u64 != 0
    }

    /// Whether network writes are allowed.
    pub fn is_writable(&self) -> bool {
        self.modes & MddModes::WRITABLE.0 as u64 != 0
    }

    /// Base address (`mem_base << 12`).
    pub const fn base(&self) -> u64 {
        self.mem_base << 12
    }

    /// Highest valid address page (`max_base << 12`).
    pub const fn max(&self) -> u64 {
        self.max_base << 12
    }
}

bit_format! {
    /// One MRT entry (4 bytes at `GHAL_MRT_OFFSET + 4*id`): `GHAL_MRT_ENCODE(addr)` =
    /// `((addr >> 15) & !3) | 1`, i.e. bit 0 valid, bits 2..31 = address bits 17..46.
    pub struct MrtEntry, 4, {
        /// Entry valid.
        valid: 0, 1;
        /// Address bits 17 and up.
        addr_hi: 2, 30;
    }
}

impl MrtEntry {
    /// `GHAL_MRT_ENCODE(addr)` for a 128 KiB-aligned address below 2^47.
    pub const fn for_addr(addr: u64) -> Option<MrtEntry> {
        if addr & ((1 << 17) - 1) != 0 || addr >= 1 << 47 {
            return None;
        }
        Some(MrtEntry {
            valid: 1,
            addr_hi: addr >> 17,
        })
    }

    /// `GHAL_MRT_DECODE`: the physical page address.
    pub const fn addr(&self) -> u64 {
        self.addr_hi << 17
    }

    /// The 32-bit register value.
    pub fn to_u32(&self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.encode()?))
    }
}

/// MRT page sizes by 3-bit code (`ghal_mrt_code_to_size`): 128K, 512K, 2M, 8M, 16M, 64M,
/// 256M, 1G.
pub const MRT_PAGE_SIZES: [u64; 8] = [
    128 << 10,
    512 << 10,
    2 << 20,
    8 << 20,
    16 << 20,
    64 << 20,
    256 << 20,
    1 << 30,
];

/// MRT page shifts by code (`ghal_mrt_code_to_shift`).
pub const MRT_PAGE_SHIFTS: [u32; 8] = [17, 19, 21, 23, 24, 26, 28, 30];

/// `GHAL_MRT_SIZE_TO_CODE`.
pub fn mrt_size_to_code(size: u64) -> Option<u8> {
    MRT_PAGE_SIZES
        .iter()
        .position(|&s| s == size)
        .map(|c| c as u8)
}

bit_format! {
    /// One vMDH table entry (our layout: 4 bytes at `GHAL_VMDH_OFFSET + 4*ptag`, built from
    /// `GHAL_VMDH_BASE_MASK` 0xFFF and `GHAL_VMDH_ENABLE_BIT` 0x8000): with vMDH on, the
    /// MDD used is `base + mdh`.
    pub struct VmdhEntry, 4, {
        /// First MDD of the block.
        base: 0, 12;
        /// Entry enabled.
        enable: 15, 1;
    }
}

flag_set! {
    /// `GNI_MEMHNDL_FLAG_*` (8 bits in qword 2 of a memory handle).
    pub struct MemHandleFlags: u8 {
        /// `GNI_MEMHNDL_FLAG_READONLY`
        const READONLY = 0x01;
        /// `GNI_MEMHNDL_FLAG_VMDH`
        const VMDH = 0x02;
        /// `GNI_MEMHNDL_FLAG_MRT`
        const MRT = 0x04;
        /// `GNI_MEMHNDL_FLAG_GART`
        const GART = 0x08;
        /// `GNI_MEMHNDL_FLAG_IOMMU`
        const IOMMU = 0x10;
        /// `GNI_MEMHNDL_FLAG_PCI_IOMMU`
        const PCI_IOMMU = 0x20;
        /// `GNI_MEMHNDL_FLAG_CLONE`
        const CLONE = 0x40;
        /// `GNI_MEMHNDL_FLAG_NEW_FRMT`: v2 layout (MDD sharing).
        const NEW_FRMT = 0x80;
    }
}

bit_format! {
    /// `gni_mem_hndl_v1_t` over the 16-byte `gni_mem_handle_t` (qword1, qword2).
    pub struct MemHandleV1, 16, {
        /// Virtual address >> 12.
        va: 0, 52;
        /// Memory domain handle.
        mdh: 52, 12;
        /// Registered pages.
        npages: 64, 28;
        /// log2 of the page size used for `npages`.
        pgsize: 92, 6;
        /// `MemHandleFlags`.
        flags: 98, 8;
        /// CRC-8 of the other bits.
        crc: 120, 8;
    }
}

bit_format! {
    /// `gni_mem_hndl_v2_t` (flag NEW_FRMT set): the MDH moves to qword 2.
    pub struct MemHandleV2, 16, {
        /// Virtual address >> 12.
        va: 0, 52;
        /// Entropy bits.
        entropy: 52, 12;
        /// Registered pages.
        npages: 64, 28;
        /// log2 of the page size used for `npages`.
        pgsize: 92, 6;
        /// `MemHandleFlags`.
        flags: 98, 8;
        /// Memory domain handle.
        mdh: 106, 12;
        /// CRC-8 of the other bits.
        crc: 120, 8;
    }
}

/// `gni_mem_handle_t`: two opaque qwords, sent to peers as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MemHandle {
    /// First qword.
    pub qword1: u64,
    /// Second qword.
    pub qword2: u64,
}

/// CRC-8 used by `gni_memhndl_calc_crc`: reflected polynomial 0x8C (the Dallas/Maxim CRC-8),
/// initial 0, over the 8 bytes of qword1 then the low 7 bytes of qword2, little endian.
pub fn handle_crc(qword1: u64, qword2: u64) -> u8 {
    let mut crc = 0u8;
    let bytes = qword1
        .to_le_bytes()
        .into_iter()
        .chain(qword2.to_le_bytes().into_iter().take(7));
    for b in bytes {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x8C
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// The meaning of a memory handle, whatever its layout version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MemHandleInfo {
    /// Start of the registered region (page aligned).
    pub va: u64,
    /// Memory domain handle (MDD index, or vMDH-relative with `VMDH`).
    pub mdh: u16,
    /// Pages registered.
    pub npages: u32,
    /// log2 of the page size.
    pub page_shift: u8,
    /// `MemHandleFlags` bits.
    pub flags: u8,
    /// Entropy (v2 only; 0 for v1).
    pub entropy: u16,
}

impl MemHandleInfo {
    /// Registered bytes (`npages << page_shift`, saturating).
    pub fn len(&self) -> u64 {
        let n = self.npages as u64;
        let shift = self.page_shift as u32;
        if n != 0 && (shift >= 64 || n.leading_zeros() < shift) {
            u64::MAX
        } else {
            n << shift.min(63)
        }
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.npages == 0
    }

    /// Whether `[addr, addr + len)` lies inside the region.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        let Some(region_end) = self.va.checked_add(self.len()) else {
            return false;
        };
        addr >= self.va && end <= region_end
    }
}

impl MemHandle {
    /// The 16-byte image (qword1 then qword2, little endian).
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.qword1.to_le_bytes());
        b[8..].copy_from_slice(&self.qword2.to_le_bytes());
        b
    }

    /// From a 16-byte image.
    pub fn from_bytes(b: &[u8]) -> Result<MemHandle, FormatError> {
        if b.len() < 16 {
            return Err(FormatError::Short {
                format: "MemHandle",
                need: 16,
                got: b.len(),
            });
        }
        let mut q1 = [0u8; 8];
        let mut q2 = [0u8; 8];
        q1.copy_from_slice(&b[..8]);
        q2.copy_from_slice(&b[8..16]);
        Ok(MemHandle {
            qword1: u64::from_le_bytes(q1),
            qword2: u64::from_le_bytes(q2),
        })
    }

    /// Build a handle with a valid CRC (v2 layout when `flags` has NEW_FRMT).
    pub fn build(info: &MemHandleInfo) -> Result<MemHandle, FormatError> {
        let bytes = if info.flags & MemHandleFlags::NEW_FRMT.0 != 0 {
            MemHandleV2 {
                va: info.va >> 12,
                entropy: info.entropy as u64,
                npages: info.npages as u64,
                pgsize: info.page_shift as u64,
                flags: info.flags as u64,
                mdh: info.mdh as u64,
                crc: 0,
            }
            .encode()?
        } else {
            MemHandleV1 {
                va: info.va >> 12,
                mdh: info.mdh as u64,
                npages: info.npages as u64,
                pgsize: info.page_shift as u64,
                flags: info.flags as u64,
                crc: 0,
            }
            .encode()?
        };
        let mut h = MemHandle::from_bytes(&bytes)?;
        h.qword2 |= (handle_crc(h.qword1, h.qword2) as u64) << 56;
        Ok(h)
    }

    /// `GNI_MEMHNDL_VERIFY`: qword2 non-zero and the CRC matches.
    pub fn verify(&self) -> bool {
        self.qword2 != 0 && (self.qword2 >> 56) as u8 == handle_crc(self.qword1, self.qword2)
    }

    /// `GNI_MEMHNDL_NEW_FRMT`.
    pub const fn is_v2(&self) -> bool {
        (self.qword2 >> 34) & MemHandleFlags::NEW_FRMT.0 as u64 != 0
    }

    /// Decode after checking the CRC; a handle that fails `verify` is `Invalid`.
    pub fn decode(&self) -> Result<MemHandleInfo, FormatError> {
        if !self.verify() {
            return Err(FormatError::Invalid {
                format: "MemHandle",
                field: "crc",
                value: self.qword2 >> 56,
            });
        }
        let b = self.to_bytes();
        Ok(if self.is_v2() {
            let v = MemHandleV2::decode(&b)?;
            MemHandleInfo {
                va: v.va << 12,
                mdh: v.mdh as u16,
                npages: v.npages as u32,
                page_shift: v.pgsize as u8,
                flags: v.flags as u8,
                entropy: v.entropy as u16,
            }
        } else {
            let v = MemHandleV1::decode(&b)?;
            MemHandleInfo {
                va: v.va << 12,
                mdh: v.mdh as u16,
                npages: v.npages as u32,
                page_shift: v.pgsize as u8,
                flags: v.flags as u8,
                entropy: 0,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::check_table;
    use super::*;

    #[test]
    fn tables() {
        check_table(MddDescriptor::FIELDS, MddDescriptor::SIZE).unwrap();
        check_table(MrtEntry::FIELDS, MrtEntry::SIZE).unwrap();
        check_table(VmdhEntry::FIELDS, VmdhEntry::SIZE).unwrap();
        check_table(MemHandleV1::FIELDS, MemHandleV1::SIZE).unwrap();
        check_table(MemHandleV2::FIELDS, MemHandleV2::SIZE).unwrap();
    }

    #[test]
    fn crc_matches_the_column_constants() {
        // gni_crc_bits: XOR of 0x5e,0xbc,0x61,0xc2,0x9d,0x23,0x46,0x8c for bits 0..7 of a byte.
        let cols = [0x5eu8, 0xbc, 0x61, 0xc2, 0x9d, 0x23, 0x46, 0x8c];
        let table = |d: u8| {
            (0..8)
                .filter(|i| d >> i & 1 == 1)
                .fold(0u8, |a, i| a ^ cols[i])
        };
        let (q1, q2) = (0x0123_4567_89AB_CDEFu64, 0x00FE_DCBA_9876_5432u64);
        let mut crc = 0u8;
        for k in 0..8 {
            crc = table(((q1 >> (8 * k)) as u8) ^ crc);
        }
        for k in 0..7 {
            crc = table(((q2 >> (8 * k)) as u8) ^ crc);
        }
        assert_eq!(handle_crc(q1, q2), crc);
    }

    #[test]
    fn handles_round_trip_and_verify() {
        for flags in [0u8, MemHandleFlags::NEW_FRMT.0 | MemHandleFlags::READONLY.0] {
            let info = MemHandleInfo {
                va: 0x7f12_3456_7000,
                mdh: 0xABC,
                npages: 3,
                page_shift: 12,
                flags,
                entropy: if flags != 0 { 0x5A5 } else { 0 },
            };
            let h = MemHandle::build(&info).unwrap();
            assert!(h.verify());
            assert_eq!(h.decode().unwrap(), info);
            assert!(info.contains(0x7f12_3456_7000, 3 * 4096));
            assert!(!info.contains(0x7f12_3456_7001, 3 * 4096));
            let huge = MemHandleInfo {
                npages: u32::MAX,
                page_shift: 40,
                ..info
            };
            assert_eq!(huge.len(), u64::MAX);
            let bad = MemHandle {
                qword1: h.qword1 ^ 1,
                ..h
            };
            assert!(matches!(
                bad.decode(),
                Err(FormatError::Invalid { field: "crc", .. })
            ));
        }
        assert!(!MemHandle::default().verify());
    }

    #[test]
    fn mrt() {
        let e = MrtEntry::for_addr(0x1_0002_0000).unwrap();
        assert_eq!(
            e.to_u32().unwrap() as u64,
            ((0x1_0002_0000u64 >> 15) & !3) | 1
        );
        assert_eq!(e.addr(), 0x1_0002_0000);
        assert!(MrtEntry::for_addr(0x1000).is_none());
        assert_eq!(mrt_size_to_code(2 << 20), Some(2));
        for (c, s) in MRT_PAGE_SHIFTS.iter().enumerate() {
            assert_eq!(1u64 << s, MRT_PAGE_SIZES[c]);
        }
    }
}
