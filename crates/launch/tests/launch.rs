//! Jobs of the PMI probe (`pmi-probe`, which uses only the `pmi` crate's client) started by this
//! crate's launcher (what `nicemu run` runs) and by hydra's `mpiexec`; failing ranks; bad
//! launch variables.
//!
//! No test can hang: launcher jobs run with `--timeout` (JOB_TIMEOUT) and on a thread the
//! test gives up on after TEST_DEADLINE; processes started directly are killed after
//! TEST_DEADLINE.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use launch::cli::RunArgs;
use launch::job::{JobError, Sink};

const PROBE: &str = env!("CARGO_BIN_EXE_pmi-probe");
/// The launcher's own limit on a job (`--timeout`).
const JOB_TIMEOUT: &str = "60";
/// Beyond this, a test calls the job hung and fails.
const TEST_DEADLINE: Duration = Duration::from_secs(120);
const MPIEXEC: &str = "/usr/bin/mpiexec.hydra";

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    Run(RunArgs),
}

struct Outcome {
    result: Result<(), JobError>,
    out: String,
    err: String,
}

/// `nicemu run <argv>`, through the same argument parsing and job code as the CLI.
fn nicemu_run(argv: &[&str]) -> Outcome {
    let mut full = vec!["nicemu", "run"];
    if !argv.contains(&"--timeout") {
        full.extend(["--timeout", JOB_TIMEOUT]);
    }
    full.extend_from_slice(argv);
    let Sub::Run(args) = Cli::try_parse_from(&full).expect("arguments parse").cmd;
    let out = Arc::new(Mutex::new(Vec::<u8>::new()));
    let err = Arc::new(Mutex::new(Vec::<u8>::new()));
    let (tx, rx) = mpsc::channel();
    {
        let (out, err): (Sink, Sink) = (out.clone(), err.clone());
        std::thread::spawn(move || tx.send(launch::cli::run(&args, out, err)));
    }
    let result = rx
        .recv_timeout(TEST_DEADLINE)
        .unwrap_or_else(|_| panic!("nicemu run {argv:?} hung for {TEST_DEADLINE:?}"));
    let text = |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&b.lock().unwrap()).into_owned();
    Outcome {
        result,
        out: text(&out),
        err: text(&err),
    }
}

/// Run `cmd` to the end (killed after TEST_DEADLINE): status, stdout, stderr.
fn run_bounded(cmd: &mut Command) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut readers = Vec::new();
    for mut stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        readers.push(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stream.read_to_string(&mut s);
            s
        }));
    }
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TEST_DEADLINE {
            let _ = child.kill();
            panic!("{cmd:?} hung for {TEST_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = readers.pop().unwrap().join().unwrap();
    let out = readers.pop().unwrap().join().unwrap();
    (status, out, err)
}

/// Each of `n` ranks printed its success line once.
fn assert_probe_passed(out: &str, n: u32) {
    for r in 0..n {
        let line = format!("pmi-probe: rank {r} of {n} (local {r} of {n}): checked {n} cards");
        assert_eq!(out.matches(&line).count(), 1, "rank {r}: {out}");
    }
    assert_eq!(out.lines().count(), n as usize, "{out}");
}

fn failed_cause(o: &Outcome) -> String {
    match &o.result {
        Err(JobError::Failed { cause, .. }) => cause.clone(),
        other => panic!("expected a failed job, got {other:?}\n{}", o.err),
    }
}

#[test]
fn a_job_of_four_probes_passes() {
    let o = nicemu_run(&["-n", "4", "--", PROBE]);
    assert!(o.result.is_ok(), "{:?}\n{}", o.result, o.err);
    assert_probe_passed(&o.out, 4);
    // Labels, and values small enough for one put.
    let o = nicemu_run(&["-n", "3", "-l", "--", PROBE, "--blob", "16"]);
    assert!(o.result.is_ok(), "{:?}\n{}", o.result, o.err);
    for r in 0..3 {
        assert!(
            o.out.contains(&format!("[{r}] pmi-probe: rank {r} of 3")),
            "{}",
            o.out
        );
    }
}

#[test]
fn a_failing_rank_ends_the_job_with_its_cause() {
    for (how, expect) in [
        (
            "exit",
            "rank 2 (".to_string() + PROBE + ") ended with exit status: 3",
        ),
        (
            "kill",
            "rank 2 (".to_string() + PROBE + ") ended with signal: 9",
        ),
        (
            "vanish",
            "rank 2 (".to_string() + PROBE + ") ended with exit status: 0 without PMI finalize",
        ),
        (
            "abort",
            "rank 2 called PMI abort (exit code 1): the probe was asked to abort".to_string(),
        ),
    ] {
        let fail = format!("2:{how}");
        // A long grace: the other ranks must end by themselves, not be killed.
        let o = nicemu_run(&["-n", "4", "--grace", "50", "--", PROBE, "--fail", &fail]);
        let cause = failed_cause(&o);
        assert!(cause.starts_with(&expect), "{how}: {cause}");
        // The other ranks learnt of it from their PMI calls, said so, and exited.
        let Err(JobError::Failed { ended, .. }) = &o.result else {
            unreachable!()
        };
        assert!(!ended.contains("killed by the launcher"), "{how}: {ended}");
        assert_eq!(
            o.err.matches("the job was aborted").count(),
            3,
            "{how}: {}",
            o.err
        );
        assert_eq!(o.out, "", "{how}: no rank may report success");
    }
}

#[test]
fn a_rank_leaving_without_finalize_fails_even_a_job_whose_ranks_all_exit_0() {
    let o = nicemu_run(&["-n", "1", "--", PROBE, "--fail", "0:vanish"]);
    let cause = failed_cause(&o);
    let expect = format!("rank 0 ({PROBE}) ended with exit status: 0 without PMI finalize");
    assert!(cause.starts_with(&expect), "{cause}");
}

#[test]
fn a_hung_rank_is_killed_at_the_timeout() {
    let o = nicemu_run(&["-n", "2", "--timeout", "1", "--", PROBE, "--fail", "1:hang"]);
    assert!(
        matches!(o.result, Err(JobError::Timeout(t)) if t == Duration::from_secs(1)),
        "{:?}",
        o.result
    );
}

#[test]
fn programs_without_pmi_and_bad_requests() {
    let o = nicemu_run(&[
        "-n",
        "3",
        "--",
        "sh",
        "-c",
        "echo rank $PMI_RANK of $PMI_SIZE",
    ]);
    assert!(o.result.is_ok(), "{:?}", o.result);
    for r in 0..3 {
        assert!(o.out.contains(&format!("rank {r} of 3\n")), "{}", o.out);
    }
    let o = nicemu_run(&["-n", "2", "--", "sh", "-c", "exit $((PMI_RANK * 5))"]);
    assert!(
        failed_cause(&o).starts_with("rank 1 (sh) ended with exit status: 5"),
        "{:?}",
        o.result
    );
    let o = nicemu_run(&["-n", "2", "--", "/nonexistent/program"]);
    assert!(
        failed_cause(&o).starts_with("cannot start rank 0"),
        "{:?}",
        o.result
    );
    let o = nicemu_run(&["-n", "0", "--", PROBE]);
    assert!(
        matches!(o.result, Err(JobError::Invalid(_))),
        "{:?}",
        o.result
    );
    assert!(Cli::try_parse_from(["nicemu", "run", "-n", "2", "--nic", "tofu", "--", "x"]).is_err());
    assert!(Cli::try_parse_from(["nicemu", "run", "-n", "2"]).is_err());
    // The NIC choice reaches the ranks.
    let o = nicemu_run(&[
        "-n",
        "1",
        "--nic",
        "gemini",
        "--",
        "sh",
        "-c",
        "echo $NICEMU_NIC",
    ]);
    assert_eq!(o.out, "gemini\n");
}

fn probe_with_env(vars: &[(&str, &str)]) -> (ExitStatus, String) {
    let mut cmd = Command::new(PROBE);
    for v in [
        "PMI_FD",
        "PMI_PORT",
        "PMI_ID",
        "PMI_RANK",
        "PMI_SIZE",
        "MPI_LOCALNRANKS",
        "MPI_LOCALRANKID",
    ] {
        cmd.env_remove(v);
    }
    cmd.envs(vars.iter().copied());
    let (status, _, err) = run_bounded(&mut cmd);
    (status, err)
}

#[test]
fn bad_launch_variables_are_clear_errors() {
    for (vars, expect) in [
        (
            &[
                ("PMI_PORT", "127.0.0.1:1"),
                ("PMI_RANK", "abc"),
                ("PMI_SIZE", "2"),
            ][..],
            "PMI_RANK=\"abc\": expected a non-negative integer",
        ),
        (
            &[("PMI_FD", "1"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")][..],
            "PMI_FD=1 is a standard stream",
        ),
        (
            &[("PMI_FD", "987"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")][..],
            "PMI_FD=987 is not an open descriptor",
        ),
        (
            &[("PMI_PORT", "localhost")][..],
            "PMI_PORT=\"localhost\": expected host:port",
        ),
        (&[("PMI_SIZE", "4")][..], "neither PMI_FD nor PMI_PORT"),
        (
            &[("PMI_PORT", "127.0.0.1:1"), ("PMI_ID", "0")][..],
            "cannot connect to the launcher",
        ),
        (&[][..], "not started by a PMI launcher"),
    ] {
        let (status, err) = probe_with_env(vars);
        assert!(!status.success(), "{vars:?}");
        assert!(err.contains(expect), "{vars:?}: {err}");
        assert!(!err.contains("panicked"), "{vars:?}: {err}");
    }
}

fn mpiexec() -> Option<&'static str> {
    if Path::new(MPIEXEC).exists() {
        Some(MPIEXEC)
    } else {
        eprintln!("skipped: {MPIEXEC} is absent (Debian's mpich package provides it)");
        None
    }
}

#[test]
fn hydra_mpiexec_runs_the_probe_over_pmi_fd_and_pmi_port() {
    let Some(mpiexec) = mpiexec() else { return };
    for extra in [&[][..], &["-pmi-port"][..]] {
        let (status, out, err) =
            run_bounded(Command::new(mpiexec).args(extra).args(["-n", "4", PROBE]));
        assert!(status.success(), "mpiexec {extra:?}: {status}\n{err}");
        assert_probe_passed(&out, 4);
    }
}

#[test]
fn hydra_mpiexec_ends_a_job_whose_rank_aborts() {
    let Some(mpiexec) = mpiexec() else { return };
    let (status, out, err) =
        run_bounded(Command::new(mpiexec).args(["-n", "3", PROBE, "--fail", "1:abort"]));
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    // hydra prints its own banner on stdout; no rank may report success. (The aborting
    // rank's own stderr line may be lost: hydra kills the job before forwarding it.)
    assert!(!out.contains("checked"), "{out}");
}
