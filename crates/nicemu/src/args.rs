//! The value parsers of the subcommands' options, one per kind of value, so that every option
//! of a kind reads its value the same way and refuses the same bad values: a size in bytes
//! (`64K`, `4M`, `1G`: the grammar of the `MPICH_*` / `FI_CXI_*` size knobs,
//! [`transport::env::parse_size`]), a size range, a duration in seconds (`-D`) and a pause in
//! microseconds (`--latency-gap`).

use std::time::Duration;

use clap::ValueEnum;

/// The longest `-D` a tool takes: a day per size.
pub const MAX_SECONDS: u64 = 86_400;
/// The longest pause between two iterations: one second.
pub const MAX_GAP_US: u64 = 1_000_000;

/// A size in bytes: a decimal number, optionally followed by `K`, `M` or `G` (powers of
/// 1024).
pub fn size(s: &str) -> Result<u64, String> {
    transport::env::parse_size(s)
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| format!("bad size '{s}' (bytes, optionally with K, M or G)"))
}

/// A size that must be at least one byte.
pub fn positive_size(s: &str) -> Result<u64, String> {
    match size(s)? {
        0 => Err(format!("bad size '{s}' (at least 1 byte)")),
        v => Ok(v),
    }
}

/// A size in bytes that fits the host's address space.
pub fn size_usize(s: &str) -> Result<usize, String> {
    size(s).and_then(|v| usize::try_from(v).map_err(|_| format!("size '{s}' is too large")))
}

/// A count that must be at least one (iterations, a window).
pub fn count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The NIC tools' `-s MIN[:MAX]`: `8` is 8:8; a DMA length is 32 bits wide, so sizes stay
/// below 4 GiB.
pub fn tool_size_range(s: &str) -> Result<(u64, u64), String> {
    let (min, max) = match s.split_once(':') {
        Some((a, b)) => (size(a)?, size(b)?),
        None => {
            let v = size(s)?;
            (v, v)
        }
    };
    if min == 0 || max < min || max > u64::from(u32::MAX) {
        return Err(format!("size range '{s}' must be 1 <= MIN <= MAX < 4 GiB"));
    }
    Ok((min, max))
}

/// OSU's `-m [MIN:]MAX`: `1024` is 1:1024.
pub fn osu_size_range(s: &str) -> Result<(usize, usize), String> {
    let (lo, hi) = match s.split_once(':') {
        Some((a, b)) => (size_usize(a)?, size_usize(b)?),
        None => (1, size_usize(s)?),
    };
    if lo == 0 || lo > hi {
        return Err(format!("bad size range '{s}' (1 <= min <= max)"));
    }
    Ok((lo, hi))
}

/// A duration given in `unit`s (a decimal number, fractions allowed when `fractions`), at
/// least one microsecond (or zero, when `zero` is allowed) and at most `max` units.
fn duration(
    s: &str,
    unit: (&str, f64),
    fractions: bool,
    zero: bool,
    max: u64,
) -> Result<Duration, String> {
    let (name, secs_per_unit) = unit;
    let bad = |why: String| format!("bad duration '{s}': {why}");
    let v: f64 = if fractions {
        s.trim()
            .parse()
            .map_err(|_| bad(format!("expected {name}")))?
    } else {
        let n: u64 = s
            .trim()
            .parse()
            .map_err(|_| bad(format!("expected a whole number of {name}")))?;
        n as f64
    };
    if !v.is_finite() || v < 0.0 {
        return Err(bad(format!("expected {name}")));
    }
    if v > max as f64 {
        return Err(bad(format!("at most {max} {name}")));
    }
    let d = Duration::try_from_secs_f64(v * secs_per_unit).map_err(|e| bad(e.to_string()))?;
    if d.is_zero() && zero {
        return Ok(d);
    }
    if d < Duration::from_micros(1) {
        return Err(bad("shorter than a microsecond".into()));
    }
    Ok(d)
}

/// `-D SEC`: how long each size runs, in seconds (fractions allowed), from a microsecond to
/// [`MAX_SECONDS`].
pub fn seconds(s: &str) -> Result<Duration, String> {
    duration(s, ("seconds", 1.0), true, false, MAX_SECONDS)
}

/// `--latency-gap USEC`: the pause between iterations, whole microseconds, at most
/// [`MAX_GAP_US`] (as the HPE tools, a whole number of microseconds).
pub fn gap_micros(s: &str) -> Result<Duration, String> {
    duration(s, ("microseconds", 1e-6), false, true, MAX_GAP_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(size("64K"), Ok(65536));
        assert_eq!(size("4m"), Ok(4 << 20));
        assert_eq!(size("1G"), Ok(1 << 30));
        assert_eq!(size("17"), Ok(17));
        for bad in ["", "K", "x", "-1", "1.5K", "99999999999999999999G"] {
            assert!(size(bad).is_err(), "{bad:?}");
        }
        assert!(positive_size("0").is_err());
    }

    #[test]
    fn size_ranges() {
        assert_eq!(tool_size_range("8"), Ok((8, 8)));
        assert_eq!(tool_size_range("1:4M"), Ok((1, 4 << 20)));
        assert_eq!(tool_size_range("2k:64K"), Ok((2048, 65536)));
        for bad in ["0", "16:8", "x", "4G", "1:"] {
            assert!(tool_size_range(bad).is_err(), "{bad:?}");
        }
        assert_eq!(osu_size_range("1024"), Ok((1, 1024)));
        assert_eq!(osu_size_range("8:64K"), Ok((8, 65536)));
        assert!(osu_size_range("0:8").is_err());
    }

    #[test]
    fn durations_are_bounded_both_ways() {
        assert_eq!(seconds("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(seconds("2"), Ok(Duration::from_secs(2)));
        for bad in ["0", "-1", "1e300", "1e-300", "inf", "NaN", "x", "86401"] {
            assert!(seconds(bad).is_err(), "{bad:?}");
        }
        assert_eq!(gap_micros("0"), Ok(Duration::ZERO));
        assert_eq!(gap_micros("250"), Ok(Duration::from_micros(250)));
        for bad in ["18446744073709551615", "1000001", "1.5", "-3", "x"] {
            assert!(gap_micros(bad).is_err(), "{bad:?}");
        }
    }
}

/// The NIC family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NicArg {
    /// HPE Slingshot-11 Cassini (cxi transport).
    Cassini,
    /// Cray Gemini (gni transport).
    Gemini,
}

/// The engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// Real time, ranks as threads.
    Threaded,
    /// Virtual time, seeded.
    Deterministic,
}
