//! Every command fed what a hostile user would feed it: values at the ends of their types,
//! options a tool does not have, sites that do not apply. Each gets a clear error (or does
//! what it says), never a panic, a hang, a process abort or a table of figures that were not
//! measured. The tools run on the deterministic engine where they run at all, so no test
//! depends on timing.

use std::process::{Command, Output, Stdio};

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run nicemu")
}

/// (success, stdout, stderr)
fn nicemu(args: &[&str]) -> (bool, String, String) {
    nicemu_env(args, &[])
}

fn nicemu_env(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = run(args, env);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The command failed with a message containing every one of `want`, and did not panic.
fn refused(args: &[&str], want: &[&str]) -> String {
    let (ok, out, err) = nicemu(args);
    assert!(!ok, "{args:?} succeeded:\n{out}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: {w:?} not in:\n{err}");
    }
    err
}

/// The data rows of a tool's table (lines that start with a number after blanks).
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

const DET: [&str; 2] = ["--engine", "deterministic"];

fn with_det<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(DET);
    v
}

#[test]
fn durations_outside_what_a_duration_can_be_are_refused() {
    for tool in ["write-lat", "send-bw", "gni-read-lat", "gni-write-bw"] {
        for d in ["1e300", "1e-300", "inf", "0", "-1"] {
            let arg = format!("--duration={d}");
            refused(&[tool, &arg], &["--duration", "bad duration"]);
        }
    }
    for tool in ["read-lat", "gni-send-lat", "atomic-lat", "gni-atomic-lat"] {
        refused(
            &[tool, "-n", "2", "--latency-gap", "18446744073709551615"],
            &["--latency-gap", "at most 1000000"],
        );
    }
}

#[test]
fn a_timed_run_prints_measured_rows_only() {
    // The shortest duration there is still measures one iteration per size.
    for tool in ["write-lat", "gni-write-lat"] {
        let (ok, out, err) = nicemu(&with_det(&[tool, "-D", "0.000001", "-s", "8"]));
        assert!(ok, "{tool}: {err}");
        let r = rows(&out);
        assert_eq!(r.len(), 1, "{out}");
        assert!(r[0][1].parse::<u64>().unwrap() >= 1, "{tool}: {out}");
    }
    for tool in ["write-bw", "gni-write-bw"] {
        let (ok, out, err) = nicemu(&with_det(&[tool, "-D", "0.000001", "-s", "8", "-l", "4"]));
        assert!(ok, "{tool}: {err}");
        let r = rows(&out);
        assert_eq!(r.len(), 1, "{out}");
        assert!(r[0][1].parse::<u64>().unwrap() >= 4, "{tool}: {out}");
    }
}

#[test]
fn zero_iterations_or_window_are_refused() {
    refused(
        &["osu", "latency", "-i", "0"],
        &["--iterations", "at least 1"],
    );
    refused(
        &["osu", "bw", "--iterations-large", "0"],
        &["--iterations-large", "at least 1"],
    );
    refused(&["osu", "bw", "-W", "0"], &["--window", "at least 1"]);
}

#[test]
fn cached_gemini_amos_run() {
    for amo in ["FADD_C", "CSWAP_C", "AX_C"] {
        let (ok, out, err) = nicemu(&with_det(&["gni-atomic-lat", "--amo", amo, "-n", "3"]));
        assert!(ok, "{amo}: {err}");
        assert!(out.contains("AMO Cache        : Enabled"), "{out}");
        assert_eq!(rows(&out)[0][1], "3", "{out}");
    }
}

#[test]
fn options_a_tool_does_not_have_are_refused() {
    // An AMO is one word: like cxi_atomic_lat, the atomic tools take no size.
    refused(&["gni-atomic-lat", "-s", "1:4M"], &["-s"]);
    refused(&["atomic-lat", "--size", "64"], &["--size"]);
    // cxi_write_bw: "Max RDMA buffer size < max write size", "Invalid buffer alignment".
    refused(
        &["write-bw", "--buf-sz", "1"],
        &[
            "--buf-sz 1",
            "smaller than the largest operation (65536 bytes)",
        ],
    );
    refused(
        &["gni-read-bw", "--buf-sz", "4K", "-s", "8K"],
        &["--buf-sz 4096"],
    );
    for tool in ["write-bw", "gni-write-bw"] {
        refused(
            &[tool, "--buf-align", "0"],
            &["--buf-align must be at least 1"],
        );
    }
    refused(
        &["write-bw", "--buf-sz", "0"],
        &["--buf-sz", "at least 1 byte"],
    );
}

#[test]
fn buffer_options_are_honoured() {
    let (ok, out, err) = nicemu(&with_det(&[
        "write-bw",
        "-s",
        "100",
        "-l",
        "8",
        "-n",
        "1",
        "--buf-sz",
        "64K",
        "--buf-align",
        "128",
    ]));
    assert!(ok, "{err}");
    assert!(
        out.contains("Max RDMA Buf     : 65536 (4096 used)"),
        "{out}"
    );
    assert!(out.contains("RDMA Buf Align   : 128"), "{out}");
}

#[test]
fn every_size_option_takes_the_same_suffixes() {
    for (args, want) in [
        (&["write-lat", "-s", "64K:1M", "--help"][..], "Usage"),
        (&["gni-write-bw", "--buf-sz", "8M", "--help"][..], "Usage"),
        (
            &["gni-write-lat", "--rdma-threshold", "2K", "--help"][..],
            "Usage",
        ),
        (&["mpi-check", "--max", "64K", "--help"][..], "Usage"),
        (&["osu", "latency", "-m", "1K:64K", "--help"][..], "Usage"),
    ] {
        let (ok, out, err) = nicemu(args);
        assert!(ok, "{args:?}: {err}");
        assert!(out.contains(want), "{args:?}: {out}");
    }
    for args in [
        &["write-lat", "-s", "64Q"][..],
        &["mpi-check", "--max", "64Q"][..],
        &["osu", "latency", "-m", "64Q"][..],
        &["gni-write-bw", "--buf-sz", "64Q"][..],
    ] {
        refused(args, &["bad size '64Q' (bytes, optionally with K, M or G)"]);
    }
}

#[test]
fn fault_sites_of_the_other_nic_are_refused() {
    refused(
        &[
            "sim",
            "--nic",
            "gemini",
            "--faults",
            "eq_full=1",
            "--nodes",
            "2",
        ],
        &["fault eq_full is Cassini's: an emulated Gemini has no such site"],
    );
    refused(
        &[
            "sim",
            "--nic",
            "cassini",
            "--faults",
            "gni_cq_overrun",
            "--nodes",
            "2",
        ],
        &["fault gni_cq_overrun is Gemini's: an emulated Cassini has no such site"],
    );
}

#[test]
fn a_campaign_does_not_wrap_its_seeds() {
    refused(
        &[
            "sim",
            "--campaign",
            "2",
            "--seed-base",
            "18446744073709551615",
        ],
        &[
            "--seed-base 18446744073709551615 with --campaign 2",
            "run past",
        ],
    );
}

#[test]
fn a_job_the_host_cannot_hold_is_refused_before_it_is_built() {
    let err = refused(
        &["job", "--nic", "cassini", "--ranks", "65536"],
        &[
            "a job of 65536 ranks needs about",
            "GiB",
            "available (MemAvailable",
        ],
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    refused(
        &["osu", "allreduce", "--nodes", "65536"],
        &[
            "a job of 65536 ranks needs about",
            "available (MemAvailable",
        ],
    );
}

#[test]
fn osu_bounds_its_nodes_and_message_sizes() {
    refused(
        &["osu", "allreduce", "--nodes", "4294967295"],
        &["--nodes must be between 2 and 65536"],
    );
    refused(
        &["osu", "latency", "-m", "1024G:1024G"],
        &["a message of 1024.0 GiB is larger than an emulated node's memory (256.0 MiB)"],
    );
}

#[test]
fn a_rank_out_of_node_memory_ends_the_job_with_its_reason() {
    // Each rank stages a window of 16 messages of 1 MiB: 16 MiB do not fit nodes of 16 MiB.
    // The rank that runs out fails the job with why, instead of going to finalize while its
    // peer waits for the messages; with more memory the same command runs.
    for nic in ["cassini", "gemini"] {
        let args = [
            "osu",
            "bw",
            "--nic",
            nic,
            "-m",
            "1M:1M",
            "-W",
            "16",
            "-i",
            "1",
            "--iterations-large",
            "1",
            "-x",
            "0",
            "--engine",
            "deterministic",
        ];
        let (ok, out, err) = nicemu_env(&args, &[("NICEMU_NODE_MEMORY_MIB", "16")]);
        assert!(!ok, "{nic}: {out}");
        assert!(
            err.contains("nodes of 16.0 MiB each (NICEMU_NODE_MEMORY_MIB sets it)"),
            "{err}"
        );
        assert!(err.contains("out of memory"), "{nic}: {err}");
        let (ok, out, err) = nicemu_env(&args, &[("NICEMU_NODE_MEMORY_MIB", "64")]);
        assert!(ok, "{nic}: {err}");
        assert_eq!(rows(&out).len(), 1, "{out}");
    }
}

#[test]
fn a_failed_rank_is_reported_once_and_as_what_it_was() {
    // Every PUT and GET of the job is reported failed (the transport's test hook): the
    // rank whose retries run out ends the job, and its reason is the error, once; it is not
    // a wrong result.
    let (ok, out, err) = nicemu_env(
        &["job", "--nic", "gemini", "--ranks", "32"],
        &[
            ("NICEMU_GNI_INJECT_POST_ERRORS", "1000"),
            ("MPICH_GNI_MAX_EAGER_MSG_SIZE", "0"),
            ("MPICH_GNI_MAX_VSHORT_MSG_SIZE", "64"),
        ],
    );
    assert!(!ok, "{out}");
    assert!(!err.contains("wrong result"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert!(line.contains("a transaction failed"), "{err}");
    // The failed post's own status, not the event's "OK".
    assert!(line.contains("status REQUEST_TIMEOUT"), "{err}");
    assert_eq!(
        line.matches("rank ").count(),
        2,
        "one rank, one peer: {line}"
    );
    assert_eq!(err.matches("a transaction failed").count(), 1, "{err}");
}

#[test]
fn knob_errors_blame_the_knob_that_was_set() {
    let (ok, _, err) = nicemu_env(
        &["job", "--nic", "cassini", "--ranks", "2"],
        &[("FI_CXI_RDZV_THRESHOLD", "0")],
    );
    assert!(!ok);
    assert!(err.contains("FI_CXI_RDZV_THRESHOLD=\"0\""), "{err}");
    assert!(
        err.contains("must not be below FI_CXI_RDZV_EAGER_SIZE (2048"),
        "{err}"
    );
    let (ok, _, err) = nicemu_env(
        &["job", "--nic", "cassini", "--ranks", "2"],
        &[
            ("FI_CXI_RDZV_THRESHOLD", "1024"),
            ("FI_CXI_RDZV_EAGER_SIZE", "4096"),
        ],
    );
    assert!(!ok);
    assert!(err.contains("FI_CXI_RDZV_EAGER_SIZE=\"4096\""), "{err}");
    assert!(
        err.contains("must not be above FI_CXI_RDZV_THRESHOLD (1024)"),
        "{err}"
    );
}

#[test]
fn a_trace_that_cannot_be_written_says_so() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    refused(
        &["trace", "-o", "/dev/full"],
        &["cannot write /dev/full: No space left on device"],
    );
}

#[test]
fn stat_says_when_every_counter_is_zero() {
    let (ok, out, err) = nicemu(&with_det(&["stat", "--counters"]));
    assert!(ok, "{err}");
    for line in out.lines().filter(|l| l.contains("Counters")) {
        assert!(line.contains("are zero"), "{out}");
    }
    assert_eq!(out.matches("Counters").count(), 2, "{out}");
}

/// `nicemu run ARGS` with `input` on its standard input.
fn run_with_input(args: &[&str], input: &[u8]) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nicemu"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nicemu");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    let out = child.wait_with_output().expect("wait for nicemu");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_gives_its_input_to_rank_0_only() {
    let (ok, out, err) = run_with_input(
        &[
            "run",
            "-n",
            "2",
            "-l",
            "--timeout",
            "60",
            "--",
            "sh",
            "-c",
            "read x; echo \"got [$x]\"",
        ],
        b"hello\n",
    );
    assert!(ok, "{err}");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["[0] got [hello]", "[1] got []"], "{out}");
}

#[test]
fn run_forwards_an_endless_line_in_labelled_pieces() {
    // 200000 bytes without a newline: forwarded in pieces of at most 64 KiB, each labelled,
    // rather than held until the line ends.
    let (ok, out, err) = nicemu(&[
        "run",
        "-n",
        "1",
        "-l",
        "--timeout",
        "60",
        "--",
        "sh",
        "-c",
        "head -c 200000 /dev/zero | tr '\\0' x",
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{} lines", lines.len());
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("[0] x") && l.len() <= 4 + (64 << 10))
    );
    let xs: usize = lines.iter().map(|l| l.len() - 4).sum();
    assert_eq!(xs, 200_000);
}

#[test]
fn run_names_a_missing_launcher_program_not_the_rank_program() {
    let err = refused(
        &[
            "run",
            "-n",
            "2",
            "--timeout",
            "60",
            "--hosts",
            "localhost,otherhost",
            "--pmi-address",
            "127.0.0.1",
            "--launcher",
            "exec",
            "--launcher-exec",
            "/nonexistent/launcher",
            "--",
            "/bin/true",
        ],
        &["cannot start rank 1 on otherhost with the launcher program /nonexistent/launcher"],
    );
    assert!(!err.contains("(/bin/true)"), "{err}");
}

#[test]
fn mpi_check_refuses_a_rank_the_job_does_not_have() {
    let me = env!("CARGO_BIN_EXE_nicemu");
    let (ok, _, err) = nicemu(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "120",
        "--",
        me,
        "mpi-check",
        "--max",
        "1K",
        "--die-rank",
        "9",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--die-rank 9: the job has ranks 0 to 1 only"),
        "{err}"
    );
    // Sizes take suffixes here as everywhere.
    let (ok, out, err) = nicemu(&[
        "run",
        "-n",
        "2",
        "--timeout",
        "120",
        "--",
        me,
        "mpi-check",
        "--max",
        "4K",
        "--reduce",
        "16",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("messages 0..4096 B ok").count(), 2, "{out}");
}
