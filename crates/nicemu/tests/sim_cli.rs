//! `nicemu sim` from the command line: a campaign finds a deliberate transport bug and prints
//! replay commands that reproduce it; a run prints its seed, derived options and digest, and
//! the same command prints the same digest; bad `--faults` strings are clear errors.

use std::process::{Command, Output};

fn nicemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("running nicemu")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.trim().strip_prefix(prefix))
}

#[test]
fn a_campaign_finds_the_injected_bug_and_its_replay_command_reproduces_it() {
    let o = nicemu(&[
        "sim",
        "--campaign",
        "4",
        "--seed-base",
        "1",
        "--nic",
        "cassini",
        "--inject-bug",
        "random",
    ]);
    let out = stdout(&o);
    assert!(!o.status.success(), "the campaign passed:\n{out}");
    let failed = line(&out, "FAILED seed ").expect("a failure line");
    let (seed, why) = failed.split_once(": ").expect("seed: why");
    let replay = line(&out, "replay: ").expect("a replay command");
    assert!(replay.contains(&format!("--seed {seed} ")), "{replay}");
    assert!(replay.contains("--inject-bug"), "{replay}");
    // Run the replay command: the same failure.
    let args: Vec<&str> = replay.split_whitespace().skip(1).collect();
    let r = nicemu(&args);
    let rout = stdout(&r);
    assert!(!r.status.success(), "the replay passed:\n{rout}");
    assert_eq!(line(&rout, "FAILED: "), Some(why), "{rout}");
    assert_eq!(line(&rout, "replay: "), Some(replay));
    // Without the bug the same seed passes.
    let fixed: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--inject-bug")
        .collect();
    let f = nicemu(&fixed);
    assert!(f.status.success(), "{}", stdout(&f));
}

#[test]
fn a_run_prints_its_seed_options_and_digest_and_replays() {
    let args = [
        "sim",
        "--seed",
        "5",
        "--nodes",
        "3",
        "--nic",
        "cassini",
        "--faults",
        "drop=0.05,reorder,corrupt=0.01,linkflap",
        "collectives",
    ];
    let a = nicemu(&args);
    let out = stdout(&a);
    assert!(
        a.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert!(
        out.contains("seed 5, 3 nodes, cassini NIC, workload collectives"),
        "{out}"
    );
    assert!(
        line(&out, "derived from the seed: ").is_some_and(|d| d.contains("FI_CXI_RX_MATCH_MODE="))
    );
    assert_eq!(
        line(&out, "faults: "),
        Some("drop=0.05,reorder=0.05,corrupt=0.01,linkflap=0.001")
    );
    let digest = line(&out, "digest: ").expect("a digest");
    assert_eq!(digest.len(), 16);
    let b = nicemu(&args);
    assert_eq!(line(&stdout(&b), "digest: "), Some(digest));
}

#[test]
fn bad_fault_strings_are_clear_errors() {
    for (faults, says) in [
        ("drip=0.1", "unknown fault \"drip\""),
        ("drop=2", "out of range"),
        ("drop=x", "is not a number"),
        ("drop,drop", "given twice"),
        ("none,drop", "cannot be combined"),
    ] {
        let o = nicemu(&["sim", "--faults", faults, "semantics"]);
        assert!(!o.status.success(), "{faults}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{faults}: {err}");
        assert!(!err.contains("panicked"), "{faults}: {err}");
    }
    let o = nicemu(&["sim", "--nic", "gemini", "--inject-bug"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cassini only"));
}
