//! `nicemu spec ...` run as a process: output content and clean failures.

use std::process::{Command, Output};

fn nicemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .output()
        .expect("run nicemu")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn csr_prints_offsets_and_fields() {
    let o = nicemu(&["spec", "cassini", "csr", "C_LPE_CFG_PTL_TABLE"]);
    assert!(o.status.success(), "{o:?}");
    let s = stdout(&o);
    assert!(s.starts_with("c_lpe_cfg_ptl_table\n"), "{s}");
    // CSR-relative and absolute BAR0 offsets (csr_defs.json: 0x981_0000; CSRs at 0x4000_0000).
    assert!(s.contains("CSR offset   0x9810000\n"), "{s}");
    assert!(s.contains("BAR0 offset  0x49810000\n"), "{s}");
    assert!(s.contains("2048 x 32 B"), "{s}");
    assert!(s.contains("block        LPE"), "{s}");
    // eq_handle is bits 16..27, SRW HRO, reset 0; en_sw_hw_st_chng resets to 1.
    let line = |name: &str| {
        s.lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name} in {s}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        line("eq_handle"),
        ["26:16", "11", "SRW", "HRO", "0x0", "eq_handle"]
    );
    assert_eq!(line("en_sw_hw_st_chng")[4], "0x1");
}

#[test]
fn unknown_csr_fails_cleanly_with_suggestions() {
    let o = nicemu(&["spec", "cassini", "csr", "c_lpe_cfg_ptl_tabel"]);
    assert!(!o.status.success());
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown CSR `c_lpe_cfg_ptl_tabel`"), "{err}");
    assert!(err.contains("c_lpe_cfg_ptl_table"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.stdout.is_empty());

    let o = nicemu(&["spec", "cassini", "csr", "qqqqqqqqqqqqqqqqqqqqqq"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown CSR"));
}

#[test]
fn csrs_lists_and_filters() {
    let all = stdout(&nicemu(&["spec", "cassini", "csrs"]));
    assert!(
        all.trim_end().ends_with("1164 CSRs"),
        "{}",
        &all[all.len().saturating_sub(200)..]
    );
    let o = nicemu(&["spec", "cassini", "csrs", "--grep", "PTL_TABLE"]);
    assert!(o.status.success());
    let s = stdout(&o);
    let row = s
        .lines()
        .find(|l| l.ends_with(" c_lpe_cfg_ptl_table"))
        .unwrap_or_else(|| panic!("{s}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["0x9810000", "2048", "32", "LPE", "c_lpe_cfg_ptl_table"]
    );
    assert!(
        s.lines()
            .skip(1)
            .all(|l| l.contains("ptl_table") || l.ends_with(" CSRs")),
        "{s}"
    );
    assert!(!s.contains("c_mb_sts_rev"));
}

#[test]
fn bar0_map() {
    let o = nicemu(&["spec", "cassini", "bar0"]);
    assert!(o.status.success());
    let s = stdout(&o);
    for (base, name) in [
        ("0x0 ", "tx_cq_launch"),
        ("0x4000000 ", "tgt_cq_launch"),
        ("0x8000000 ", "ct_doorbell"),
        ("0x10000000 ", "eq_sw_state"),
        ("0x40000000 ", "csr"),
    ] {
        assert!(
            s.lines()
                .any(|l| l.starts_with(base) && l.split_whitespace().nth(4) == Some(name)),
            "{name} at {base}: {s}"
        );
    }
    assert!(s.contains("PF 2048 MiB, VF 512 MiB"));
    assert!(s.contains("PI_IPD   0x11000000"));
}

#[test]
fn gemini_map() {
    let o = nicemu(&["spec", "gemini", "map"]);
    assert!(o.status.success(), "{o:?}");
    let s = stdout(&o);
    let rows = s.lines().count() - 1;
    assert_eq!(rows, firmware_spec::gemini::map::REGIONS.len());
    for r in firmware_spec::gemini::map::REGIONS {
        assert!(
            s.lines()
                .any(|l| l.starts_with(&format!("{:#x} ", r.base)) && l.contains(r.name)),
            "{}: {s}",
            r.name
        );
    }
}

#[test]
fn bad_usage_is_a_usage_error() {
    let o = nicemu(&["spec", "cassini"]);
    assert!(!o.status.success());
    assert_eq!(o.status.code(), Some(2));
}
