//! FMA (Fast Memory Access): the descriptor registers, the GET control word and the window
//! semantics.
//!
//! Public (`gemini_hw.h` `ghal_fma_desc_t`, `ghal_gcw_t`, `GHAL_FMA_*`; `ghal_pub.h` FMA
//! macros): the 9-qword descriptor layout at the start of each 4 KiB descriptor page, the
//! privilege mask at page offset 0x80, mode/flag/sync-type codes, PE mask modes, the GET
//! control word layout, the command codes, and the windows (1 GiB per FMA id).
//!
//! Our reading (not stated by the headers; documented in `docs/gemini-formats.md`):
//! the remote target of a window access is `base_offset + window offset`, split into
//! (PE, MDH offset) by the PE mask mode; the GCW `count` is the GET length in 4-byte units
//! minus one (a GCW moves 4..=64 bytes); `gb` asks for a flagged response.

use super::codes::{UnknownCode, code_enum, flag_set};
use super::layout::bit_format;
use super::map;

bit_format! {
    /// `ghal_fma_desc_t`: the FMA descriptor registers (72 bytes at the start of the page).
    pub struct FmaDescriptor, 72, {
        /// Base offset: remote MDH offset and PE, arranged by `pe_mask_mode`.
        base_offset: 0, 58;
        /// Window command (`code & 0x1F`: 0 = plain GET/PUT, 0x10 = PUT_MSG, else AMO).
        command: 64, 5;
        /// Remote memory domain handle.
        rem_mem_dh: 72, 12;
        /// Source (local) memory domain handle.
        src_mem_dh: 84, 12;
        /// PE mask mode (0..=7).
        pe_mask_mode: 96, 3;
        /// `FmaMode2` bits.
        mode2: 122, 6;
        /// Number of PEs in the NTT group.
        num_pes: 128, 18;
        /// Base PE of the NTT group.
        pe_base: 146, 18;
        /// Completion queue handle for local events.
        cq_hndl: 164, 10;
        /// Source protection tag.
        src_ptag: 174, 8;
        /// Destination protection tag.
        dest_ptag: 182, 8;
        /// `FmaMode3` bits.
        mode3: 190, 2;
        /// Outstanding PUT count (writes clear).
        wc: 192, 16;
        /// Outstanding GET count (writes clear).
        rc: 208, 16;
        /// SSIDs in use (writes clear).
        ssid_inuse: 224, 8;
        /// `FmaFlags` error bits (writes clear).
        flags: 240, 3;
        /// Scratch register 0: AMO first operand, or the sync flag value.
        scratch0: 256, 64;
        /// Scratch register 1: AMO second operand, or the sync flag offset.
        scratch1: 320, 64;
        /// Alloc-SyncID doorbell (write `ALLOC_SEQID_DOORBELL`).
        alloc_syncid: 384, 64;
        /// Sync-complete CQ data (56 bits).
        synccmp_data: 448, 56;
        /// Sync-complete type (`sync_type` bits).
        synccmp_type: 504, 8;
        /// CQ-write doorbell: completion data for the remote CQ.
        cq_write: 512, 64;
    }
}

/// Byte offsets of the descriptor registers inside the 4 KiB page (qword index × 8).
pub mod reg {
    /// Qword 1: base offset.
    pub const BASE_OFFSET: u64 = 0x00;
    /// Qword 2: command, MDHs, PE mask mode, mode2.
    pub const QW2: u64 = 0x08;
    /// Qword 3: NTT group, CQ handle, ptags, mode3.
    pub const QW3: u64 = 0x10;
    /// Qword 4: counters and error flags (`GHAL_FMA_RD_STATUS` / `CLEAR_STATUS`).
    pub const STATUS: u64 = 0x18;
    /// Scratch register 0.
    pub const SCRATCH0: u64 = 0x20;
    /// Scratch register 1.
    pub const SCRATCH1: u64 = 0x28;
    /// Alloc-SyncID doorbell.
    pub const ALLOC_SYNCID: u64 = 0x30;
    /// Sync-complete doorbell.
    pub const SYNC_COMPLETE: u64 = 0x38;
    /// CQ-write doorbell.
    pub const CQ_WRITE: u64 = 0x40;
    /// Privilege mask (`GHAL_FMA_DESC_PRVMASK_OFFSET`).
    pub const PRVMASK: u64 = 0x80;
}

/// Size of an FMA descriptor page (`GHAL_FMA_CTRL_SIZE`).
pub const CTRL_SIZE: u64 = 0x1000;
/// Size of one FMA window (`GHAL_FMA_WINDOW_SIZE`).
pub const WINDOW_SIZE: u64 = map::FMA_WINDOW_SIZE;
/// `GHAL_FMA_ALLOC_SEQID_DOORBELL`.
pub const ALLOC_SEQID_DOORBELL: u64 = 0xff;
/// `GHAL_FMA_SYNC_TYPE_OFFSET`: bit of the sync type in the sync-complete qword.
pub const SYNC_TYPE_OFFSET: u32 = 56;
/// `GHAL_FMA_FLAG_SHIFT`: bit of the error flags in the status qword.
pub const FLAG_SHIFT: u32 = 48;
/// `GHAL_FMA_RC_SHIFT`.
pub const RC_SHIFT: u32 = 16;
/// `GHAL_FMA_SSID_SHIFT`.
pub const SSID_SHIFT: u32 = 32;
/// `GHAL_FMA_COUNTER_MASK`.
pub const COUNTER_MASK: u64 = 0xffff;
/// `GHAL_FMA_SSID_MASK`.
pub const SSID_MASK: u64 = 0xff;

/// FMA window operations (`ghal_pub.h`, Gemini). The 0x100 bit selects PUT semantics; the
/// descriptor's `command` field takes the low 5 bits.
pub mod op {
    /// `GHAL_FMA_GET`
    pub const GET: u32 = 0x000;
    /// `GHAL_FMA_PUT`
    pub const PUT: u32 = 0x100;
    /// `GHAL_FMA_PUT_MSG`: a PUT that is part of a message (SMSG).
    pub const PUT_MSG: u32 = 0x110;
    /// `GHAL_FMA_PUT_S` (not supported on Gemini; equals PUT).
    pub const PUT_S: u32 = 0x100;
}

flag_set! {
    /// `GHAL_FMA_MODE_*` of qword 2 (`mode2`).
    pub struct FmaMode2: u8 {
        /// `GHAL_FMA_MODE_VMDH_ENABLE`
        const VMDH_ENABLE = 0x01;
        /// `GHAL_FMA_MODE_DT_ENABLE`
        const DT_ENABLE = 0x02;
        /// `GHAL_FMA_MODE_FMA_ENABLE`
        const FMA_ENABLE = 0x04;
        /// `GHAL_FMA_MODE_RADP_ENABLE`: response adaptive routing.
        const RADP_ENABLE = 0x08;
        /// `GHAL_FMA_MODE_ADP_ENABLE`: request adaptive routing.
        const ADP_ENABLE = 0x10;
        /// `GHAL_FMA_MODE_HASH_ENABLE`
        const HASH_ENABLE = 0x20;
    }
}

flag_set! {
    /// `GHAL_FMA_MODE_*` of qword 3 (`mode3`).
    pub struct FmaMode3: u8 {
        /// `GHAL_FMA_MODE_NTT_ENABLE`: the PE is an NTT index.
        const NTT_ENABLE = 0x01;
    }
}

flag_set! {
    /// `GHAL_FMA_FLAG_*` error bits of the status qword.
    pub struct FmaFlags: u8 {
        /// `GHAL_FMA_FLAG_SNCID_ALLOC_ERROR`
        const SNCID_ALLOC_ERROR = 0x01;
        /// `GHAL_FMA_FLAG_NPES_ERROR`: PE outside the NTT group.
        const NPES_ERROR = 0x02;
        /// `GHAL_FMA_FLAG_HT_REQ_ERROR`: bad HT request.
        const HT_REQ_ERROR = 0x04;
    }
}

flag_set! {
    /// `GHAL_FMA_SYNCTYPE_*`. `NO_EVENT` is 0.
    pub struct SyncType: u8 {
        /// `GHAL_FMA_SYNCTYPE_LOCAL_EVENT`
        const LOCAL_EVENT = 0x01;
        /// `GHAL_FMA_SYNCTYPE_REMOTE_EVENT`
        const REMOTE_EVENT = 0x02;
        /// `GHAL_FMA_SYNCTYPE_WITH_FLAG`: deliver a flag at the target.
        const WITH_FLAG = 0x04;
    }
}

impl SyncType {
    /// `GHAL_FMA_SYNCTYPE_NO_EVENT`.
    pub const NO_EVENT: SyncType = SyncType(0);
}

flag_set! {
    /// `GHAL_FMA_MASK_*`: privilege mask bits; a set bit lets user space write the field.
    pub struct PrivMask: u32 {
        /// `GHAL_FMA_MASK_CQWRITE`
        const CQWRITE = 0x0000_0001;
        /// `GHAL_FMA_MASK_SYNCCMP`
        const SYNCCMP = 0x0000_0002;
        /// `GHAL_FMA_MASK_ALLOCSYNCID`
        const ALLOCSYNCID = 0x0000_0004;
        /// `GHAL_FMA_MASK_SCRATCHREG1`
        const SCRATCHREG1 = 0x0000_0008;
        /// `GHAL_FMA_MASK_SCRATCHREG0`
        const SCRATCHREG0 = 0x0000_0010;
        /// `GHAL_FMA_MASK_NPES`
        const NPES = 0x0000_0020;
        /// `GHAL_FMA_MASK_PEBASE`
        const PEBASE = 0x0000_0040;
        /// `GHAL_FMA_MASK_CQHANDLE`
        const CQHANDLE = 0x0000_0080;
        /// `GHAL_FMA_MASK_PTAG`
        const PTAG = 0x0000_0100;
        /// `GHAL_FMA_MASK_NTTENABLE`
        const NTTENABLE = 0x0000_0200;
        /// `GHAL_FMA_MASK_VMDHENABLE`
        const VMDHENABLE = 0x0000_0400;
        /// `GHAL_FMA_MASK_CMD`
        const CMD = 0x0000_0800;
        /// `GHAL_FMA_MASK_REMOTEMDH`
        const REMOTEMDH = 0x0000_1000;
        /// `GHAL_FMA_MASK_SOURCEMDH`
        const SOURCEMDH = 0x0000_2000;
        /// `GHAL_FMA_MASK_PEMASKMODE`
        const PEMASKMODE = 0x0000_4000;
        /// `GHAL_FMA_MASK_FMAENABLE`
        const FMAENABLE = 0x0000_8000;
        /// `GHAL_FMA_MASK_HARA`: hash, request adapt, response adapt.
        const HARA = 0x0001_0000;
        /// `GHAL_FMA_MASK_BASEOFFSET`
        const BASEOFFSET = 0x0002_0000;
    }
}

impl PrivMask {
    /// `GHAL_FMA_MASK_DEFAULT`: what a user process may write (not ptag, CQ handle, NTT,
    /// FMA enable).
    pub const DEFAULT: PrivMask = PrivMask(
        PrivMask::CQWRITE.0
            | PrivMask::SYNCCMP.0
            | PrivMask::ALLOCSYNCID.0
            | PrivMask::SCRATCHREG1.0
            | PrivMask::SCRATCHREG0.0
            | PrivMask::CMD.0
            | PrivMask::REMOTEMDH.0
            | PrivMask::SOURCEMDH.0
            | PrivMask::BASEOFFSET.0
            | PrivMask::VMDHENABLE.0
            | PrivMask::HARA.0
            | PrivMask::PEMASKMODE.0,
    );
}

/// Width of a PE in the base offset.
pub const PE_WIDTH: u32 = 18;
/// Width of the MDH offset in the base offset.
pub const OFFSET_WIDTH: u32 = 40;

/// Bit position of the PE inside `base_offset` for a PE mask mode
/// (`_GHAL_FMA_PEMASKMODE_PESHIFT`: 0→40, 1→35, 2→21, 3→12, 4→10, 5→9, 6→8, 7→6).
pub const fn pe_shift(pe_mask_mode: u64) -> u32 {
    match pe_mask_mode & 7 {
        0 => 40,
        1 => 35,
        2 => 21,
        3 => 12,
        4 => 10,
        5 => 9,
        6 => 8,
        _ => 6,
    }
}

/// Build a `base_offset` from a PE and a 40-bit MDH offset (`GHAL_FMA_SET_PE_W_MM` +
/// `GHAL_FMA_SET_RMDH_OFFSET_W_MM`): the offset's low `pe_shift` bits stay in place, the PE
/// goes above them, the rest of the offset above the PE.
pub const fn compose_base_offset(pe_mask_mode: u64, pe: u64, offset: u64) -> u64 {
    let s = pe_shift(pe_mask_mode);
    let pe_mask = (1u64 << PE_WIDTH) - 1;
    let low = offset & ((1u64 << s) - 1);
    let high = (offset >> s) & ((1u64 << (OFFSET_WIDTH - s)) - 1);
    low | ((pe & pe_mask) << s) | (high << (s + PE_WIDTH))
}

/// Split a 58-bit address formed like a `base_offset` into `(pe, offset)`.
pub const fn split_base_offset(pe_mask_mode: u64, value: u64) -> (u64, u64) {
    let s = pe_shift(pe_mask_mode);
    let pe_mask = (1u64 << PE_WIDTH) - 1;
    let low = value & ((1u64 << s) - 1);
    let pe = (value >> s) & pe_mask;
    let high = (value >> (s + PE_WIDTH)) & ((1u64 << (OFFSET_WIDTH - s)) - 1);
    (pe, low | (high << s))
}

impl FmaDescriptor {
    /// The remote `(pe, mdh offset)` of a window access at `window_offset` (our reading:
    /// `base_offset + window_offset`, split by the PE mask mode). The PE is an NTT index when
    /// [`FmaMode3::NTT_ENABLE`] is set.
    pub const fn target(&self, window_offset: u64) -> (u64, u64) {
        let v = self.base_offset.wrapping_add(window_offset) & ((1u64 << 58) - 1);
        split_base_offset(self.pe_mask_mode, v)
    }

    /// `mode2`, checked.
    pub fn mode2(&self) -> Result<FmaMode2, UnknownCode> {
        FmaMode2::from_bits(self.mode2 as u8)
    }

    /// Whether the PE field goes through the NTT.
    pub fn ntt_enabled(&self) -> bool {
        self.mode3 & FmaMode3::NTT_ENABLE.0 as u64 != 0
    }

    /// The status qword as software reads it (`wc | rc << 16 | ssid << 32 | flags << 48`).
    pub const fn status_word(&self) -> u64 {
        (self.wc & COUNTER_MASK)
            | ((self.rc & COUNTER_MASK) << RC_SHIFT)
            | ((self.ssid_inuse & SSID_MASK) << SSID_SHIFT)
            | ((self.flags & 0x7) << FLAG_SHIFT)
    }
}

/// The sync-complete doorbell value (`GHAL_FMA_SYNC_COMPLETE`): `type << 56 | data`.
pub const fn sync_complete_word(sync_type: SyncType, data56: u64) -> u64 {
    ((sync_type.0 as u64) << SYNC_TYPE_OFFSET) | (data56 & ((1u64 << 56) - 1))
}

bit_format! {
    /// `ghal_gcw_t`: the GET control word software stores into the GET window.
    pub struct GetControlWord, 8, {
        /// Local MDH offset where the response lands.
        local_offset: 0, 40;
        /// GET length in 4-byte units minus one (our reading).
        count: 48, 4;
        /// Flagged response (our reading).
        gb: 58, 1;
        /// Command: 0 for a plain GET, else a fetching AMO (`code & 0x1F`).
        cmd: 59, 5;
    }
}

/// Largest GET one GCW moves under our reading of `count` (16 × 4 bytes).
pub const GCW_MAX_BYTES: u64 = 64;

impl GetControlWord {
    /// Bytes the GCW fetches: `(count + 1) * 4`.
    pub const fn length(&self) -> u64 {
        ((self.count & 0xF) + 1) * 4
    }

    /// The `count` for a GET of `len` bytes (`len` a multiple of 4 in 4..=64).
    pub const fn count_for(len: u64) -> Option<u64> {
        if len == 0 || len > GCW_MAX_BYTES || len & 3 != 0 {
            None
        } else {
            Some(len / 4 - 1)
        }
    }

    /// As a 64-bit store.
    pub fn to_u64(&self) -> Result<u64, super::layout::FormatError> {
        Ok(u64::from_le_bytes(self.encode()?))
    }

    /// From a 64-bit store (every pattern decodes).
    pub fn from_u64(v: u64) -> GetControlWord {
        GetControlWord::decode(&v.to_le_bytes()).unwrap_or_default()
    }
}

code_enum! {
    /// The kind of an FMA window.
    pub enum WindowKind: u8 {
        /// PUT, write-combining.
        PutWc = 0,
        /// GET (stores are GET control words).
        Get = 1,
        /// PUT, uncached.
        PutUc = 2,
    }
}

/// Where an address in the NIC map falls among the FMA windows:
/// `(kind, fma id, offset in the window)`. OS windows give ids 64..=67.
pub fn decode_window(addr: u64) -> Option<(WindowKind, u64, u64)> {
    let (r, id, off) = map::decode(addr)?;
    let os = super::limits::FMA_DESCRIPTORS;
    let (kind, id) = match r.name {
        "fma_putwc" => (WindowKind::PutWc, id),
        "fma_get" => (WindowKind::Get, id),
        "fma_putuc" => (WindowKind::PutUc, id),
        "fma_putwc_os" => (WindowKind::PutWc, os + id),
        "fma_get_os" => (WindowKind::Get, os + id),
        "fma_putuc_os" => (WindowKind::PutUc, os + id),
        _ => return None,
    };
    Some((kind, id, off))
}

/// The BAR address of byte `offset` of window `kind` of FMA descriptor `id` (0..=67;
/// ids 64..=67 are the OS descriptors and use the OS windows).
pub fn window_addr(kind: WindowKind, id: u64, offset: u64) -> Option<u64> {
    if offset >= WINDOW_SIZE {
        return None;
    }
    let user = super::limits::FMA_DESCRIPTORS;
    let (base, idx) = if id < user {
        let b = match kind {
            WindowKind::PutWc => map::FMA_PUTWC_BASE,
            WindowKind::Get => map::FMA_GET_BASE,
            WindowKind::PutUc => map::FMA_PUTUC_BASE,
        };
        (b, id)
    } else if id < super::limits::FMA_TOTAL_DESCRIPTORS {
        let b = match kind {
            WindowKind::PutWc => map::FMA_PUTWC_OS_BASE,
            WindowKind::Get => map::FMA_GET_OS_BASE,
            WindowKind::PutUc => map::FMA_PUTUC_OS_BASE,
        };
        (b, id - user)
    } else {
        return None;
    };
    Some(base + idx * WINDOW_SIZE + offset)
}

#[cfg(test)]
mod tests {
    use super::super::layout::check_table;
    use super::*;

    #[test]
    fn tables() {
        check_table(FmaDescriptor::FIELDS, FmaDescriptor::SIZE).unwrap();
        check_table(GetControlWord::FIELDS, GetControlWord::SIZE).unwrap();
        assert_eq!(PrivMask::DEFAULT.bits(), 0x3_7C1F);
    }

    #[test]
    fn base_offset_modes() {
        for mode in 0..8 {
            let b = compose_base_offset(mode, 0x2_ABCD, 0xAB_CDEF_0123);
            assert_eq!(
                split_base_offset(mode, b),
                (0x2_ABCD, 0xAB_CDEF_0123),
                "mode {mode}"
            );
            assert!(b < 1 << 58);
        }
        assert_eq!(compose_base_offset(0, 5, 0x100), (5 << 40) | 0x100);
        let d = FmaDescriptor {
            base_offset: compose_base_offset(0, 7, 0x1000),
            ..Default::default()
        };
        assert_eq!(d.target(0x20), (7, 0x1020));
    }

    #[test]
    fn gcw_and_windows() {
        let g = GetControlWord {
            local_offset: 0x1234,
            count: GetControlWord::count_for(64).unwrap(),
            gb: 0,
            cmd: 0,
        };
        assert_eq!(g.length(), 64);
        assert_eq!(GetControlWord::from_u64(g.to_u64().unwrap()), g);
        assert_eq!(GetControlWord::count_for(6), None);
        let a = window_addr(WindowKind::Get, 3, 0x40).unwrap();
        assert_eq!(a, 0x20_0000_0000 + 3 * (1 << 30) + 0x40);
        assert_eq!(decode_window(a), Some((WindowKind::Get, 3, 0x40)));
        let os = window_addr(WindowKind::PutUc, 65, 8).unwrap();
        assert_eq!(os, 0x0f_0000_0000 + (1 << 30) + 8);
        assert_eq!(decode_window(os), Some((WindowKind::PutUc, 65, 8)));
        assert_eq!(window_addr(WindowKind::PutWc, 68, 0), None);
        assert_eq!(decode_window(0x480_0000), None);
        assert_eq!(
            sync_complete_word(SyncType::LOCAL_EVENT, 0xAB),
            (1 << 56) | 0xAB
        );
    }
}
