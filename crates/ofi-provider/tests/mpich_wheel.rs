//! The provider under MPICH's ch4:ofi netmod and a libfabric 2.x: the PyPI `mpich` 5.0.2
//! wheel bundles libfabric 2.5.1 (`lib/mpich/libfabric.so.1`), whose `fi_getinfo` is called
//! for API 2.5. `tests/c/mpi_ranks.c` (the program of the Open MPI test in `ofi.rs`) is built
//! with the wheel's `mpicc` and run by its `mpiexec` (hydra) on four ranks, each its own
//! process with its own emulated NIC, with the traffic seen in every NIC's counters.
//!
//! MPICH always opens a completion counter and binds it to its endpoints (`create_vci_domain`
//! in `ofi_init.c`), so the run needs the provider's counters (`fi_cntr_open`). The settings
//! it needs (docs/ofi-provider.md, "MPICH"):
//!
//! - `MPIR_CVAR_CH4_NETMOD=ofi` (the wheel's default netmod is UCX), `FI_PROVIDER=nicemu`,
//!   `FI_PROVIDER_PATH`;
//! - `MPIR_CVAR_NOLOCAL=1`, so that ranks on one host talk through the netmod, not shared
//!   memory;
//! - `MPIR_CVAR_CH4_OFI_ENABLE_ATOMICS=0` (its hints would ask for atomic message ordering)
//!   and `MPIR_CVAR_CH4_OFI_ENABLE_RMA=0` (no `FI_RMA` here);
//! - `MPIR_CVAR_CH4_OFI_CONTEXT_ID_BITS=16`, `MPIR_CVAR_CH4_OFI_RANK_BITS=0`,
//!   `MPIR_CVAR_CH4_OFI_TAG_BITS=20`: with MPICH's 4 protocol bits the match bits fit the
//!   provider's 46-bit `mem_tag_format`.
//!
//! The wheel is about 20 MB, so the test is ignored by default. Run it with
//!
//! ```sh
//! pip download --no-deps --only-binary :all: -d /tmp/whl mpich==5.0.2
//! NICEMU_MPICH_WHEEL=/tmp/whl/mpich-5.0.2-py3-none-manylinux_2_28_x86_64.whl \
//!     cargo test -p ofi-provider --test mpich_wheel -- --ignored
//! ```
//!
//! Without `NICEMU_MPICH_WHEEL` the test runs `pip download` itself.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmp() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-mpich-wheel")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The unpacked wheel's data directory (`bin/mpicc`, `bin/mpiexec`, `lib/mpich/`), with
/// the execute bits the zip format drops restored on `bin/`.
fn wheel() -> PathBuf {
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
            assert!(out.status.success(), "pip download mpich: {}", text(&out));
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
        text(&out)
    );
    let data = std::fs::read_dir(&unpacked)
        .expect("listing the wheel")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".data"))
        .expect("the wheel has no .data directory")
        .join("data");
    for e in std::fs::read_dir(data.join("bin")).expect("the wheel has no bin/") {
        let p = e.expect("listing bin/").path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .expect("making the wheel's programs executable");
    }
    data
}

/// A directory holding the provider as `libnicemu-fi.so`, for `FI_PROVIDER_PATH` (the
/// newest of the cdylib beside the test binary and in the profile directory).
fn provider_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    let lib = [
        deps.join("libnicemu_fi.so"),
        deps.join("../libnicemu_fi.so"),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max()
    .map(|(_, p)| p)
    .unwrap_or_else(|| panic!("libnicemu_fi.so was not built beside {}", deps.display()));
    let dir = tmp().join("provider");
    std::fs::create_dir_all(&dir).expect("creating the provider directory");
    let link = dir.join("libnicemu-fi.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lib, &link).expect("linking the provider");
    dir
}

/// The value of `name=value` in a counter line of `NICEMU_OFI_COUNTER_REPORT`.
fn counter(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[test]
#[ignore = "needs the PyPI mpich wheel; see the module documentation"]
fn mpich_runs_four_ranks_over_ch4_ofi_on_the_provider() {
    let data = wheel();
    let exe = tmp().join("mpi_ranks");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mpi_ranks.c");
    let out = Command::new("bash")
        .arg(data.join("bin/mpicc"))
        .args(["-Wall", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("running the wheel's mpicc");
    assert!(out.status.success(), "mpicc mpi_ranks.c: {}", text(&out));
    let out = Command::new("timeout")
        .arg("300")
        .arg(data.join("bin/mpiexec"))
        .args(["-n", "4"])
        .arg(&exe)
        .env("FI_PROVIDER_PATH", provider_dir())
        .env("FI_PROVIDER", "nicemu")
        .env("NICEMU_OFI_COUNTER_REPORT", "1")
        .env("MPIR_CVAR_CH4_NETMOD", "ofi")
        .env("MPIR_CVAR_NOLOCAL", "1")
        .env("MPIR_CVAR_CH4_OFI_ENABLE_ATOMICS", "0")
        .env("MPIR_CVAR_CH4_OFI_ENABLE_RMA", "0")
        .env("MPIR_CVAR_CH4_OFI_CONTEXT_ID_BITS", "16")
        .env("MPIR_CVAR_CH4_OFI_RANK_BITS", "0")
        .env("MPIR_CVAR_CH4_OFI_TAG_BITS", "20")
        .output()
        .expect("running the wheel's mpiexec");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ring: u64 = [0, 1, 192, 193, 16384, 16385, 100000, 1 << 20, 4 << 20]
        .iter()
        .sum();
    for rank in 0..4 {
        assert!(
            stdout.contains(&format!(
                "mpi_ranks: ok (rank {rank} of 4, {ring} B to its neighbour)"
            )),
            "{t}"
        );
        // The counter line exists only if the rank opened the provider; the fabric bytes
        // show that the messages went through the emulated NICs, not MPICH's shared memory.
        let prefix = format!("nicemu-ofi: rank {rank} of 4: ");
        let line = stderr
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no counter line of rank {rank}:\n{t}"));
        assert!(counter(line, "fabric.bytes_sent") > ring, "{line}");
        assert!(counter(line, "fabric.bytes_received") > ring, "{line}");
        assert_eq!(counter(line, "fabric.network_timeouts"), 0, "{line}");
        assert!(counter(line, "c_cq_cntrs.success_tx_cntr") >= 9, "{line}");
        assert!(counter(line, "c_rmu_cntrs.ptl_success_cntr") >= 9, "{line}");
        assert!(counter(line, "c_lpe_cntrs.get_cmds") >= 1, "{line}");
    }
}
