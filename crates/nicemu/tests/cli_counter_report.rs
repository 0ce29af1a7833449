//! `MPICH_OFI_CXI_COUNTER_REPORT` at MPI finalize on the cxi transport: per-rank counter
//! lines from level 2, the network summary line, and a clear error for a bad level.

use std::process::Command;

fn job(level: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nicemu"));
    cmd.args(["job", "--nic", "cassini", "--ranks", "3"]);
    match level {
        Some(l) => cmd.env("MPICH_OFI_CXI_COUNTER_REPORT", l),
        None => cmd.env_remove("MPICH_OFI_CXI_COUNTER_REPORT"),
    };
    let out = cmd.output().expect("run nicemu");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn counter(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn level_two_prints_every_rank_s_counters_and_the_summary() {
    let (ok, _, err) = job(Some("2"));
    assert!(ok, "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("cxi counters: rank "))
        .collect();
    assert_eq!(lines.len(), 3, "{err}");
    for r in 0..3 {
        let l = lines
            .iter()
            .find(|l| l.starts_with(&format!("cxi counters: rank {r} (cxi0):")))
            .unwrap_or_else(|| panic!("no line of rank {r}: {err}"));
        // The job's collectives went over the fabric: packets out and in, no timeouts on a
        // fault-free fabric, and the extended set is not shown at level 2.
        assert!(counter(l, "tx_ok_opt") > 0, "{l}");
        assert!(counter(l, "rx_ok_opt") > 0, "{l}");
        assert_eq!(counter(l, "sct_timeouts") + counter(l, "spt_timeouts"), 0);
        assert!(!l.contains("put_cmds="), "{l}");
    }
    let summary: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("MPICH Slingshot Network Summary: "))
        .collect();
    assert_eq!(
        summary,
        ["MPICH Slingshot Network Summary: 0 network timeouts (3 NICs reporting)"]
    );
}

#[test]
fn higher_levels_add_the_extended_set_and_lower_ones_stay_quiet() {
    let (ok, _, err) = job(Some("4"));
    assert!(ok, "{err}");
    let l = err
        .lines()
        .find(|l| l.starts_with("cxi counters: rank 1 "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(counter(l, "put_cmds") > 0, "{l}");
    // Default (1) and 0: no timeouts, so nothing at all.
    for level in [None, Some("0"), Some("1")] {
        let (ok, _, err) = job(level);
        assert!(ok, "{err}");
        assert!(!err.contains("cxi counters:"), "{level:?}: {err}");
        assert!(!err.contains("Network Summary"), "{level:?}: {err}");
    }
}

#[test]
fn a_bad_level_is_a_clear_error() {
    for bad in ["6", "verbose", "-1"] {
        let (ok, _, err) = job(Some(bad));
        assert!(!ok, "{bad} was accepted");
        assert!(
            err.contains(&format!("MPICH_OFI_CXI_COUNTER_REPORT=\"{bad}\"")),
            "{err}"
        );
        assert!(
            err.contains("must be an integer from 0 (off) to 5"),
            "{err}"
        );
    }
}
