//! Cray Gemini (XE6/XK7) and the uGNI ABI, from the public Cray GPL-2 headers
//! (`gemini_hw.h`, `ghal_pub.h`, `gni_pub.h`, and the `gni_priv.h` excerpt carried by the
//! libfabric GNI provider). Where no public layout exists the choice is ours: see
//! `docs/gemini-formats.md`.

pub mod amo;
pub mod bte;
pub mod codes;
pub mod cq;
pub mod cqe;
pub mod fma;
pub mod gni;
pub mod layout;
pub mod limits;
pub mod map;
pub mod mdd;
pub mod ntt;
pub mod pci;
pub mod post;
pub mod smsg;

pub use codes::UnknownCode;
pub use layout::{Field, FormatError};
