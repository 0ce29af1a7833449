//! What a device access costs by backend, as plain functions for `nicemu bench memory`:
//! the same device writes and reads through a [`DmaPort`] onto node RAM and onto process
//! memory (in the access mode of this process: `NICEMU_PROCMEM_ACCESS=syscall` measures the
//! system-call path), and what pinning costs.

use std::time::{Duration, Instant};

use super::{PinAccess, ProcessMemory};
use crate::dma::DmaPort;
use crate::memory::{HostMemory, PAGE_SIZE};

/// One measured size.
#[derive(Clone, Copy, Debug)]
pub struct AccessCost {
    /// Bytes per access.
    pub bytes: usize,
    /// Device write into node RAM, per access.
    pub ram_write: Duration,
    /// Device read from node RAM, per access.
    pub ram_read: Duration,
    /// Device write into registered process memory, per access.
    pub process_write: Duration,
    /// Device read from registered process memory, per access.
    pub process_read: Duration,
}

fn per(n: u32, d: Duration) -> Duration {
    d / n.max(1)
}

fn time(n: u32, mut f: impl FnMut() -> bool) -> Result<Duration, String> {
    let t = Instant::now();
    for _ in 0..n {
        if !f() {
            return Err("a device access failed".into());
        }
    }
    Ok(per(n, t.elapsed()))
}

/// Device writes and reads of each of `sizes` bytes, about `budget` bytes moved per
/// measurement (at least 1000 accesses).
pub fn access_costs(sizes: &[usize], budget: usize) -> Result<Vec<AccessCost>, String> {
    let max = sizes.iter().copied().max().unwrap_or(8);
    let ram_len = (max as u64 + 2 * PAGE_SIZE).next_multiple_of(PAGE_SIZE);
    let ram = DmaPort::passthrough(HostMemory::new(ram_len).map_err(|e| e.to_string())?);
    let hosted =
        HostMemory::hosted(2 * PAGE_SIZE, ProcessMemory::new()).map_err(|e| e.to_string())?;
    let pm = hosted.process().cloned().ok_or("no process memory")?;
    let proc_port = DmaPort::passthrough(hosted);
    // The process's own buffer, as a program's.
    let mut own = vec![0u8; max];
    let own_addr = own.as_mut_ptr() as u64;
    let pin = pm
        .pin(own_addr, max as u64, PinAccess::RW)
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0x5Au8; max];
    let mut out = Vec::new();
    for &n in sizes {
        let iters = u32::try_from((budget / n.max(1)).max(1000)).unwrap_or(u32::MAX);
        let src = &buf[..n];
        let ram_write = time(iters, || ram.write(PAGE_SIZE, src).is_ok())?;
        let process_write = time(iters, || proc_port.write(own_addr, src).is_ok())?;
        let dst = &mut buf[..n];
        let ram_read = time(iters, || ram.read(PAGE_SIZE, dst).is_ok())?;
        let process_read = time(iters, || proc_port.read(own_addr, dst).is_ok())?;
        out.push(AccessCost {
            bytes: n,
            ram_write,
            ram_read,
            process_write,
            process_read,
        });
    }
    drop(pin);
    drop(own);
    Ok(out)
}

/// Pinning (and unpinning) `len` bytes of the process's memory, per pin.
pub fn pin_cost(len: usize, iters: u32) -> Result<Duration, String> {
    let pm = ProcessMemory::new();
    let mut own = vec![0u8; len];
    let addr = own.as_mut_ptr() as u64;
    let t = Instant::now();
    for _ in 0..iters {
        let p = pm
            .pin(addr, len as u64, PinAccess::RW)
            .map_err(|e| e.to_string())?;
        drop(p);
    }
    let d = per(iters, t.elapsed());
    drop(own);
    Ok(d)
}
