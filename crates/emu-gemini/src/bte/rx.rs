//! The RX side of the BTE: RX channels and their descriptor ring, into which SENDs from the
//! network land.

use crate::fault::Fault;
use crate::packet::{Header, flag};
use crate::regs::{self, Target, patch, qword_of, u16_lane};
use emu_core::dma::DmaPort;
use emu_core::sparse::SparseTable;
use firmware_spec::gemini::bte::{
    CpuRxDescriptor, RXD_FLAG_BTE_COMPLETE, RXD_FLAG_ERR_STATUS_SHIFT, RXD_FLAG_IMM_AVAILABLE,
    RxChannel, RxDescriptor, RxdMode, rxvc_flag,
};
use firmware_spec::gemini::cqe::HwStatus;
use firmware_spec::gemini::limits::BTE_RX_DESCRIPTORS;
use firmware_spec::gemini::pci::{IRQ_RX, irq_index};

use super::tx::CHANNELS;

/// The RX side of the BTE of one NIC: RX channels and their descriptor ring, into which
/// SENDs from the network land.
#[derive(Clone, Debug)]
pub(crate) struct BteRx {
    rx: [RxChannel; CHANNELS],
    /// RX descriptors, stored sparsely.
    rxd: SparseTable<u64>,
    rx_base: u64,
    rx_count: u64,
}

impl Default for BteRx {
    fn default() -> Self {
        BteRx {
            rx: Default::default(),
            rxd: SparseTable::new(BTE_RX_DESCRIPTORS as usize, 0),
            rx_base: 0,
            rx_count: 0,
        }
    }
}

impl BteRx {
    /// RX descriptors backed by storage (0 at reset).
    pub(crate) fn allocated_entries(&self) -> usize {
        self.rxd.allocated_entries()
    }

    /// Load from a BTE RX register.
    pub(crate) fn reg_read(&self, t: Target) -> u64 {
        match t {
            Target::RxRingBase => self.rx_base,
            Target::RxRingCount => self.rx_count,
            Target::BteRx(i) => self.rxd.get(i as usize).copied().unwrap_or(0),
            Target::BteRxChannel { ch, off } => self
                .rx
                .get(usize::from(ch))
                .filter(|_| off < 32)
                .and_then(|c| c.encode().ok())
                .map_or(0, |img| qword_of(&img, (off / 8) as usize)),
            _ => 0,
        }
    }

    /// Store to a BTE RX register.
    pub(crate) fn reg_write(&mut self, t: Target, sub: u64, data: &[u8]) {
        let merged = |old: u64| regs::merge(old, sub, data);
        match t {
            Target::RxRingBase => self.rx_base = merged(self.rx_base),
            Target::RxRingCount => self.rx_count = merged(self.rx_count),
            Target::BteRx(i) => {
                if let Ok(w) = self.rxd.get_mut(i as usize) {
                    *w = merged(*w);
                }
            }
            Target::BteRxChannel { ch, off } if off < 32 => {
                if let Some(c) = self.rx.get_mut(usize::from(ch))
                    && let Ok(mut img) = c.encode()
                {
                    let q = (off / 8) as usize;
                    let old = qword_of(&img, q);
                    patch(&mut img, q, merged(old));
                    if let Ok(mut n) = RxChannel::decode(&img) {
                        // The read index belongs to the hardware.
                        n.read_index = c.read_index;
                        if n.flags & rxvc_flag::RESET != 0 {
                            n.read_index = 0;
                            n.write_index = 0;
                            n.flags &= !rxvc_flag::RESET;
                        }
                        *c = n;
                    }
                }
            }
            _ => {}
        }
    }

    /// A SEND arrived: deliver it into RX channel `hdr.cmd` (data, then the CPU RX
    /// descriptor). Returns the MSI-X vector to raise, if the channel or buffer asks for one.
    pub(crate) fn receive(
        &mut self,
        dma: &DmaPort,
        hdr: &Header,
        payload: &[u8],
    ) -> Result<Option<u16>, Fault> {
        let ch = usize::from(hdr.cmd);
        let rx = *self.rx.get(ch).ok_or(Fault::BadCommand)?;
        if rx.flags & rxvc_flag::ENABLE == 0 {
            return Err(Fault::NoRxBuffer);
        }
        let (base, count) = (u16_lane(self.rx_base, ch), u16_lane(self.rx_count, ch));
        if count == 0 || rx.read_index % count == rx.write_index % count {
            return Err(Fault::NoRxBuffer);
        }
        let pos = rx.read_index % count;
        let raw = self.rxd.get((base + pos) as usize).copied().unwrap_or(0);
        let rxd = RxDescriptor::decode(&raw.to_le_bytes()).unwrap_or_default();
        let n = (payload.len() as u64).min(rx.buf_size);
        let mut flags = RXD_FLAG_BTE_COMPLETE;
        if hdr.flags & flag::IMMED != 0 {
            flags |= RXD_FLAG_IMM_AVAILABLE;
        }
        if (payload.len() as u64) > rx.buf_size {
            flags |= u64::from(HwStatus::MemBoundsErr.code()) << RXD_FLAG_ERR_STATUS_SHIFT;
        }
        let data = payload.get(..n as usize).unwrap_or(&[]);
        dma.write(rxd.base_addr, data).map_err(|_| Fault::Dma)?;
        let cpu = CpuRxDescriptor {
            buff_addr: rxd.base_addr,
            mode1: rxd.mode1,
            flags,
            data_len: n,
            imm_data: if hdr.flags & flag::IMMED != 0 {
                hdr.op1
            } else {
                0
            },
        };
        if rx.cpu_ring_addr != 0
            && let Ok(img) = cpu.encode()
        {
            let at = rx.cpu_ring_addr.checked_add(32 * pos).ok_or(Fault::Dma)?;
            dma.write(at, &img).map_err(|_| Fault::Dma)?;
        }
        if let Some(c) = self.rx.get_mut(ch) {
            c.read_index = (pos + 1) % count;
        }
        let irq = rxd.mode1 & u64::from(RxdMode::IRQ_ENABLE.bits()) != 0
            || rx.flags & rxvc_flag::IRQ_ENABLE != 0;
        Ok(irq.then_some(irq_index(ch as u32, IRQ_RX) as u16))
    }
}
