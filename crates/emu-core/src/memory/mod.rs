//! Host memory of one emulated node, and a physical page allocator over it.
//!
//! [`HostMemory`] is the RAM that the CPU side (driver, user library) and the devices (through
//! their [`crate::dma::DmaPort`]) share. It wraps one anonymous vm-memory mapping starting at
//! host physical address 0; anonymous mappings are committed lazily, so a node can have a
//! gigabyte of RAM and only pay for the pages it touches. The handle is cheap to clone (an
//! `Arc` inside) and every accessor is bounds-checked: a bad address is a typed
//! [`MemoryError`], never a panic.
//!
//! Plain reads and writes copy in one `memcpy`-sized chunk, straight from the mapping's base
//! pointer after one bounds check (the `raw` module holds the only `unsafe` code, each
//! block with its safety argument); accesses of up to 8 bytes are volatile, larger ones a
//! `memcpy`, as vm-memory does for guest memory. The `*_acquire` / `*_release` accessors are
//! real atomic 4- or 8-byte accesses, for words that the CPU and a device hand over to each
//! other (ring valid bits, producer/consumer indices, AMO targets).
//!
//! [`PageAllocator`] hands out page-granular ranges of that RAM (kernel pages for rings,
//! pinned user buffers); [`HostMemory::alloc`] / [`HostMemory::free`] are its thread-safe
//! front end.
//!
//! Modules: `host` ([`HostMemory`]), `alloc` ([`PageAllocator`]), `snapshot`
//! ([`MemorySnapshot`]) over `written` (the write tracking), `raw` (the unsafe accesses),
//! `error`.

mod alloc;
mod error;
mod host;
#[allow(unsafe_code)]
mod raw;
mod snapshot;
mod written;

pub use alloc::{GuestRange, PAGE_SIZE, PageAllocator};
pub use error::{AllocError, MemoryError};
pub use host::HostMemory;
pub(crate) use host::copy_between;
pub use snapshot::MemorySnapshot;
pub use vm_memory::GuestAddress;
pub use written::SNAPSHOT_CHUNK;

#[cfg(test)]
mod tests;
