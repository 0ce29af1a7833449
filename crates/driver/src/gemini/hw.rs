//! `ghal`: hardware access. Every function here programs the Gemini through BAR 0 stores and
//! loads exactly as `docs/gemini-programming.md` (the driver/device contract) fixes, with the
//! formats of `firmware_spec::gemini`. BAR 0 offset = NIC map address.
//!
//! Ordering rules of the contract that this module enforces:
//! - MDD: qword 0, then qword 1 (which holds `VALID`); invalidate by qword 1 without `VALID`.
//! - CQ: qword 2 (ring address), qword 0 = 0, then qword 1 with `enable`.
//! - FMA allocation: privileged QW3, QW2 (with `FMA_ENABLE`), then `PRVMASK`.
//! - BTE post: the 48-byte TXD into its slot, then the next write index to the doorbell.

use std::fmt;
use std::sync::Arc;

use emu_core::mmio::{Mmio, MmioError};
use firmware_spec::gemini::bte::{
    self, CpuRxDescriptor, RxChannel, RxDescriptor, TxChannel, TxDescriptor,
};
use firmware_spec::gemini::cq::CqDescriptor;
use firmware_spec::gemini::fma::{self, FmaDescriptor, PrivMask, WindowKind};
use firmware_spec::gemini::layout::{BitFormat, FormatError};
use firmware_spec::gemini::mdd::{MddDescriptor, MrtEntry};
use firmware_spec::gemini::ntt::NttEntry;
use firmware_spec::gemini::{limits, map};
use thiserror::Error;

use crate::mem::MapShared;

/// CQ user alias page: software read index (`GHAL_CQ_READ_INDEX_OFFSET`).
pub const CQ_USER_RD_INDEX: u64 = 0x00;
/// CQ user alias page: status, bit 0 `OVERRUN` (W1C), bits 32..63 lost count (contract).
pub const CQ_USER_STATUS: u64 = 0x08;
/// CQ user alias page: hardware write index (contract).
pub const CQ_USER_WR_INDEX: u64 = 0x10;
/// FMA descriptor page: `gni_return_t` of the last locally rejected request (contract).
pub const FMA_ERR_RC: u64 = 0x50;
/// BTE TX channel: `gni_return_t` of the last rejected TXD (contract).
pub const BTE_CHANNEL_ERR_RC: u64 = 0x20;
/// BTE TX channel: TXDs completed, read only (contract).
pub const BTE_CHANNEL_COMPLETED: u64 = 0x28;
/// Base of the model's read-only counters (contract, "Model registers").
pub const COUNTERS_BASE: u64 = 0x5F0_0000;
/// Byte pitch of a BTE channel register block.
const CHANNEL_PITCH: u64 = 64;
/// Byte pitch of a CPU RX descriptor in the RX completion ring.
pub const CPU_RX_PITCH: u64 = 32;

/// Why a hardware access failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HwError {
    /// A BAR access failed (the device refused it or is gone).
    #[error("MMIO access to {what} at {offset:#x} failed: {source}")]
    Mmio {
        /// The register block.
        what: &'static str,
        /// BAR 0 offset.
        offset: u64,
        /// The MMIO error.
        source: MmioError,
    },
    /// An entry index beyond the block's entries.
    #[error("{what} has no entry {index}")]
    NoEntry {
        /// The register block.
        what: &'static str,
        /// The entry asked for.
        index: u64,
    },
    /// A value does not fit its register field.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// BAR 0 is not the size of the Gemini address map.
    #[error("BAR 0 is {got:#x} bytes; the Gemini address map needs {need:#x}")]
    BarSize {
        /// Size found.
        got: u64,
        /// Size needed.
        need: u64,
    },
}

/// Split an encoded image into little-endian qwords (a trailing partial qword is padded).
fn qwords(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

/// Decode a format from its first qwords; missing qwords read as zero.
fn from_qwords<T: BitFormat>(q: &[u64]) -> Result<T, FormatError> {
    let mut bytes: Vec<u8> = q.iter().flat_map(|w| w.to_le_bytes()).collect();
    if bytes.len() < T::BYTES {
        bytes.resize(T::BYTES, 0);
    }
    T::decode_slice(&bytes)
}

/// The addresses software maps for one FMA descriptor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FmaPages {
    /// User alias page of the descriptor.
    pub user_page: u64,
    /// Privileged page of the descriptor.
    pub priv_page: u64,
    /// PUT write-combining window.
    pub put_wc: u64,
    /// GET window.
    pub get: u64,
    /// PUT uncached window.
    pub put_uc: u64,
}

/// BAR 0 offsets of FMA descriptor `id` (0..68; 64..68 use the OS windows).
pub fn fma_pages(id: u32) -> Option<FmaPages> {
    let id = u64::from(id);
    if id >= limits::FMA_TOTAL_DESCRIPTORS {
        return None;
    }
    Some(FmaPages {
        user_page: map::FMA_DESC_USER_BASE + map::DESC_PAGE_SIZE * id,
        priv_page: map::FMA_DESC_BASE + map::DESC_PAGE_SIZE * id,
        put_wc: fma::window_addr(WindowKind::PutWc, id, 0)?,
        get: fma::window_addr(WindowKind::Get, id, 0)?,
        put_uc: fma::window_addr(WindowKind::PutUc, id, 0)?,
    })
}

/// BAR 0 offset of the user alias page of CQ `index`.
pub fn cq_user_page(index: u32) -> Option<u64> {
    (u64::from(index) < limits::CQ_DESCRIPTORS)
        .then(|| map::CQ_DESC_USER_BASE + map::DESC_PAGE_SIZE * u64::from(index))
}

/// The hardware access layer of one Gemini: BAR 0 and nothing else.
#[derive(Clone)]
pub struct Ghal {
    bar: Arc<dyn Mmio>,
}

impl fmt::Debug for Ghal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ghal")
            .field("bar0_size", &self.bar.size())
            .finish()
    }
}

impl Ghal {
    /// Access through `bar0`, which must span the whole address map.
    pub fn new(bar0: Arc<dyn Mmio>) -> Result<Self, HwError> {
        if bar0.size() < map::ADDRESS_SPACE_SIZE {
            return Err(HwError::BarSize {
                got: bar0.size(),
                need: map::ADDRESS_SPACE_SIZE,
            });
        }
        Ok(Ghal { bar: bar0 })
    }

    /// The BAR.
    pub fn bar(&self) -> &Arc<dyn Mmio> {
        &self.bar
    }

    fn rd(&self, what: &'static str, offset: u64) -> Result<u64, HwError> {
        self.bar.read_u64(offset).map_err(|source| HwError::Mmio {
            what,
            offset,
            source,
        })
    }

    fn wr(&self, what: &'static str, offset: u64, v: u64) -> Result<(), HwError> {
        self.bar
            .write_u64(offset, v)
            .map_err(|source| HwError::Mmio {
                what,
                offset,
                source,
            })
    }

    fn entry(
        what: &'static str,
        base: u64,
        pitch: u64,
        count: u64,
        i: u64,
    ) -> Result<u64, HwError> {
        if i >= count {
            return Err(HwError::NoEntry { what, index: i });
        }
        Ok(base + pitch * i)
    }

    // ---- identity ----------------------------------------------------------------------

    /// `NODE_ID`: this NIC's physical PE (18 bits).
    pub fn node_id(&self) -> Result<u32, HwError> {
        Ok((self.rd("node_id", map::NODE_ID_OFFSET)? & u64::from(limits::PE_MASK)) as u32)
    }

    /// `MRT_PAGESIZE`: the 3-bit MRT page size code.
    pub fn mrt_page_code(&self) -> Result<u8, HwError> {
        Ok((self.rd("mrt_pagesize", map::MRT_PAGESIZE_OFFSET)? & 7) as u8)
    }

    /// Set the MRT page size code.
    pub fn set_mrt_page_code(&self, code: u8) -> Result<(), HwError> {
        self.wr(
            "mrt_pagesize",
            map::MRT_PAGESIZE_OFFSET,
            u64::from(code & 7),
        )
    }

    /// Read model counter `index` (contract, "Model registers").
    pub fn counter(&self, index: u32) -> Result<u64, HwError> {
        self.rd("counter", COUNTERS_BASE + 8 * u64::from(index))
    }

    // ---- NTT ---------------------------------------------------------------------------

    /// Write NTT bank 0 entry `index`.
    pub fn write_ntt(&self, index: u32, e: &NttEntry) -> Result<(), HwError> {
        let a = Self::entry(
            "ntt",
            map::NTT_BASE,
            map::NTT_PITCH,
            limits::NTT_ENTRIES,
            u64::from(index),
        )?;
        self.wr("ntt", a, u64::from_le_bytes(e.encode()?))
    }

    /// Read NTT bank 0 entry `index`.
    pub fn read_ntt(&self, index: u32) -> Result<NttEntry, HwError> {
        let a = Self::entry(
            "ntt",
            map::NTT_BASE,
            map::NTT_PITCH,
            limits::NTT_ENTRIES,
            u64::from(index),
        )?;
        Ok(NttEntry::decode(&self.rd("ntt", a)?.to_le_bytes())?)
    }

    // ---- MDD / MRT ---------------------------------------------------------------------

    fn mdd_addr(index: u32) -> Result<u64, HwError> {
        Self::entry(
            "mdd",
            map::MDD_BASE,
            map::MDD_PITCH,
            limits::MDD_ENTRIES,
            u64::from(index),
        )
    }

    /// Program MDD `index`: qword 0, then qword 1 (which carries `VALID`).
    pub fn write_mdd(&self, index: u32, d: &MddDescriptor) -> Result<(), HwError> {
        let a = Self::mdd_addr(index)?;
        let q = qwords(&d.encode()?);
        self.wr("mdd", a, q[0])?;
        self.wr("mdd", a + 8, q[1])
    }

    /// Invalidate MDD `index`: qword 1 without `VALID`, then clear qword 0.
    pub fn invalidate_mdd(&self, index: u32) -> Result<(), HwError> {
        let a = Self::mdd_addr(index)?;
        self.wr("mdd", a + 8, 0)?;
        self.wr("mdd", a, 0)
    }

    /// Whether MDD `index` is valid (one load of qword 1).
    pub fn mdd_is_valid(&self, index: u32) -> Result<bool, HwError> {
        let a = Self::mdd_addr(index)?;
        let q1 = self.rd("mdd", a + 8)?;
        Ok(from_qwords::<MddDescriptor>(&[0, q1])?.is_valid())
    }

    /// Read MDD `index`.
    pub fn read_mdd(&self, index: u32) -> Result<MddDescriptor, HwError> {
        let a = Self::mdd_addr(index)?;
        Ok(from_qwords(&[self.rd("mdd", a)?, self.rd("mdd", a + 8)?])?)
    }

    fn mrt_addr(index: u32) -> Result<u64, HwError> {
        Self::entry(
            "mrt",
            map::MRT_BASE,
            map::MRT_PITCH,
            limits::MRT_ENTRIES,
            u64::from(index),
        )
    }

    /// Write MRT entry `index` (a 4-byte register).
    pub fn write_mrt(&self, index: u32, e: &MrtEntry) -> Result<(), HwError> {
        let a = Self::mrt_addr(index)?;
        self.bar
            .write_u32(a, e.to_u32()?)
            .map_err(|source| HwError::Mmio {
                what: "mrt",
                offset: a,
                source,
            })
    }

    /// Clear (invalidate) MRT entry `index`.
    pub fn clear_mrt(&self, index: u32) -> Result<(), HwError> {
        let a = Self::mrt_addr(index)?;
        self.bar.write_u32(a, 0).map_err(|source| HwError::Mmio {
            what: "mrt",
            offset: a,
            source,
        })
    }

    /// Read MRT entry `index`.
    pub fn read_mrt(&self, index: u32) -> Result<MrtEntry, HwError> {
        let a = Self::mrt_addr(index)?;
        let v = self.bar.read_u32(a).map_err(|source| HwError::Mmio {
            what: "mrt",
            offset: a,
            source,
        })?;
        Ok(MrtEntry::decode(&v.to_le_bytes())?)
    }

    // ---- CQ ----------------------------------------------------------------------------

    fn cq_addr(index: u32) -> Result<u64, HwError> {
        Self::entry(
            "cq",
            map::CQ_BASE,
            map::CQ_PITCH,
            limits::CQ_DESCRIPTORS,
            u64::from(index),
        )
    }

    /// Set up CQ `index` from `d` (its `enable` is forced on): qword 2 (ring address and
    /// `irq_req`), qword 0 = 0, then qword 1 with `enable`.
    pub fn cq_enable(&self, index: u32, d: &CqDescriptor) -> Result<(), HwError> {
        let a = Self::cq_addr(index)?;
        let d = CqDescriptor {
            rd_index: 0,
            wr_index: 0,
            enable: 1,
            ..*d
        };
        let q = qwords(&d.encode()?);
        self.wr("cq", a + 16, q[2])?;
        self.wr("cq", a, 0)?;
        self.wr("cq", a + 8, q[1])
    }

    /// Disable CQ `index` (events for it are then dropped) and clear its ring address.
    pub fn cq_disable(&self, index: u32) -> Result<(), HwError> {
        let a = Self::cq_addr(index)?;
        self.wr("cq", a + 8, 0)?;
        self.wr("cq", a + 16, 0)?;
        self.wr("cq", a, 0)
    }

    /// Whether CQ `index` is enabled (one load of qword 1).
    pub fn cq_is_enabled(&self, index: u32) -> Result<bool, HwError> {
        let a = Self::cq_addr(index)?;
        let q1 = self.rd("cq", a + 8)?;
        Ok(from_qwords::<CqDescriptor>(&[0, q1, 0])?.enable != 0)
    }

    /// Read the kernel view of CQ `index`.
    pub fn cq_read(&self, index: u32) -> Result<CqDescriptor, HwError> {
        let a = Self::cq_addr(index)?;
        Ok(from_qwords(&[
            self.rd("cq", a)?,
            self.rd("cq", a + 8)?,
            self.rd("cq", a + 16)?,
        ])?)
    }

    /// Arm the one-shot interrupt of CQ `index`: rewrite qword 2 with `irq_req`.
    pub fn cq_arm(&self, index: u32, base_addr: u64) -> Result<(), HwError> {
        let a = Self::cq_addr(index)?;
        let d = CqDescriptor {
            base_addr,
            irq_req: 1,
            ..CqDescriptor::default()
        };
        let q = qwords(&d.encode()?);
        self.wr("cq", a + 16, q[2])
    }

    /// Store the software read index of CQ `index` through its user alias page.
    pub fn cq_set_read_index(&self, index: u32, rd: u64) -> Result<(), HwError> {
        let page = cq_user_page(index).ok_or(HwError::NoEntry {
            what: "cq_user",
            index: u64::from(index),
        })?;
        self.wr("cq_user", page + CQ_USER_RD_INDEX, rd)
    }

    /// The `STATUS` word of CQ `index` (bit 0 overrun, bits 32.. lost count).
    pub fn cq_status(&self, index: u32) -> Result<u64, HwError> {
        let page = cq_user_page(index).ok_or(HwError::NoEntry {
            what: "cq_user",
            index: u64::from(index),
        })?;
        self.rd("cq_user", page + CQ_USER_STATUS)
    }

    // ---- FMA ---------------------------------------------------------------------------

    fn fma(id: u32) -> Result<FmaPages, HwError> {
        fma_pages(id).ok_or(HwError::NoEntry {
            what: "fma",
            index: u64::from(id),
        })
    }

    /// Allocate-time programming of FMA descriptor `id` on its privileged page: QW3, base
    /// offset, QW2 (with `FMA_ENABLE` if `d.mode2` has it), then `PRVMASK`.
    pub fn fma_configure(&self, id: u32, d: &FmaDescriptor, mask: PrivMask) -> Result<(), HwError> {
        let p = Self::fma(id)?.priv_page;
        let q = qwords(&d.encode()?);
        self.wr("fma", p + fma::reg::QW3, q[2])?;
        self.wr("fma", p + fma::reg::BASE_OFFSET, q[0])?;
        self.wr("fma", p + fma::reg::QW2, q[1])?;
        // Clear any error left by a previous owner.
        self.wr("fma", p + fma::reg::STATUS, 0)?;
        self.wr("fma", p + fma::reg::PRVMASK, u64::from(mask.bits()))
    }

    /// Rewrite the privileged QW3 (NTT group, CQ handle, ptags, mode3) of descriptor `id`.
    pub fn fma_write_qw3(&self, id: u32, d: &FmaDescriptor) -> Result<(), HwError> {
        let p = Self::fma(id)?.priv_page;
        let q = qwords(&d.encode()?);
        self.wr("fma", p + fma::reg::QW3, q[2])
    }

    /// Take descriptor `id` back: QW2 without `FMA_ENABLE` (window stores are then refused),
    /// QW3 and the base offset cleared, error flags cleared, `PRVMASK` back to its default.
    pub fn fma_release(&self, id: u32) -> Result<(), HwError> {
        let p = Self::fma(id)?.priv_page;
        self.wr("fma", p + fma::reg::QW2, 0)?;
        self.wr("fma", p + fma::reg::QW3, 0)?;
        self.wr("fma", p + fma::reg::BASE_OFFSET, 0)?;
        self.wr("fma", p + fma::reg::SCRATCH0, 0)?;
        self.wr("fma", p + fma::reg::SCRATCH1, 0)?;
        self.wr("fma", p + fma::reg::STATUS, 0)?;
        self.wr(
            "fma",
            p + fma::reg::PRVMASK,
            u64::from(PrivMask::DEFAULT.bits()),
        )
    }

    /// Read the registers of descriptor `id` from its privileged page (QW1..QW3 and the
    /// scratch registers; the doorbells read 0).
    pub fn fma_read(&self, id: u32) -> Result<FmaDescriptor, HwError> {
        let p = Self::fma(id)?.priv_page;
        let mut q = [0u64; 9];
        for (i, w) in q.iter_mut().enumerate().take(6) {
            *w = self.rd("fma", p + 8 * i as u64)?;
        }
        // The status qword reads as `status_word`, which has the bit layout of qword 4.
        Ok(from_qwords(&q)?)
    }

    /// Whether descriptor `id` has `FMA_ENABLE` (one load of QW2).
    pub fn fma_enabled(&self, id: u32) -> Result<bool, HwError> {
        let p = Self::fma(id)?.priv_page;
        let q2 = self.rd("fma", p + fma::reg::QW2)?;
        let d: FmaDescriptor = from_qwords(&[0, q2])?;
        Ok(d.mode2 & u64::from(fma::FmaMode2::FMA_ENABLE.bits()) != 0)
    }

    /// The `STATUS` word of descriptor `id` (`wc | rc << 16 | ssid << 32 | flags << 48`).
    pub fn fma_status(&self, id: u32) -> Result<u64, HwError> {
        let p = Self::fma(id)?.priv_page;
        self.rd("fma", p + fma::reg::STATUS)
    }

    /// Read the privilege mask of descriptor `id`.
    pub fn fma_prvmask(&self, id: u32) -> Result<u32, HwError> {
        let p = Self::fma(id)?.priv_page;
        Ok(self.rd("fma", p + fma::reg::PRVMASK)? as u32)
    }

    /// `ERR_RC` of descriptor `id`.
    pub fn fma_err_rc(&self, id: u32) -> Result<u64, HwError> {
        let p = Self::fma(id)?.priv_page;
        self.rd("fma", p + FMA_ERR_RC)
    }

    // ---- BTE ---------------------------------------------------------------------------

    fn pack_u16x4(v: [u16; 4]) -> u64 {
        v.iter()
            .enumerate()
            .fold(0u64, |acc, (i, x)| acc | (u64::from(*x) << (16 * i)))
    }

    fn unpack_u16x4(v: u64) -> [u16; 4] {
        [0, 1, 2, 3].map(|i| (v >> (16 * i)) as u16)
    }

    /// Partition the TX descriptor slots: channel `c` owns `base[c] .. base[c] + count[c]`.
    pub fn bte_set_tx_rings(&self, base: [u16; 4], count: [u16; 4]) -> Result<(), HwError> {
        self.wr("tchnl_base", bte::TCHNL_BASE_OFFSET, Self::pack_u16x4(base))?;
        self.wr(
            "tchnl_count",
            bte::TCHNL_COUNT_OFFSET,
            Self::pack_u16x4(count),
        )
    }

    /// The TX ring partition `(base, count)`.
    pub fn bte_tx_rings(&self) -> Result<([u16; 4], [u16; 4]), HwError> {
        Ok((
            Self::unpack_u16x4(self.rd("tchnl_base", bte::TCHNL_BASE_OFFSET)?),
            Self::unpack_u16x4(self.rd("tchnl_count", bte::TCHNL_COUNT_OFFSET)?),
        ))
    }

    fn tx_channel(c: u32) -> Result<u64, HwError> {
        Self::entry(
            "bte_tx_channel",
            map::BTE_TX_CHANNEL_BASE,
            CHANNEL_PITCH,
            limits::BTE_CHANNELS,
            u64::from(c),
        )
    }

    /// Reset TX channel `c`, then enable it with `flags` (`txvc_flag`), TX interrupts on
    /// vector `irq_index`, and the CPU copy of the ring (completed TXD images) at
    /// `cpu_ring_addr` (64-byte aligned; 0 = none).
    pub fn bte_tx_channel_enable(
        &self,
        c: u32,
        flags: u64,
        irq_index: u32,
        cpu_ring_addr: u64,
    ) -> Result<(), HwError> {
        let a = Self::tx_channel(c)?;
        let reset = TxChannel {
            flags: bte::txvc_flag::RESET,
            ..TxChannel::default()
        };
        self.wr("bte_tx_channel", a, qwords(&reset.encode()?)[0])?;
        self.wr("bte_tx_channel", a + 8, cpu_ring_addr)?;
        let ch = TxChannel {
            flags,
            irq_req_index: u64::from(irq_index),
            ..TxChannel::default()
        };
        self.wr("bte_tx_channel", a, qwords(&ch.encode()?)[0])
    }

    /// Disable TX channel `c`.
    pub fn bte_tx_channel_disable(&self, c: u32) -> Result<(), HwError> {
        let a = Self::tx_channel(c)?;
        self.wr("bte_tx_channel", a, 0)
    }

    /// The channel registers of TX channel `c`.
    pub fn bte_tx_channel(&self, c: u32) -> Result<TxChannel, HwError> {
        let a = Self::tx_channel(c)?;
        Ok(from_qwords(&[
            self.rd("bte_tx_channel", a)?,
            self.rd("bte_tx_channel", a + 8)?,
            self.rd("bte_tx_channel", a + 16)?,
            self.rd("bte_tx_channel", a + 24)?,
        ])?)
    }

    /// The hardware read index (ring position) of TX channel `c`.
    pub fn bte_tx_read_index(&self, c: u32) -> Result<u16, HwError> {
        let a = Self::tx_channel(c)?;
        Ok(self.rd("bte_tx_channel", a + 16)? as u16)
    }

    /// `ERR_RC` and completed-TXD count of TX channel `c`.
    pub fn bte_tx_stats(&self, c: u32) -> Result<(u64, u64), HwError> {
        let a = Self::tx_channel(c)?;
        Ok((
            self.rd("bte_tx_channel", a + BTE_CHANNEL_ERR_RC)?,
            self.rd("bte_tx_channel", a + BTE_CHANNEL_COMPLETED)?,
        ))
    }

    fn tx_slot(slot: u32) -> Result<u64, HwError> {
        Self::entry(
            "bte_tx",
            map::BTE_TX_BASE,
            map::BTE_TX_PITCH,
            limits::BTE_TX_SLOTS,
            u64::from(slot),
        )
    }

    /// Post on TX channel `c`: write the TXD into `slot`, then store `next_write` (the next
    /// ring position) to the channel doorbell.
    pub fn bte_post(
        &self,
        c: u32,
        slot: u32,
        d: &TxDescriptor,
        next_write: u16,
    ) -> Result<(), HwError> {
        let s = Self::tx_slot(slot)?;
        let ch = Self::tx_channel(c)?;
        for (i, q) in qwords(&d.encode()?).into_iter().enumerate() {
            self.wr("bte_tx", s + 8 * i as u64, q)?;
        }
        self.wr("bte_tx_channel", ch + 24, u64::from(next_write))
    }

    /// Read back TX slot `slot` (flags and status are written by the BTE).
    pub fn bte_read_txd(&self, slot: u32) -> Result<TxDescriptor, HwError> {
        let s = Self::tx_slot(slot)?;
        let mut q = [0u64; 6];
        for (i, w) in q.iter_mut().enumerate() {
            *w = self.rd("bte_tx", s + 8 * i as u64)?;
        }
        Ok(from_qwords(&q)?)
    }

    /// Partition the RX descriptors among the RX channels.
    pub fn bte_set_rx_rings(&self, base: [u16; 4], count: [u16; 4]) -> Result<(), HwError> {
        self.wr("rchnl_base", bte::RCHNL_BASE_OFFSET, Self::pack_u16x4(base))?;
        self.wr(
            "rchnl_count",
            bte::RCHNL_COUNT_OFFSET,
            Self::pack_u16x4(count),
        )
    }

    fn rx_channel(c: u32) -> Result<u64, HwError> {
        Self::entry(
            "bte_rx_channel",
            map::BTE_RX_CHANNEL_BASE,
            CHANNEL_PITCH,
            limits::BTE_CHANNELS,
            u64::from(c),
        )
    }

    /// Set up RX channel `c`: buffer size, CPU completion ring, flags (`rxvc_flag`), RX
    /// interrupt vector; the write index starts at `write_index` (buffers already posted).
    pub fn bte_rx_channel_enable(
        &self,
        c: u32,
        buf_size: u32,
        cpu_ring_addr: u64,
        flags: u64,
        irq_index: u32,
        write_index: u16,
    ) -> Result<(), HwError> {
        let a = Self::rx_channel(c)?;
        let reset = RxChannel {
            flags: bte::rxvc_flag::RESET,
            ..RxChannel::default()
        };
        self.wr("bte_rx_channel", a, qwords(&reset.encode()?)[0])?;
        self.wr("bte_rx_channel", a + 8, cpu_ring_addr)?;
        self.wr("bte_rx_channel", a + 24, u64::from(write_index))?;
        let ch = RxChannel {
            buf_size: u64::from(buf_size),
            irq_req_index: u64::from(irq_index),
            flags,
            ..RxChannel::default()
        };
        self.wr("bte_rx_channel", a, qwords(&ch.encode()?)[0])
    }

    /// Disable RX channel `c`.
    pub fn bte_rx_channel_disable(&self, c: u32) -> Result<(), HwError> {
        let a = Self::rx_channel(c)?;
        self.wr("bte_rx_channel", a, 0)
    }

    /// The hardware read index of RX channel `c` (buffers consumed).
    pub fn bte_rx_read_index(&self, c: u32) -> Result<u16, HwError> {
        let a = Self::rx_channel(c)?;
        Ok(self.rd("bte_rx_channel", a + 16)? as u16)
    }

    /// Store the software write index of RX channel `c` (buffers posted).
    pub fn bte_rx_set_write_index(&self, c: u32, w: u16) -> Result<(), HwError> {
        let a = Self::rx_channel(c)?;
        self.wr("bte_rx_channel", a + 24, u64::from(w))
    }

    /// Write RX descriptor `r`.
    pub fn bte_write_rxd(&self, r: u32, d: &RxDescriptor) -> Result<(), HwError> {
        let a = Self::entry(
            "bte_rx",
            map::BTE_RX_BASE,
            map::BTE_RX_PITCH,
            limits::BTE_RX_DESCRIPTORS,
            u64::from(r),
        )?;
        self.wr("bte_rx", a, u64::from_le_bytes(d.encode()?))
    }
}

/// Decode a CPU RX descriptor from its 32-byte image.
pub fn decode_cpu_rx(bytes: &[u8]) -> Result<CpuRxDescriptor, FormatError> {
    CpuRxDescriptor::decode(bytes)
}

/// A window of a BAR handed to a client (an FMA descriptor page or window, a CQ alias page):
/// offsets are relative to the window, accesses outside it are refused, and once the
/// resource behind it is freed (or its client closes) every access fails with
/// [`MmioError::DeviceGone`], as a zapped mapping would fault.
pub struct MmioWindow {
    bar: Arc<dyn Mmio>,
    base: u64,
    size: u64,
    shared: Arc<MapShared>,
}

impl fmt::Debug for MmioWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmioWindow")
            .field("base", &format_args!("{:#x}", self.base))
            .field("size", &format_args!("{:#x}", self.size))
            .field("revoked", &self.shared.is_revoked())
            .finish()
    }
}

impl MmioWindow {
    pub(crate) fn new(bar: Arc<dyn Mmio>, base: u64, size: u64, shared: Arc<MapShared>) -> Self {
        MmioWindow {
            bar,
            base,
            size,
            shared,
        }
    }

    /// Whether the resource behind the window was freed.
    pub fn is_revoked(&self) -> bool {
        self.shared.is_revoked()
    }

    /// BAR 0 offset of the window's first byte.
    pub fn bar_offset(&self) -> u64 {
        self.base
    }

    fn check(&self, offset: u64, width: usize) -> Result<u64, MmioError> {
        if self.shared.is_revoked() {
            return Err(MmioError::DeviceGone);
        }
        match offset.checked_add(width as u64) {
            Some(end) if end <= self.size => Ok(self.base + offset),
            _ => Err(MmioError::OutOfRange {
                offset,
                width,
                size: self.size,
            }),
        }
    }
}

impl Mmio for MmioWindow {
    fn size(&self) -> u64 {
        self.size
    }
    fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        let a = self.check(offset, data.len())?;
        self.bar.read(a, data)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        let a = self.check(offset, data.len())?;
        self.bar.write(a, data)
    }
    fn write_burst(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        let a = self.check(offset, data.len())?;
        self.bar.write_burst(a, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// BAR 0 as plain memory, recording the order of stores.
    pub(crate) struct Regs {
        mem: Mutex<HashMap<u64, u8>>,
        log: Mutex<Vec<(u64, u64)>>,
    }

    impl Regs {
        pub(crate) fn new() -> Arc<Self> {
            Arc::new(Regs {
                mem: Mutex::new(HashMap::new()),
                log: Mutex::new(Vec::new()),
            })
        }
    }

    impl Mmio for Regs {
        fn size(&self) -> u64 {
            map::ADDRESS_SPACE_SIZE
        }
        fn read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
            let m = self.mem.lock().unwrap();
            for (i, d) in data.iter_mut().enumerate() {
                *d = *m.get(&(offset + i as u64)).unwrap_or(&0);
            }
            Ok(())
        }
        fn write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
            let mut m = self.mem.lock().unwrap();
            for (i, d) in data.iter().enumerate() {
                m.insert(offset + i as u64, *d);
            }
            let mut v = [0u8; 8];
            v[..data.len()].copy_from_slice(data);
            self.log
                .lock()
                .unwrap()
                .push((offset, u64::from_le_bytes(v)));
            Ok(())
        }
    }

    #[test]
    fn mdd_is_written_qword0_then_valid_qword1() {
        let r = Regs::new();
        let g = Ghal::new(r.clone()).unwrap();
        let d = MddDescriptor {
            ptag: 7,
            mem_base: 0x12345,
            max_base: 0x12347,
            modes: 0x30,
            cqh: 5,
            ..Default::default()
        };
        g.write_mdd(3, &d).unwrap();
        let log = r.log.lock().unwrap().clone();
        assert_eq!(log[0].0, map::MDD_BASE + 48);
        assert_eq!(log[1].0, map::MDD_BASE + 56);
        assert_eq!(g.read_mdd(3).unwrap(), d);
        g.invalidate_mdd(3).unwrap();
        assert!(!g.read_mdd(3).unwrap().is_valid());
        assert!(matches!(
            g.write_mdd(4096, &d),
            Err(HwError::NoEntry { what: "mdd", .. })
        ));
    }

    #[test]
    fn cq_setup_order_and_arm() {
        let r = Regs::new();
        let g = Ghal::new(r.clone()).unwrap();
        let d = CqDescriptor {
            base_addr: 0x10_0000,
            max_index: 63,
            irq_thresh_index: 1,
            irq_req_index: 29,
            ..Default::default()
        };
        g.cq_enable(9, &d).unwrap();
        let base = map::CQ_BASE + 32 * 9;
        let offs: Vec<u64> = r.log.lock().unwrap().iter().map(|(o, _)| *o).collect();
        assert_eq!(offs, vec![base + 16, base, base + 8]);
        let back = g.cq_read(9).unwrap();
        assert_eq!(back.enable, 1);
        assert_eq!(back.max_index, 63);
        g.cq_arm(9, 0x10_0000).unwrap();
        assert_eq!(g.cq_read(9).unwrap().irq_req, 1);
        g.cq_disable(9).unwrap();
        assert_eq!(g.cq_read(9).unwrap(), CqDescriptor::default());
    }

    #[test]
    fn fma_configure_writes_mask_last() {
        let r = Regs::new();
        let g = Ghal::new(r.clone()).unwrap();
        let d = FmaDescriptor {
            cq_hndl: 4,
            src_ptag: 9,
            dest_ptag: 9,
            mode2: u64::from(fma::FmaMode2::FMA_ENABLE.bits()),
            ..Default::default()
        };
        g.fma_configure(2, &d, PrivMask::DEFAULT).unwrap();
        let p = map::FMA_DESC_BASE + 2 * 4096;
        let log = r.log.lock().unwrap().clone();
        assert_eq!(log.first().unwrap().0, p + fma::reg::QW3);
        assert_eq!(*log.last().unwrap(), (p + 0x80, 0x3_7C1F));
        let back = g.fma_read(2).unwrap();
        assert_eq!((back.cq_hndl, back.src_ptag, back.mode2), (4, 9, 4));
        g.fma_release(2).unwrap();
        assert_eq!(g.fma_read(2).unwrap().mode2, 0);
        assert!(fma_pages(68).is_none());
        assert_eq!(fma_pages(64).unwrap().put_wc, map::FMA_PUTWC_OS_BASE);
    }

    #[test]
    fn bte_rings_and_post() {
        let r = Regs::new();
        let g = Ghal::new(r.clone()).unwrap();
        g.bte_set_tx_rings([0, 256, 512, 768], [256, 256, 256, 255])
            .unwrap();
        assert_eq!(
            g.bte_tx_rings().unwrap(),
            ([0, 256, 512, 768], [256, 256, 256, 255])
        );
        let d = TxDescriptor {
            dest_pe: 3,
            data_len: 64,
            ..Default::default()
        };
        g.bte_post(1, 256, &d, 1).unwrap();
        let log = r.log.lock().unwrap().clone();
        assert_eq!(
            log.last().unwrap(),
            &(map::BTE_TX_CHANNEL_BASE + 64 + 24, 1)
        );
        assert_eq!(g.bte_read_txd(256).unwrap(), d);
    }

    #[test]
    fn windows_are_bounded_and_revocable() {
        let r = Regs::new();
        let shared = MapShared::new();
        let w = MmioWindow::new(r.clone(), 0x1000, 0x100, Arc::clone(&shared));
        w.write_u64(8, 5).unwrap();
        assert_eq!(r.read_u64(0x1008).unwrap(), 5);
        assert!(matches!(
            w.write_u64(0xFC, 1),
            Err(MmioError::OutOfRange { .. })
        ));
        assert!(w.read_u64(u64::MAX - 3).is_err());
        shared.revoke();
        assert_eq!(w.read_u64(8), Err(MmioError::DeviceGone));
    }
}
