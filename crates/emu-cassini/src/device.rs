//! The Cassini PCI function: configuration space, BAR0 (2 GiB, served sparsely) decoded per
//! `firmware_spec::cassini::pci`, the CSR region, and the [`DeviceModel`] entry points that
//! hand MMIO stores, packets and timers to the hardware blocks.

use emu_core::engine::{DeviceIo, DeviceModel};
use emu_core::fabric::Packet;
use emu_core::mmio::MmioError;
use emu_core::pci::{BarConfig, BarKind, MsixConfig, PciIds};
use emu_core::pci_shell::PciShell;
use firmware_spec::cassini::csr::{self, Generation};
use firmware_spec::cassini::pci::{
    self as cpci, BAR0_SIZE_PF, Bar0Region, CSR_BASE, CassiniVersion, MbStsRev, Platform,
};

use crate::config::CassiniConfig;
use crate::csr::CsrFile;

/// Class code of the function: network controller, Ethernet (base 0x02, sub 0x00).
const CLASS_NETWORK_ETHERNET: u32 = 0x02_00_00;

/// The emulated Cassini 1 NIC (PCI 0x17db:0x0501, PF).
#[derive(Clone)]
pub struct Cassini {
    pub(crate) cfg: CassiniConfig,
    name: String,
    pub(crate) csr: CsrFile,
    pub(crate) hw: crate::hw::Hw,
}

impl std::fmt::Debug for Cassini {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cassini")
            .field("name", &self.name)
            .field("nid", &self.cfg.nid)
            .finish_non_exhaustive()
    }
}

/// BAR0 offset of the MSI-X table (in CSR space, `c_pi_ipd_cfg_msix_table`).
pub(crate) const MSIX_TABLE_BAR0: u64 = CSR_BASE + csr::C_PI_IPD_CFG_MSIX_TABLE.offset;
/// BAR0 offset of the MSI-X PBA (`c_pi_ipd_cfg_msix_pba`).
pub(crate) const MSIX_PBA_BAR0: u64 = CSR_BASE + csr::C_PI_IPD_CFG_MSIX_PBA.offset;

impl Cassini {
    /// A Cassini 1.1 on platform NETSIM with the given configuration, out of reset.
    pub fn new(cfg: CassiniConfig) -> Cassini {
        let id = cpci::pci_id(Generation::Cassini1, cpci::Function::Pf);
        let version = CassiniVersion::Cassini1_1;
        let ids = PciIds {
            vendor_id: id.vendor,
            device_id: id.device,
            revision: version.rev() as u8,
            class_code: CLASS_NETWORK_ETHERNET,
            subsystem_vendor_id: id.vendor,
            subsystem_id: id.device,
        };
        let vectors = cfg.msix_vectors.clamp(1, emu_core::pci::msix::MAX_VECTORS);
        // BAR0: 64-bit, 2 GiB (MMIO_BAR_LEN_PF). The MSI-X table and PBA live in CSR space
        // (docs/cassini-programming.md, "Interrupts").
        let bar0 = BarConfig {
            size: BAR0_SIZE_PF,
            kind: BarKind::Mem64,
            prefetchable: true,
        };
        let msix = MsixConfig {
            table_size: vectors,
            table_bar: 0,
            table_offset: MSIX_TABLE_BAR0 as u32,
            pba_bar: 0,
            pba_offset: MSIX_PBA_BAR0 as u32,
        };
        let pi = PciShell::new(ids, &[(0, bar0)], msix)
            .expect("BAR0 and 1..=2048 MSI-X vectors in CSR space are a valid layout");
        let mut csr = CsrFile::new(Generation::Cassini1);
        let nid = cfg.nid & 0xF_FFFF;
        // Identity (docs/cassini-programming.md): c_mb_sts_rev reports platform NETSIM,
        // nicsim_nic_id and c_oxe_cfg_fab_sfa carry the NID.
        let rev = MbStsRev::new(version, Platform::Netsim).to_u64();
        for f in csr::C_MB_STS_REV.fields {
            csr.hw_set(csr::C_MB_STS_REV, 0, f, (rev >> f.bit) & f.value_mask());
        }
        csr.hw_set(
            csr::NICSIM_NIC_ID,
            0,
            csr::fields::nicsim_nic_id::ID,
            u64::from(nid),
        );
        csr.hw_set(
            csr::C_OXE_CFG_FAB_SFA,
            0,
            csr::fields::c_oxe_cfg_fab_sfa::NID,
            u64::from(nid),
        );
        let hw = crate::hw::Hw::new(&cfg, pi);
        Cassini {
            name: format!("cassini{nid}"),
            cfg,
            csr,
            hw,
        }
    }

    /// The NID this NIC was created with.
    pub fn nid(&self) -> u32 {
        self.cfg.nid
    }

    /// Entries of the NIC's sparse tables (portal table, CTs, EQs, CQs, RMU, address
    /// contexts) backed by storage: 0 out of reset, growing a page at a time with what
    /// software configures (`emu_core::sparse`).
    pub fn allocated_table_entries(&self) -> usize {
        self.hw.allocated_table_entries()
    }

    fn flush_pending_irqs(&mut self, io: &mut DeviceIo<'_>) {
        self.hw.pi.raise_released(io);
    }

    fn bar0_read(&mut self, io: &mut DeviceIo<'_>, off: u64, data: &mut [u8]) {
        data.fill(0);
        match cpci::decode_bar0(off) {
            Bar0Region::Csr { off } => self.csr_read(io, off, data),
            Bar0Region::EqSwState { eq, off } => self.hw.ee_page_read(eq, off, data),
            Bar0Region::TxCqLaunch { cq, off } => self.hw.launch_read(false, cq, off, data),
            Bar0Region::TgtCqLaunch { cq, off } => self.hw.launch_read(true, cq, off, data),
            Bar0Region::CtDoorbell { .. } | Bar0Region::Unmapped => {}
        }
    }

    fn bar0_write(&mut self, io: &mut DeviceIo<'_>, off: u64, data: &[u8]) {
        match cpci::decode_bar0(off) {
            Bar0Region::Csr { off } => self.csr_write(io, off, data),
            Bar0Region::EqSwState { eq, off } => {
                self.hw.ee_page_write(io, eq, off, data);
            }
            Bar0Region::TxCqLaunch { cq, off } => self.hw.launch_write(io, false, cq, off, data),
            Bar0Region::TgtCqLaunch { cq, off } => self.hw.launch_write(io, true, cq, off, data),
            Bar0Region::CtDoorbell { ct, off } => self.hw.ct_doorbell(io, ct, off, data),
            Bar0Region::Unmapped => {}
        }
    }

    /// A load from the CSR region at CSR offset `off`.
    fn csr_read(&mut self, _io: &mut DeviceIo<'_>, off: u64, data: &mut [u8]) {
        let bar = CSR_BASE + off;
        if let Some(rel) = in_window(bar, MSIX_TABLE_BAR0, self.hw.pi.msix().table_bytes()) {
            if self.hw.pi.table_read(rel, data).is_err() {
                data.fill(0);
            }
            return;
        }
        if let Some(rel) = in_window(bar, MSIX_PBA_BAR0, self.hw.pi.msix().pba_bytes()) {
            if self.hw.pi.pba_read(rel, data).is_err() {
                data.fill(0);
            }
            return;
        }
        let mut pos = 0usize;
        let pieces: Vec<_> = self.csr.decode(off, data.len()).collect();
        for p in pieces {
            match p {
                Some(p) => {
                    let out = &mut data[pos..pos + p.len];
                    let mut entry = self.csr.entry(p.csr, p.entry);
                    self.hw.reflect(p.csr, p.entry, &mut entry);
                    out.copy_from_slice(&entry[p.byte..p.byte + p.len]);
                    pos += p.len;
                }
                None => {
                    self.csr.unmapped_accesses += 1;
                    data[pos] = 0;
                    pos += 1;
                }
            }
        }
    }

    /// A store to the CSR region at CSR offset `off`.
    fn csr_write(&mut self, io: &mut DeviceIo<'_>, off: u64, data: &[u8]) {
        let bar = CSR_BASE + off;
        if let Some(rel) = in_window(bar, MSIX_TABLE_BAR0, self.hw.pi.msix().table_bytes()) {
            let _ = self.hw.pi.table_write(io, rel, data);
            return;
        }
        if in_window(bar, MSIX_PBA_BAR0, self.hw.pi.msix().pba_bytes()).is_some() {
            return;
        }
        let mut pos = 0usize;
        let pieces: Vec<_> = self.csr.decode(off, data.len()).collect();
        for p in pieces {
            match p {
                Some(p) => {
                    let d = &data[pos..pos + p.len];
                    self.csr.write_piece(&p, d);
                    self.hw.csr_written(&mut self.csr, io, &p, d);
                    pos += p.len;
                }
                None => {
                    self.csr.unmapped_accesses += 1;
                    pos += 1;
                }
            }
        }
    }
}

/// `Some(offset - base)` if `[offset, offset + 1)` lies in `[base, base + len)`.
fn in_window(offset: u64, base: u64, len: u64) -> Option<u64> {
    (offset >= base && offset - base < len).then(|| offset - base)
}

impl DeviceModel for Cassini {
    fn name(&self) -> &str {
        &self.name
    }

    fn config_read(&mut self, reg: u16) -> u32 {
        self.hw.pi.config_read(reg)
    }

    fn config_write(&mut self, reg: u16, value: u32) {
        self.hw.pi.config_write(reg, value);
    }

    fn mmio_read(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), MmioError> {
        self.flush_pending_irqs(io);
        check(bar, offset, data.len())?;
        self.bar0_read(io, offset, data);
        Ok(())
    }

    fn mmio_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        self.flush_pending_irqs(io);
        check(bar, offset, data.len())?;
        let _span = tracing::trace_span!("cassini_mmio", offset, len = data.len()).entered();
        self.bar0_write(io, offset, data);
        Ok(())
    }

    /// A write-combined burst (a low-latency command written as one 64 or 128 B store): the
    /// BAR offset is decoded and checked once; a burst inside one queue's launch page goes
    /// to the LL window qword by qword without decoding each again, anything else is the
    /// sequence of 8-byte stores it stands for.
    fn mmio_write_burst(
        &mut self,
        io: &mut DeviceIo<'_>,
        bar: u8,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        self.flush_pending_irqs(io);
        check(bar, offset, 8)?;
        let _span = tracing::trace_span!("cassini_mmio", offset, len = data.len()).entered();
        let len = data.len() as u64;
        let launch = match cpci::decode_bar0(offset) {
            Bar0Region::TxCqLaunch { cq, off } => Some((false, cq, off)),
            Bar0Region::TgtCqLaunch { cq, off } => Some((true, cq, off)),
            _ => None,
        };
        match launch {
            Some((tgt, cq, off)) if u64::from(off) + len <= LAUNCH_PAGE => {
                for (i, q) in data.chunks_exact(8).enumerate() {
                    self.hw.launch_write(io, tgt, cq, off + 8 * i as u32, q);
                }
            }
            _ => {
                for (i, q) in data.chunks_exact(8).enumerate() {
                    self.bar0_write(io, offset + 8 * i as u64, q);
                }
            }
        }
        Ok(())
    }

    fn packet(&mut self, io: &mut DeviceIo<'_>, pkt: Packet) {
        self.flush_pending_irqs(io);
        let _span =
            tracing::trace_span!("cassini_rx", src = pkt.src.0, len = pkt.data.len()).entered();
        self.hw.packet(io, pkt);
    }

    fn timer(&mut self, io: &mut DeviceIo<'_>, token: u64) {
        self.flush_pending_irqs(io);
        let _span = tracing::trace_span!("cassini_timer", token).entered();
        self.hw.timer(io, token);
    }

    fn bar_size(&self, bar: u8) -> u64 {
        if bar == 0 { BAR0_SIZE_PF } else { 0 }
    }
    fn snapshot(&self) -> Option<Box<dyn DeviceModel>> {
        Some(Box::new(self.clone()))
    }
}

/// BAR0 only; accesses naturally aligned and inside the BAR.
/// Bytes of one queue's launch page (doorbell and LL windows at 0x400..0x1000).
const LAUNCH_PAGE: u64 = 0x1000;

fn check(bar: u8, offset: u64, width: usize) -> Result<(), MmioError> {
    if bar != 0 {
        return Err(MmioError::OutOfRange {
            offset,
            width,
            size: 0,
        });
    }
    if !matches!(width, 1 | 2 | 4 | 8) {
        return Err(MmioError::BadWidth { offset, width });
    }
    if !offset.is_multiple_of(width as u64) {
        return Err(MmioError::Misaligned { offset, width });
    }
    if offset + width as u64 > BAR0_SIZE_PF {
        return Err(MmioError::OutOfRange {
            offset,
            width,
            size: BAR0_SIZE_PF,
        });
    }
    Ok(())
}

#[cfg(test)]
mod idle_storage_tests {
    use super::*;
    use crate::lpe::PtlteConfig;
    use emu_core::sparse::PAGE;

    #[test]
    fn an_idle_nic_holds_no_table_entries_and_grows_a_page_per_configured_entry() {
        let mut nic = Cassini::new(CassiniConfig::default());
        assert_eq!(nic.allocated_table_entries(), 0, "out of reset");
        // Looking at entries nobody configured reads reset values and allocates nothing.
        assert_eq!(nic.hw.lpe.state(7), None);
        assert!(
            nic.hw
                .ct
                .state(7)
                .is_some_and(|c| !c.enabled && c.success == 0)
        );
        assert!(nic.hw.ee.eq(9).is_some_and(|e| !e.enabled));
        assert_eq!(nic.hw.cqs.tx_state(3), (false, false));
        assert_eq!(nic.allocated_table_entries(), 0, "after reads");
        // 40 PtlTEs and 40 CTs, 50 apart: each lands in a page of its own (50 > PAGE).
        let n = 40u16;
        for k in 0..n {
            let i = 1 + k * 50;
            nic.hw.lpe.configure(i, PtlteConfig::default()).unwrap();
            nic.hw.ct.enable(i, None).unwrap();
        }
        assert_eq!(nic.allocated_table_entries(), 2 * usize::from(n) * PAGE);
        assert!(nic.hw.lpe.state(51).is_some());
        assert!(nic.hw.ct.state(51).is_some_and(|c| c.enabled));
        // Configuring a neighbour in an already-backed page costs nothing more.
        nic.hw.lpe.configure(2, PtlteConfig::default()).unwrap();
        assert_eq!(nic.allocated_table_entries(), 2 * usize::from(n) * PAGE);
        // Out of range is an error, not an allocation.
        assert!(nic.hw.ct.enable(5000, None).is_err());
        assert!(nic.hw.lpe.configure(5000, PtlteConfig::default()).is_err());
        assert_eq!(nic.allocated_table_entries(), 2 * usize::from(n) * PAGE);
    }
}
