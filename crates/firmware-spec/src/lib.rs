//! The hardware contract of the emulated NICs: PCI ids, BAR maps, CSR map, command, event and descriptor formats, return codes and limits. No behaviour.
#![forbid(unsafe_code)]
