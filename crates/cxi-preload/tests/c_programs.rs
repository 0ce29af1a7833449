//! C programs that drive `/dev/cxi0` exactly as HPE's libcxi does (open, write of uAPI
//! structs, mmap of tokens, stores into the doorbell page, reading what the NIC writes
//! back), run with `libnicemu_cxi.so` preloaded: `tests/c/*.c`. Each prints why and returns
//! early when gcc is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// `libnicemu_cxi.so` as cargo built it for this test.
fn library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        // The test binary is target/<profile>/deps/c_programs-*; the cdylib is built beside
        // it (deps/) and, by `cargo build`, in target/<profile>/: take the newest.
        let exe = std::env::current_exe().expect("test executable path");
        let deps = exe.parent().expect("deps directory");
        [
            deps.join("libnicemu_cxi.so"),
            deps.join("../libnicemu_cxi.so"),
        ]
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("libnicemu_cxi.so was not built beside {}", deps.display()))
    })
}

fn gcc_missing() -> bool {
    if Command::new("gcc").arg("--version").output().is_err() {
        eprintln!("skipped: gcc not found");
        return true;
    }
    false
}

fn build(name: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cxi-{name}"));
    let o = Command::new("gcc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(c_dir().join(format!("{name}.c")))
        .output()
        .expect("running gcc");
    assert!(
        o.status.success(),
        "compiling {name}.c failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run a test program alone (its own one-node machine), with the library preloaded and
/// without launcher variables inherited from whoever runs the tests.
fn run(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = build(name);
    Command::new(&exe)
        .envs(env.iter().copied())
        .env("LD_PRELOAD", library())
        .env_remove("PMI_PORT")
        .env_remove("PMI_FD")
        .env_remove("PMI_RANK")
        .env_remove("PMI_SIZE")
        .env_remove("PMI_ID")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .output()
        .expect("running the test program")
}

fn check(name: &str) {
    check_with(name, &[]);
}

fn check_with(name: &str, env: &[(&str, &str)]) {
    if gcc_missing() {
        return;
    }
    let o = run(name, env);
    assert!(o.status.success(), "{name}: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("{name}: ok")), "{name}: {}", text(&o));
}

#[test]
fn sysfs_and_device_info_are_what_libcxi_reads() {
    check("sysfs_devinfo");
}

#[test]
fn bad_uapi_use_gets_the_drivers_errors() {
    check("uapi_errors");
}

#[test]
fn doorbell_stores_reach_the_nic_and_bad_commands_stop_the_queue() {
    check("doorbell");
}

#[test]
fn closing_the_device_releases_its_pages_and_objects() {
    check("close_releases");
}

#[test]
fn counters_without_a_write_back_buffer_and_mappings_through_syscall() {
    check("counter");
}

/// `NICEMU_CXI_JOIN=start`: the node comes up in a thread when the library is loaded; the
/// program's first open of the device waits for it and the device works as before.
#[test]
fn the_node_brought_up_at_load_serves_the_device() {
    check_with("doorbell", &[("NICEMU_CXI_JOIN", "start")]);
}
