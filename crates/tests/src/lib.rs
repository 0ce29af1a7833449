//! Pure reference models used by the cross-crate tests in `tests/`. They know the published
//! semantics (Portals 4, the Cassini ABI) and nothing of the emulator's internals: they are
//! what the emulated NIC is checked against, so they never import an emulator crate.
//!
//! * [`portals`]: one matching Portals table entry — PRIORITY / OVERFLOW lists, unexpected
//!   headers, LE options, and the events every operation must produce.
//! * [`mpi_loopback`]: the `mpi` transport contract as an in-memory reference transport.
//! * [`mpi_semantics`]: the MPI semantics suite every transport must pass.
//!
//! How the suite is organised and how to replay a failing property test: `docs/testing.md`.
#![forbid(unsafe_code)]

pub mod mpi_loopback;
pub mod mpi_semantics;
pub mod portals;
