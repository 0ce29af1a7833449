//! The hardware contract of the emulated NICs: PCI ids, BAR maps, CSR map, command, event and
//! descriptor formats, return codes and limits. No behaviour: emulators, driver and user
//! libraries all encode and decode through these one definitions (architecture seam 5).
//!
//! - [`cassini`]: HPE Slingshot-11 Cassini, exact to the public user ABI.
//! - [`gemini`]: Cray Gemini (XE6/XK7), from the public headers; where no public layout
//!   exists the choice is ours and documented in `docs/gemini-formats.md`.
//! - [`bits`]: little-endian bit-field access on byte buffers (used for CSRs and golden tests).
#![forbid(unsafe_code)]

pub mod bits;
pub mod cassini;
pub mod gemini;
