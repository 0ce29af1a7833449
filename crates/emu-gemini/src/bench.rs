//! Measurements as plain functions, shared by the criterion bench
//! (`cargo bench -p emu-gemini --bench gemini`), the `perf` example and the CLI:
//! FMA put rate, PUTWC store rate, and BTE bandwidth, on either engine.
//!
//! Each reports wall-clock time (what the emulation costs on this machine) and, on the
//! deterministic engine, virtual time (what the model says the hardware would take).

use crate::cluster::{Cluster, ClusterConfig, ClusterError};
use crate::host::{HostError, Local, PostOpts, Remote, rdma_txd};
use emu_core::engine::EngineKind;
use emu_core::engine::threaded::ThreadedConfig;
use emu_core::time::SimDuration;
use firmware_spec::gemini::bte::TxdMode1;
use firmware_spec::gemini::fma::{self, SyncType, WindowKind};
use std::fmt;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a measurement failed.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The cluster could not be built.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A NIC operation failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// An MMIO access failed.
    #[error(transparent)]
    Mmio(#[from] emu_core::mmio::MmioError),
    /// The workload completed with a wrong result.
    #[error("check failed: {0}")]
    Check(&'static str),
}

/// One measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// What was measured.
    pub name: &'static str,
    /// The engine.
    pub engine: EngineKind,
    /// Operations done.
    pub ops: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall-clock time.
    pub wall: Duration,
    /// Virtual time (deterministic engine only).
    pub virtual_time: Option<SimDuration>,
}

impl Measurement {
    /// Operations per wall-clock second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.wall.as_secs_f64().max(1e-12)
    }
    /// Bytes per wall-clock second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64().max(1e-12)
    }
    /// Operations per virtual second (deterministic engine).
    pub fn ops_per_virtual_sec(&self) -> Option<f64> {
        self.virtual_time
            .map(|t| self.ops as f64 / (t.as_ps() as f64 / 1e12).max(1e-15))
    }
    /// Bytes per virtual second (deterministic engine).
    pub fn bytes_per_virtual_sec(&self) -> Option<f64> {
        self.virtual_time
            .map(|t| self.bytes as f64 / (t.as_ps() as f64 / 1e12).max(1e-15))
    }
}

impl fmt::Display for Measurement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<22} {:<13} {:>10} ops {:>12} B  wall {:>9.3} ms  {:>12.0} ops/s  {:>8.3} GB/s",
            self.name,
            format!("{:?}", self.engine),
            self.ops,
            self.bytes,
            self.wall.as_secs_f64() * 1e3,
            self.ops_per_sec(),
            self.bytes_per_sec() / 1e9
        )?;
        if let (Some(o), Some(b)) = (self.ops_per_virtual_sec(), self.bytes_per_virtual_sec()) {
            write!(f, "  | modelled {o:>12.0} ops/s {:>8.3} GB/s", b / 1e9)?;
        }
        Ok(())
    }
}

const PTAG: u8 = 9;

fn cluster(kind: EngineKind, mem: u64, paced: bool) -> Result<Cluster, BenchError> {
    let mut cfg = match kind {
        EngineKind::Deterministic => ClusterConfig::deterministic([1, 1, 1], 1),
        EngineKind::Threaded => ClusterConfig::threaded(
            [1, 1, 1],
            ThreadedConfig {
                workers: 1,
                ..ThreadedConfig::default()
            },
        ),
    };
    cfg.mem_per_node = mem.div_ceil(4096) * 4096;
    if !paced {
        cfg.nic.bte_bandwidth = 0;
    }
    Ok(Cluster::new(cfg)?)
}

/// FMA put rate: `posts` 8-byte PUTs from one NIC to its router neighbour, each a full
/// post (descriptor setup, one store, `SYNC_COMPLETE` with a local event), up to 128 in
/// flight, every completion polled.
pub fn fma_put_rate(kind: EngineKind, posts: u64) -> Result<Measurement, BenchError> {
    let c = cluster(kind, 16 << 20, true)?;
    let (a, b) = (&c.nics[0], &c.nics[1]);
    let mut cq = a.cq_create(1, 1024)?;
    let src = a.alloc(1 << 20)?;
    a.register(1, PTAG, src, 1 << 20, true, None)?;
    let dst = b.alloc(1 << 20)?;
    let r = b.register(1, PTAG, dst, 1 << 20, true, None)?;
    let f = a.fma_alloc(0, PTAG, 1, None)?;
    let t0 = Instant::now();
    let v0 = c.now();
    let mut posted = 0u64;
    while posted < posts {
        let batch = (posts - posted).min(128);
        for k in 0..batch {
            let i = posted + k;
            let to = Remote {
                pe: 1,
                mdh: 1,
                offset: r.off((8 * i) % (1 << 20)),
            };
            let o = PostOpts {
                data: i & 0xFFFF_FFFF,
                ..PostOpts::default()
            };
            a.fma_put(f, to, &i.to_le_bytes(), o)?;
        }
        for _ in 0..batch {
            a.cq_wait(&mut cq)?;
        }
        posted += batch;
    }
    let wall = t0.elapsed();
    let vt = c.now().since(v0);
    let last = posts.saturating_sub(1);
    if posts > 0 && b.read_u64(dst + (8 * last) % (1 << 20))? != last {
        return Err(BenchError::Check("last PUT"));
    }
    Ok(Measurement {
        name: "FMA put rate (8 B)",
        engine: kind,
        ops: posts,
        bytes: 8 * posts,
        wall,
        virtual_time: (kind == EngineKind::Deterministic).then_some(vt),
    })
}

/// PUTWC store rate: `stores` 8-byte stores streamed into the write-combining window (one
/// sequence, one event at the end).
pub fn fma_store_rate(kind: EngineKind, stores: u64) -> Result<Measurement, BenchError> {
    let bytes = 8 * stores;
    let c = cluster(kind, bytes + (16 << 20), true)?;
    let (a, b) = (&c.nics[0], &c.nics[1]);
    let mut cq = a.cq_create(1, 64)?;
    let dst = b.alloc(bytes.max(8))?;
    let r = b.register(1, PTAG, dst, bytes.max(8), true, None)?;
    let f = a.fma_alloc(0, PTAG, 1, None)?;
    let t0 = Instant::now();
    let v0 = c.now();
    // Descriptor: target PE 1, MDD 1, offset 0; then stream through the window.
    a.fma_put(
        f,
        Remote {
            pe: 1,
            mdh: 1,
            offset: r.off(0),
        },
        &[],
        PostOpts {
            sync: SyncType::NO_EVENT,
            ..PostOpts::default()
        },
    )?;
    let win = fma::window_addr(WindowKind::PutWc, u64::from(f.id), 0)
        .ok_or(BenchError::Check("window"))?;
    for i in 0..stores {
        a.bar0.write_u64(win + 8 * i, i)?;
    }
    let sync = fma::sync_complete_word(SyncType::LOCAL_EVENT, 1);
    a.bar0.write_u64(
        firmware_spec::gemini::map::FMA_DESC_USER_BASE + fma::reg::SYNC_COMPLETE,
        sync,
    )?;
    a.cq_wait(&mut cq)?;
    let wall = t0.elapsed();
    let vt = c.now().since(v0);
    if stores > 0 && b.read_u64(dst + 8 * (stores - 1))? != stores - 1 {
        return Err(BenchError::Check("last store"));
    }
    Ok(Measurement {
        name: "PUTWC stores (8 B)",
        engine: kind,
        ops: stores,
        bytes,
        wall,
        virtual_time: (kind == EngineKind::Deterministic).then_some(vt),
    })
}

/// BTE bandwidth: one PUT of `bytes` between the two NICs of a router, from doorbell to
/// global completion. `paced`: at the modelled 6.911 GB/s; otherwise as fast as the
/// emulation goes.
pub fn bte_bandwidth(kind: EngineKind, bytes: u64, paced: bool) -> Result<Measurement, BenchError> {
    let c = cluster(kind, bytes + (16 << 20), paced)?;
    let (a, b) = (&c.nics[0], &c.nics[1]);
    let mut cq = a.cq_create(1, 64)?;
    let len = bytes.max(8);
    let src = a.alloc(len)?;
    let s = a.register(1, PTAG, src, len, false, None)?;
    let dst = b.alloc(len)?;
    let d = b.register(1, PTAG, dst, len, true, None)?;
    a.write_mem(src + len - 8, &0x5EED_u64.to_le_bytes())?;
    let mut ch = a.bte_enable(0, 0, 8, 0, false)?;
    let txd = rdma_txd(
        TxdMode1::PUT,
        PTAG,
        Local {
            mdh: s.mdh,
            offset: s.off(0),
        },
        Remote {
            pe: 1,
            mdh: d.mdh,
            offset: d.off(0),
        },
        len,
        1,
        TxdMode1::CQ_GLOBAL,
        0,
        1,
    );
    let t0 = Instant::now();
    let v0 = c.now();
    a.bte_post(&mut ch, &txd)?;
    a.cq_wait(&mut cq)?;
    let wall = t0.elapsed();
    let vt = c.now().since(v0);
    if b.read_u64(dst + len - 8)? != 0x5EED {
        return Err(BenchError::Check("BTE data"));
    }
    Ok(Measurement {
        name: if paced {
            "BTE PUT (paced)"
        } else {
            "BTE PUT (unpaced)"
        },
        engine: kind,
        ops: 1,
        bytes: len,
        wall,
        virtual_time: (kind == EngineKind::Deterministic).then_some(vt),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_run_and_model_the_hardware() {
        let m = fma_put_rate(EngineKind::Deterministic, 300).unwrap();
        assert_eq!(m.ops, 300);
        assert!(m.ops_per_virtual_sec().unwrap() > 1e5);
        let s = fma_store_rate(EngineKind::Deterministic, 1000).unwrap();
        assert_eq!(s.bytes, 8000);
        let b = bte_bandwidth(EngineKind::Deterministic, 4 << 20, true).unwrap();
        let gbs = b.bytes_per_virtual_sec().unwrap() / 1e9;
        assert!((5.0..7.0).contains(&gbs), "{gbs} GB/s");
        let t = bte_bandwidth(EngineKind::Threaded, 1 << 20, false).unwrap();
        assert!(t.virtual_time.is_none() && t.bytes_per_sec() > 0.0);
        assert!(m.to_string().contains("FMA put rate"));
    }
}
