//! Virtual time. One unit is a picosecond so that link serialisation times are exact.

/// A point in (virtual or real) time, in picoseconds since the engine started.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);

    pub const fn from_ps(ps: u64) -> Self {
        SimTime(ps)
    }
    pub const fn from_ns(ns: u64) -> Self {
        SimTime(ns.saturating_mul(1_000))
    }
    pub const fn from_us(us: u64) -> Self {
        SimTime(us.saturating_mul(1_000_000))
    }
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
    pub const fn saturating_add(self, d: SimDuration) -> Self {
        SimTime(self.0.saturating_add(d.0))
    }
    pub const fn since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

/// A span of time in picoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(pub u64);

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);
    pub const fn from_ps(ps: u64) -> Self {
        SimDuration(ps)
    }
    pub const fn from_ns(ns: u64) -> Self {
        SimDuration(ns.saturating_mul(1_000))
    }
    pub const fn from_us(us: u64) -> Self {
        SimDuration(us.saturating_mul(1_000_000))
    }
    pub const fn as_ps(self) -> u64 {
        self.0
    }
    pub const fn as_ns(self) -> u64 {
        self.0 / 1_000
    }
}

impl std::ops::Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        self.saturating_add(d)
    }
}

impl SimDuration {
    /// Convert from a standard duration (saturating at about 213 days).
    pub fn from_std(d: std::time::Duration) -> Self {
        let ps = d.as_nanos().saturating_mul(1_000);
        SimDuration(u64::try_from(ps).unwrap_or(u64::MAX))
    }
    /// Convert to a standard duration (sub-nanosecond parts are truncated).
    pub const fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0 / 1_000)
    }
    /// Sum of two durations, saturating.
    pub const fn saturating_add(self, other: SimDuration) -> Self {
        SimDuration(self.0.saturating_add(other.0))
    }
}

impl std::ops::Add for SimDuration {
    type Output = SimDuration;
    fn add(self, d: SimDuration) -> SimDuration {
        self.saturating_add(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_round_trip_and_saturation() {
        let d = std::time::Duration::from_micros(3);
        assert_eq!(SimDuration::from_std(d), SimDuration::from_us(3));
        assert_eq!(SimDuration::from_us(3).to_std(), d);
        assert_eq!(
            SimDuration::from_std(std::time::Duration::MAX),
            SimDuration(u64::MAX)
        );
        assert_eq!(SimTime(5) + SimDuration(u64::MAX), SimTime(u64::MAX));
        assert_eq!(SimDuration(2) + SimDuration(3), SimDuration(5));
    }
}
