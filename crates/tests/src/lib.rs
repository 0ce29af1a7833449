//! Pure reference models used by the cross-crate tests in `tests/`. They know the published
//! semantics (Portals 4, the Cassini ABI) and nothing of the emulator's internals.
#![forbid(unsafe_code)]
