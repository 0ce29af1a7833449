//! The NIC's hardware blocks together, and the dispatch of MMIO stores, packets and timers to
//! them. Each block lives in its own module; this one only routes.

use emu_core::engine::DeviceIo;
use emu_core::fabric::Packet;
use emu_core::pci::MsixTable;
use firmware_spec::cassini::csr::Csr;

use crate::csr::{CsrFile, Piece};
use crate::device::CassiniConfig;

/// Every block of the NIC.
#[derive(Debug)]
pub(crate) struct Hw {
    pub(crate) nid: u32,
}

impl Hw {
    pub(crate) fn new(cfg: &CassiniConfig) -> Self {
        Hw { nid: cfg.nid }
    }

    /// Patch hardware-owned fields of a CSR entry image before software reads it.
    pub(crate) fn reflect(&self, _c: &'static Csr, _entry: u32, _image: &mut [u8]) {}

    /// Software wrote (part of) a CSR entry: let the owning block pick up the change.
    pub(crate) fn csr_written(
        &mut self,
        _csr: &mut CsrFile,
        _msix: &mut MsixTable,
        _io: &mut DeviceIo<'_>,
        _p: &Piece,
        _data: &[u8],
    ) {
    }

    pub(crate) fn ee_page_read(&self, _eq: u32, _off: u32, _data: &mut [u8]) {}

    pub(crate) fn ee_page_write(
        &mut self,
        _csr: &mut CsrFile,
        _msix: &mut MsixTable,
        _io: &mut DeviceIo<'_>,
        _eq: u32,
        _off: u32,
        _data: &[u8],
    ) {
    }

    pub(crate) fn launch_read(&self, _tgt: bool, _cq: u32, _off: u32, _data: &mut [u8]) {}

    pub(crate) fn launch_write(
        &mut self,
        _msix: &mut MsixTable,
        _io: &mut DeviceIo<'_>,
        _tgt: bool,
        _cq: u32,
        _off: u32,
        _data: &[u8],
    ) {
    }

    pub(crate) fn ct_doorbell(
        &mut self,
        _io: &mut DeviceIo<'_>,
        _ct: u32,
        _off: u32,
        _data: &[u8],
    ) {
    }

    pub(crate) fn packet(&mut self, _msix: &mut MsixTable, _io: &mut DeviceIo<'_>, _pkt: Packet) {}

    pub(crate) fn timer(&mut self, _msix: &mut MsixTable, _io: &mut DeviceIo<'_>, _token: u64) {}
}
