//! The host's scheduler is invisible to the emulated NICs (docs/fabric-between-processes.md,
//! "Time"): a job of rank processes survives one of them stopped with SIGSTOP in the middle
//! of 4 MiB transfers, and a rank started long after the others, with every byte checked
//! and no timeout counted; a rank killed with SIGKILL still ends the job with an error
//! naming it.
//!
//! The stop is longer than every timeout a rank process has, several times over, with the
//! knobs that can be shortened shortened: the fabric's dead-peer timeout
//! (`NICEMU_FABRIC_TIMEOUT_MS=1000`), the cxi transport's (`NICEMU_CXI_TIMEOUT=1`, seconds),
//! Cassini's request timeout (1 s) and retransmissions (8 tries within it), Gemini's 100 ms
//! request watchdog. (The MPI layer's 300 s wait limit is not crossed; it reads the same
//! clock as the others.)

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

const NICEMU: &str = env!("CARGO_BIN_EXE_nicemu");

/// How long the stopped rank stays stopped (and how late the late rank starts).
const STOP: Duration = Duration::from_secs(4);

fn clean(cmd: &mut Command) -> &mut Command {
    for v in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "NICEMU_NIC"] {
        cmd.env_remove(v);
    }
    cmd.env("NICEMU_FABRIC_TIMEOUT_MS", "1000")
        .env("NICEMU_CXI_TIMEOUT", "1")
}

/// A job of 4 ranks of `nicemu mpi-check ARGS` under `nicemu run`, its stdout lines
/// arriving on the receiver as they are printed.
fn start(nic: &str, run_args: &[&str], check_args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = clean(&mut Command::new(NICEMU))
        .args(["run", "--timeout", "300", "-n", "4", "--nic", nic])
        .args(run_args)
        .args(["--", NICEMU, "mpi-check"])
        .args(check_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nicemu");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Read lines until one satisfies `f` (the job prints it, or ends first: then panic with
/// what it printed). Returns every line read, the matching one last.
fn until(rx: &Receiver<String>, seen: &mut Vec<String>, f: impl Fn(&str) -> bool) -> String {
    loop {
        match rx.recv() {
            Ok(l) => {
                seen.push(l.clone());
                if f(&l) {
                    return l;
                }
            }
            Err(_) => panic!(
                "the job ended before the expected line:\n{}",
                seen.join("\n")
            ),
        }
    }
}

/// A counter `name N` or `name=N` of a rank's line.
fn counter(line: &str, name: &str) -> Option<u64> {
    let at = line.find(name)?;
    line[at + name.len()..]
        .trim_start_matches(['=', ' '])
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn signal(pid: &str, sig: &str) {
    let st = Command::new("kill")
        .args([sig, pid])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill {sig} {pid}");
}

/// Wait for the job; its status, all its stdout lines and its stderr.
fn finish(
    mut child: Child,
    rx: &Receiver<String>,
    mut seen: Vec<String>,
) -> (bool, String, String) {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    let st = child.wait().expect("wait for nicemu run");
    seen.extend(rx.iter());
    (st.success(), seen.join("\n"), err)
}

/// Every rank checked all its messages, the fabric counted no network timeout and the NIC
/// no request timeout or dead connection (Cassini `sct_timeouts`, Gemini `timeouts=`).
/// Cassini's retransmissions (`spt_timeouts`: a packet sent again after the 1 ms
/// retransmission timeout, recovered by the PCT) are not asserted: between processes whose
/// clocks run apart, a receiver that the host did not schedule acknowledges late for its
/// sender (docs/fabric-between-processes.md, "Time"). Returns each rank's line.
fn all_ok(nic: &str, ok: bool, text: &str, err: &str, messages: usize) -> Vec<String> {
    assert!(ok, "{nic}: the job failed:\n{err}\n{text}");
    (0..4)
        .map(|r| {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("rank {r}/4 ")))
                .unwrap_or_else(|| panic!("{nic}: no line of rank {r}:\n{text}\n{err}"))
                .to_string();
            assert!(
                line.contains(&format!("{messages} messages 0..4194304 B ok"))
                    && line.contains("allreduce of 4096 u64 ok"),
                "{line}"
            );
            assert_eq!(counter(&line, "network timeouts"), Some(0), "{line}");
            for t in ["sct_timeouts", " timeouts="] {
                assert!(
                    counter(&line, t).unwrap_or(0) == 0,
                    "{nic}: the NIC counted {t}: {line}"
                );
            }
            line
        })
        .collect()
}

/// Rank 1 is stopped once the 4 MiB rounds flow, for longer than every timeout, then
/// continued: the job completes, every byte checked, no timeout counted, and the other
/// ranks' clocks stood still meanwhile.
fn a_stopped_rank(nic: &str) {
    const ROUNDS: usize = 12;
    let rounds = ROUNDS.to_string();
    let (child, rx) = start(nic, &[], &["--announce", "--big-rounds", &rounds]);
    let mut seen = Vec::new();
    let line = until(&rx, &mut seen, |l| l.starts_with("rank 1 pid "));
    let pid = line.trim_start_matches("rank 1 pid ").trim().to_string();
    until(&rx, &mut seen, |l| l == "rank 1: round 2 ok");
    signal(&pid, "-STOP");
    std::thread::sleep(STOP);
    signal(&pid, "-CONT");
    let (ok, text, err) = finish(child, &rx, seen);
    let lines = all_ok(nic, ok, &text, &err, 13 + ROUNDS);
    for r in [0, 2] {
        // The neighbours of the stopped rank waited for it with their clocks held.
        let held = counter(&lines[r], "clock held").unwrap_or(0);
        assert!(
            held > 0,
            "{nic}: rank {r} never held its clock: {}",
            lines[r]
        );
    }
}

#[test]
fn a_rank_stopped_mid_transfer_on_cassini_delays_the_job_and_breaks_nothing() {
    a_stopped_rank("cassini");
}

#[test]
fn a_rank_stopped_mid_transfer_on_gemini_delays_the_job_and_breaks_nothing() {
    a_stopped_rank("gemini");
}

/// Rank 1 starts after the others have waited for it longer than every timeout.
fn a_late_rank(nic: &str) {
    let script = format!(
        "if [ \"$PMI_RANK\" = 1 ]; then sleep {}; fi; exec \"$0\" mpi-check",
        STOP.as_secs()
    );
    let out = clean(&mut Command::new(NICEMU))
        .args(["run", "--timeout", "300", "-n", "4", "--nic", nic])
        .args(["--", "sh", "-c", &script, NICEMU])
        .output()
        .expect("run nicemu");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    all_ok(nic, out.status.success(), &text, &err, 13);
}

#[test]
fn a_rank_started_late_on_cassini_is_waited_for() {
    a_late_rank("cassini");
}

#[test]
fn a_rank_started_late_on_gemini_is_waited_for() {
    a_late_rank("gemini");
}

/// Rank 2 is killed (SIGKILL) in the middle of the 4 MiB rounds: the job fails, and the
/// ranks that survive report what the hardware and the fabric saw (the peer gone, its
/// pid exited, or the job aborted because of it), by themselves: the launcher's grace is
/// longer than the test waits.
fn a_killed_rank(nic: &str) {
    let (child, rx) = start(
        nic,
        &["--grace", "250"],
        &["--announce", "--big-rounds", "1000"],
    );
    let mut seen = Vec::new();
    let line = until(&rx, &mut seen, |l| l.starts_with("rank 2 pid "));
    let pid = line.trim_start_matches("rank 2 pid ").trim().to_string();
    until(&rx, &mut seen, |l| l == "rank 2: round 2 ok");
    signal(&pid, "-KILL");
    let (ok, text, err) = finish(child, &rx, seen);
    assert!(!ok, "{nic}: the job survived a killed rank:\n{text}\n{err}");
    assert!(
        !err.contains("timed out") && !err.contains("--timeout"),
        "{nic}: the job ended only at the launcher's timeout:\n{err}"
    );
    assert!(err.contains("rank 2"), "{nic}: {err}");
    for r in [1, 3] {
        // The neighbours ended by themselves, with the reason.
        let mine: Vec<&str> = err
            .lines()
            .filter(|l| l.contains(&format!("rank {r}")))
            .collect();
        assert!(
            mine.iter().any(|l| l.contains("unreachable")
                || l.contains("exited")
                || l.contains("aborted")
                || l.contains("Undeliverable")),
            "{nic}: rank {r} ended without saying why:\n{err}"
        );
    }
}

#[test]
fn a_rank_killed_mid_transfer_on_cassini_ends_the_job_with_the_reason() {
    a_killed_rank("cassini");
}

#[test]
fn a_rank_killed_mid_transfer_on_gemini_ends_the_job_with_the_reason() {
    a_killed_rank("gemini");
}
