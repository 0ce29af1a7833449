//! How much host memory an in-process job takes, checked before the machine is built: a
//! job the host cannot hold is refused with both figures instead of being killed by the
//! kernel (or aborting on a failed allocation) part way through building it. Also the
//! emulated node's memory as `NICEMU_NODE_MEMORY_MIB` sets it, for every kind of job.

#![forbid(unsafe_code)]

use mpi::Env;

use crate::{Job, JobError, Nic};

/// The node memory `NICEMU_NODE_MEMORY_MIB` asks for in `env`, bytes (`None` when unset);
/// a bad value is an error naming the range ([`platform::process::node_memory`]).
pub fn node_memory_from_env(env: &Env) -> Result<Option<u64>, String> {
    env.get("NICEMU_NODE_MEMORY_MIB")
        .map(platform::process::node_memory)
        .transpose()
}

/// What one rank's machine takes: `(per rank, per pair of ranks)` bytes. Fitted to the
/// peak RSS of `nicemu job` (deterministic engine) at 256, 1024 and 4096 ranks, less the
/// program's own 16 bytes per pair: Cassini 75.6, 367.8 and 2858 MiB, Gemini 91.8, 552.6
/// and 4963 MiB. The part per pair is each rank's state about every peer (connections,
/// mailboxes, sequence numbers).
fn per_rank(nic: Nic) -> (u64, u64) {
    match nic {
        Nic::Cassini => (243 << 10, 101),
        Nic::Gemini => (329 << 10, 212),
    }
}

/// What a job takes besides its ranks.
const BASE: u64 = 8 << 20;

/// Host memory as the kernel counts what a new job may take without swapping
/// (`MemAvailable` in `/proc/meminfo`), bytes; `None` where there is no such file.
pub fn host_memory_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// `bytes` for a person: `74.1 GiB`, `312.0 MiB`.
pub fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

impl Job {
    /// Host memory the job's machine and its ranks' MPI state are estimated to take, bytes
    /// (the program's own buffers not included).
    pub fn memory_estimate(&self) -> u64 {
        let ranks = u64::from(self.ranks());
        let (rank, pair) = per_rank(self.nic);
        BASE.saturating_add(ranks.saturating_mul(rank))
            .saturating_add(ranks.saturating_mul(ranks).saturating_mul(pair))
    }

    /// Refuse the job when its estimate, with `program` bytes of the program's own buffers,
    /// is more than the host's available memory ([`host_memory_available`]); the error
    /// names both figures. A host that does not tell is not checked.
    pub fn check_memory(&self, program: u64) -> Result<(), JobError> {
        let need = self.memory_estimate().saturating_add(program);
        match host_memory_available() {
            Some(available) if need > available => Err(JobError::Memory {
                ranks: self.ranks(),
                need,
                available,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_grows_with_the_pairs_of_ranks() {
        let small = Job::new(Nic::Cassini, 256).memory_estimate();
        assert!((60 << 20..90 << 20).contains(&small), "{}", human(small));
        let big = Job::new(Nic::Gemini, 4096).memory_estimate();
        assert!((4500 << 20..5500 << 20).contains(&big), "{}", human(big));
        let huge = Job::new(Nic::Cassini, 65536).memory_estimate();
        assert!(huge > 400 << 30, "{}", human(huge));
    }

    #[test]
    fn node_memory_comes_from_its_variable() {
        assert_eq!(node_memory_from_env(&Env::new()), Ok(None));
        let env = Env::new().with("NICEMU_NODE_MEMORY_MIB", "2048");
        assert_eq!(node_memory_from_env(&env), Ok(Some(2 << 30)));
        for bad in ["8", "lots", "2097152"] {
            let env = Env::new().with("NICEMU_NODE_MEMORY_MIB", bad);
            assert!(node_memory_from_env(&env).is_err(), "{bad}");
        }
    }

    #[test]
    fn available_memory_is_read_where_the_kernel_tells() {
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(host_memory_available().is_some_and(|b| b > 0));
        }
    }
}
