//! `nicemu job`: an MPI job whose ranks run as coroutines on the deterministic engine. Two
//! runs with one seed, in two processes, print the same digest.

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

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in {out}"))
}

#[test]
fn the_same_seed_prints_the_same_digest_in_two_processes() {
    for nic in ["cassini", "gemini"] {
        let args = ["job", "--nic", nic, "--ranks", "6", "--seed", "42"];
        let (ok, a, err) = nicemu(&args);
        assert!(ok, "{nic}: {err}");
        let (ok, b, err) = nicemu(&args);
        assert!(ok, "{nic}: {err}");
        assert!(a.contains("correct on all 6 ranks"), "{a}");
        assert!(line(&a, "peak RSS: ").ends_with("MiB"), "{a}");
        let digest = line(&a, "digest: ");
        assert_eq!(digest.len(), "digest: ".len() + 16, "{a}");
        assert_eq!(digest, line(&b, "digest: "), "{nic}: {a}\n{b}");
        assert_eq!(line(&a, "virtual time: "), line(&b, "virtual time: "));
    }
}

#[test]
fn the_threaded_engine_runs_the_same_job() {
    let (ok, out, err) = nicemu(&[
        "job", "--nic", "gemini", "--ranks", "3", "--engine", "threaded",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("correct on all 3 ranks"), "{out}");
    assert!(out.contains("digest: none (threaded engine)"), "{out}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let (ok, _, err) = nicemu(&["job", "--nic", "cassini", "--ranks", "0"]);
    assert!(!ok);
    assert!(err.contains("--ranks must be between 1 and"), "{err}");
    let (ok, _, err) = nicemu(&["job", "--nic", "cassini", "--ranks", "many"]);
    assert!(!ok);
    assert!(err.contains("--ranks"), "{err}");
    for seed in ["--seed=-1", "--seed=lots"] {
        let (ok, _, err) = nicemu(&["job", "--nic", "gemini", "--ranks", "2", seed]);
        assert!(!ok);
        assert!(
            err.contains("invalid value") && err.contains("--seed"),
            "{err}"
        );
    }
    let (ok, _, err) = nicemu(&["job", "--nic", "myrinet", "--ranks", "2"]);
    assert!(!ok);
    assert!(err.contains("--nic"), "{err}");
}
