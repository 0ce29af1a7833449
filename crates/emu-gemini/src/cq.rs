//! Completion queues: 1,024 CQ descriptors, each a ring of 8-byte CQEs in host memory.
//!
//! Format `ghal_cq_desc_t` (`firmware_spec::gemini::cq::CqDescriptor`); CQE
//! `firmware_spec::gemini::cqe::Cqe`. The ring keeps one slot empty; an event that finds it
//! full is lost and sets the sticky overrun flag, which every later entry carries until
//! software clears it (docs/gemini-programming.md, "Completion queues").

use crate::regs;
use emu_core::dma::DmaPort;
use emu_core::sparse::SparseTable;
use firmware_spec::gemini::cq::CqDescriptor;
use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::limits::CQ_DESCRIPTORS;

#[derive(Clone, Copy, Debug, Default)]
struct Cq {
    desc: CqDescriptor,
    overrun: bool,
    lost: u64,
}

/// What happened to an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// Written into the ring (the `Option` is the MSI-X vector to raise, if any).
    Written(Option<u16>),
    /// Lost: the ring was full (overrun).
    Lost,
    /// Not written: no such CQ, CQ 0, CQ disabled, or the ring's DMA address faulted.
    Dropped,
}

/// All CQ descriptors of a NIC.
#[derive(Clone, Debug)]
pub struct CqTable {
    /// Descriptors, stored sparsely (an untouched CQ is disabled).
    cqs: SparseTable<Cq>,
}

impl Default for CqTable {
    fn default() -> Self {
        CqTable {
            cqs: SparseTable::new(CQ_DESCRIPTORS as usize, Cq::default()),
        }
    }
}

fn qword(bytes: &[u8], q: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = bytes.get(q * 8..q * 8 + 8) {
        b.copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

impl CqTable {
    /// CQ descriptors backed by storage (0 at reset).
    pub fn allocated_entries(&self) -> usize {
        self.cqs.allocated_entries()
    }

    /// Qword `q` (0..4) of the kernel view of CQ `index`.
    pub fn read_kernel(&self, index: u32, q: usize) -> u64 {
        let Ok(cq) = self.cqs.get(index as usize) else {
            return 0;
        };
        match cq.desc.encode() {
            Ok(b) => qword(&b, q),
            Err(_) => 0,
        }
    }

    /// Store qword `q` of the kernel view. Setting `enable` resets the indices, the overrun
    /// flag and the lost count.
    pub fn write_kernel(&mut self, index: u32, q: usize, v: u64) {
        let Ok(cq) = self.cqs.get_mut(index as usize) else {
            return;
        };
        let Ok(mut b) = cq.desc.encode() else {
            return;
        };
        let Some(dst) = b.get_mut(q * 8..q * 8 + 8) else {
            return;
        };
        dst.copy_from_slice(&v.to_le_bytes());
        let Ok(new) = CqDescriptor::decode(&b) else {
            return;
        };
        let was = cq.desc.enable != 0;
        cq.desc = new;
        if !was && new.enable != 0 {
            cq.desc.rd_index = 0;
            cq.desc.wr_index = 0;
            cq.overrun = false;
            cq.lost = 0;
        }
    }

    /// Load from the user alias page of CQ `index`.
    pub fn read_user(&self, index: u32, off: u64) -> u64 {
        let Ok(cq) = self.cqs.get(index as usize) else {
            return 0;
        };
        match off {
            regs::CQ_USER_RD_INDEX => cq.desc.rd_index,
            regs::CQ_USER_STATUS => {
                u64::from(cq.overrun) | (cq.lost.min(u64::from(u32::MAX)) << 32)
            }
            regs::CQ_USER_WR_INDEX => cq.desc.wr_index,
            _ => 0,
        }
    }

    /// Store to the user alias page of CQ `index`.
    pub fn write_user(&mut self, index: u32, off: u64, v: u64) {
        let Ok(cq) = self.cqs.get_mut(index as usize) else {
            return;
        };
        match off {
            regs::CQ_USER_RD_INDEX => {
                cq.desc.rd_index =
                    (v & (firmware_spec::gemini::cq::MAX_ENTRIES - 1)) % cq.desc.entries();
            }
            regs::CQ_USER_STATUS if v & regs::CQ_STATUS_OVERRUN != 0 => cq.overrun = false,
            _ => {}
        }
    }

    /// Lose an event bound for CQ `cqh` as a full ring does: the sticky overrun flag is set
    /// and the loss counted (`Lost`); `Dropped` for a CQ an event could not reach anyway.
    pub fn overrun(&mut self, cqh: u64) -> Posted {
        if cqh == 0 {
            return Posted::Dropped;
        }
        let Ok(Some(cq)) = self.cqs.get_mut_if_touched(cqh as usize) else {
            return Posted::Dropped;
        };
        if cq.desc.enable == 0 {
            return Posted::Dropped;
        }
        cq.overrun = true;
        cq.lost = cq.lost.saturating_add(1);
        Posted::Lost
    }

    /// Deliver `cqe` to CQ `cqh`.
    pub fn post(&mut self, dma: &DmaPort, cqh: u64, mut cqe: Cqe) -> Posted {
        if cqh == 0 {
            return Posted::Dropped;
        }
        // An untouched CQ is disabled: the event is dropped without allocating it.
        let Ok(Some(cq)) = self.cqs.get_mut_if_touched(cqh as usize) else {
            return Posted::Dropped;
        };
        if cq.desc.enable == 0 {
            return Posted::Dropped;
        }
        if cq.desc.is_full() {
            cq.overrun = true;
            cq.lost = cq.lost.saturating_add(1);
            return Posted::Lost;
        }
        cqe.overrun = u64::from(cq.overrun);
        let Ok(word) = cqe.to_u64() else {
            return Posted::Dropped;
        };
        let addr = cq.desc.entry_addr(cq.desc.wr_index);
        if dma.store_u64_release(addr, word).is_err() {
            return Posted::Dropped;
        }
        cq.desc.wr_index = (cq.desc.wr_index + 1) % cq.desc.entries();
        let mut irq = None;
        if cq.desc.irq_req != 0 && cq.desc.pending() >= cq.desc.irq_thresh_index.max(1) {
            cq.desc.irq_req = 0;
            irq = Some(cq.desc.irq_req_index as u16);
        }
        Posted::Written(irq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu_core::memory::HostMemory;
    use firmware_spec::gemini::cqe::{CqeSource, HwStatus};

    fn enable(t: &mut CqTable, i: u32, base: u64, entries: u64) {
        let d = CqDescriptor {
            base_addr: base,
            max_index: entries - 1,
            enable: 1,
            ..Default::default()
        };
        let b = d.encode().unwrap();
        t.write_kernel(i, 2, qword(&b, 2));
        t.write_kernel(i, 0, 0);
        t.write_kernel(i, 1, qword(&b, 1));
    }

    #[test]
    fn ring_overrun_is_sticky_until_cleared() {
        let dma = DmaPort::passthrough(HostMemory::new(1 << 20).unwrap());
        let mut t = CqTable::default();
        let e = Cqe::from_hw(CqeSource::Bte, HwStatus::Ok, 42);
        assert_eq!(t.post(&dma, 3, e), Posted::Dropped);
        enable(&mut t, 3, 0x1000, 4);
        for _ in 0..3 {
            assert_eq!(t.post(&dma, 3, e), Posted::Written(None));
        }
        assert_eq!(t.post(&dma, 3, e), Posted::Lost);
        assert_eq!(t.read_user(3, regs::CQ_USER_STATUS), 1 | (1 << 32));
        assert_eq!(t.read_user(3, regs::CQ_USER_WR_INDEX), 3);
        // Consume two entries; the next event carries the overrun bit.
        t.write_user(3, regs::CQ_USER_RD_INDEX, 2);
        assert_eq!(t.post(&dma, 3, e), Posted::Written(None));
        let w = Cqe::from_u64(dma.read_u64(0x1000 + 3 * 8).unwrap());
        assert_eq!((w.overrun, w.data, w.source), (1, 42, 4));
        t.write_user(3, regs::CQ_USER_STATUS, regs::CQ_STATUS_OVERRUN);
        assert_eq!(t.post(&dma, 3, e), Posted::Written(None));
        let w = Cqe::from_u64(dma.read_u64(0x1000).unwrap());
        assert_eq!(w.overrun, 0);
        assert_eq!(t.read_user(3, regs::CQ_USER_STATUS) >> 32, 1);
        assert_eq!(t.post(&dma, 0, e), Posted::Dropped);
    }

    #[test]
    fn interrupt_is_one_shot() {
        let dma = DmaPort::passthrough(HostMemory::new(1 << 20).unwrap());
        let mut t = CqTable::default();
        enable(&mut t, 1, 0x2000, 16);
        let d = CqDescriptor {
            base_addr: 0x2000,
            irq_req: 1,
            ..Default::default()
        };
        t.write_kernel(1, 2, qword(&d.encode().unwrap(), 2));
        let e = Cqe::from_hw(CqeSource::SsidSreq, HwStatus::Ok, 1);
        assert_eq!(t.post(&dma, 1, e), Posted::Written(Some(0)));
        assert_eq!(t.post(&dma, 1, e), Posted::Written(None));
    }
}
