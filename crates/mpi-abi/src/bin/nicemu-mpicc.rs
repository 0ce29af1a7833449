//! `nicemu-mpicc`: compile and link a C program against nicemu's MPI library
//! (`libmpi_abi.so.1`), as `mpicc` does for other MPI libraries.
//!
//! ```text
//! nicemu-mpicc -O2 -o hello hello.c     # compile and link (rpath set: runs as is)
//! nicemu-mpicc -c hello.c               # compile only
//! nicemu-mpicc -show -o hello hello.c   # print the compiler command instead
//! nicemu-mpicc -static-mpi -o hello hello.c  # link libmpi_abi.a instead of the .so
//! ```
//!
//! It finds `mpi.h` and the library
//! - in `$NICEMU_MPI_INCLUDE` and `$NICEMU_MPI_LIBDIR` when set;
//! - else next to itself: the library in its own directory (cargo's target directory,
//!   where `cargo build` puts both), in `../lib` (an installed tree) or in `deps/` (where a
//!   bare `cargo test` leaves it), the most recent of them; the header in `../include` (an installed tree) or in the
//!   source tree it was built from.
//!
//! The C compiler is `$NICEMU_CC`, else `$CC`, else `cc`.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const LIB: &str = "libmpi_abi.so";
const SONAME: &str = "libmpi_abi.so.1";
const STATIC: &str = "libmpi_abi.a";
/// What the static library needs from the system (the Rust standard library's needs).
const STATIC_DEPS: [&str; 4] = ["-lpthread", "-ldl", "-lm", "-lgcc_s"];

fn first_existing(cands: impl IntoIterator<Item = PathBuf>, file: &str) -> Option<PathBuf> {
    cands.into_iter().find(|d| d.join(file).is_file())
}

/// Of the directories holding `file`, the one whose copy is the most recent (cargo leaves
/// the library both in its target directory and in `deps/`, and only some commands refresh
/// the first).
fn newest(cands: impl IntoIterator<Item = PathBuf>, file: &str) -> Option<PathBuf> {
    cands
        .into_iter()
        .filter_map(|d| {
            let t = std::fs::metadata(d.join(file))
                .and_then(|m| m.modified())
                .ok()?;
            Some((t, d))
        })
        .max_by_key(|(t, _)| *t)
        .map(|(_, d)| d)
}

fn locate(lib_file: &str) -> Result<(PathBuf, PathBuf), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let here = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let include = match std::env::var_os("NICEMU_MPI_INCLUDE") {
        Some(d) => PathBuf::from(d),
        None => first_existing(
            [
                here.join("../include"),
                here.join("include"),
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include"),
            ],
            "mpi.h",
        )
        .ok_or("mpi.h not found (set NICEMU_MPI_INCLUDE)")?,
    };
    let lib = match std::env::var_os("NICEMU_MPI_LIBDIR") {
        Some(d) => PathBuf::from(d),
        None => newest([here.clone(), here.join("../lib"), here.join("deps")], lib_file).ok_or(format!(
            "{lib_file} not found next to {} (build it with `cargo build -p mpi-abi`, or set NICEMU_MPI_LIBDIR)",
            exe.display()
        ))?,
    };
    let include = include.canonicalize().unwrap_or(include);
    let lib = lib.canonicalize().unwrap_or(lib);
    Ok((include, lib))
}

/// Programs linked with `-lmpi_abi` record the SONAME `libmpi_abi.so.1`: make sure a file
/// of that name sits beside the library so the rpath finds it.
fn ensure_soname_link(lib: &Path) -> Result<(), String> {
    let link = lib.join(SONAME);
    if link.exists() {
        return Ok(());
    }
    std::os::unix::fs::symlink(LIB, &link)
        .or_else(|e| if link.exists() { Ok(()) } else { Err(e) })
        .map_err(|e| format!("creating {}: {e}", link.display()))
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let show = args.iter().any(|a| a == "-show");
    let static_mpi = args.iter().any(|a| a == "-static-mpi");
    args.retain(|a| a != "-show" && a != "-static-mpi");
    let (include, lib) = match locate(if static_mpi { STATIC } else { LIB }) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("nicemu-mpicc: {e}");
            return ExitCode::from(2);
        }
    };
    let cc = std::env::var("NICEMU_CC")
        .or_else(|_| std::env::var("CC"))
        .unwrap_or_else(|_| "cc".into());
    let link = !args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let mut cmd = vec![cc, format!("-I{}", include.display())];
    cmd.extend(args);
    if link && static_mpi {
        cmd.push(lib.join(STATIC).display().to_string());
        cmd.extend(STATIC_DEPS.iter().map(|s| s.to_string()));
    } else if link {
        cmd.push(format!("-L{}", lib.display()));
        cmd.push(format!("-Wl,-rpath,{}", lib.display()));
        cmd.push("-lmpi_abi".into());
    }
    if show {
        println!("{}", cmd.join(" "));
        return ExitCode::SUCCESS;
    }
    if link
        && !static_mpi
        && let Err(e) = ensure_soname_link(&lib)
    {
        eprintln!("nicemu-mpicc: {e}");
        return ExitCode::from(2);
    }
    match Command::new(&cmd[0]).args(&cmd[1..]).status() {
        Ok(st) if st.success() => ExitCode::SUCCESS,
        Ok(st) => ExitCode::from(st.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("nicemu-mpicc: running {}: {e}", cmd[0]);
            ExitCode::from(2)
        }
    }
}
