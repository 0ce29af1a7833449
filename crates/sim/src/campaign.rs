//! Campaigns: one configuration, many seeds.

use std::time::{Duration, Instant};

use platform::NicFaultCounters;

use crate::run::{SimConfig, SimOutcome, run};

/// `count` runs of `base`, with seeds `seed_base`, `seed_base + 1`, ...
#[derive(Clone, Debug)]
pub struct Campaign {
    /// Everything but the seed.
    pub base: SimConfig,
    /// The first seed.
    pub seed_base: u64,
    /// How many seeds.
    pub count: u64,
}

/// What a campaign found.
#[derive(Debug, Default)]
pub struct CampaignReport {
    /// Runs that passed.
    pub passed: u64,
    /// Runs that failed: the seed's configuration and what went wrong.
    pub failures: Vec<(SimConfig, String)>,
    /// Wall time of the campaign.
    pub wall: Duration,
    /// Packets lost, duplicated, reordered, corrupted, and link flaps, summed over the runs.
    pub dropped: u64,
    /// Duplicated packets.
    pub duplicated: u64,
    /// Reordered deliveries.
    pub reordered: u64,
    /// Corrupted deliveries.
    pub corrupted: u64,
    /// Link flaps.
    pub link_flaps: u64,
    /// Link-level retransmissions (Gemini's links retry lost and damaged packets).
    pub link_retries: u64,
    /// Packets the link layer held until a flapped link was up again.
    pub link_held_for_flap: u64,
    /// Switch ports taken down.
    pub port_downs: u64,
    /// NIC fault sites that fired, summed over the runs.
    pub nic: NicFaultCounters,
    /// Pinning failures the drivers injected, summed over the runs.
    pub pin_failures: u64,
}

impl Campaign {
    /// The last seed of the campaign; `None` when there is no seed or the seeds would go
    /// past `u64::MAX` (they are not wrapped around to 0).
    pub fn last_seed(&self) -> Option<u64> {
        self.seed_base.checked_add(self.count.checked_sub(1)?)
    }

    /// Run every seed; `progress` is called after each run with its index, configuration
    /// and outcome.
    pub fn run(&self, mut progress: impl FnMut(u64, &SimConfig, &SimOutcome)) -> CampaignReport {
        let start = Instant::now();
        let mut rep = CampaignReport::default();
        for i in 0..self.count {
            let cfg = SimConfig {
                seed: self.seed_base.wrapping_add(i),
                ..self.base.clone()
            };
            let out = run(&cfg);
            if let Some(f) = &out.fabric {
                rep.dropped += f.dropped;
                rep.duplicated += f.duplicated;
                rep.reordered += f.reordered;
                rep.corrupted += f.corrupted;
                rep.link_flaps += f.link_flaps;
                rep.link_retries += f.link_retries;
                rep.link_held_for_flap += f.link_held_for_flap;
                rep.port_downs += f.port_downs;
            }
            if let Some(n) = &out.nic_faults {
                rep.nic.add(n);
            }
            rep.pin_failures += out.pin_failures;
            progress(i, &cfg, &out);
            match &out.failure {
                None => rep.passed += 1,
                Some(why) => rep.failures.push((cfg, why.clone())),
            }
        }
        rep.wall = start.elapsed();
        rep
    }
}
