//! The type-0 configuration header every PCI function has (PCI Local Bus and PCI Express
//! Base specifications): its size, its BARs, and the registers the driver touches to enable a
//! function and its MSI-X capability.

/// Size of PCI Express extended configuration space.
pub const CONFIG_SPACE_SIZE: u16 = 4096;
/// Number of BARs of a type-0 header.
pub const NUM_BARS: u8 = 6;

/// Config offset of the vendor id (low half) and device id (high half).
pub(super) const CFG_ID: u16 = 0x00;
/// Config offset of the command register (low half) and status (high half).
pub(super) const CFG_COMMAND: u16 = 0x04;
/// Command register: memory space enable.
pub(super) const COMMAND_MEMORY: u32 = 1 << 1;
/// Command register: bus master enable.
pub(super) const COMMAND_MASTER: u32 = 1 << 2;
/// Config offset of the revision (byte 0) and class code (bytes 1..4).
pub(super) const CFG_CLASS_REV: u16 = 0x08;
/// Config offset of the first capability pointer.
pub(super) const CFG_CAPABILITY_LIST: u16 = 0x34;
/// Capability id of MSI-X.
pub(super) const CAP_ID_MSIX: u32 = 0x11;
/// MSI-X message control: enable.
pub(super) const MSIX_ENABLE: u32 = 1 << 15;
/// MSI-X message control: function mask.
pub(super) const MSIX_FUNCTION_MASK: u32 = 1 << 14;
/// Capabilities followed before the list is taken to be malformed (a loop).
pub(super) const MAX_CAPABILITIES: u32 = 48;
