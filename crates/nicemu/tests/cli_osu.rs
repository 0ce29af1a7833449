//! `nicemu osu` runs the OSU-format benchmarks as MPI jobs on either NIC.

use std::process::Command;

fn nicemu(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .output()
        .expect("run nicemu");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn latency_and_allreduce_tables_on_both_nics() {
    for nic in ["cassini", "gemini"] {
        let (ok, out, err) = nicemu(&["osu", "latency", "--nic", nic, "-m", "8:64", "-i", "10"]);
        assert!(ok, "{nic}: {err}");
        assert!(out.starts_with("# OSU MPI Latency Test v7.4"), "{out}");
        let rows: Vec<&str> = out
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert_eq!(rows.len(), 4, "{out}");
        assert!(rows[0].starts_with('8'), "{out}");
        let (ok, out, err) = nicemu(&[
            "osu",
            "allreduce",
            "--nic",
            nic,
            "--nodes",
            "3",
            "-m",
            "4:16",
            "-i",
            "5",
        ]);
        assert!(ok, "{nic}: {err}");
        assert!(out.contains("Allreduce Latency Test"), "{out}");
    }
}

#[test]
fn bad_arguments_are_clear_errors() {
    let (ok, _, err) = nicemu(&["osu", "latency", "--nodes", "1"]);
    assert!(!ok);
    assert!(err.contains("--nodes must be between 2 and 65536"), "{err}");
    let (ok, _, err) = nicemu(&["osu", "latency", "-m", "0:8"]);
    assert!(!ok);
    assert!(err.contains("bad size range"), "{err}");
}
