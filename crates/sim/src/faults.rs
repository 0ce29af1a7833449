//! The `--faults` language: a comma-separated list of fault sites of the fabric, each
//! `name` or `name=value`, turned into an [`emu_core::fabric::FaultConfig`].
//!
//! | site | value | default | meaning |
//! |---|---|---|---|
//! | `drop` | probability | 0.05 | a packet is lost |
//! | `dup` (`duplicate`) | probability | 0.01 | a packet is delivered twice |
//! | `reorder` | probability | 0.05 | a packet is held back (up to `reorder-max`) |
//! | `reorder-max` | microseconds | 2 | the longest hold-back |
//! | `corrupt` | probability | 0.01 | one bit of a packet is flipped (its CRC then fails) |
//! | `linkflap` | probability | 0.001 | per packet, a link of its route goes down for `flap-down` |
//! | `flap-down` | microseconds | 20 | how long a flapped link stays down |
//! | `port-down` | probability | 0.0005 | per packet, the switch port facing its destination goes down for `port-down-time` |
//! | `port-down-time` | microseconds | 50 | how long a downed switch port stays down |
//! | `eq_full` | probability | 0.01 | Cassini: a target event finds its PtlTE's EQ full |
//! | `le_exhaust` | probability | 0.01 | Cassini: no LE for an unexpected header |
//! | `atu_miss` | probability | 0.001 | Cassini: a command's local buffer misses in the ATU |
//! | `ct_delay` | probability | 0.05 | Cassini: a CT write-back is late by `ct-delay-time` |
//! | `ct-delay-time` | microseconds | 5 | |
//! | `slow_target` | probability | 0.001 | both: the receiving NIC stalls for `slow-target-time` |
//! | `slow-target-time` | microseconds | 10 | |
//! | `gni_cq_overrun` | probability | 0.01 | Gemini: a remote event finds its CQ full |
//! | `smsg_starve` | probability | 0.01 | Gemini: SMSG credit returns are held for `smsg-starve-time` |
//! | `smsg-starve-time` | microseconds | 20 | |
//! | `pin_fail` | probability | 0.05 | both drivers: a registration's pages cannot be pinned (cxi `-ENOMEM`, kgni `GNI_RC_ERROR_NOMEM`) |
//! | `none` | — | — | no faults (alone) |
//!
//! Probabilities are in `0..=1`; a site given twice is an error.

use emu_core::fabric::FaultConfig;
use emu_core::nic_faults::NicFaults;
use emu_core::time::SimDuration;
use platform::DriverFaults;
use runtime::Nic;
use thiserror::Error;

/// Why a `--faults` string was refused.
#[derive(Debug, Error, PartialEq)]
pub enum FaultSpecError {
    /// An unknown site name.
    #[error(
        "unknown fault {0:?} (known: drop, dup, reorder, reorder-max, corrupt, linkflap, flap-down, port-down, port-down-time, eq_full, le_exhaust, atu_miss, ct_delay, ct-delay-time, slow_target, slow-target-time, gni_cq_overrun, smsg_starve, smsg-starve-time, pin_fail, none)"
    )]
    Unknown(String),
    /// A value that is not a number.
    #[error("fault {site}: {value:?} is not a number")]
    NotANumber {
        /// The site.
        site: String,
        /// What was given.
        value: String,
    },
    /// A probability outside 0..=1 or a negative / too long duration.
    #[error("fault {site}: {value} is out of range ({range})")]
    OutOfRange {
        /// The site.
        site: String,
        /// What was given.
        value: f64,
        /// The allowed range.
        range: &'static str,
    },
    /// A site named twice.
    #[error("fault {0} is given twice")]
    Twice(String),
    /// An empty item (`drop=0.1,,corrupt`) or an empty string.
    #[error("empty fault list item in {0:?}")]
    Empty(String),
    /// `none` together with other sites.
    #[error("`none` cannot be combined with other faults")]
    NoneWithOthers,
    /// A value given to `none`.
    #[error("`none` takes no value")]
    NoneWithValue,
    /// Sites of the other NIC family: the chosen NIC has no such site, so they would never
    /// fire.
    #[error(
        "fault {} {} {other}'s: an emulated {nic} has no such site ({nic}'s own: {own})",
        sites.join(", "),
        if sites.len() == 1 { "is" } else { "are" }
    )]
    NotOnThisNic {
        /// The sites given that do not apply.
        sites: Vec<String>,
        /// The NIC of the job.
        nic: &'static str,
        /// The NIC they belong to.
        other: &'static str,
        /// The chosen NIC's own sites.
        own: &'static str,
    },
}

/// Parsed fault sites, in a canonical form that prints back to an equivalent `--faults`
/// string ([`FaultSpec::to_arg`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultSpec {
    /// Per-packet drop probability.
    pub drop: f64,
    /// Per-packet duplication probability.
    pub dup: f64,
    /// Per-copy reorder probability.
    pub reorder: f64,
    /// Longest reorder hold-back, microseconds.
    pub reorder_max_us: f64,
    /// Per-copy corruption probability.
    pub corrupt: f64,
    /// Per-packet link-flap probability.
    pub linkflap: f64,
    /// Link-flap window, microseconds.
    pub flap_down_us: f64,
    /// Per-packet switch-port-down probability.
    pub port_down: f64,
    /// Switch-port-down window, microseconds.
    pub port_down_us: f64,
    /// Cassini: per target event check, the EQ reads as full.
    pub eq_full: f64,
    /// Cassini: per request, no LE for its unexpected header.
    pub le_exhaust: f64,
    /// Cassini: per command with a local buffer, an ATU miss.
    pub atu_miss: f64,
    /// Cassini: per CT write-back, a delay.
    pub ct_delay: f64,
    /// CT write-back delay, microseconds.
    pub ct_delay_us: f64,
    /// Per arriving packet, a target stall.
    pub slow_target: f64,
    /// Target stall, microseconds.
    pub slow_target_us: f64,
    /// Gemini: per remote event, a CQ overrun.
    pub cq_overrun: f64,
    /// Gemini: per SMSG credit return, a hold.
    pub smsg_starve: f64,
    /// Credit-return hold, microseconds.
    pub smsg_starve_us: f64,
    /// Drivers: per registration request, a pinning failure.
    pub pin_fail: f64,
}

const DEFAULT_REORDER_MAX_US: f64 = 2.0;
const DEFAULT_FLAP_DOWN_US: f64 = 20.0;
const DEFAULT_PORT_DOWN_US: f64 = 50.0;
const DEFAULT_CT_DELAY_US: f64 = 5.0;
const DEFAULT_SLOW_TARGET_US: f64 = 10.0;
const DEFAULT_SMSG_STARVE_US: f64 = 20.0;
/// The longest duration accepted (1 s of virtual time; the NIC layers give up long before).
const MAX_US: f64 = 1e6;

impl Default for FaultSpec {
    fn default() -> Self {
        FaultSpec::none()
    }
}

impl FaultSpec {
    /// No faults.
    pub const fn none() -> Self {
        FaultSpec {
            drop: 0.0,
            dup: 0.0,
            reorder: 0.0,
            reorder_max_us: DEFAULT_REORDER_MAX_US,
            corrupt: 0.0,
            linkflap: 0.0,
            flap_down_us: DEFAULT_FLAP_DOWN_US,
            port_down: 0.0,
            port_down_us: DEFAULT_PORT_DOWN_US,
            eq_full: 0.0,
            le_exhaust: 0.0,
            atu_miss: 0.0,
            ct_delay: 0.0,
            ct_delay_us: DEFAULT_CT_DELAY_US,
            slow_target: 0.0,
            slow_target_us: DEFAULT_SLOW_TARGET_US,
            cq_overrun: 0.0,
            smsg_starve: 0.0,
            smsg_starve_us: DEFAULT_SMSG_STARVE_US,
            pin_fail: 0.0,
        }
    }

    /// Parse a `--faults` string (see the module doc).
    pub fn parse(s: &str) -> Result<Self, FaultSpecError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(FaultSpecError::Empty(s.into()));
        }
        let mut spec = FaultSpec::none();
        let mut seen: Vec<&str> = Vec::new();
        let items: Vec<&str> = s.split(',').map(str::trim).collect();
        for item in &items {
            if item.is_empty() {
                return Err(FaultSpecError::Empty(s.into()));
            }
            let (name, value) = match item.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (*item, None),
            };
            let canonical = match name {
                "duplicate" => "dup",
                "port_down" => "port-down",
                "cq_overrun" => "gni_cq_overrun",
                n => n,
            };
            if canonical == "none" {
                if value.is_some() {
                    return Err(FaultSpecError::NoneWithValue);
                }
                if items.len() > 1 {
                    return Err(FaultSpecError::NoneWithOthers);
                }
                return Ok(FaultSpec::none());
            }
            let (slot, default, range_max, range): (&mut f64, f64, f64, &'static str) =
                match canonical {
                    "drop" => (&mut spec.drop, 0.05, 1.0, "0..=1"),
                    "dup" => (&mut spec.dup, 0.01, 1.0, "0..=1"),
                    "reorder" => (&mut spec.reorder, 0.05, 1.0, "0..=1"),
                    "reorder-max" => (
                        &mut spec.reorder_max_us,
                        DEFAULT_REORDER_MAX_US,
                        MAX_US,
                        "0..=1000000 us",
                    ),
                    "corrupt" => (&mut spec.corrupt, 0.01, 1.0, "0..=1"),
                    "linkflap" => (&mut spec.linkflap, 0.001, 1.0, "0..=1"),
                    "flap-down" => (
                        &mut spec.flap_down_us,
                        DEFAULT_FLAP_DOWN_US,
                        MAX_US,
                        "0..=1000000 us",
                    ),
                    "port-down" => (&mut spec.port_down, 0.0005, 1.0, "0..=1"),
                    "port-down-time" => (
                        &mut spec.port_down_us,
                        DEFAULT_PORT_DOWN_US,
                        MAX_US,
                        "0..=1000000 us",
                    ),
                    "eq_full" => (&mut spec.eq_full, 0.01, 1.0, "0..=1"),
                    "le_exhaust" => (&mut spec.le_exhaust, 0.01, 1.0, "0..=1"),
                    "atu_miss" => (&mut spec.atu_miss, 0.001, 1.0, "0..=1"),
                    "ct_delay" => (&mut spec.ct_delay, 0.05, 1.0, "0..=1"),
                    "ct-delay-time" => (
                        &mut spec.ct_delay_us,
                        DEFAULT_CT_DELAY_US,
                        MAX_US,
                        "0..=1000000 us",
                    ),
                    "slow_target" => (&mut spec.slow_target, 0.001, 1.0, "0..=1"),
                    "slow-target-time" => (
                        &mut spec.slow_target_us,
                        DEFAULT_SLOW_TARGET_US,
                        MAX_US,
                        "0..=1000000 us",
                    ),
                    "gni_cq_overrun" => (&mut spec.cq_overrun, 0.01, 1.0, "0..=1"),
                    "smsg_starve" => (&mut spec.smsg_starve, 0.01, 1.0, "0..=1"),
                    "smsg-starve-time" => (
                        &mut spec.smsg_starve_us,
                        DEFAULT_SMSG_STARVE_US,
                        MAX_US,
                        "0..=1000000 us",
                    ),
                    "pin_fail" => (&mut spec.pin_fail, 0.05, 1.0, "0..=1"),
                    other => return Err(FaultSpecError::Unknown(other.into())),
                };
            if seen.contains(&canonical) {
                return Err(FaultSpecError::Twice(canonical.into()));
            }
            seen.push(canonical);
            let v = match value {
                None => default,
                Some(v) => v.parse::<f64>().map_err(|_| FaultSpecError::NotANumber {
                    site: canonical.into(),
                    value: v.into(),
                })?,
            };
            if !(0.0..=range_max).contains(&v) {
                return Err(FaultSpecError::OutOfRange {
                    site: canonical.into(),
                    value: v,
                    range,
                });
            }
            *slot = v;
        }
        Ok(spec)
    }

    /// Refuse the sites of the other NIC family (and their times, when set): a job on
    /// `nic` would run as if they were not given and report success without them.
    pub fn check_nic(&self, nic: Nic) -> Result<(), FaultSpecError> {
        let cassini = [
            ("eq_full", self.eq_full > 0.0),
            ("le_exhaust", self.le_exhaust > 0.0),
            ("atu_miss", self.atu_miss > 0.0),
            ("ct_delay", self.ct_delay > 0.0),
            ("ct-delay-time", self.ct_delay_us != DEFAULT_CT_DELAY_US),
        ];
        let gemini = [
            ("gni_cq_overrun", self.cq_overrun > 0.0),
            ("smsg_starve", self.smsg_starve > 0.0),
            (
                "smsg-starve-time",
                self.smsg_starve_us != DEFAULT_SMSG_STARVE_US,
            ),
        ];
        let (foreign, nic, other, own): (&[(&str, bool)], _, _, _) = match nic {
            Nic::Cassini => (
                &gemini,
                "Cassini",
                "Gemini",
                "eq_full, le_exhaust, atu_miss, ct_delay",
            ),
            Nic::Gemini => (&cassini, "Gemini", "Cassini", "gni_cq_overrun, smsg_starve"),
        };
        let sites: Vec<String> = foreign
            .iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| name.to_string())
            .collect();
        if sites.is_empty() {
            return Ok(());
        }
        Err(FaultSpecError::NotOnThisNic {
            sites,
            nic,
            other,
            own,
        })
    }

    /// The fabric's fault configuration.
    pub fn config(&self) -> FaultConfig {
        let ps = |us: f64| SimDuration((us * 1e6).round() as u64);
        FaultConfig {
            drop: self.drop,
            duplicate: self.dup,
            reorder: self.reorder,
            reorder_max_delay: ps(self.reorder_max_us),
            corrupt: self.corrupt,
            link_flap: self.linkflap,
            link_flap_down: ps(self.flap_down_us),
            port_down: self.port_down,
            port_down_time: ps(self.port_down_us),
        }
    }

    /// The NIC models' fault profile.
    pub fn nic(&self) -> NicFaults {
        let ps = |us: f64| SimDuration((us * 1e6).round() as u64);
        NicFaults {
            eq_full: self.eq_full,
            ct_delay: self.ct_delay,
            ct_delay_time: ps(self.ct_delay_us),
            atu_miss: self.atu_miss,
            le_exhaust: self.le_exhaust,
            slow_target: self.slow_target,
            slow_target_time: ps(self.slow_target_us),
            cq_overrun: self.cq_overrun,
            smsg_starve: self.smsg_starve,
            smsg_starve_time: ps(self.smsg_starve_us),
        }
    }

    /// The drivers' fault profile, drawing from `seed`.
    pub fn driver(&self, seed: u64) -> DriverFaults {
        DriverFaults::new(self.pin_fail, seed)
    }

    /// Whether any site can fire.
    pub fn any(&self) -> bool {
        self.config().any() || self.nic().any() || self.pin_fail > 0.0
    }

    /// A `--faults` string that parses back to this spec.
    pub fn to_arg(&self) -> String {
        let mut parts = Vec::new();
        let mut p = |name: &str, v: f64| {
            if v > 0.0 {
                parts.push(format!("{name}={v}"));
            }
        };
        p("drop", self.drop);
        p("dup", self.dup);
        p("reorder", self.reorder);
        p("corrupt", self.corrupt);
        p("linkflap", self.linkflap);
        p("port-down", self.port_down);
        p("eq_full", self.eq_full);
        p("le_exhaust", self.le_exhaust);
        p("atu_miss", self.atu_miss);
        p("ct_delay", self.ct_delay);
        p("slow_target", self.slow_target);
        p("gni_cq_overrun", self.cq_overrun);
        p("smsg_starve", self.smsg_starve);
        p("pin_fail", self.pin_fail);
        for (name, v, default) in [
            ("reorder-max", self.reorder_max_us, DEFAULT_REORDER_MAX_US),
            ("flap-down", self.flap_down_us, DEFAULT_FLAP_DOWN_US),
            ("port-down-time", self.port_down_us, DEFAULT_PORT_DOWN_US),
            ("ct-delay-time", self.ct_delay_us, DEFAULT_CT_DELAY_US),
            (
                "slow-target-time",
                self.slow_target_us,
                DEFAULT_SLOW_TARGET_US,
            ),
            (
                "smsg-starve-time",
                self.smsg_starve_us,
                DEFAULT_SMSG_STARVE_US,
            ),
        ] {
            if v != default {
                parts.push(format!("{name}={v}"));
            }
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(",")
        }
    }
}

impl std::str::FromStr for FaultSpec {
    type Err = FaultSpecError;
    fn from_str(s: &str) -> Result<Self, FaultSpecError> {
        FaultSpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sites_of_the_other_nic_are_refused() {
        let on = |spec: &str, nic| FaultSpec::parse(spec).unwrap().check_nic(nic);
        assert_eq!(on("drop,slow_target,pin_fail", Nic::Gemini), Ok(()));
        assert_eq!(on("eq_full,ct_delay,ct-delay-time=9", Nic::Cassini), Ok(()));
        assert_eq!(on("gni_cq_overrun,smsg_starve", Nic::Gemini), Ok(()));
        let e = on("drop,eq_full=1,atu_miss", Nic::Gemini).unwrap_err();
        assert_eq!(
            e.to_string(),
            "fault eq_full, atu_miss are Cassini's: an emulated Gemini has no such site \
             (Gemini's own: gni_cq_overrun, smsg_starve)"
        );
        let e = on("cq_overrun", Nic::Cassini).unwrap_err().to_string();
        assert!(e.starts_with("fault gni_cq_overrun is Gemini's"), "{e}");
        assert!(on("smsg-starve-time=3", Nic::Cassini).is_err());
    }

    #[test]
    fn defaults_values_and_round_trip() {
        let s = FaultSpec::parse("drop=0.05,reorder,corrupt=0.01,linkflap").unwrap();
        assert_eq!(s.drop, 0.05);
        assert_eq!(s.reorder, 0.05);
        assert_eq!(s.corrupt, 0.01);
        assert_eq!(s.linkflap, 0.001);
        assert_eq!(s.dup, 0.0);
        let c = s.config();
        assert_eq!(c.reorder_max_delay, SimDuration::from_us(2));
        assert_eq!(c.link_flap_down, SimDuration::from_us(20));
        assert!(c.any());
        assert_eq!(FaultSpec::parse(&s.to_arg()).unwrap(), s);
        let t =
            FaultSpec::parse("duplicate=0.2, flap-down=7.5 ,linkflap=0.01,reorder-max=3").unwrap();
        assert_eq!((t.dup, t.flap_down_us, t.reorder_max_us), (0.2, 7.5, 3.0));
        assert_eq!(FaultSpec::parse(&t.to_arg()).unwrap(), t);
        assert_eq!(FaultSpec::parse("none").unwrap(), FaultSpec::none());
        assert!(!FaultSpec::none().any());
        assert_eq!(FaultSpec::none().to_arg(), "none");
        // The driver site.
        let d = FaultSpec::parse("pin_fail").unwrap();
        assert_eq!(d.pin_fail, 0.05);
        assert!(d.any() && !d.config().any() && !d.nic().any());
        assert_eq!(d.to_arg(), "pin_fail=0.05");
        assert_eq!(d.driver(9), platform::DriverFaults::new(0.05, 9));
        // NIC sites: defaults, aliases, canonical form, and the profile they make.
        let n = FaultSpec::parse(
            "eq_full,le_exhaust=0.02,atu_miss,ct_delay,slow_target,port_down,cq_overrun=0.1,smsg_starve,smsg-starve-time=7",
        )
        .unwrap();
        assert_eq!((n.eq_full, n.le_exhaust, n.atu_miss), (0.01, 0.02, 0.001));
        assert_eq!(
            (n.port_down, n.cq_overrun, n.smsg_starve_us),
            (0.0005, 0.1, 7.0)
        );
        assert_eq!(FaultSpec::parse(&n.to_arg()).unwrap(), n);
        assert!(n.to_arg().contains("gni_cq_overrun=0.1"));
        let nic = n.nic();
        assert!(nic.any() && n.any());
        assert_eq!(nic.smsg_starve_time, SimDuration::from_us(7));
        assert_eq!(nic.slow_target_time, SimDuration::from_us(10));
        assert_eq!(n.config().port_down_time, SimDuration::from_us(50));
        assert!(!FaultSpec::none().nic().any());
        let only_nic = FaultSpec::parse("slow_target").unwrap();
        assert!(only_nic.any() && !only_nic.config().any());
    }

    #[test]
    fn bad_strings_are_clear_errors() {
        let e = |s: &str| FaultSpec::parse(s).unwrap_err();
        assert_eq!(e("drip=0.1"), FaultSpecError::Unknown("drip".into()));
        assert!(matches!(e("drop=abc"), FaultSpecError::NotANumber { .. }));
        assert!(matches!(e("drop=1.5"), FaultSpecError::OutOfRange { .. }));
        assert!(matches!(e("drop=-0.1"), FaultSpecError::OutOfRange { .. }));
        assert!(matches!(e("drop=NaN"), FaultSpecError::OutOfRange { .. }));
        assert!(matches!(
            e("flap-down=1e9"),
            FaultSpecError::OutOfRange { .. }
        ));
        assert_eq!(e("drop,drop=0.2"), FaultSpecError::Twice("drop".into()));
        assert_eq!(e("dup,duplicate"), FaultSpecError::Twice("dup".into()));
        assert!(matches!(e(""), FaultSpecError::Empty(_)));
        assert!(matches!(e("drop,,corrupt"), FaultSpecError::Empty(_)));
        assert_eq!(e("none,drop"), FaultSpecError::NoneWithOthers);
        assert_eq!(e("none=1"), FaultSpecError::NoneWithValue);
        // The messages name what was wrong.
        assert!(e("drip").to_string().contains("drip"));
        assert!(e("corrupt=2").to_string().contains("corrupt"));
    }
}
