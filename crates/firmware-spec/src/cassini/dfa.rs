//! Fabric addresses (DFA), match ids and rendezvous bit layouts (`cassini_user_defs.h`
//! `union c_fab_addr`, `C_DFA_*`, `C_PID_ANY`, `C_RANK_ANY`, `C_NID_ANY`; `cxi_prov_hw.h`
//! `cxi_build_dfa`, `cxi_build_mcast_dfa`, `cxi_dfa_*`, `CXI_MATCH_ID*`,
//! `struct cxi_rdzv_match_bits`, `struct cxi_rdzv_user_ptr`; `cxi-abi.h`
//! `union cxi_pte_map_offset`; cassini.md §2.1, §4.2, §6, §7).
//!
//! A unicast DFA is `endpoint_defined@0:12` + `nid@12:20`; commands carry a 5-bit
//! `index_ext` next to it, so an endpoint is 17 bits: a PID (`pid_bits` wide) plus the PtlTE
//! index within the PID's granule of `2^(17 - pid_bits)` indices.

use super::layout::{FormatError, UnknownValue, layout};
use super::limits::{C_DFA_PID_BITS_MAX, C_DFA_PID_BITS_MIN};

/// `C_DFA_ENDPOINT_DEFINED_BITS` / `CXI_DFA_EP_WIDTH`.
pub const C_DFA_ENDPOINT_DEFINED_BITS: u32 = 12;
/// `C_DFA_INDEX_EXT_BITS` / `CXI_DFA_EXT_WIDTH`.
pub const C_DFA_INDEX_EXT_BITS: u32 = 5;
/// `C_DFA_MULTICAST_ID_BITS`.
pub const C_DFA_MULTICAST_ID_BITS: u32 = 13;
/// `C_PID_ANY` = `(1 << C_DFA_PID_BITS_MAX) - 1` = 511: any PID (also "allocate any").
pub const C_PID_ANY: u32 = (1 << C_DFA_PID_BITS_MAX) - 1;
/// `C_RANK_ANY` = `(1 << (32 - C_DFA_PID_BITS_MAX)) - 1`: any logical rank.
pub const C_RANK_ANY: u32 = (1 << (32 - C_DFA_PID_BITS_MAX)) - 1;
/// `C_NID_ANY` = 0xFFFFF: any NID.
pub const C_NID_ANY: u32 = 0xF_FFFF;
/// `CXI_MATCH_ID_ANY` = `CXI_MATCH_ID(9, C_PID_ANY, C_RANK_ANY)`: any initiator.
pub const CXI_MATCH_ID_ANY: u32 = 0xFFFF_FFFF;
/// `CXI_MCAST_FA_FORMAT`: `format` of a multicast DFA.
pub const CXI_MCAST_FA_FORMAT: u16 = 0x1FF;
/// `CXI_MCAST_FA_ACTION`: `action` of a multicast DFA.
pub const CXI_MCAST_FA_ACTION: u8 = 0x7;

/// A validated `pid_bits` (`C_DFA_PID_BITS_MIN..=C_DFA_PID_BITS_MAX`, 6..=9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PidBits(u32);

impl PidBits {
    /// The driver default, 9.
    pub const DEFAULT: PidBits = PidBits(9);

    /// Validate.
    pub fn new(bits: u32) -> Result<Self, FormatError> {
        if (C_DFA_PID_BITS_MIN..=C_DFA_PID_BITS_MAX).contains(&bits) {
            Ok(PidBits(bits))
        } else {
            Err(UnknownValue {
                kind: "pid_bits",
                value: bits as u64,
            }
            .into())
        }
    }

    /// The width.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `(1 << pid_bits) - 1`: the largest PID value, which is the wildcard (`pid_count` =
    /// this many usable PIDs).
    pub const fn pid_mask(self) -> u32 {
        (1 << self.0) - 1
    }

    /// `pid_granule` = `2^(17 - pid_bits)`: PtlTE indices per PID (256 for 9 bits).
    pub const fn pid_granule(self) -> u32 {
        1 << (17 - self.0)
    }
}

impl Default for PidBits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

layout! {
    /// `struct c_fa_unicast`: a unicast DFA.
    pub struct UnicastDfa("c_fa_unicast", 4) {
        /// `endpoint_defined` (12 bits): `((idx >> 5) << pid_bits) + pid`.
        endpoint_defined[0:12]: u16,
        /// `nid` (20 bits).
        nid[12:20]: u32,
    }
    consts {}
    derived {}
}

layout! {
    /// `struct c_fa_multicast`: a multicast DFA (`format` 0x1FF, `action` 7).
    pub struct MulticastDfa("c_fa_multicast", 4) {
        /// `action` (3 bits).
        action[0:3]: u8,
        /// `multicast_id` (13 bits).
        multicast_id[3:13]: u16,
        /// `reduction_id` (3 bits).
        reduction_id[18:3]: u8,
        /// `format` (9 bits).
        format[23:9]: u16,
    }
    consts {}
    derived {}
}

impl UnicastDfa {
    /// As the 32-bit `dfa` of a command.
    pub fn to_u32(&self) -> u32 {
        u32::from_le_bytes(self.encode())
    }

    /// From a 32-bit `dfa`.
    pub fn from_u32(dfa: u32) -> Self {
        UnicastDfa {
            endpoint_defined: (dfa & 0xFFF) as u16,
            nid: dfa >> 12,
        }
    }
}

impl MulticastDfa {
    /// As the 32-bit `dfa` of a command.
    pub fn to_u32(&self) -> u32 {
        u32::from_le_bytes(self.encode())
    }

    /// From a 32-bit `dfa`.
    pub fn from_u32(dfa: u32) -> Self {
        MulticastDfa {
            action: (dfa & 0x7) as u8,
            multicast_id: ((dfa >> 3) & 0x1FFF) as u16,
            reduction_id: ((dfa >> 18) & 0x7) as u8,
            format: (dfa >> 23) as u16,
        }
    }
}

/// `cxi_build_dfa(nid, pid, pid_bits, idx)`: the 32-bit unicast DFA and the 5-bit
/// `index_ext` addressing PtlTE index `idx` of PID `pid` on NIC `nid`.
pub fn build_dfa(nid: u32, pid: u32, pid_bits: PidBits, idx: u32) -> (u32, u8) {
    let ep = ((idx >> C_DFA_INDEX_EXT_BITS) << pid_bits.get()).wrapping_add(pid) & 0xFFF;
    ((nid & C_NID_ANY) << 12 | ep, (idx & 0x1F) as u8)
}

/// `cxi_dfa_nid()`: the NID of a unicast DFA.
pub const fn dfa_nid(dfa: u32) -> u32 {
    dfa >> C_DFA_ENDPOINT_DEFINED_BITS
}

/// `cxi_dfa_ep()`: the 12-bit `endpoint_defined`.
pub const fn dfa_ep(dfa: u32) -> u32 {
    dfa & 0xFFF
}

/// `cxi_dfa_pid()`: the PID of a unicast DFA.
pub const fn dfa_pid(dfa: u32, pid_bits: PidBits) -> u32 {
    dfa & pid_bits.pid_mask()
}

/// The PtlTE index within the PID granule: inverse of the index part of [`build_dfa`].
pub const fn dfa_index(dfa: u32, index_ext: u8, pid_bits: PidBits) -> u32 {
    ((dfa_ep(dfa) >> pid_bits.get()) << C_DFA_INDEX_EXT_BITS) | (index_ext as u32 & 0x1F)
}

/// Inverse of [`build_dfa`]: `(nid, pid, idx)`.
pub const fn split_dfa(dfa: u32, index_ext: u8, pid_bits: PidBits) -> (u32, u32, u32) {
    (
        dfa_nid(dfa),
        dfa_pid(dfa, pid_bits),
        dfa_index(dfa, index_ext, pid_bits),
    )
}

/// `cxi_dfa_to_init()`: the initiator match id of a DFA (RENDEZVOUS events carry the DFA).
pub const fn dfa_to_init(dfa: u32, pid_bits: PidBits) -> u32 {
    match_id(pid_bits, dfa_pid(dfa, pid_bits), dfa_nid(dfa))
}

/// `cxi_build_mcast_dfa(mcast_id, red_id, idx_ext)`: a multicast DFA and its `index_ext`.
pub fn build_mcast_dfa(mcast_id: u32, red_id: u32, idx_ext: u32) -> (u32, u8) {
    let d = MulticastDfa {
        action: CXI_MCAST_FA_ACTION,
        multicast_id: (mcast_id & 0x1FFF) as u16,
        reduction_id: (red_id & 0x7) as u8,
        format: CXI_MCAST_FA_FORMAT,
    };
    (d.to_u32(), (idx_ext & 0x1F) as u8)
}

/// Whether a DFA is multicast (`format` 0x1FF).
pub const fn is_multicast(dfa: u32) -> bool {
    (dfa >> 23) as u16 == CXI_MCAST_FA_FORMAT
}

/// `CXI_MATCH_ID(pid_bits, pid, ep)`: PID in the top `pid_bits` bits, endpoint (20-bit NID,
/// or logical rank for `use_logical` PtlTEs) below.
pub const fn match_id(pid_bits: PidBits, pid: u32, ep: u32) -> u32 {
    let b = pid_bits.get();
    ((pid & pid_bits.pid_mask()) << (32 - b)) | (ep & ((1 << (32 - b)) - 1))
}

/// `CXI_MATCH_ID_PID()`.
pub const fn match_id_pid(pid_bits: PidBits, id: u32) -> u32 {
    id >> (32 - pid_bits.get())
}

/// `CXI_MATCH_ID_EP()`.
pub const fn match_id_ep(pid_bits: PidBits, id: u32) -> u32 {
    id & ((1 << (32 - pid_bits.get())) - 1)
}

layout! {
    /// `struct cxi_rdzv_match_bits`: match bits of a rendezvous Get (hardware-issued or
    /// software) and of the source-buffer LE.
    pub struct RdzvMatchBits("cxi_rdzv_match_bits", 8) {
        /// `rendezvous_id` (8 bits).
        rendezvous_id[0:8]: u8,
        /// `transaction_type` (4 bits; the driver configures 0xF).
        transaction_type[8:4]: u8,
        /// `match_bits` (16 bits) mirrored from the rendezvous Put.
        match_bits[48:16]: u16,
    }
    consts {}
    derived {}
}

layout! {
    /// `struct cxi_rdzv_user_ptr`: `user_ptr` of the REPLY event of a hardware rendezvous Get.
    pub struct RdzvUserPtr("cxi_rdzv_user_ptr", 8) {
        /// `src_nid` (20 bits).
        src_nid[0:20]: u32,
        /// `src_pid` (9 bits).
        src_pid[20:9]: u16,
        /// `ptlte_index` (11 bits).
        ptlte_index[29:11]: u16,
        /// `rendezvous_id` (8 bits).
        rendezvous_id[40:8]: u8,
        /// `buffer_id` (16 bits).
        buffer_id[48:16]: u16,
    }
    consts {}
    derived {}
}

layout! {
    /// `union cxi_pte_map_offset` (`cxi-abi.h`): `pid_offset` of a multicast PtlTE map.
    pub struct PteMapOffset("cxi_pte_map_offset", 4) {
        /// `mcast_id` (13 bits).
        mcast_id[0:13]: u16,
        /// `mcast_pte_index` (5 bits).
        mcast_pte_index[13:5]: u8,
    }
    consts {}
    derived {}
}

macro_rules! word_conv {
    ($t:ty, $w:ty) => {
        impl $t {
            /// As the raw word.
            pub fn to_raw(&self) -> $w {
                <$w>::from_le_bytes(self.encode())
            }

            /// From the raw word (bits outside the fields ignored).
            pub fn from_raw(raw: $w) -> Self {
                // Every field is a plain integer, so decoding a full-size image cannot fail.
                Self::decode(&raw.to_le_bytes()).unwrap_or_default()
            }
        }
    };
}
word_conv!(RdzvMatchBits, u64);
word_conv!(RdzvUserPtr, u64);
word_conv!(PteMapOffset, u32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert_eq!(C_PID_ANY, 511);
        assert_eq!(C_RANK_ANY, (1 << 23) - 1);
        assert_eq!(C_NID_ANY, 1_048_575);
        assert_eq!(
            match_id(PidBits::DEFAULT, C_PID_ANY, C_RANK_ANY),
            CXI_MATCH_ID_ANY
        );
        assert!(PidBits::new(5).is_err());
        assert!(PidBits::new(10).is_err());
        assert_eq!(PidBits::DEFAULT.pid_granule(), 256);
    }

    #[test]
    fn dfa_known() {
        // nid 0x12345, pid 7, index 255 with pid_bits 9: ep = (255 >> 5) << 9 | 7 = 0xE07.
        let (dfa, ext) = build_dfa(0x12345, 7, PidBits::DEFAULT, 255);
        assert_eq!(dfa, 0x1234_5E07);
        assert_eq!(ext, 31);
        assert_eq!(split_dfa(dfa, ext, PidBits::DEFAULT), (0x12345, 7, 255));
        assert_eq!(dfa_to_init(dfa, PidBits::DEFAULT), 7 << 23 | 0x12345);
        let u = UnicastDfa::from_u32(dfa);
        assert_eq!((u.nid, u.endpoint_defined), (0x12345, 0xE07));
        assert_eq!(u.to_u32(), dfa);
    }

    #[test]
    fn dfa_roundtrip_all_widths() {
        for bits in 6..=9 {
            let pb = PidBits::new(bits).unwrap();
            for pid in [0, 1, pb.pid_mask() - 1] {
                for idx in [0, 1, 31, 32, pb.pid_granule() - 1] {
                    let (dfa, ext) = build_dfa(0xABCDE, pid, pb, idx);
                    assert_eq!(split_dfa(dfa, ext, pb), (0xABCDE, pid, idx));
                }
            }
        }
    }

    #[test]
    fn mcast() {
        let (dfa, ext) = build_mcast_dfa(0x1ABC, 5, 0x23);
        assert!(is_multicast(dfa));
        assert_eq!(ext, 3);
        assert_eq!(dfa, 0x1FF << 23 | 5 << 18 | 0x1ABC << 3 | 7);
        let m = MulticastDfa::from_u32(dfa);
        assert_eq!((m.multicast_id, m.reduction_id), (0x1ABC, 5));
        assert!(!is_multicast(build_dfa(1, 2, PidBits::DEFAULT, 3).0));
    }

    #[test]
    fn rdzv_words() {
        let mb = RdzvMatchBits {
            rendezvous_id: 0xAB,
            transaction_type: 0xF,
            match_bits: 0x1234,
        };
        assert_eq!(mb.to_raw(), 0x1234 << 48 | 0xF << 8 | 0xAB);
        assert_eq!(RdzvMatchBits::from_raw(mb.to_raw()), mb);
        let up = RdzvUserPtr {
            src_nid: 0xFFFFF,
            src_pid: 0x1FF,
            ptlte_index: 0x7FF,
            rendezvous_id: 0xFF,
            buffer_id: 0xFFFF,
        };
        assert_eq!(up.to_raw(), u64::MAX);
        assert_eq!(RdzvUserPtr::from_raw(u64::MAX), up);
        let off = PteMapOffset {
            mcast_id: 0x1FFF,
            mcast_pte_index: 1,
        };
        assert_eq!(off.to_raw(), 0x3FFF);
    }
}
