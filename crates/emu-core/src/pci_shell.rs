//! The PCI function around a device model's blocks ([`PciShell`]): its configuration space
//! (identity, BARs, an MSI-X capability), its MSI-X table and pending-bit array, and the
//! messages a configuration write released. Every emulated NIC has the same shell; only where
//! its BARs and MSI-X structures sit differs, which the model says when it builds the shell
//! and when it decodes an access to its BARs.
//!
//! A configuration access comes without a [`DeviceIo`] (the engine calls
//! [`crate::engine::DeviceModel::config_write`] directly), so messages that unmasking or
//! enabling MSI-X releases wait in the shell until the model's next handler call raises them
//! ([`PciShell::raise_released`]).

use crate::engine::DeviceIo;
use crate::mmio::MmioError;
use crate::pci::{BarConfig, MsixConfig, MsixOutcome, MsixTable, PciConfigSpace, PciError, PciIds};

/// The PCI side of an emulated function.
#[derive(Clone, Debug)]
pub struct PciShell {
    config: PciConfigSpace,
    msix: MsixTable,
    /// MSI-X messages released by configuration writes, raised on the next handler call.
    released: Vec<u16>,
}

impl PciShell {
    /// A function with identity `ids` and PCIe extended configuration space, BARs `bars`
    /// (index, configuration) and an MSI-X capability `msix` with its table.
    pub fn new(ids: PciIds, bars: &[(u8, BarConfig)], msix: MsixConfig) -> Result<Self, PciError> {
        let mut config = PciConfigSpace::new(ids, true);
        for &(index, bar) in bars {
            config.set_bar(index, bar)?;
        }
        config.add_msix(msix)?;
        Ok(PciShell {
            config,
            msix: MsixTable::new(msix.table_size)?,
            released: Vec::new(),
        })
    }

    /// A configuration read.
    pub fn config_read(&self, reg: u16) -> u32 {
        self.config.read(reg)
    }

    /// A configuration write; the MSI-X messages it releases (enable, unmask) are raised on
    /// the next handler call.
    pub fn config_write(&mut self, reg: u16, value: u32) {
        self.config.write(reg, value);
        for d in self.msix.sync_control(&self.config) {
            self.released.push(d.vector);
        }
    }

    /// Raise the messages configuration writes released (at the start of every handler).
    pub fn raise_released(&mut self, io: &mut DeviceIo<'_>) {
        for v in self.released.drain(..) {
            io.interrupt(v);
        }
    }

    /// Signal MSI-X vector `vector`: raised now if enabled and unmasked, else left pending
    /// (or dropped while MSI-X is disabled).
    pub fn raise(&mut self, io: &mut DeviceIo<'_>, vector: u16) {
        if let MsixOutcome::Delivered { .. } = self.msix.signal(vector) {
            io.interrupt(vector);
        }
    }

    /// The MSI-X table.
    pub fn msix(&self) -> &MsixTable {
        &self.msix
    }

    /// A load from the MSI-X table at byte `offset` of it.
    pub fn table_read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        self.msix.table_read(offset, data)
    }

    /// A store to the MSI-X table at byte `offset` of it; an entry it unmasks raises its
    /// pending message now.
    pub fn table_write(
        &mut self,
        io: &mut DeviceIo<'_>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), MmioError> {
        for d in self.msix.table_write(offset, data)? {
            io.interrupt(d.vector);
        }
        Ok(())
    }

    /// A load from the pending-bit array at byte `offset` of it.
    pub fn pba_read(&self, offset: u64, data: &mut [u8]) -> Result<(), MmioError> {
        self.msix.pba_read(offset, data)
    }

    /// A store to the pending-bit array (read-only: ignored, or an error for a bad access).
    pub fn pba_write(&self, offset: u64, data: &[u8]) -> Result<(), MmioError> {
        self.msix.pba_write(offset, data)
    }
}
