//! Programs compiled by another MPI 5.0 standard-ABI implementation run on ours: the C test
//! programs are compiled with `mpicc_abi` of the PyPI `mpich` wheel (MPICH 5, which ships
//! `mpicc_abi` and `include/mpi_abi.h`) — not with `nicemu-mpicc` — and run under `nicemu
//! run`'s launcher on both NICs with the loader pointed at our `libmpi_abi.so.1`
//! (`LD_LIBRARY_PATH`; the wheel's wrapper links with a RUNPATH, which the variable
//! overrides). A second test compares every constant and handle value the two headers share,
//! and the `MPI_Status` layout.
//!
//! Both need the wheel (about 20 MB), so they are ignored by default. Run them with
//!
//! ```sh
//! pip download --no-deps --only-binary :all: -d /tmp/whl mpich==5.0.2
//! NICEMU_MPICH_WHEEL=/tmp/whl/mpich-5.0.2-py3-none-manylinux_2_28_x86_64.whl \
//!     cargo test -p mpi-abi --test mpich_wheel -- --ignored
//! ```
//!
//! Without `NICEMU_MPICH_WHEEL` the tests run `pip download` themselves.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

const RUN_LIMIT: Duration = Duration::from_secs(180);

fn tmp() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpich-wheel")
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/c")
}

/// The unpacked wheel's data directory (holding `bin/mpicc_abi`, `include/mpi_abi.h`).
fn wheel() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tmp();
        std::fs::create_dir_all(&dir).expect("creating the work directory");
        let whl = match std::env::var_os("NICEMU_MPICH_WHEEL") {
            Some(p) => PathBuf::from(p),
            None => {
                let out = Command::new("pip")
                    .args(["download", "--no-deps", "--only-binary", ":all:", "-d"])
                    .arg(&dir)
                    .arg("mpich==5.0.2")
                    .output()
                    .expect("running pip (set NICEMU_MPICH_WHEEL to a downloaded wheel instead)");
                assert!(
                    out.status.success(),
                    "pip download mpich failed (set NICEMU_MPICH_WHEEL instead):\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                std::fs::read_dir(&dir)
                    .expect("listing the download directory")
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .find(|p| p.extension().is_some_and(|x| x == "whl"))
                    .expect("pip left no wheel")
            }
        };
        let unpacked = dir.join("unpacked");
        let out = Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&whl)
            .arg(&unpacked)
            .output()
            .expect("running python3 to unpack the wheel");
        assert!(
            out.status.success(),
            "unpacking {}: {}",
            whl.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let data = std::fs::read_dir(&unpacked)
            .expect("listing the wheel")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with(".data"))
            .expect("the wheel has no .data directory")
            .join("data");
        for f in ["bin/mpicc_abi", "include/mpi_abi.h"] {
            assert!(data.join(f).is_file(), "the wheel ships no {f}");
        }
        data
    })
}

/// Our header's directory and a directory whose `libmpi_abi.so.1` is our library. Made once
/// per test binary: the tests run in parallel, and two making the same link race (EEXIST).
fn ours() -> (PathBuf, PathBuf) {
    static OURS: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    OURS.get_or_init(make_ours).clone()
}

fn make_ours() -> (PathBuf, PathBuf) {
    let out = Command::new(env!("CARGO_BIN_EXE_nicemu-mpicc"))
        .args(["-show", "x.c"])
        .output()
        .expect("running nicemu-mpicc -show");
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    let flag = |p: &str| {
        line.split_whitespace()
            .find_map(|a| a.strip_prefix(p))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("no {p} in `{line}`"))
    };
    let (include, libdir) = (flag("-I"), flag("-L"));
    let loader_dir = tmp().join("ours");
    std::fs::create_dir_all(&loader_dir).expect("creating the library directory");
    let link = loader_dir.join("libmpi_abi.so.1");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(libdir.join("libmpi_abi.so"), &link).expect("linking the library");
    (include, loader_dir)
}

/// `MPI_`/`MPIX_` upper-case identifiers of a header.
fn constants(header: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(header).expect("reading a header");
    let mut set = BTreeSet::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("MPI_")
            && word.len() > 4
            && word[4..]
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            set.insert(word.to_string());
        }
    }
    set
}

/// Compile and run a program printing `names` (and the status layout) against `header`.
fn print_values(include: &Path, header: &str, names: &[String], exe: &Path) -> String {
    let mut src = format!("#include <stdio.h>\n#include <{header}>\nint main(void) {{\n");
    for n in names {
        src.push_str(&format!(
            "    printf(\"%s %lld\\n\", \"{n}\", (long long)(intptr_t)({n}));\n"
        ));
    }
    src.push_str(
        "    printf(\"status %zu %zu %zu %zu\\n\", sizeof(MPI_Status), \
         __builtin_offsetof(MPI_Status, MPI_SOURCE), __builtin_offsetof(MPI_Status, MPI_TAG), \
         __builtin_offsetof(MPI_Status, MPI_ERROR));\n    return 0;\n}\n",
    );
    let c = exe.with_extension("c");
    std::fs::write(&c, src).expect("writing the program");
    let out = Command::new("cc")
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(exe)
        .arg(&c)
        .output()
        .expect("running cc");
    assert!(
        out.status.success(),
        "compiling against {header}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(exe).output().expect("running the program");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs the PyPI mpich wheel; see the module documentation"]
fn the_wheels_header_has_our_constants_handles_and_status_layout() {
    let theirs = wheel().join("include");
    let (include, _) = ours();
    let common: Vec<String> = constants(&theirs.join("mpi_abi.h"))
        .intersection(&constants(&include.join("mpi.h")))
        .filter(|n| !matches!(n.as_str(), "MPI_SOURCE" | "MPI_TAG" | "MPI_ERROR"))
        // Our header only names it in a comment.
        .filter(|n| n.as_str() != "MPI_T_ERR_NOT_SUPPORTED")
        .cloned()
        .collect();
    assert!(common.len() > 200, "only {} shared names", common.len());
    let a = print_values(&theirs, "mpi_abi.h", &common, &tmp().join("values-wheel"));
    let b = print_values(&include, "mpi.h", &common, &tmp().join("values-ours"));
    let differ: Vec<_> = a.lines().zip(b.lines()).filter(|(x, y)| x != y).collect();
    assert_eq!(a.lines().count(), common.len() + 1);
    assert!(
        differ.is_empty(),
        "values differ (wheel, ours): {differ:#?}"
    );
}

/// Run `prog` as `ranks` processes under `nicemu run`'s launcher with our library first on
/// the loader's path.
fn run_job(prog: &Path, ranks: u32, nic: &str, libdir: &Path) -> Result<String, String> {
    let mut spec = launch::job::JobSpec::new(ranks, vec![prog.display().to_string()]);
    spec.env.push(("NICEMU_NIC".into(), nic.into()));
    spec.env
        .push(("LD_LIBRARY_PATH".into(), libdir.display().to_string()));
    spec.timeout = Some(RUN_LIMIT);
    launch::job::run_captured(&spec)
}

#[test]
#[ignore = "needs the PyPI mpich wheel; see the module documentation"]
fn programs_compiled_by_the_wheels_mpicc_abi_run_on_both_nics() {
    let data = wheel();
    let (_, libdir) = ours();
    let bin = tmp().join("bin");
    std::fs::create_dir_all(&bin).expect("creating the output directory");
    for name in ["hello", "p2p", "coll", "rma", "rma_dynamic"] {
        let exe = bin.join(name);
        let out = Command::new("bash")
            .arg(data.join("bin/mpicc_abi"))
            .args(["-Wall", "-o"])
            .arg(&exe)
            .arg(sources().join(format!("{name}.c")))
            .output()
            .expect("running the wheel's mpicc_abi");
        assert!(
            out.status.success(),
            "mpicc_abi {name}.c: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for nic in ["cassini", "gemini"] {
            let text = run_job(&exe, 4, nic, &libdir)
                .unwrap_or_else(|e| panic!("{name} on 4 {nic} processes failed: {e}"));
            assert!(
                text.contains(&format!("{name}: OK")),
                "{name} on {nic}:\n{text}"
            );
            if name == "hello" {
                // The processor names are our emulated nodes': our library answered.
                for r in 0..4 {
                    assert!(
                        text.contains(&format!("rank {r} of 4 on nicemu-{nic}-node{r}")),
                        "{text}"
                    );
                }
            }
        }
    }
}
