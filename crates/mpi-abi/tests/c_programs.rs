//! The C test programs of `tests/c`, compiled with `nicemu-mpicc` against `libmpi_abi.so.1`
//! and run as singletons and as jobs of four processes (under `nicemu run`'s launcher) on
//! both emulated NICs; plus the wrapper's `-show`, the default
//! error handler, and the launch errors of `MPI_Init`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The programs and the line each prints on success.
const PROGRAMS: [&str; 9] = [
    "hello",
    "p2p",
    "coll",
    "dtype",
    "comm",
    "rma",
    "rma_ranges",
    "rma_dynamic",
    "errors",
];

/// The longest a program may run (they take well under a second on a quiet machine).
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/c")
}

fn mpicc() -> &'static str {
    env!("CARGO_BIN_EXE_nicemu-mpicc")
}

/// Compile every program once (into this test target's temporary directory).
fn binaries() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi-abi-c");
        std::fs::create_dir_all(&dir).expect("creating the output directory");
        for name in PROGRAMS.iter().chain(&["fatal", "zcopy"]) {
            let out = Command::new(mpicc())
                .args(["-Wall", "-Wextra", "-Werror", "-o"])
                .arg(dir.join(name))
                .arg(sources().join(format!("{name}.c")))
                .output()
                .expect("running nicemu-mpicc");
            assert!(
                out.status.success(),
                "compiling {name}.c failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    })
}

/// Run `prog` with `env` (and none of the launch variables of the test's own environment),
/// killing it after [`RUN_LIMIT`].
fn run(prog: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(prog);
    for v in ["PMI_RANK", "PMI_FD", "PMI_PORT", "PMI_SIZE", "NICEMU_NIC"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starting a test program");
    let start = Instant::now();
    loop {
        if child
            .try_wait()
            .expect("waiting for a test program")
            .is_some()
        {
            return child.wait_with_output().expect("collecting output");
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting output");
            panic!(
                "{} did not finish in {RUN_LIMIT:?}; stderr:\n{}",
                prog.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run_all_on(nic: &str) {
    let dir = binaries();
    for name in PROGRAMS {
        let out = run(&dir.join(name), &[("NICEMU_NIC", nic)]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains(&format!("{name}: OK")),
            "{name} on {nic}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
    }
}

#[test]
fn c_programs_pass_on_cassini() {
    run_all_on("cassini");
}

#[test]
fn c_programs_pass_on_gemini() {
    run_all_on("gemini");
}

#[test]
fn hello_reports_the_nic_it_ran_on() {
    let dir = binaries();
    for (nic, name) in [
        ("cassini", "nicemu-cassini-node0"),
        ("gemini", "nicemu-gemini-node0"),
    ] {
        let out = run(&dir.join("hello"), &[("NICEMU_NIC", nic)]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("rank 0 of 1 on {name}")),
            "{stdout}"
        );
    }
    // Without NICEMU_NIC: Cassini.
    let out = run(&dir.join("hello"), &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nicemu-cassini-node0"));
}

#[test]
fn errors_are_fatal_by_default() {
    let out = run(&binaries().join("fatal"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(6),
        "MPI_ERR_RANK is the exit status: {stderr}"
    );
    assert!(
        stderr.contains("fatal error in MPI_Send") && stderr.contains("rank 1"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("not reached"));
}

#[test]
fn a_bad_nic_name_fails_init_clearly() {
    let out = run(&binaries().join("hello"), &[("NICEMU_NIC", "myrinet")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("NICEMU_NIC") && stderr.contains("myrinet") && stderr.contains("cassini"),
        "{stderr}"
    );
}

#[test]
fn a_broken_process_manager_launch_fails_init_clearly() {
    // The launch variables are set, but no process manager answers on them.
    for (var, value) in [
        ("PMI_RANK", "0"),
        ("PMI_FD", "0"),
        ("PMI_PORT", "127.0.0.1:1"),
    ] {
        let out = run(&binaries().join("hello"), &[(var, value)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{var}: the program ran as a singleton"
        );
        assert!(stderr.contains("process manager"), "{var}: {stderr}");
    }
}

/// Run `prog` as a job of `ranks` processes under the PMI-1 launcher of `nicemu run`;
/// its combined output, or the launcher's error.
fn run_job(prog: &Path, ranks: u32, nic: &str) -> Result<String, String> {
    let mut spec = launch::job::JobSpec::new(ranks, vec![prog.display().to_string()]);
    spec.env.push(("NICEMU_NIC".into(), nic.into()));
    spec.timeout = Some(RUN_LIMIT);
    launch::job::run_captured(&spec)
}

/// A writer into a shared buffer.
/// Every C program as a job of 4 processes (one rank and one emulated node each, meeting on
/// the fabric between processes), started by `nicemu run`'s launcher.
fn run_all_multi_process(nic: &str) {
    let dir = binaries();
    for name in PROGRAMS {
        let text = run_job(&dir.join(name), 4, nic)
            .unwrap_or_else(|e| panic!("{name} on 4 {nic} processes failed: {e}"));
        assert!(
            text.matches(&format!("{name}: OK")).count() >= 1,
            "{name} on 4 {nic} processes:\n{text}"
        );
    }
    let text = run_job(&dir.join("hello"), 4, nic).expect("hello");
    for r in 0..4 {
        assert!(text.contains(&format!("rank {r} of 4")), "{text}");
    }
}

/// An `MPI_Get` of a contiguous range is one NIC get per 64 KiB, not one per byte:
/// `rma_ranges` reads 5 byte ranges (2.2 MiB in all: 36 pieces of at most 64 KiB) and 1,000
/// strided 3-byte blocks from its neighbour on each of its two windows, 2,072 gets per rank;
/// one NIC get per byte would be over 4 million. Counted by the Cassini counters of each rank
/// (`MPICH_OFI_CXI_COUNTER_REPORT=5`).
#[test]
fn a_get_of_a_contiguous_range_is_one_nic_get() {
    let mut spec =
        launch::job::JobSpec::new(2, vec![binaries().join("rma_ranges").display().to_string()]);
    spec.env.push(("NICEMU_NIC".into(), "cassini".into()));
    spec.env
        .push(("MPICH_OFI_CXI_COUNTER_REPORT".into(), "5".into()));
    spec.timeout = Some(RUN_LIMIT);
    let text = launch::job::run_captured(&spec).expect("rma_ranges on 2 Cassini processes");
    assert!(text.contains("rma_ranges: OK"), "{text}");
    let gets: Vec<u64> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("get_cmds="))
        .map(|n| n.parse().expect("a get_cmds count"))
        .collect();
    assert_eq!(gets.len(), 2, "one get_cmds counter per rank:\n{text}");
    for n in gets {
        assert!(
            (2072..4000).contains(&n),
            "{n} NIC gets for 2,072 MPI_Get pieces"
        );
    }
}

/// The transport statistics each rank printed at finalize (`NICEMU_TRANSPORT_STATS=1`), by
/// rank: `transport stats: rank R (nic): name=value ...`.
fn transport_stats(text: &str, ranks: usize) -> Vec<std::collections::BTreeMap<String, u64>> {
    let mut out = vec![std::collections::BTreeMap::new(); ranks];
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("transport stats: rank ") else {
            continue;
        };
        let (r, rest) = rest.split_once(' ').expect("a rank");
        let r: usize = r.parse().expect("a rank number");
        for w in rest.split_whitespace().skip(1) {
            if let Some((k, v)) = w.split_once('=') {
                out[r].insert(k.to_string(), v.parse().expect("a count"));
            }
        }
    }
    for (r, s) in out.iter().enumerate() {
        assert!(!s.is_empty(), "no statistics of rank {r}:\n{text}");
    }
    out
}

fn stat(s: &std::collections::BTreeMap<String, u64>, k: &str) -> u64 {
    s.get(k).copied().unwrap_or(0)
}

/// `zcopy` as a job of two processes: every large message goes from the program's own buffer
/// to the program's own buffer with no staging copy on either side (the transports' own
/// counters say so), and memory unmapped or freed between messages is registered afresh, not
/// written through a stale registration (every byte is checked by the program).
fn zero_copy_between_processes(nic: &str) -> Vec<std::collections::BTreeMap<String, u64>> {
    let mut spec =
        launch::job::JobSpec::new(2, vec![binaries().join("zcopy").display().to_string()]);
    spec.env.push(("NICEMU_NIC".into(), nic.into()));
    spec.env.push(("NICEMU_TRANSPORT_STATS".into(), "1".into()));
    spec.timeout = Some(RUN_LIMIT);
    let text = launch::job::run_captured(&spec)
        .unwrap_or_else(|e| panic!("zcopy on 2 {nic} processes failed: {e}"));
    assert!(text.contains("zcopy: OK"), "{text}");
    let s = transport_stats(&text, 2);
    let (tx, rx) = (&s[0], &s[1]);
    // Three sends from one buffer, one from MPI_Alloc_mem memory, three from fresh mappings,
    // one from a fresh malloc.
    assert_eq!(stat(tx, "send_zero_copy"), 8, "{nic}: {tx:?}");
    assert_eq!(stat(rx, "recv_zero_copy"), 8, "{nic}: {rx:?}");
    for (r, st) in s.iter().enumerate() {
        // The Alloc_mem buffer was registered at MPI_Alloc_mem; the second and third sends
        // from one buffer found their registration.
        assert!(stat(st, "mr_cache_hits") >= 1, "{nic} rank {r}: {st:?}");
        // The unmapped and freed buffers' registrations were found invalid and dropped.
        assert!(
            stat(st, "mr_cache_invalidated") >= 1,
            "{nic} rank {r}: {st:?}"
        );
        assert!(stat(st, "mr_cache_misses") >= 5, "{nic} rank {r}: {st:?}");
    }
    s
}

#[test]
fn large_messages_go_zero_copy_between_cassini_processes() {
    let s = zero_copy_between_processes("cassini");
    let (tx, rx) = (&s[0], &s[1]);
    assert_eq!(stat(tx, "send_staged"), 0, "no send was copied: {tx:?}");
    assert_eq!(
        stat(rx, "recv_zero_copy_fallback"),
        0,
        "every receive was posted on the buffer: {rx:?}"
    );
}

#[test]
fn large_messages_go_zero_copy_between_gemini_processes() {
    let s = zero_copy_between_processes("gemini");
    let (tx, rx) = (&s[0], &s[1]);
    assert_eq!(stat(tx, "R0"), 8, "{tx:?}");
    assert_eq!(stat(tx, "R1"), 0, "{tx:?}");
    assert_eq!(
        stat(rx, "R0_landed") + stat(rx, "R0_copied"),
        0,
        "nothing copied out of a staging buffer: {rx:?}"
    );
}

#[test]
fn c_programs_pass_as_four_processes_on_cassini() {
    run_all_multi_process("cassini");
}

#[test]
fn c_programs_pass_as_four_processes_on_gemini() {
    run_all_multi_process("gemini");
}

#[test]
fn wrapper_shows_header_library_and_rpath() {
    let out = Command::new(mpicc())
        .args(["-show", "-o", "x", "x.c"])
        .output()
        .expect("running nicemu-mpicc -show");
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("-o x x.c") && line.contains("-lmpi_abi"),
        "{line}"
    );
    let inc = line
        .split_whitespace()
        .find_map(|a| a.strip_prefix("-I"))
        .expect("an include directory");
    assert!(Path::new(inc).join("mpi.h").is_file(), "{line}");
    let rpath = line
        .split_whitespace()
        .find_map(|a| a.strip_prefix("-Wl,-rpath,"))
        .expect("an rpath");
    assert!(Path::new(rpath).join("libmpi_abi.so").is_file(), "{line}");
    // Compile-only: no link flags.
    let out = Command::new(mpicc())
        .args(["-show", "-c", "x.c"])
        .output()
        .expect("running nicemu-mpicc -show -c");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("-lmpi_abi"));
}

#[test]
fn a_program_links_the_static_library_too() {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi-abi-c-static-hello");
    let out = Command::new(mpicc())
        .args(["-static-mpi", "-o"])
        .arg(&exe)
        .arg(sources().join("hello.c"))
        .output()
        .expect("running nicemu-mpicc -static-mpi");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run(&exe, &[("NICEMU_NIC", "gemini")]);
    assert!(String::from_utf8_lossy(&run.stdout).contains("hello: OK"));
    // No dynamic dependency on the library.
    let bytes = std::fs::read(&exe).expect("reading the program");
    let soname = b"libmpi_abi.so.1\0";
    assert!(!bytes.windows(soname.len()).any(|w| w == soname));
}

#[test]
fn the_library_carries_the_standard_soname() {
    let out = Command::new(mpicc())
        .args(["-show", "x.c"])
        .output()
        .expect("running nicemu-mpicc -show");
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    let dir = line
        .split_whitespace()
        .find_map(|a| a.strip_prefix("-L"))
        .expect("a library directory");
    let bytes = std::fs::read(Path::new(dir).join("libmpi_abi.so")).expect("reading the library");
    let soname = b"libmpi_abi.so.1\0";
    assert!(
        bytes.windows(soname.len()).any(|w| w == soname),
        "no libmpi_abi.so.1 string in the library"
    );
}
