//! Environment knobs (`FI_CXI_*`, `MPICH_GNI_*`, `MPICH_OFI_*`, ...), read once at init. A job
//! started in-process gets its own set instead of the process environment, so tests can run
//! jobs with different settings side by side.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A set of environment variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// An empty environment (every knob at its default).
    pub fn new() -> Self {
        Self::default()
    }

    /// The variables of this process whose names start with one of the knob prefixes
    /// (`FI_`, `MPICH_`, `NICEMU_`, `PMI_`).
    pub fn from_process() -> Self {
        let vars = std::env::vars()
            .filter(|(k, _)| {
                ["FI_", "MPICH_", "NICEMU_", "PMI_"]
                    .iter()
                    .any(|p| k.starts_with(p))
            })
            .collect();
        Env { vars }
    }

    /// This set with `var=value` added (or replaced).
    pub fn with(mut self, var: &str, value: &str) -> Self {
        self.vars.insert(var.to_string(), value.to_string());
        self
    }

    /// Set `var=value`.
    pub fn set(&mut self, var: &str, value: &str) {
        self.vars.insert(var.to_string(), value.to_string());
    }

    /// The raw value of `var`.
    pub fn get(&self, var: &str) -> Option<&str> {
        self.vars.get(var).map(String::as_str)
    }

    /// `var` parsed as a `T`, `default` when unset; a value that does not parse is an
    /// [`Error::Config`] naming the variable.
    pub fn parse<T: FromStr>(&self, var: &str, default: T) -> Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(var) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|e: T::Err| Error::Config {
                var: var.to_string(),
                value: v.to_string(),
                reason: e.to_string(),
            }),
        }
    }

    /// A size in bytes: a decimal number with an optional `K`, `M` or `G` suffix (powers of
    /// 1024), as the Cray MPICH knobs accept.
    pub fn size(&self, var: &str, default: usize) -> Result<usize> {
        let Some(v) = self.get(var) else {
            return Ok(default);
        };
        parse_size(v).ok_or_else(|| Error::Config {
            var: var.to_string(),
            value: v.to_string(),
            reason: "expected a size in bytes (a number, optionally with K, M or G)".into(),
        })
    }

    /// One of `choices` (compared without case), `default` when unset.
    pub fn choice<'a>(&self, var: &str, choices: &[&'a str], default: &'a str) -> Result<&'a str> {
        let Some(v) = self.get(var) else {
            return Ok(default);
        };
        choices
            .iter()
            .find(|c| c.eq_ignore_ascii_case(v.trim()))
            .copied()
            .ok_or_else(|| Error::Config {
                var: var.to_string(),
                value: v.to_string(),
                reason: format!("expected one of {}", choices.join(", ")),
            })
    }

    /// A boolean: `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`, `enabled`/`disabled`.
    pub fn flag(&self, var: &str, default: bool) -> Result<bool> {
        let Some(v) = self.get(var) else {
            return Ok(default);
        };
        match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" | "enabled" => Ok(true),
            "0" | "false" | "no" | "off" | "disabled" => Ok(false),
            _ => Err(Error::Config {
                var: var.to_string(),
                value: v.to_string(),
                reason: "expected 1/0, true/false, yes/no, on/off or enabled/disabled".into(),
            }),
        }
    }
}

/// The gni transport's knobs: Cray MPICH's `MPICH_GNI_*` variables (intro_mpi(3)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GniKnobs {
    /// `MPICH_GNI_MAX_VSHORT_MSG_SIZE`: the largest payload sent inline in an SMSG message
    /// (E0); default by job size, [`default_vshort`].
    pub vshort: usize,
    /// `MPICH_GNI_MAX_EAGER_MSG_SIZE` (default 8192): the largest message sent eagerly
    /// through a bounce buffer (E1); above it, rendezvous.
    pub eager: usize,
    /// `MPICH_GNI_RDMA_THRESHOLD` (default 2048): transfers of at least this many bytes go
    /// through the BTE, smaller ones through FMA.
    pub rdma_threshold: usize,
    /// `MPICH_GNI_NDREG_MAXSIZE` (default 4 MiB): the largest GET rendezvous (R0); longer
    /// messages are pipelined PUTs (R1) in chunks of this size.
    pub ndreg_maxsize: usize,
    /// `MPICH_GNI_DYNAMIC_CONN` (default enabled): connect to a peer on first traffic with
    /// it (datagram exchange) instead of to every peer at init.
    pub dynamic_conn: bool,
}

/// The default of `MPICH_GNI_MAX_VSHORT_MSG_SIZE` for a job of `ranks` ranks. Cray makes it
/// shrink as the job grows, because every connection holds a mailbox of `credits × (vshort +
/// header)` bytes on both sides. Cray's table is not in our sources, so the values are ours:
/// 1024 up to 1024 ranks (where E0 and E1 cost the same on the emulated Gemini, see
/// docs/mpi.md), 768 up to 16384, and 512 above (sst-macro's model of Cray MPICH).
pub fn default_vshort(ranks: u32) -> usize {
    match ranks {
        0..=1024 => 1024,
        1025..=16384 => 768,
        _ => 512,
    }
}

impl Env {
    /// The gni knobs for a job of `ranks` ranks; a value that does not parse or is out of
    /// range is an [`Error::Config`] naming the variable.
    pub fn gni_knobs(&self, ranks: u32) -> Result<GniKnobs> {
        let ranged = |var: &str, default: usize, lo: usize, hi: usize| -> Result<usize> {
            let v = self.size(var, default)?;
            if !(lo..=hi).contains(&v) {
                return Err(Error::Config {
                    var: var.to_string(),
                    value: self.get(var).unwrap_or_default().to_string(),
                    reason: format!("must be between {lo} and {hi} bytes"),
                });
            }
            Ok(v)
        };
        Ok(GniKnobs {
            vshort: ranged(
                "MPICH_GNI_MAX_VSHORT_MSG_SIZE",
                default_vshort(ranks),
                64,
                10_000,
            )?,
            eager: ranged("MPICH_GNI_MAX_EAGER_MSG_SIZE", 8192, 0, 1 << 20)?,
            rdma_threshold: ranged("MPICH_GNI_RDMA_THRESHOLD", 2048, 0, 1 << 20)?,
            ndreg_maxsize: ranged("MPICH_GNI_NDREG_MAXSIZE", 4 << 20, 4096, 1 << 30)?,
            dynamic_conn: self.flag("MPICH_GNI_DYNAMIC_CONN", true)?,
        })
    }
}

/// `1234`, `64K`, `8M`, `1G` (powers of 1024), or `None`.
pub fn parse_size(v: &str) -> Option<usize> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1usize << 10),
        'm' | 'M' => (&v[..v.len() - 1], 1 << 20),
        'g' | 'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// Writes `line` and its newline to standard error in one write. Ranks of a job share the
/// launcher's stderr pipe; `eprintln!` writes the newline separately, so another rank's line
/// could land between a line and its newline. Report lines (well under `PIPE_BUF`) stay whole.
pub fn eprint_line(line: &str) {
    use std::io::Write;
    let whole = format!("{line}\n");
    // Nothing sensible is left to do when standard error itself cannot be written.
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_bad_values() {
        let env = Env::new()
            .with("A", "64K")
            .with("B", "oops")
            .with("C", "hybrid");
        assert_eq!(env.size("A", 0).unwrap(), 65536);
        assert_eq!(env.size("Z", 7).unwrap(), 7);
        let e = env.size("B", 0).unwrap_err().to_string();
        assert!(e.starts_with("B=\"oops\""), "{e}");
        assert_eq!(
            env.choice("C", &["hardware", "software", "hybrid"], "hardware")
                .unwrap(),
            "hybrid"
        );
        assert!(env.choice("B", &["x"], "x").is_err());
        assert!(env.flag("B", false).is_err());
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("G"), None);
    }

    #[test]
    fn gni_knobs_defaults_ranges_and_errors() {
        let k = Env::new().gni_knobs(2).unwrap();
        assert_eq!(
            (k.vshort, k.eager, k.rdma_threshold, k.ndreg_maxsize),
            (1024, 8192, 2048, 4 << 20)
        );
        assert!(k.dynamic_conn);
        assert_eq!(Env::new().gni_knobs(1024).unwrap().vshort, 1024);
        assert_eq!(Env::new().gni_knobs(1025).unwrap().vshort, 768);
        assert_eq!(Env::new().gni_knobs(16_384).unwrap().vshort, 768);
        assert_eq!(Env::new().gni_knobs(16_385).unwrap().vshort, 512);
        let k = Env::new()
            .with("MPICH_GNI_MAX_EAGER_MSG_SIZE", "32K")
            .with("MPICH_GNI_DYNAMIC_CONN", "disabled")
            .gni_knobs(2)
            .unwrap();
        assert_eq!(k.eager, 32 << 10);
        assert!(!k.dynamic_conn);
        for (var, value) in [
            ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "63"),
            ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "2G"),
            ("MPICH_GNI_RDMA_THRESHOLD", "x"),
            ("MPICH_GNI_NDREG_MAXSIZE", "1K"),
            ("MPICH_GNI_DYNAMIC_CONN", "sometimes"),
        ] {
            let e = Env::new().with(var, value).gni_knobs(2).unwrap_err();
            assert!(e.to_string().contains(var), "{e}");
        }
    }
}
