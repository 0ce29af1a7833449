//! `libnicemu_cxi.so`: the emulated Cassini as an unmodified process sees a real one. Loaded
//! with `LD_PRELOAD` (what `nicemu run --nic cassini` sets), it answers the C library calls
//! HPE's libcxi makes on `/dev/cxi0` and on the cxi sysfs files, with an emulated Cassini
//! hosted in the process (built on the first open of the device, so a process that never
//! opens it runs no emulator), so that libcxi, libfabric's CXI provider and the programs on
//! them run unmodified and unrecompiled. See docs/real-cxi.md.
//!
//! - [`sysfs`]: the tree of files and links (`/sys/class/cxi_user/cxi0`, `device/properties`,
//!   telemetry, the `hsn0` netdev, wait objects' `intr` files); [`content`]: their bytes.
//! - [`node`]: the node this process hosts, alone or as one rank of a launched job.
//! - [`device`]: open device files (uAPI `write`s to the driver, `mmap` of tokens), wait
//!   object files, writable attributes.
//! - [`doorbell`]: the doorbell watcher, which turns stores into the mapped launch, EQ and CT
//!   pages into the device's BAR stores.
//! - [`ffi`]: the interposed functions and every `unsafe` block.

pub mod content;
pub mod device;
pub mod doorbell;
pub mod ffi;
pub mod node;
pub mod sysfs;
