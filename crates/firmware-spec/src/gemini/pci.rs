//! PCI identity and BAR layout of the emulated Gemini function.
//!
//! Public (`gemini_hw.h`): vendor 0x17DB (Cray), device 0x0201 (`PCI_DEVICE_ID_CRAY_GEMINI_1`),
//! one PCI device per NIC (`GHAL_MAX_PCI_DEVS`), the in-band IRQ numbering. The real Gemini
//! sits on HyperTransport, not PCIe; the revision, class code and BAR layout of the
//! emulated function are our choice.

/// `PCI_VENDOR_ID_CRAY`.
pub const VENDOR_ID: u16 = 0x17DB;
/// `PCI_DEVICE_ID_CRAY_GEMINI_1`.
pub const DEVICE_ID: u16 = 0x0201;
/// Revision id of the emulated function (our choice).
pub const REVISION: u8 = 0x01;
/// Class code: network controller (0x02), other (0x80), prog-if 0 (our choice).
pub const CLASS_CODE: u32 = 0x02_80_00;
/// `GHAL_MAX_PCI_DEVS`: PCI functions per NIC.
pub const MAX_PCI_DEVS: u32 = 1;

/// One BAR of the emulated function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    /// BAR index (0..=5).
    pub index: u8,
    /// Size in bytes (a power of two).
    pub size: u64,
    /// 64-bit memory BAR.
    pub is_64bit: bool,
    /// Prefetchable.
    pub prefetchable: bool,
    /// What it maps.
    pub description: &'static str,
}

/// BAR 0 (our choice): the whole NIC address map of [`super::map`], byte for byte — local
/// block, CQ/FMA descriptor pages and the FMA windows — so BAR offset = map address.
/// 256 GiB, 64-bit, not prefetchable (MMIO stores have side effects; the PUTWC windows are
/// mapped write-combining by the driver, not by the BAR attribute).
pub const BAR0: Bar = Bar {
    index: 0,
    size: super::map::ADDRESS_SPACE_SIZE,
    is_64bit: true,
    prefetchable: false,
    description: "NIC address map (gemini::map), BAR offset = map address",
};

/// BAR 2 (our choice): MSI-X table (at 0) and PBA (at 0x800), 4 KiB.
pub const BAR2: Bar = Bar {
    index: 2,
    size: 0x1000,
    is_64bit: true,
    prefetchable: false,
    description: "MSI-X table at 0x0, PBA at 0x800",
};

/// Every BAR of the function.
pub const BARS: &[Bar] = &[BAR0, BAR2];

/// Offset of the MSI-X table in BAR 2.
pub const MSIX_TABLE_OFFSET: u64 = 0x0;
/// Offset of the MSI-X PBA in BAR 2.
pub const MSIX_PBA_OFFSET: u64 = 0x800;
/// MSI-X vectors: the 32 in-band IRQs plus the flow-control IRQ (index 32).
pub const MSIX_VECTORS: u16 = 33;

/// `GHAL_FIRST_INBAND_IRQ`.
pub const FIRST_INBAND_IRQ: u32 = 21;
/// `GHAL_NUM_INBAND_IRQS`.
pub const NUM_INBAND_IRQS: u32 = 32;
/// `GHAL_IRQ_RX`.
pub const IRQ_RX: u32 = 0;
/// `GHAL_IRQ_TX`.
pub const IRQ_TX: u32 = 1;
/// `GHAL_IRQ_FLWCTRL_INDEX`.
pub const IRQ_FLWCTRL_INDEX: u32 = 32;

/// `GHAL_IRQ_INDEX(vc_id, rx_tx)` = 21 + 2*vc + rx_tx.
pub const fn irq_index(vc: u32, rx_tx: u32) -> u32 {
    FIRST_INBAND_IRQ + (vc << 1) + rx_tx
}

/// `GHAL_FIRST_CQ_IRQ` = 21 + 2 * 4 BTE channels = 29.
pub const FIRST_CQ_IRQ: u32 = FIRST_INBAND_IRQ + ((super::limits::BTE_CHANNELS as u32) << 1);
/// `GHAL_IRQ_CQ_MAX_INDEX` = 32 - 29 = 3 CQ interrupt lines.
pub const IRQ_CQ_MAX_INDEX: u32 = NUM_INBAND_IRQS - FIRST_CQ_IRQ;

/// `GHAL_IRQ_CQ_INDEX(idx)`.
pub const fn irq_cq_index(idx: u32) -> u32 {
    FIRST_CQ_IRQ + idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_bars() {
        assert_eq!((VENDOR_ID, DEVICE_ID), (0x17DB, 0x0201));
        for b in BARS {
            assert!(b.size.is_power_of_two());
        }
        assert_eq!(irq_index(3, IRQ_TX), 28);
        assert_eq!(FIRST_CQ_IRQ, 29);
        assert_eq!(IRQ_CQ_MAX_INDEX, 3);
        assert_eq!(irq_cq_index(2), 31);
    }
}
