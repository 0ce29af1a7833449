//! The seeded isolation campaign: a generator of adversarial attempts, drawn class by class
//! from one seed, run against a victim process on the emulated Cassini and Gemini. Each
//! attempt must be refused, must move the counter named for its class by exactly one, must
//! deliver nothing to the victim (no event in its EQ or CQs), and must leave every victim
//! buffer bit for bit as it was (hashed after every attempt).
//!
//! Counters (per class, read before and after every attempt):
//!
//! * Cassini hardware counters through the CSR window of the node that refuses (names as
//!   `cxi_dump_csrs` prints them): `c_rmu_cntrs.ptl_invld_vni_cntr`,
//!   `c_rmu_cntrs.ptl_no_ptlte_cntr`, `c1_oxe_cntrs.err_no_translation`,
//!   `c_lpe_cntrs.err_op_violation`, `c_cq_cntrs.num_tx_cmd_perm_errors`,
//!   `c_cq_cntrs.num_tgt_cmd_perm_errors`, `c_cq_cntrs.fail_tx_cntr`,
//!   `c_cq_cntrs.fail_tgt_cntr`.
//! * Gemini: the NIC counter `REMOTE_REJECTS` (index 15 of the counter block).
//! * Driver-level refusals (a uAPI request naming another process's object, an mmap the
//!   process was never given, a CDM with a wrong ptag or cookie): the drivers' count of
//!   requests answered with an error (`CxiDevice::refused_requests`,
//!   `Kgni::refused_requests`). The kernel drivers return the error code only; the count is
//!   this emulation's statistic, so that every refusal is visible without a log.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use driver::mem::UserMemory;

/// splitmix64: a small, seedable generator (the campaign needs reproducible draws, not
/// cryptographic ones).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5EED_1501_A710_0000)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next() & 1 == 0
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.range(0, items.len() as u64) as usize]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

pub fn hash_mem(m: &UserMemory) -> u64 {
    let mut v = vec![0u8; m.len() as usize];
    m.read(0, &mut v).expect("read");
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// Per-class tally of a campaign.
#[derive(Default, Debug, Clone)]
pub struct ClassTally {
    pub attempts: u64,
    pub refused: u64,
    pub counter: &'static str,
    pub counted: u64,
}

/// What a campaign did.
#[derive(Default, Debug)]
pub struct Report {
    pub nic: &'static str,
    pub seed: u64,
    pub classes: BTreeMap<&'static str, ClassTally>,
    pub wall: Duration,
}

impl Report {
    pub fn attempts(&self) -> u64 {
        self.classes.values().map(|t| t.attempts).sum()
    }

    pub fn record(&mut self, class: &'static str, counter: &'static str, counted: u64) {
        let t = self.classes.entry(class).or_default();
        t.attempts += 1;
        t.refused += 1;
        t.counter = counter;
        t.counted += counted;
    }

    pub fn print(&self) {
        println!(
            "isolation campaign: {} seed {}: {} attempts, 0 succeeded, {:.1} s",
            self.nic,
            self.seed,
            self.attempts(),
            self.wall.as_secs_f64()
        );
        println!("| class | attempts | refused | counter | counted |");
        println!("|---|---|---|---|---|");
        for (class, t) in &self.classes {
            println!(
                "| {class} | {} | {} | `{}` | {} |",
                t.attempts, t.refused, t.counter, t.counted
            );
        }
    }
}

/// Attempts to run: `ISOLATION_ATTEMPTS` if set, else `default`.
pub fn attempts_from_env(default: u64) -> u64 {
    std::env::var("ISOLATION_ATTEMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The seed: `ISOLATION_SEED` if set, else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("ISOLATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

pub struct Timer(Instant);

impl Timer {
    pub fn start() -> Timer {
        Timer(Instant::now())
    }
    pub fn done(self) -> Duration {
        self.0.elapsed()
    }
}
