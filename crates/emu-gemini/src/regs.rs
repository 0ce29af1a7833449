//! BAR 0 decoding and the model's own registers.
//!
//! BAR 0 is the NIC address map of `firmware_spec::gemini::map`, byte for byte (BAR offset =
//! map address). [`decode`] turns an offset into the block and entry it addresses; it tests
//! the FMA windows first because PUT stores are by far the most frequent accesses.

use firmware_spec::gemini::fma::WindowKind;
use firmware_spec::gemini::{bte, limits, map};

/// Offset of the CQ read index in a CQ user alias page (`GHAL_CQ_READ_INDEX_OFFSET`).
pub const CQ_USER_RD_INDEX: u64 = 0x00;
/// CQ user alias page: status (bit 0 overrun, W1C; bits 32..63 lost events). Our choice.
pub const CQ_USER_STATUS: u64 = 0x08;
/// CQ user alias page: hardware write index (read only). Our choice.
pub const CQ_USER_WR_INDEX: u64 = 0x10;
/// `CQ_USER_STATUS` bit: events were lost (sticky).
pub const CQ_STATUS_OVERRUN: u64 = 1;

/// FMA descriptor page: `gni_return_t` of the last locally rejected request. Our choice.
pub const FMA_ERR_RC: u64 = 0x50;

/// BTE TX channel: `gni_return_t` of the last rejected TXD (in the unused upper half of the
/// 64-byte channel pitch). Our choice.
pub const BTE_CHANNEL_ERR_RC: u64 = 0x20;
/// BTE TX channel: TXDs completed (read only). Our choice.
pub const BTE_CHANNEL_COMPLETED: u64 = 0x28;

/// Base of the model's counter block (inside the local block, past the public RAT base).
/// Our choice.
pub const COUNTERS_BASE: u64 = 0x5F0_0000;

/// Indices of the counters at `COUNTERS_BASE + 8 * index`.
pub mod counter {
    /// Packets sent.
    pub const PACKETS_TX: u32 = 0;
    /// Packets received (including ones dropped for a bad CRC).
    pub const PACKETS_RX: u32 = 1;
    /// Payload bytes sent.
    pub const BYTES_TX: u32 = 2;
    /// Payload bytes received.
    pub const BYTES_RX: u32 = 3;
    /// Packets dropped because their CRC did not match.
    pub const CRC_DROPS: u32 = 4;
    /// FMA PUT requests sent (after write combining).
    pub const FMA_PUTS: u32 = 5;
    /// FMA GET requests sent.
    pub const FMA_GETS: u32 = 6;
    /// AMO requests sent.
    pub const AMOS: u32 = 7;
    /// BTE TXDs started.
    pub const BTE_TXDS: u32 = 8;
    /// CQ entries written.
    pub const CQ_EVENTS: u32 = 9;
    /// CQ events lost to overrun.
    pub const CQ_LOST: u32 = 10;
    /// Requests that failed (locally or remotely).
    pub const ERRORS: u32 = 11;
    /// Requests that timed out.
    pub const TIMEOUTS: u32 = 12;
    /// Answers for unknown (timed out or duplicated) requests.
    pub const STRAY_ANSWERS: u32 = 13;
    /// Events for a disabled or non-existent CQ.
    pub const CQ_DROPPED: u32 = 14;
    /// Remote requests that failed the target's checks.
    pub const REMOTE_REJECTS: u32 = 15;
    /// Frames the model could not decode.
    pub const BAD_FRAMES: u32 = 16;
    /// Requests of an in-order stream that arrived behind the stream's position (a copy of
    /// one already applied, or one whose gap was given up on) and were dropped.
    pub const ORDER_STALE: u32 = 17;
    /// Copies of a request that must not be applied twice (an AMO, or outside an in-order
    /// stream a request that raises an event) that the fabric delivered again, dropped.
    pub const DUPLICATES: u32 = 18;
    /// Number of counters.
    pub const COUNT: u32 = 19;
}

/// What a BAR 0 offset addresses. Indices are checked against the resource counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `NODE_ID`.
    NodeId,
    /// `NTT_CONFIG`.
    NttConfig,
    /// NTT bank `bank` entry `index`.
    Ntt {
        /// 0 or 1.
        bank: u8,
        /// Entry.
        index: u32,
    },
    /// MRT entry.
    Mrt(u32),
    /// `MRT_PAGESIZE`.
    MrtPageSize,
    /// MDD `index`, byte `off` (0..16).
    Mdd {
        /// Entry.
        index: u32,
        /// Byte offset in the entry.
        off: u64,
    },
    /// vMDH entry of a ptag.
    Vmdh(u32),
    /// CQ descriptor (kernel view), byte `off` (0..32).
    Cq {
        /// CQ.
        index: u32,
        /// Byte offset.
        off: u64,
    },
    /// CQ user alias page, byte `off` (0..4096).
    CqUser {
        /// CQ.
        index: u32,
        /// Byte offset.
        off: u64,
    },
    /// BTE TX descriptor slot, byte `off` (0..64).
    BteTx {
        /// Slot.
        slot: u32,
        /// Byte offset.
        off: u64,
    },
    /// BTE TX channel registers, byte `off` (0..64).
    BteTxChannel {
        /// Channel.
        ch: u8,
        /// Byte offset.
        off: u64,
    },
    /// `TCHNL_BASE`.
    TxRingBase,
    /// `TCHNL_COUNT`.
    TxRingCount,
    /// BTE RX descriptor.
    BteRx(u32),
    /// BTE RX channel registers, byte `off` (0..64).
    BteRxChannel {
        /// Channel.
        ch: u8,
        /// Byte offset.
        off: u64,
    },
    /// `RCHNL_BASE`.
    RxRingBase,
    /// `RCHNL_COUNT`.
    RxRingCount,
    /// FMA descriptor page, privileged view.
    FmaPriv {
        /// Descriptor (0..68).
        id: u8,
        /// Byte offset in the page.
        off: u64,
    },
    /// FMA descriptor page, user alias.
    FmaUser {
        /// Descriptor (0..68).
        id: u8,
        /// Byte offset in the page.
        off: u64,
    },
    /// An FMA window.
    Window {
        /// PUTWC, GET or PUTUC.
        kind: WindowKind,
        /// Descriptor (0..68).
        id: u8,
        /// Offset in the window.
        off: u64,
    },
    /// A model counter.
    Counter(u32),
    /// Nothing the model implements (reads 0, stores ignored).
    Unmapped,
}

fn window(addr: u64, base: u64, count: u64, first_id: u64, kind: WindowKind) -> Option<Target> {
    let rel = addr.checked_sub(base)?;
    let id = rel / map::FMA_WINDOW_SIZE;
    if id >= count {
        return None;
    }
    Some(Target::Window {
        kind,
        id: (first_id + id) as u8,
        off: rel % map::FMA_WINDOW_SIZE,
    })
}

fn table(addr: u64, base: u64, pitch: u64, count: u64) -> Option<(u32, u64)> {
    let rel = addr.checked_sub(base)?;
    let i = rel / pitch;
    (i < count).then_some((i as u32, rel % pitch))
}

/// Decode a BAR 0 offset.
pub fn decode(addr: u64) -> Target {
    use limits::*;
    if addr >= map::FMA_PUTWC_OS_BASE {
        let user = FMA_DESCRIPTORS;
        let os = FMA_OS_DESCRIPTORS;
        return window(addr, map::FMA_PUTWC_BASE, user, 0, WindowKind::PutWc)
            .or_else(|| window(addr, map::FMA_GET_BASE, user, 0, WindowKind::Get))
            .or_else(|| window(addr, map::FMA_PUTUC_BASE, user, 0, WindowKind::PutUc))
            .or_else(|| window(addr, map::FMA_PUTWC_OS_BASE, os, user, WindowKind::PutWc))
            .or_else(|| window(addr, map::FMA_GET_OS_BASE, os, user, WindowKind::Get))
            .or_else(|| window(addr, map::FMA_PUTUC_OS_BASE, os, user, WindowKind::PutUc))
            .unwrap_or(Target::Unmapped);
    }
    if addr >= map::CQ_DESC_USER_BASE {
        if let Some((i, off)) = table(
            addr,
            map::FMA_DESC_BASE,
            map::DESC_PAGE_SIZE,
            FMA_TOTAL_DESCRIPTORS,
        ) {
            return Target::FmaPriv { id: i as u8, off };
        }
        if let Some((i, off)) = table(
            addr,
            map::FMA_DESC_USER_BASE,
            map::DESC_PAGE_SIZE,
            FMA_TOTAL_DESCRIPTORS,
        ) {
            return Target::FmaUser { id: i as u8, off };
        }
        if let Some((index, off)) = table(
            addr,
            map::CQ_DESC_USER_BASE,
            map::DESC_PAGE_SIZE,
            CQ_DESCRIPTORS,
        ) {
            return Target::CqUser { index, off };
        }
        return Target::Unmapped;
    }
    match addr {
        map::NODE_ID_OFFSET => return Target::NodeId,
        map::NTT_CONFIG_OFFSET => return Target::NttConfig,
        map::MRT_PAGESIZE_OFFSET => return Target::MrtPageSize,
        bte::TCHNL_BASE_OFFSET => return Target::TxRingBase,
        bte::TCHNL_COUNT_OFFSET => return Target::TxRingCount,
        bte::RCHNL_BASE_OFFSET => return Target::RxRingBase,
        bte::RCHNL_COUNT_OFFSET => return Target::RxRingCount,
        _ => {}
    }
    if let Some((index, _)) = table(addr, map::NTT_BASE, map::NTT_PITCH, NTT_ENTRIES) {
        return Target::Ntt { bank: 0, index };
    }
    if let Some((index, _)) = table(addr, map::NTT1_BASE, map::NTT_PITCH, NTT_ENTRIES) {
        return Target::Ntt { bank: 1, index };
    }
    if let Some((slot, off)) = table(addr, map::BTE_TX_BASE, map::BTE_TX_PITCH, BTE_TX_SLOTS) {
        return Target::BteTx { slot, off };
    }
    if let Some((ch, off)) = table(addr, map::BTE_TX_CHANNEL_BASE, 64, BTE_CHANNELS) {
        return Target::BteTxChannel { ch: ch as u8, off };
    }
    if let Some((i, _)) = table(addr, map::MRT_BASE, map::MRT_PITCH, MRT_ENTRIES) {
        return Target::Mrt(i);
    }
    if let Some((index, off)) = table(addr, map::MDD_BASE, map::MDD_PITCH, MDD_ENTRIES) {
        return Target::Mdd { index, off };
    }
    if let Some((i, _)) = table(addr, map::VMDH_BASE, map::VMDH_PITCH, VMDH_ENTRIES) {
        return Target::Vmdh(i);
    }
    if let Some((index, off)) = table(addr, map::CQ_BASE, map::CQ_PITCH, CQ_DESCRIPTORS) {
        return Target::Cq { index, off };
    }
    if let Some((i, _)) = table(
        addr,
        map::BTE_RX_BASE,
        map::BTE_RX_PITCH,
        BTE_RX_DESCRIPTORS,
    ) {
        return Target::BteRx(i);
    }
    if let Some((ch, off)) = table(addr, map::BTE_RX_CHANNEL_BASE, 64, BTE_CHANNELS) {
        return Target::BteRxChannel { ch: ch as u8, off };
    }
    if let Some((i, _)) = table(addr, COUNTERS_BASE, 8, u64::from(counter::COUNT)) {
        return Target::Counter(i);
    }
    Target::Unmapped
}

/// Replace the bytes `[sub, sub + data.len())` of a 64-bit register value with `data`.
pub fn merge(old: u64, sub: u64, data: &[u8]) -> u64 {
    let mut b = old.to_le_bytes();
    let s = sub as usize;
    if let Some(dst) = b.get_mut(s..s + data.len()) {
        dst.copy_from_slice(data);
    }
    u64::from_le_bytes(b)
}

/// Copy the bytes `[sub, sub + data.len())` of a 64-bit register value into `data`.
pub fn extract(v: u64, sub: u64, data: &mut [u8]) {
    let b = v.to_le_bytes();
    let s = sub as usize;
    match b.get(s..s + data.len()) {
        Some(src) => data.copy_from_slice(src),
        None => data.fill(0),
    }
}

/// The little-endian value of a 1..8-byte store.
pub fn value(data: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = data.len().min(8);
    b[..n].copy_from_slice(&data[..n]);
    u64::from_le_bytes(b)
}

/// 16-bit lane `ch` of a register holding one lane per channel.
pub(crate) fn u16_lane(reg: u64, ch: usize) -> u64 {
    (reg >> (16 * ch)) & 0xFFFF
}

/// Qword `q` of a register image (0 past its end).
pub(crate) fn qword_of(bytes: &[u8], q: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(q * 8..q * 8 + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

/// Store `v` as qword `q` of a register image.
pub(crate) fn patch<const N: usize>(img: &mut [u8; N], q: usize, v: u64) {
    if let Some(d) = img.get_mut(q * 8..q * 8 + 8) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firmware_spec::gemini::fma;

    #[test]
    fn decodes_every_block() {
        assert_eq!(decode(map::NODE_ID_OFFSET), Target::NodeId);
        assert_eq!(
            decode(map::NTT_BASE + 8 * 5),
            Target::Ntt { bank: 0, index: 5 }
        );
        assert_eq!(
            decode(map::MDD_BASE + 16 * 7 + 8),
            Target::Mdd { index: 7, off: 8 }
        );
        assert_eq!(
            decode(map::CQ_BASE + 32 * 1023 + 16),
            Target::Cq {
                index: 1023,
                off: 16
            }
        );
        assert_eq!(
            decode(map::CQ_DESC_USER_BASE + 4096 * 3 + 8),
            Target::CqUser { index: 3, off: 8 }
        );
        assert_eq!(
            decode(map::FMA_DESC_BASE + 4096 * 67 + 0x80),
            Target::FmaPriv { id: 67, off: 0x80 }
        );
        assert_eq!(
            decode(map::FMA_DESC_USER_BASE + 0x38),
            Target::FmaUser { id: 0, off: 0x38 }
        );
        assert_eq!(
            decode(map::BTE_TX_CHANNEL_BASE + 64 * 3 + 0x18),
            Target::BteTxChannel { ch: 3, off: 0x18 }
        );
        assert_eq!(decode(bte::TCHNL_COUNT_OFFSET), Target::TxRingCount);
        assert_eq!(decode(map::MRT_PAGESIZE_OFFSET), Target::MrtPageSize);
        assert_eq!(decode(COUNTERS_BASE + 8), Target::Counter(1));
        assert_eq!(decode(map::LOCAL_BLOCK_SIZE), Target::Unmapped);
        for (kind, id, off) in [
            (WindowKind::PutWc, 0u64, 0u64),
            (WindowKind::Get, 63, 0x3FFF_FFF8),
            (WindowKind::PutUc, 5, 8),
            (WindowKind::PutWc, 64, 16),
            (WindowKind::Get, 67, 0),
        ] {
            let a = fma::window_addr(kind, id, off).unwrap();
            assert_eq!(
                decode(a),
                Target::Window {
                    kind,
                    id: id as u8,
                    off
                }
            );
        }
    }

    #[test]
    fn register_halves() {
        let v = merge(0x1111_2222_3333_4444, 4, &0xAAAA_BBBBu32.to_le_bytes());
        assert_eq!(v, 0xAAAA_BBBB_3333_4444);
        let mut out = [0u8; 4];
        extract(v, 0, &mut out);
        assert_eq!(u32::from_le_bytes(out), 0x3333_4444);
        assert_eq!(value(&[1, 2]), 0x0201);
    }
}
