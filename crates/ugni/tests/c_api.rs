//! The C API as C programs see it: `tests/c/*.c` compiled with gcc against
//! `include/gni_pub.h` and linked with `-lugni` (libugni.so.0), run alone or as jobs of
//! two processes under `nicemu run`'s launcher; plus the header's declarations against the
//! library's exported symbols. Each test prints why and returns early without gcc.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest a program may run.
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn no_gcc() -> bool {
    if Command::new("gcc").arg("--version").output().is_err() {
        eprintln!("skipped: gcc not found");
        return true;
    }
    false
}

/// A directory with the library as `libugni.so` and `libugni.so.0` (its SONAME).
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The test binary is target/<profile>/deps/c_api-*; `cargo test` builds the cdylib
        // into target/<profile>/deps (and `cargo build` into target/<profile>): the newest.
        let exe = std::env::current_exe().expect("test executable path");
        let deps = exe.parent().expect("deps directory");
        let lib = [deps.join("libugni.so"), deps.join("../libugni.so")]
            .into_iter()
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
            .max()
            .map(|(_, p)| p)
            .unwrap_or_else(|| panic!("libugni.so was not built beside {}", deps.display()));
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ugni-lib");
        std::fs::create_dir_all(&dir).expect("creating the library directory");
        for name in ["libugni.so", "libugni.so.0"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&lib, &link).expect("linking the library");
        }
        dir
    })
}

/// Compile `tests/c/<name>.c` (once per test binary run).
fn build(name: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ugni-c-{name}"));
    let lib = lib_dir();
    let o = Command::new("gcc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(crate_dir().join(format!("tests/c/{name}.c")))
        .arg(format!("-I{}", crate_dir().join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lugni")
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

/// Launcher and credential variables of the test's own environment, which a program run
/// alone must not see.
const LAUNCH_VARS: &[&str] = &[
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_FD",
    "PMI_PORT",
    "PMI_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_GNI_PTAG",
    "PMI_GNI_COOKIE",
    "PMI_GNI_DEV_ID",
    "PMI_GNI_LOC_ADDR",
];

/// Run `prog` alone with `env`, killed after [`RUN_LIMIT`].
fn run_alone(prog: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(prog);
    for v in LAUNCH_VARS {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starting a test program");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("waiting").is_some() {
            return child.wait_with_output().expect("collecting output");
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting output");
            panic!("{} did not finish: {}", prog.display(), text(&out));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Run `prog` as a job of `ranks` processes under `nicemu run`'s launcher (which hands each
/// rank its PMI_GNI_* credentials), with a fresh address-exchange directory.
fn run_job(prog: &Path, ranks: u32, env: &[(&str, &str)]) -> Result<String, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "ugni-job-{}-{}",
        prog.file_name().and_then(|n| n.to_str()).unwrap_or("x"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the exchange directory");
    let mut spec = launch::job::JobSpec::new(ranks, vec![prog.display().to_string()]);
    spec.env
        .push(("UGNI_TEST_DIR".into(), dir.display().to_string()));
    for (k, v) in env {
        spec.env.push(((*k).into(), (*v).into()));
    }
    spec.timeout = Some(RUN_LIMIT);
    let r = launch::job::run_captured(&spec);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn bad_calls_get_ugni_return_codes() {
    if no_gcc() {
        return;
    }
    let out = run_alone(&build("errors"), &[]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("errors: OK"),
        "{}",
        text(&out)
    );
}

#[test]
fn two_processes_connect_with_datagrams() {
    if no_gcc() {
        return;
    }
    let prog = build("datagram");
    let out = run_job(&prog, 2, &[]).unwrap_or_else(|e| panic!("datagram job: {e}"));
    assert_eq!(out.matches("datagram: OK").count(), 2, "{out}");
}

#[test]
fn two_processes_exchange_short_messages_with_credits() {
    if no_gcc() {
        return;
    }
    let prog = build("smsg");
    let out = run_job(&prog, 2, &[]).unwrap_or_else(|e| panic!("smsg job: {e}"));
    assert_eq!(out.matches("smsg: OK").count(), 2, "{out}");
}

#[test]
fn two_processes_put_get_amo_and_cq_write_in_their_own_memory() {
    if no_gcc() {
        return;
    }
    let prog = build("rma");
    let out = run_job(&prog, 2, &[]).unwrap_or_else(|e| panic!("rma job: {e}"));
    assert_eq!(out.matches("rma: OK").count(), 2, "{out}");
}

#[test]
fn a_full_cq_reports_its_overrun_once() {
    if no_gcc() {
        return;
    }
    let out = run_alone(&build("overrun"), &[]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("overrun: OK"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_cq_named_by_a_registration_can_be_destroyed_before_it() {
    if no_gcc() {
        return;
    }
    let out = run_alone(&build("teardown"), &[]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("teardown: OK"),
        "{}",
        text(&out)
    );
}

/// The structures of `gni_pub.h` as gcc lays them out are the ones the library reads and
/// writes.
#[test]
fn structure_layouts_match_the_library() {
    use std::mem::{offset_of, size_of};
    use ugni::ffi::misc::{
        gni_dev_res_desc_t, gni_job_limits_t, gni_job_res_desc_t, gni_ntt_descriptor_t,
        gni_version_info_t,
    };
    use ugni::ffi::unsupported::gni_msgq_attr_t;
    use ugni::ffi::{gni_mem_handle_t, gni_smsg_attr_t};
    if no_gcc() {
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ugni-c-layouts");
    let o = Command::new("gcc")
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(crate_dir().join("tests/c/layouts.c"))
        .arg(format!("-I{}", crate_dir().join("include").display()))
        .output()
        .expect("running gcc");
    assert!(o.status.success(), "{}", text(&o));
    let out = Command::new(&exe).output().expect("running layouts");
    let c: std::collections::HashMap<String, usize> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect();
    let mut want: Vec<(String, usize)> = vec![
        ("gni_mem_handle_t".into(), size_of::<gni_mem_handle_t>()),
        ("gni_smsg_attr_t".into(), size_of::<gni_smsg_attr_t>()),
        (
            "gni_smsg_attr_t.msg_buffer".into(),
            offset_of!(gni_smsg_attr_t, msg_buffer),
        ),
        (
            "gni_smsg_attr_t.buff_size".into(),
            offset_of!(gni_smsg_attr_t, buff_size),
        ),
        (
            "gni_smsg_attr_t.mem_hndl".into(),
            offset_of!(gni_smsg_attr_t, mem_hndl),
        ),
        (
            "gni_smsg_attr_t.mbox_offset".into(),
            offset_of!(gni_smsg_attr_t, mbox_offset),
        ),
        (
            "gni_smsg_attr_t.mbox_maxcredit".into(),
            offset_of!(gni_smsg_attr_t, mbox_maxcredit),
        ),
        (
            "gni_smsg_attr_t.msg_maxsize".into(),
            offset_of!(gni_smsg_attr_t, msg_maxsize),
        ),
        (
            "gni_post_descriptor_t".into(),
            firmware_spec::gemini::post::C_SIZE,
        ),
        ("gni_job_limits_t".into(), size_of::<gni_job_limits_t>()),
        (
            "gni_job_limits_t.ntt_size".into(),
            offset_of!(gni_job_limits_t, ntt_size),
        ),
        (
            "gni_ntt_descriptor_t".into(),
            size_of::<gni_ntt_descriptor_t>(),
        ),
        (
            "gni_ntt_descriptor_t.u".into(),
            offset_of!(gni_ntt_descriptor_t, table),
        ),
        (
            "gni_ntt_descriptor_t.flags".into(),
            offset_of!(gni_ntt_descriptor_t, flags),
        ),
        ("gni_version_info_t".into(), size_of::<gni_version_info_t>()),
        (
            "gni_version_info_t.kgni_version".into(),
            offset_of!(gni_version_info_t, kgni_version),
        ),
        (
            "gni_version_info_t.kgni_build_string".into(),
            offset_of!(gni_version_info_t, kgni_build_string),
        ),
        ("gni_dev_res_desc_t".into(), size_of::<gni_dev_res_desc_t>()),
        ("gni_job_res_desc_t".into(), size_of::<gni_job_res_desc_t>()),
        ("gni_msgq_attr_t".into(), size_of::<gni_msgq_attr_t>()),
        (
            "gni_msgq_attr_t.rcv_cq_sz".into(),
            offset_of!(gni_msgq_attr_t, rcv_cq_sz),
        ),
        ("gni_error_event_t".into(), 48),
        ("gni_cq_entry_t".into(), 8),
        ("gni_return_t".into(), 4),
    ];
    // The post descriptor, field by field, against firmware_spec's C image.
    for (name, off, _) in firmware_spec::gemini::post::C_LAYOUT {
        if !matches!(*name, "next_descr" | "prev_descr") {
            want.push((format!("gni_post_descriptor_t.{name}"), *off));
        }
    }
    for (k, v) in &want {
        assert_eq!(c.get(k), Some(v), "{k}: C {:?}, library {v}", c.get(k));
    }
    assert_eq!(c.len(), want.len(), "every line of layouts.c is compared");
}

/// Every function `gni_pub.h` declares is exported by the library, and the two tables.
#[test]
fn the_header_and_the_library_agree() {
    let header =
        std::fs::read_to_string(crate_dir().join("include/gni_pub.h")).expect("reading gni_pub.h");
    // Every identifier right before a '(' that is a function of the API (the macros with
    // arguments are upper case after the prefix: GNI_CQ_*, GNI_GET_*, GNI_JOB_*, ...).
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut declared: Vec<String> = Vec::new();
    for (i, _) in header.match_indices('(') {
        let start = header[..i]
            .rfind(|c: char| !is_ident(c))
            .map_or(0, |p| p + 1);
        let name = &header[start..i];
        let api = name.starts_with("GNI_")
            && name[4..].starts_with(|c: char| c.is_ascii_uppercase())
            && name[4..].contains(|c: char| c.is_ascii_lowercase());
        if (api || name.starts_with("gni_cq_")) && !declared.iter().any(|d| d == name) {
            declared.push(name.to_owned());
        }
    }
    assert!(declared.len() > 90, "{} functions found", declared.len());
    let Ok(nm) = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib_dir().join("libugni.so"))
        .output()
    else {
        eprintln!("skipped: nm not found");
        return;
    };
    let symbols = String::from_utf8_lossy(&nm.stdout);
    let exported: std::collections::HashSet<&str> = symbols
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let missing: Vec<&String> = declared
        .iter()
        .filter(|f| !exported.contains(f.as_str()))
        .collect();
    assert!(missing.is_empty(), "declared but not exported: {missing:?}");
    for table in ["gni_err_str", "gni_statistic_str"] {
        assert!(exported.contains(table), "{table} is not exported");
    }
}
