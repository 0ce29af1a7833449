//! PCI function addresses (`domain:bus:device.function`) and vendor/device ids, with the ids of
//! the NICs this driver knows.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// The address of one PCI function: `domain:bus:device.function`, as Linux names it in sysfs
/// (`0000:3b:00.0`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddress {
    domain: u32,
    bus: u8,
    device: u8,
    function: u8,
}

/// Why a PCI address could not be built or parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AddressError {
    /// Device numbers are 5 bits.
    #[error("PCI device number {0:#x} is above 0x1f")]
    Device(u8),
    /// Function numbers are 3 bits.
    #[error("PCI function number {0} is above 7")]
    Function(u8),
    /// The text is not `[dddd:]bb:dd.f` in hex.
    #[error("'{0}' is not a PCI address of the form [dddd:]bb:dd.f")]
    Syntax(String),
}

impl PciAddress {
    /// An address; `device` must be below 32 and `function` below 8.
    pub fn new(domain: u32, bus: u8, device: u8, function: u8) -> Result<Self, AddressError> {
        if device > 0x1f {
            return Err(AddressError::Device(device));
        }
        if function > 7 {
            return Err(AddressError::Function(function));
        }
        Ok(PciAddress {
            domain,
            bus,
            device,
            function,
        })
    }

    /// The PCI segment (domain).
    pub fn domain(&self) -> u32 {
        self.domain
    }
    /// The bus number.
    pub fn bus(&self) -> u8 {
        self.bus
    }
    /// The device (slot) number, 0..32.
    pub fn device(&self) -> u8 {
        self.device
    }
    /// The function number, 0..8.
    pub fn function(&self) -> u8 {
        self.function
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciAddress {
    type Err = AddressError;

    /// Parses `dddd:bb:dd.f` or `bb:dd.f` (domain 0), hex digits, as `lspci -D` prints them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || AddressError::Syntax(s.to_string());
        let hex = |t: &str, max_len: usize| -> Result<u32, AddressError> {
            if t.is_empty() || t.len() > max_len || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(t, 16).map_err(|_| bad())
        };
        let (head, func) = s.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, dev) = match parts.as_slice() {
            [d, b, v] => (hex(d, 8)?, hex(b, 2)?, hex(v, 2)?),
            [b, v] => (0, hex(b, 2)?, hex(v, 2)?),
            _ => return Err(bad()),
        };
        let func = hex(func, 1)?;
        let narrow = |v: u32| u8::try_from(v).map_err(|_| bad());
        PciAddress::new(domain, narrow(bus)?, narrow(dev)?, narrow(func)?)
    }
}

/// A PCI vendor/device id pair, the key of a driver's id table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciId {
    /// Vendor id (config offset 0x00).
    pub vendor: u16,
    /// Device id (config offset 0x02).
    pub device: u16,
}

impl PciId {
    /// An id pair.
    pub const fn new(vendor: u16, device: u16) -> Self {
        PciId { vendor, device }
    }
}

impl fmt::Display for PciId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vendor, self.device)
    }
}

impl From<firmware_spec::cassini::pci::PciId> for PciId {
    fn from(id: firmware_spec::cassini::pci::PciId) -> Self {
        PciId::new(id.vendor, id.device)
    }
}

/// The ids of the NICs this project drives, from `firmware_spec` (the one definition of the
/// hardware contract).
pub mod ids {
    use super::PciId;
    use firmware_spec::cassini::pci as cassini;
    use firmware_spec::gemini::pci as gemini;

    /// Cray vendor id (Cassini 1, Gemini).
    pub const VENDOR_CRAY: u16 = cassini::VENDOR_CRAY;
    /// HPE vendor id (Cassini 2).
    pub const VENDOR_HPE: u16 = cassini::VENDOR_HPE;

    /// Cassini 1 (Slingshot-11); PF and VF share the id.
    pub const CASSINI_1: PciId = PciId::new(cassini::VENDOR_CRAY, cassini::DEVICE_CASSINI1);
    /// Cassini 2 physical function.
    pub const CASSINI_2_PF: PciId = PciId::new(cassini::VENDOR_HPE, cassini::DEVICE_CASSINI2_PF);
    /// Cassini 2 virtual function.
    pub const CASSINI_2_VF: PciId = PciId::new(cassini::VENDOR_HPE, cassini::DEVICE_CASSINI2_VF);
    /// Gemini.
    pub const GEMINI: PciId = PciId::new(gemini::VENDOR_ID, gemini::DEVICE_ID);

    /// Every Cassini id, for a Cassini driver's id table.
    pub const CASSINI: &[PciId] = &[CASSINI_1, CASSINI_2_PF, CASSINI_2_VF];
    /// Every Gemini id, for a Gemini driver's id table.
    pub const GEMINI_IDS: &[PciId] = &[GEMINI];
}

/// Which known NIC an id belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum NicKind {
    /// Cassini 1 (0x17db:0x0501).
    Cassini1,
    /// Cassini 2 physical function (0x1590:0x0371).
    Cassini2Pf,
    /// Cassini 2 virtual function (0x1590:0x0372).
    Cassini2Vf,
    /// Gemini (0x17db:0x0201).
    Gemini,
}

impl NicKind {
    /// The NIC an id names, if it is one we know.
    pub fn from_id(id: PciId) -> Option<Self> {
        match id {
            ids::CASSINI_1 => Some(NicKind::Cassini1),
            ids::CASSINI_2_PF => Some(NicKind::Cassini2Pf),
            ids::CASSINI_2_VF => Some(NicKind::Cassini2Vf),
            ids::GEMINI => Some(NicKind::Gemini),
            _ => None,
        }
    }

    /// A human-readable name.
    pub fn name(&self) -> &'static str {
        match self {
            NicKind::Cassini1 => "Cassini 1",
            NicKind::Cassini2Pf => "Cassini 2 PF",
            NicKind::Cassini2Vf => "Cassini 2 VF",
            NicKind::Gemini => "Gemini",
        }
    }
}

impl fmt::Display for NicKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_round_trips_through_text() {
        let a: PciAddress = "0000:3b:00.1".parse().unwrap();
        assert_eq!(
            (a.domain(), a.bus(), a.device(), a.function()),
            (0, 0x3b, 0, 1)
        );
        assert_eq!(a.to_string(), "0000:3b:00.1");
        let short: PciAddress = "3b:1f.7".parse().unwrap();
        assert_eq!(short.to_string(), "0000:3b:1f.7");
        let wide: PciAddress = "10000:01:02.3".parse().unwrap();
        assert_eq!(wide.domain(), 0x10000);
    }

    #[test]
    fn bad_addresses_are_rejected() {
        for s in [
            "",
            "0000:3b:00",
            "3b.00.0",
            "0000:3b:20.0",
            "0000:3b:00.8",
            "zz:00.0",
            "0:1:2:3.0",
        ] {
            assert!(s.parse::<PciAddress>().is_err(), "{s} parsed");
        }
        assert_eq!(PciAddress::new(0, 0, 32, 0), Err(AddressError::Device(32)));
        assert_eq!(PciAddress::new(0, 0, 0, 8), Err(AddressError::Function(8)));
    }

    #[test]
    fn known_ids_are_identified() {
        assert_eq!(
            NicKind::from_id(PciId::new(0x17db, 0x0501)),
            Some(NicKind::Cassini1)
        );
        assert_eq!(
            NicKind::from_id(PciId::new(0x1590, 0x0371)),
            Some(NicKind::Cassini2Pf)
        );
        assert_eq!(
            NicKind::from_id(PciId::new(0x1590, 0x0372)),
            Some(NicKind::Cassini2Vf)
        );
        assert_eq!(
            NicKind::from_id(PciId::new(0x17db, 0x0201)),
            Some(NicKind::Gemini)
        );
        assert_eq!(NicKind::from_id(PciId::new(0x8086, 0x0d57)), None);
        assert_eq!(PciId::new(0x17db, 0x201).to_string(), "17db:0201");
        use firmware_spec::cassini::pci::{Function, Generation, pci_id};
        assert_eq!(
            PciId::from(pci_id(Generation::Cassini2, Function::Vf)),
            ids::CASSINI_2_VF
        );
    }
}
