//! A minimal host side for emulated Cassinis, used by the tests, the demo and the benchmarks
//! of this crate: it programs the NIC exactly as `docs/cassini-programming.md` says a driver
//! does — CSR stores through the BAR0 MMIO handle, page tables, command rings and event rings
//! in host memory — and drives the data path through rings and doorbells only. The real
//! driver is `crates/driver`; this is the smallest thing that exercises the device the same
//! way.
//!
//! `cluster` builds the NICs on an engine, `node` programs one with CSR stores (address
//! contexts, page tables, memory descriptors, profiles, counters), `queues` (command and
//! event queues), `ct` (counting events) and `pte` (portal table entries) allocate the rest
//! of what a test uses; `fixed` holds the fixed choices.

mod cluster;
mod ct;
mod error;
mod fixed;
mod node;
mod pte;
mod queues;

pub use cluster::{Cluster, ClusterSnapshot};
pub use ct::Ct;
pub use error::HarnessError;
pub use fixed::{AC_KERNEL, AC_USER, NODE_MEM, PAGE, RGID, USER_IOVA_BASE, USER_IOVA_PAGES};
pub use node::{Md, Node, entry_image};
pub use queues::{CmdQueue, EqOpts, EqRing, dfa, header};
