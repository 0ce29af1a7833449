//! Triggered-list entries (TLEs): the 2048 slots pending triggered operations occupy
//! (`C_NUM_TLES`), drawn from four pools (`c_cq_cfg_tle_pool[4]`) and a shared reserve
//! (`c_cq_cfg_sts_tle_shared`).
//!
//! Pool model (csr_defs.json field names; the combination rule is our reading): a pool may
//! hold up to `max_alloc` entries; its first `num_reserved` come from its own reservation and
//! the rest from the shared reserve of `num_shared` entries, while that lasts. The device never
//! holds more than `C_NUM_TLES` in all. Reset values: `num_reserved` 8, `max_alloc` 512,
//! `num_shared` 2016 (4 x 8 + 2016 = 2048). The cxi driver instead zeroes the shared reserve
//! and gives each service pool `num_reserved = max_alloc` (`cass_tle_init`,
//! `cass_cfg_tle_pool`, `cass_rgroup.c`); both configurations work here.

use firmware_spec::cassini::limits::C_NUM_TLES;

/// Number of TLE pools (`c_cq_cfg_tle_pool` has 4 entries; a CQ picks one with
/// `mem_q_pfq`).
pub const NUM_TLE_POOLS: usize = 4;

/// Width limit of the 12-bit pool fields.
const FIELD_MAX: u16 = (1 << 12) - 1;

/// `c_cq_cfg_tle_pool`: one pool's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlePoolConfig {
    /// `num_reserved` (12 bits): entries reserved for this pool.
    pub num_reserved: u16,
    /// `max_alloc` (12 bits): most entries this pool may hold.
    pub max_alloc: u16,
}

impl Default for TlePoolConfig {
    /// The CSR reset value.
    fn default() -> Self {
        TlePoolConfig {
            num_reserved: 8,
            max_alloc: 512,
        }
    }
}

/// Reset value of `c_cq_cfg_sts_tle_shared.num_shared`.
pub const DEFAULT_NUM_SHARED: u16 = 2016;

/// One pool's status (`c_cq_sts_tle_in_use`, `c_cq_sts_max_tle_in_use`, `in_use` of
/// `c_cq_cfg_tle_pool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TlePoolStatus {
    /// Entries held now.
    pub in_use: u16,
    /// High-water mark of `in_use` (software clears it).
    pub max_in_use: u16,
    /// Of `in_use`, entries taken from the shared reserve.
    pub shared_in_use: u16,
}

/// The four pools and the shared reserve.
#[derive(Debug, Clone)]
pub(crate) struct TlePools {
    cfg: [TlePoolConfig; NUM_TLE_POOLS],
    num_shared: u16,
    status: [TlePoolStatus; NUM_TLE_POOLS],
    shared_allocated: u16,
    total: u16,
}

impl TlePools {
    pub(crate) fn new() -> Self {
        TlePools {
            cfg: [TlePoolConfig::default(); NUM_TLE_POOLS],
            num_shared: DEFAULT_NUM_SHARED,
            status: [TlePoolStatus::default(); NUM_TLE_POOLS],
            shared_allocated: 0,
            total: 0,
        }
    }

    pub(crate) fn configure(&mut self, pool: usize, cfg: TlePoolConfig) {
        if let Some(c) = self.cfg.get_mut(pool) {
            *c = TlePoolConfig {
                num_reserved: cfg.num_reserved.min(FIELD_MAX),
                max_alloc: cfg.max_alloc.min(FIELD_MAX),
            };
        }
    }

    pub(crate) fn config(&self, pool: usize) -> Option<TlePoolConfig> {
        self.cfg.get(pool).copied()
    }

    pub(crate) fn set_num_shared(&mut self, n: u16) {
        self.num_shared = n.min(FIELD_MAX);
    }

    pub(crate) fn num_shared(&self) -> u16 {
        self.num_shared
    }

    pub(crate) fn shared_allocated(&self) -> u16 {
        self.shared_allocated
    }

    pub(crate) fn total(&self) -> u16 {
        self.total
    }

    pub(crate) fn status(&self, pool: usize) -> Option<TlePoolStatus> {
        self.status.get(pool).copied()
    }

    pub(crate) fn clear_max(&mut self, pool: usize) {
        if let Some(s) = self.status.get_mut(pool) {
            s.max_in_use = s.in_use;
        }
    }

    /// Take one entry for `pool`; false if the pool, the shared reserve or the device is
    /// exhausted (or `pool` does not exist).
    pub(crate) fn try_alloc(&mut self, pool: usize) -> bool {
        let (Some(cfg), Some(st)) = (self.cfg.get(pool), self.status.get_mut(pool)) else {
            return false;
        };
        if st.in_use >= cfg.max_alloc || self.total as usize >= C_NUM_TLES {
            return false;
        }
        if st.in_use >= cfg.num_reserved {
            if self.shared_allocated >= self.num_shared {
                return false;
            }
            self.shared_allocated += 1;
            st.shared_in_use += 1;
        }
        st.in_use += 1;
        st.max_in_use = st.max_in_use.max(st.in_use);
        self.total += 1;
        true
    }

    /// Return one entry of `pool` (shared entries first).
    pub(crate) fn free(&mut self, pool: usize) {
        let Some(st) = self.status.get_mut(pool) else {
            return;
        };
        if st.in_use == 0 {
            return;
        }
        if st.shared_in_use > 0 {
            st.shared_in_use -= 1;
            self.shared_allocated = self.shared_allocated.saturating_sub(1);
        }
        st.in_use -= 1;
        self.total = self.total.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_then_shared_then_refused() {
        let mut p = TlePools::new();
        p.configure(
            0,
            TlePoolConfig {
                num_reserved: 2,
                max_alloc: 5,
            },
        );
        p.set_num_shared(2);
        assert!(p.try_alloc(0));
        assert!(p.try_alloc(0));
        assert_eq!(p.shared_allocated(), 0);
        assert!(p.try_alloc(0));
        assert!(p.try_alloc(0));
        assert_eq!(p.shared_allocated(), 2);
        // Shared reserve exhausted before max_alloc.
        assert!(!p.try_alloc(0));
        // Another pool still has its reservation.
        assert!(p.try_alloc(1));
        p.free(0);
        assert_eq!(p.shared_allocated(), 1);
        assert!(p.try_alloc(0));
        assert_eq!(p.status(0).map(|s| (s.in_use, s.max_in_use)), Some((4, 4)));
        assert!(!p.try_alloc(7));
        assert_eq!(p.total(), 5);
    }

    #[test]
    fn driver_style_pools() {
        let mut p = TlePools::new();
        p.set_num_shared(0);
        p.configure(
            2,
            TlePoolConfig {
                num_reserved: 3,
                max_alloc: 3,
            },
        );
        assert!((0..3).all(|_| p.try_alloc(2)));
        assert!(!p.try_alloc(2));
        assert_eq!(p.status(2).map(|s| s.shared_in_use), Some(0));
    }
}
