//! `nicemu run -n N -- PROGRAM` starts a multi-process job with a PMI-1 server; here the
//! program is nicemu's own hidden PMI probe. Jobs run with `--timeout 60`, so a broken
//! launcher fails the test instead of hanging it.

use std::process::{Command, Output};

const NICEMU: &str = env!("CARGO_BIN_EXE_nicemu");

fn run(args: &[&str]) -> Output {
    Command::new(NICEMU)
        .args(["run", "--timeout", "60"])
        .args(args)
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .output()
        .expect("run nicemu")
}

#[test]
fn four_ranks_exchange_values_through_pmi() {
    let out = run(&["-n", "4", "--nic", "cassini", "--", NICEMU, "pmi-probe"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for r in 0..4 {
        let line = format!("pmi-probe: rank {r} of 4 (local {r} of 4): checked 4 cards");
        assert_eq!(text.matches(&line).count(), 1, "{text}");
    }
}

#[test]
fn a_failing_rank_fails_the_job_with_a_message() {
    let out = run(&["-n", "3", "--", NICEMU, "pmi-probe", "--fail", "1:exit"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nicemu run: error: rank 1 (") && err.contains("ended with exit status: 3"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("checked"));
}

#[test]
fn bad_host_lists_and_launchers_are_clear_errors() {
    for (args, expect) in [
        (
            &["--hosts", "a,,b"][..],
            "--hosts \"a,,b\": an empty host name",
        ),
        (
            &["--hosts", "a:0"][..],
            "the number of slots must be between 1 and",
        ),
        (
            &["--hosts", "a", "--launcher", "rsh"][..],
            "--launcher rsh: expected ssh or exec",
        ),
        (
            &["--hosts", "a", "--launcher", "exec"][..],
            "--launcher exec needs --launcher-exec",
        ),
        (
            &["--hosts", "no-such-host.invalid"][..],
            "cannot tell which address ranks on no-such-host.invalid reach this launcher at",
        ),
    ] {
        let mut all = vec!["-n", "2"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", NICEMU, "pmi-probe"]);
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
