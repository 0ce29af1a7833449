//! `nicemu install --prefix DIR`: the installed tree is usable as MPICH's and libfabric's are.
//! A C program compiled with the installed `nicemu-mpicc` runs (alone and under the installed
//! `nicemu run`), and, where libfabric's `fi_info` is installed, the environment file lets
//! libfabric find the provider `nicemu`.
//!
//! The install copies from the target directory of the `nicemu` under test; `nicemu-mpicc`
//! is built there by `cargo test --workspace` (or `cargo build -p mpi-abi`), the libraries
//! by this crate's dev-dependencies.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nicemu() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nicemu"))
}

fn check(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A command with none of the variables that would point it elsewhere than the install.
fn clean(mut cmd: Command) -> Command {
    for v in [
        "NICEMU_MPI_INCLUDE",
        "NICEMU_MPI_LIBDIR",
        "FI_PROVIDER_PATH",
        "FI_PROVIDER",
        "PKG_CONFIG_PATH",
        "LD_LIBRARY_PATH",
        "PMI_RANK",
        "PMI_FD",
        "PMI_PORT",
        "PMI_SIZE",
        "NICEMU_NIC",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

/// `sh -c SCRIPT` after sourcing the install's environment file.
fn with_env(prefix: &Path, script: &str) -> Output {
    let mut cmd = clean(Command::new("sh"));
    cmd.arg("-c")
        .arg(format!(
            ". '{}/share/nicemu/env.sh' && {script}",
            prefix.display()
        ))
        .output()
        .expect("running sh")
}

/// Run `nicemu install --prefix PREFIX`, check it succeeded, return what it printed.
fn run_install(prefix: &Path) -> String {
    let out = nicemu()
        .arg("install")
        .arg("--prefix")
        .arg(prefix)
        .output()
        .unwrap();
    check(&out, "nicemu install")
}

fn install() -> PathBuf {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nicemu-install");
    let _ = std::fs::remove_dir_all(&prefix);
    run_install(&prefix);
    prefix.canonicalize().unwrap()
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn an_installed_tree_compiles_and_runs_c_programs_and_serves_libfabric() {
    let p = install();
    for f in [
        "bin/nicemu",
        "bin/nicemu-mpicc",
        "include/mpi.h",
        "lib/libmpi_abi.so.1",
        "lib/libfabric/libnicemu-fi.so",
        "lib/pkgconfig/nicemu-mpi.pc",
        "lib/pkgconfig/nicemu-fi.pc",
        "share/nicemu/env.sh",
    ] {
        assert!(p.join(f).is_file(), "{f} missing from the install");
    }
    assert_eq!(
        std::fs::read_link(p.join("lib/libmpi_abi.so")).unwrap(),
        Path::new("libmpi_abi.so.1")
    );

    // The installed wrapper takes mpi.h and the library from the install, not the build tree.
    let show = check(
        &clean(Command::new(p.join("bin/nicemu-mpicc")))
            .args(["-show", "-o", "hello", "hello.c"])
            .output()
            .unwrap(),
        "nicemu-mpicc -show",
    );
    let lib = p.join("lib");
    for want in [
        format!("-I{}", p.join("include").display()),
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
    ] {
        assert!(
            show.split_whitespace().any(|w| w == want),
            "{want} not in {show}"
        );
    }

    // Compile tests/c/hello.c with it and run the program alone and as a job of two.
    let hello = p.join("hello");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/c/hello.c");
    check(
        &clean(Command::new(p.join("bin/nicemu-mpicc")))
            .arg("-o")
            .arg(&hello)
            .arg(&src)
            .output()
            .unwrap(),
        "compiling hello.c with the installed nicemu-mpicc",
    );
    let alone = check(
        &clean(Command::new("timeout"))
            .arg("120")
            .arg(&hello)
            .output()
            .unwrap(),
        "./hello",
    );
    assert!(alone.contains("rank 0 of 1 on nicemu-"), "{alone}");
    let job = with_env(
        &p,
        &format!("timeout 120 nicemu run -n 2 -- '{}'", hello.display()),
    );
    let job = check(&job, "nicemu run -n 2 -- ./hello through env.sh");
    for r in 0..2 {
        assert!(job.contains(&format!("rank {r} of 2 on nicemu-")), "{job}");
    }
    // The environment file puts the installed nicemu first on PATH.
    let which = check(&with_env(&p, "command -v nicemu"), "command -v nicemu");
    assert_eq!(which.trim(), p.join("bin/nicemu").display().to_string());

    if on_path("pkg-config") {
        let flags = check(
            &with_env(&p, "pkg-config --cflags --libs nicemu-mpi"),
            "pkg-config nicemu-mpi",
        );
        assert!(
            flags.contains(&format!("-I{}", p.join("include").display())),
            "{flags}"
        );
        assert!(flags.contains("-lmpi_abi"), "{flags}");
        let dir = check(
            &with_env(&p, "pkg-config --variable=providerdir nicemu-fi"),
            "pkg-config nicemu-fi",
        );
        assert_eq!(dir.trim(), p.join("lib/libfabric").display().to_string());
    } else {
        eprintln!(
            "pkg-config not installed: the .pc files were not read (apt-get install pkg-config)"
        );
    }

    if on_path("fi_info") {
        let info = check(&with_env(&p, "fi_info -p nicemu"), "fi_info -p nicemu");
        assert!(info.contains("provider: nicemu"), "{info}");
        // Without the environment file libfabric does not know the provider.
        let bare = clean(Command::new("fi_info"))
            .args(["-p", "nicemu"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&bare.stdout).contains("provider: nicemu"),
            "fi_info found nicemu without the environment file"
        );
    } else {
        eprintln!(
            "fi_info not installed: libfabric's discovery of the installed provider was not \
             checked (apt-get install libfabric-bin)"
        );
    }
}

#[test]
fn an_install_run_twice_replaces_the_files_in_place() {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nicemu-install-twice");
    let _ = std::fs::remove_dir_all(&prefix);
    for _ in 0..2 {
        let text = run_install(&prefix);
        assert!(text.contains("share/nicemu/env.sh"), "{text}");
    }
    let leftovers: Vec<_> = walk(&prefix)
        .into_iter()
        .filter(|f| f.to_string_lossy().contains(".nicemu-install"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_install_from_a_directory_without_the_libraries_names_what_to_build() {
    let empty = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nicemu-install-from-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let prefix = empty.join("prefix");
    let out = nicemu()
        .args(["install", "--from"])
        .arg(&empty)
        .arg("--prefix")
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cargo build -p nicemu -p mpi-abi -p ofi-provider"),
        "{err}"
    );
    assert!(!prefix.exists());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}
