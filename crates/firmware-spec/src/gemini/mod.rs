//! Cray Gemini (XE6/XK7) and the uGNI ABI, from the public headers (`gemini_hw.h`,
//! `gni_pub.h`). Where no public layout exists the choice is ours: see
//! `docs/gemini-formats.md`.

pub mod limits;
pub mod map;
