//! The Gemini driver (`kgni`): a kernel-style driver for the emulated Cray Gemini, programmed
//! only through BAR MMIO and host memory as `docs/gemini-programming.md` (the driver/device
//! contract) fixes. See `docs/driver-gemini.md`.
//!
//! - [`hw`]: `ghal`-like hardware access (NTT, MDD/MRT, CQ descriptors, FMA privileged
//!   configuration, BTE TX/RX channels) and [`hw::MmioWindow`], the revocable BAR window a
//!   client maps.
//! - [`kgni`]: the per-device state ([`Kgni`]): job table with ptag/cookie checks, CDMs,
//!   allocators with the hardware limits, per-client ownership, memory registration, the
//!   OS-mediated BTE post path, datagrams, waits; [`KgniClient`] is an open file.
//! - [`uapi`]: the request enum, responses, handles and mmap tokens.
//! - [`datagram`]: `EpPostData` matching (bound vs wildcard) and the kgni-to-kgni wire format.
//! - [`alloc`]: id allocators.
//! - [`driver`]: the PCI driver (id table, probe).

pub mod datagram;
pub mod driver;
pub mod error;
pub mod hw;
pub mod kgni;
pub mod uapi;

pub use driver::KgniDriver;
pub use error::{KgniError, Object, Resource};
pub use kgni::{FreeCounts, Kgni, KgniClient, KgniConfig, KgniIdleState, ResetReport, Waiter};
pub use uapi::{
    AttachInfo, CdmId, CqId, CqInfo, DatagramResult, EpId, FmaId, JobConfig, MapKind, Mapping,
    MmapToken, PostInfo, Request, Response,
};
