//! List-entry pool accounting.
//!
//! Linked LEs and unexpected headers live in one ME/ULE RAM of 65,536 entries, 16,384 per
//! processing engine (PE), each PE with 16 LE pools (cassini.md §4.1, §9). A PtlTE draws from
//! the pool `(pe_num, le_pool)` of its table entry. The limits are the CSRs
//! `c_lpe_cfg_pe_le_pools[pe * 16 + pool]` {`num_reserved`, `max_alloc`} and
//! `c_lpe_cfg_pe_le_shared[pe]` {`num_shared`, `num_total`} (csr_defs.json; reset values
//! 0 / 1024 and 16384 / 16384).
//!
//! Our reading of how they combine (the public sources give only the field names): an
//! allocation fails if the pool already holds `max_alloc` entries or the PE holds `num_total`;
//! the first `num_reserved` entries of a pool are its own; beyond them each entry is taken from
//! the PE's shared part, which holds at most `num_shared`. A free returns a shared entry first.

use super::hw::{PE_COUNT, PE_LE_MAX, POOLS_PER_PE};

/// Limits of one LE pool (`c_lpe_cfg_pe_le_pools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// Entries reserved for this pool.
    pub num_reserved: u32,
    /// Most entries this pool may hold.
    pub max_alloc: u32,
}

impl Default for PoolLimits {
    /// The CSR reset values.
    fn default() -> Self {
        Self {
            num_reserved: 0,
            max_alloc: 1024,
        }
    }
}

/// Shared-space limits of one PE (`c_lpe_cfg_pe_le_shared`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeLimits {
    /// Entries available to pools beyond their reservation.
    pub num_shared: u32,
    /// Entries of the PE in all.
    pub num_total: u32,
}

impl Default for PeLimits {
    /// The CSR reset values.
    fn default() -> Self {
        Self {
            num_shared: PE_LE_MAX,
            num_total: PE_LE_MAX,
        }
    }
}

/// Usage of one pool, as `cxil_pte_status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolUsage {
    /// `num_reserved` of the pool.
    pub reserved: u32,
    /// Entries held now (`c_lpe_sts_pe_le_alloc.num_allocated`).
    pub allocated: u32,
    /// `max_alloc` of the pool.
    pub max: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Pool {
    limits: PoolLimits,
    allocated: u32,
}

#[derive(Debug, Clone, Default)]
struct Pe {
    limits: PeLimits,
    shared_allocated: u32,
    total_allocated: u32,
    pools: [Pool; POOLS_PER_PE],
}

/// The four PEs' pools.
#[derive(Debug, Clone)]
pub(crate) struct LePools {
    pes: [Pe; PE_COUNT],
}

impl Default for LePools {
    fn default() -> Self {
        Self {
            pes: std::array::from_fn(|_| Pe::default()),
        }
    }
}

impl LePools {
    fn pe(&self, pe: u8) -> Option<&Pe> {
        self.pes.get(usize::from(pe))
    }

    pub(crate) fn valid(pe: u8, pool: u8) -> bool {
        usize::from(pe) < PE_COUNT && usize::from(pool) < POOLS_PER_PE
    }

    pub(crate) fn set_pool_limits(&mut self, pe: u8, pool: u8, limits: PoolLimits) -> bool {
        match self
            .pes
            .get_mut(usize::from(pe))
            .and_then(|p| p.pools.get_mut(usize::from(pool)))
        {
            Some(p) => {
                p.limits = limits;
                true
            }
            None => false,
        }
    }

    pub(crate) fn set_pe_limits(&mut self, pe: u8, limits: PeLimits) -> bool {
        match self.pes.get_mut(usize::from(pe)) {
            Some(p) => {
                p.limits = limits;
                true
            }
            None => false,
        }
    }

    /// Takes one entry; false when the limits forbid it.
    pub(crate) fn try_alloc(&mut self, pe: u8, pool: u8) -> bool {
        let Some(pe) = self.pes.get_mut(usize::from(pe)) else {
            return false;
        };
        let Some(p) = pe.pools.get_mut(usize::from(pool)) else {
            return false;
        };
        if p.allocated >= p.limits.max_alloc || pe.total_allocated >= pe.limits.num_total {
            return false;
        }
        if p.allocated >= p.limits.num_reserved {
            if pe.shared_allocated >= pe.limits.num_shared {
                return false;
            }
            pe.shared_allocated += 1;
        }
        p.allocated += 1;
        pe.total_allocated += 1;
        true
    }

    /// Returns `n` entries.
    pub(crate) fn free(&mut self, pe: u8, pool: u8, n: u32) {
        let Some(pe) = self.pes.get_mut(usize::from(pe)) else {
            return;
        };
        let Some(p) = pe.pools.get_mut(usize::from(pool)) else {
            return;
        };
        for _ in 0..n {
            if p.allocated == 0 {
                break;
            }
            if p.allocated > p.limits.num_reserved {
                pe.shared_allocated = pe.shared_allocated.saturating_sub(1);
            }
            p.allocated -= 1;
            pe.total_allocated = pe.total_allocated.saturating_sub(1);
        }
    }

    pub(crate) fn usage(&self, pe: u8, pool: u8) -> PoolUsage {
        self.pe(pe)
            .and_then(|p| p.pools.get(usize::from(pool)))
            .map(|p| PoolUsage {
                reserved: p.limits.num_reserved,
                allocated: p.allocated,
                max: p.limits.max_alloc,
            })
            .unwrap_or_default()
    }

    /// (shared allocated, total allocated) of a PE, as `c_lpe_cfg_pe_le_shared` reports them.
    pub(crate) fn pe_usage(&self, pe: u8) -> (u32, u32) {
        self.pe(pe)
            .map(|p| (p.shared_allocated, p.total_allocated))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_alloc_bounds_a_pool() {
        let mut p = LePools::default();
        assert!(p.set_pool_limits(
            0,
            1,
            PoolLimits {
                num_reserved: 0,
                max_alloc: 2
            }
        ));
        assert!(p.try_alloc(0, 1));
        assert!(p.try_alloc(0, 1));
        assert!(!p.try_alloc(0, 1));
        p.free(0, 1, 1);
        assert!(p.try_alloc(0, 1));
        assert_eq!(p.usage(0, 1).allocated, 2);
    }

    #[test]
    fn reserved_entries_survive_shared_exhaustion() {
        let mut p = LePools::default();
        p.set_pe_limits(
            2,
            PeLimits {
                num_shared: 1,
                num_total: 10,
            },
        );
        p.set_pool_limits(
            2,
            0,
            PoolLimits {
                num_reserved: 0,
                max_alloc: 10,
            },
        );
        p.set_pool_limits(
            2,
            1,
            PoolLimits {
                num_reserved: 2,
                max_alloc: 10,
            },
        );
        assert!(p.try_alloc(2, 0)); // takes the single shared entry
        assert!(!p.try_alloc(2, 0));
        assert!(p.try_alloc(2, 1)); // reserved
        assert!(p.try_alloc(2, 1)); // reserved
        assert!(!p.try_alloc(2, 1)); // would need shared
        assert_eq!(p.pe_usage(2), (1, 3));
        p.free(2, 0, 1);
        assert!(p.try_alloc(2, 1));
        assert_eq!(p.pe_usage(2), (1, 3));
    }

    #[test]
    fn invalid_pool_never_allocates() {
        let mut p = LePools::default();
        assert!(!p.try_alloc(4, 0));
        assert!(!p.try_alloc(0, 16));
        assert!(!LePools::valid(0, 16));
    }
}
