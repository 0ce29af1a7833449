//! MPI across processes: `nicemu mpi-check` as 4 ranks, each process hosting its own emulated
//! NIC, the nodes meeting on the fabric between processes (shared memory on this host).
//! Started by `nicemu run`'s PMI-1 launcher and, when Debian's MPICH is installed, by hydra's
//! `mpiexec`. Messages of 0 B to 4 MiB and an allreduce are checked by the ranks; the test
//! checks every rank said so and that the traffic went through the NICs and the fabric.

use std::path::Path;
use std::process::{Command, Output};

const NICEMU: &str = env!("CARGO_BIN_EXE_nicemu");
const MPIEXEC: &str = "/usr/bin/mpiexec.hydra";

fn clean(cmd: &mut Command) -> &mut Command {
    for v in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NICEMU_NIC"] {
        cmd.env_remove(v);
    }
    cmd
}

fn nicemu_run(nic: &str, extra: &[&str]) -> Output {
    clean(&mut Command::new(NICEMU))
        .args(["run", "--timeout", "120", "-n", "4", "--nic", nic, "--"])
        .args([NICEMU, "mpi-check"])
        .args(extra)
        .output()
        .expect("run nicemu")
}

/// A counter `name=N` (or `name N` after "fabric sent") of one rank's line.
fn counter(line: &str, name: &str) -> u64 {
    let at = line
        .find(name)
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    line[at + name.len()..]
        .trim_start_matches(['=', ' '])
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {name} in {line}"))
}

/// Every rank checked its data and moved it through its NIC and the fabric.
fn check(out: &Output, nic: &str) {
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{nic}: {err}\n{text}");
    let nic_counter = if nic == "cassini" {
        "c_hni_cntrs.tx_ok_opt"
    } else {
        "packets_tx"
    };
    for r in 0..4 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("rank {r}/4 ")))
            .unwrap_or_else(|| panic!("no line of rank {r}:\n{text}\n{err}"));
        assert!(
            line.contains("13 messages 0..4194304 B ok")
                && line.contains("allreduce of 4096 u64 ok"),
            "{line}"
        );
        // Two 4 MiB messages (one out, one in) at least.
        assert!(counter(line, "fabric sent") > 0, "{line}");
        assert!(counter(line, "packets / ") > 4 << 20, "{line}");
        let sent = counter(line, nic_counter);
        assert!(sent > 0, "{line}");
    }
}

/// Names in /dev/shm that look like ours.
fn shm_names() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("nicemu"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn four_processes_on_cassini_under_nicemu_run() {
    check(&nicemu_run("cassini", &[]), "cassini");
}

#[test]
fn four_processes_on_gemini_under_nicemu_run() {
    check(&nicemu_run("gemini", &[]), "gemini");
}

#[test]
fn four_processes_under_hydra_mpiexec() {
    if !Path::new(MPIEXEC).exists() {
        eprintln!("skipped: {MPIEXEC} is absent (Debian's mpich package provides it)");
        return;
    }
    for nic in ["cassini", "gemini"] {
        let out = clean(&mut Command::new(MPIEXEC))
            .args(["-n", "4", NICEMU, "mpi-check"])
            .env("NICEMU_NIC", nic)
            .output()
            .expect("run mpiexec");
        check(&out, nic);
    }
}

#[test]
fn a_rank_that_dies_ends_the_job_with_an_error_and_leaves_no_segment() {
    let before = shm_names();
    let out = nicemu_run("cassini", &["--die-rank", "2", "--max", "65536"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rank 2"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("allreduce of"),
        "a rank finished although rank 2 left"
    );
    assert_eq!(
        shm_names(),
        before,
        "a shared-memory segment was left behind"
    );
}

#[test]
fn without_a_launcher_mpi_check_says_how_to_start_it() {
    let out = clean(&mut Command::new(NICEMU))
        .arg("mpi-check")
        .output()
        .expect("run nicemu");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("nicemu run -n N"), "{err}");
}
