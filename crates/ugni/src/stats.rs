//! What the library did, by kind: SMSG messages, FMA PUTs, GETs and AMOs, BTE (RDMA) PUTs
//! and GETs, CQ writes, with their bytes. Together with the NIC's counters this shows which
//! protocol a uGNI user took for which message (Open MPI's ugni BTL: SMSG for small messages,
//! GETs for its eager-get and rendezvous paths, PUTs for ob1's put fallback), and is printed
//! by the counter report (`NICEMU_UGNI_COUNTER_REPORT=1`, [`crate::host`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// One kind of operation: how many, how many bytes.
#[derive(Debug, Default)]
pub struct Count {
    ops: AtomicU64,
    bytes: AtomicU64,
}

impl Count {
    const fn new() -> Self {
        Count {
            ops: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Count one operation of `bytes`.
    pub fn add(&self, bytes: u64) {
        self.ops.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `(operations, bytes)` so far.
    pub fn get(&self) -> (u64, u64) {
        (
            self.ops.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// SMSG messages sent (header + data bytes).
pub static SMSG_SENDS: Count = Count::new();
/// FMA PUTs posted.
pub static FMA_PUTS: Count = Count::new();
/// FMA GETs posted.
pub static FMA_GETS: Count = Count::new();
/// AMOs posted.
pub static AMOS: Count = Count::new();
/// BTE PUTs posted.
pub static RDMA_PUTS: Count = Count::new();
/// BTE GETs posted.
pub static RDMA_GETS: Count = Count::new();
/// CQ writes posted.
pub static CQ_WRITES: Count = Count::new();
/// Memory registrations made.
pub static REGISTRATIONS: Count = Count::new();

/// Every count by name: `ugni.<kind>` and `ugni.<kind>_bytes`.
pub fn all() -> Vec<(String, u64)> {
    let kinds: [(&str, &Count); 8] = [
        ("smsg_sends", &SMSG_SENDS),
        ("fma_puts", &FMA_PUTS),
        ("fma_gets", &FMA_GETS),
        ("amos", &AMOS),
        ("rdma_puts", &RDMA_PUTS),
        ("rdma_gets", &RDMA_GETS),
        ("cq_writes", &CQ_WRITES),
        ("registrations", &REGISTRATIONS),
    ];
    let mut v = Vec::new();
    for (name, c) in kinds {
        let (ops, bytes) = c.get();
        v.push((format!("ugni.{name}"), ops));
        if name != "amos" && name != "cq_writes" {
            v.push((format!("ugni.{name}_bytes"), bytes));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up() {
        let c = Count::new();
        c.add(10);
        c.add(5);
        assert_eq!(c.get(), (2, 15));
        let names: Vec<String> = all().into_iter().map(|(k, _)| k).collect();
        assert!(names.contains(&"ugni.smsg_sends_bytes".to_string()));
        assert!(names.contains(&"ugni.amos".to_string()));
        assert!(!names.contains(&"ugni.amos_bytes".to_string()));
    }
}
