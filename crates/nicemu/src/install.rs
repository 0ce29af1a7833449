//! `nicemu install --prefix DIR`: lay out what cargo built as other software expects to find
//! an MPI library and a libfabric provider, the way MPICH and libfabric install:
//!
//! ```text
//! DIR/bin/nicemu, DIR/bin/nicemu-mpicc
//! DIR/include/mpi.h
//! DIR/lib/libmpi_abi.so.1, DIR/lib/libmpi_abi.so -> libmpi_abi.so.1, DIR/lib/libmpi_abi.a
//! DIR/lib/libfabric/libnicemu-fi.so        (libfabric's FI_PROVIDER_PATH scan loads *-fi.so)
//! DIR/lib/pkgconfig/nicemu-mpi.pc, DIR/lib/pkgconfig/nicemu-fi.pc
//! DIR/share/nicemu/env.sh                  (PATH, LD_LIBRARY_PATH, FI_PROVIDER_PATH, PKG_CONFIG_PATH)
//! ```
//!
//! It copies from the cargo target directory this binary runs from (or `--from`), and builds
//! nothing: what is missing there is named with the `cargo build` command that makes it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

/// The header of the MPI 5.0 standard ABI, as the library of this source tree was built with.
const MPI_H: &str = include_str!("../../mpi-abi/include/mpi.h");

#[derive(Args)]
pub struct InstallArgs {
    /// The directory to install into (created if needed; files already there are replaced).
    #[arg(long, value_name = "DIR")]
    prefix: PathBuf,
    /// The cargo target directory to copy from (default: the one this `nicemu` runs from,
    /// e.g. target/release).
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
}

/// A file the install takes from the target directory.
struct Part {
    /// Its name in the target directory.
    built: &'static str,
    /// Where it goes, relative to the prefix.
    dest: &'static str,
    /// The package that builds it.
    package: &'static str,
    /// Whether the install can do without it.
    optional: bool,
}

const PARTS: [Part; 5] = [
    Part {
        built: "nicemu",
        dest: "bin/nicemu",
        package: "nicemu",
        optional: false,
    },
    Part {
        built: "nicemu-mpicc",
        dest: "bin/nicemu-mpicc",
        package: "mpi-abi",
        optional: false,
    },
    Part {
        built: "libmpi_abi.so",
        dest: "lib/libmpi_abi.so.1",
        package: "mpi-abi",
        optional: false,
    },
    Part {
        built: "libmpi_abi.a",
        dest: "lib/libmpi_abi.a",
        package: "mpi-abi",
        optional: true,
    },
    Part {
        built: "libnicemu_fi.so",
        dest: "lib/libfabric/libnicemu-fi.so",
        package: "ofi-provider",
        optional: false,
    },
];

/// Where `file` was built: the target directory itself or its `deps/` (where cargo leaves
/// the libraries of dependencies), the most recent copy.
fn find_built(from: &Path, file: &str) -> Option<PathBuf> {
    [from.join(file), from.join("deps").join(file)]
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
}

/// Write `bytes` (or copy `src`) to `dest` through a temporary file and a rename, so a program
/// running from the old file keeps running and a reader never sees half a file.
fn put(dest: &Path, src: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = dest.parent().context("destination without a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.nicemu-install",
        dest.file_name().unwrap_or_default().to_string_lossy()
    ));
    match src {
        Some(src) => std::fs::copy(src, &tmp)
            .map(drop)
            .with_context(|| format!("copying {} to {}", src.display(), tmp.display()))?,
        None => {
            std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?
        }
    }
    std::fs::rename(&tmp, dest).with_context(|| format!("renaming to {}", dest.display()))
}

fn symlink(target: &str, link: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(link) {
        Ok(_) => {
            std::fs::remove_file(link).with_context(|| format!("replacing {}", link.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("{}", link.display())),
    }
    std::os::unix::fs::symlink(target, link).with_context(|| format!("linking {}", link.display()))
}

/// Text of the environment file, the pkg-config files and their names, for an install in
/// `prefix` (absolute).
fn generated(prefix: &Path) -> Vec<(&'static str, String)> {
    let p = prefix.display();
    // The prefix as one single-quoted shell word.
    let quoted = format!("'{}'", p.to_string().replace('\'', r"'\''"));
    let version = env!("CARGO_PKG_VERSION");
    vec![
        (
            "share/nicemu/env.sh",
            format!(
                "# nicemu installed in {p}: source this file (`. {p}/share/nicemu/env.sh`) to put\n\
                 # its programs on PATH, libmpi_abi.so.1 on the loader's path, the libfabric\n\
                 # provider `nicemu` on libfabric's provider path and the .pc files on pkg-config's.\n\
                 NICEMU_PREFIX={quoted}\n\
                 export NICEMU_PREFIX\n\
                 PATH=\"$NICEMU_PREFIX/bin${{PATH:+:$PATH}}\"\n\
                 LD_LIBRARY_PATH=\"$NICEMU_PREFIX/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\"\n\
                 FI_PROVIDER_PATH=\"$NICEMU_PREFIX/lib/libfabric${{FI_PROVIDER_PATH:+:$FI_PROVIDER_PATH}}\"\n\
                 PKG_CONFIG_PATH=\"$NICEMU_PREFIX/lib/pkgconfig${{PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}}\"\n\
                 export PATH LD_LIBRARY_PATH FI_PROVIDER_PATH PKG_CONFIG_PATH\n"
            ),
        ),
        (
            "lib/pkgconfig/nicemu-mpi.pc",
            format!(
                "prefix={p}\n\
                 exec_prefix=${{prefix}}\n\
                 libdir=${{exec_prefix}}/lib\n\
                 includedir=${{prefix}}/include\n\
                 \n\
                 Name: nicemu-mpi\n\
                 Description: MPI 5.0 standard ABI library (libmpi_abi.so.1) over nicemu's emulated NICs\n\
                 Version: {version}\n\
                 Cflags: -I${{includedir}}\n\
                 Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lmpi_abi\n\
                 Libs.private: -lpthread -ldl -lm -lgcc_s\n"
            ),
        ),
        (
            "lib/pkgconfig/nicemu-fi.pc",
            format!(
                "prefix={p}\n\
                 exec_prefix=${{prefix}}\n\
                 libdir=${{exec_prefix}}/lib\n\
                 # The directory to give libfabric as FI_PROVIDER_PATH (provider name: nicemu).\n\
                 providerdir=${{libdir}}/libfabric\n\
                 \n\
                 Name: nicemu-fi\n\
                 Description: libfabric provider nicemu (libnicemu-fi.so), loaded by libfabric from FI_PROVIDER_PATH\n\
                 Version: {version}\n\
                 Cflags:\n\
                 Libs:\n"
            ),
        ),
    ]
}

/// The directory this binary runs from.
fn own_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running nicemu")?;
    Ok(exe.parent().map(Path::to_path_buf).unwrap_or_default())
}

pub fn run(args: InstallArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let from = match &args.from {
        Some(d) => d.clone(),
        None => own_dir()?,
    };
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for part in &PARTS {
        match find_built(&from, part.built) {
            Some(src) => found.push((part, src)),
            None if part.optional => {}
            None => missing.push(part),
        }
    }
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|p| p.built).collect();
        let mut packages: Vec<&str> = missing.iter().map(|p| p.package).collect();
        packages.dedup();
        let release = if from.file_name().is_some_and(|n| n == "release") {
            " --release"
        } else {
            ""
        };
        let pkgs: Vec<String> = packages.iter().map(|p| format!("-p {p}")).collect();
        bail!(
            "{} not found in {}: build first with `cargo build{release} {}`, then run this again \
             (nicemu install copies what cargo built, it builds nothing)",
            names.join(", "),
            from.display(),
            pkgs.join(" ")
        );
    }
    std::fs::create_dir_all(&args.prefix)
        .with_context(|| format!("creating {}", args.prefix.display()))?;
    let prefix = args
        .prefix
        .canonicalize()
        .with_context(|| format!("{}", args.prefix.display()))?;
    for (part, src) in &found {
        put(&prefix.join(part.dest), Some(src), &[])?;
        writeln!(
            out,
            "{} <- {}",
            prefix.join(part.dest).display(),
            src.display()
        )?;
    }
    symlink("libmpi_abi.so.1", &prefix.join("lib/libmpi_abi.so"))?;
    put(&prefix.join("include/mpi.h"), None, MPI_H.as_bytes())?;
    for (name, text) in generated(&prefix) {
        put(&prefix.join(name), None, text.as_bytes())?;
    }
    writeln!(
        out,
        "installed in {p}; to use it: . {p}/share/nicemu/env.sh",
        p = prefix.display()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of generated file `name` for an install in `prefix`.
    fn file(prefix: &str, name: &str) -> String {
        generated(Path::new(prefix))
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| text)
            .unwrap_or_else(|| panic!("no {name}"))
    }

    #[test]
    fn the_environment_file_prepends_the_install_to_each_path() {
        let env = file("/opt/nicemu", "share/nicemu/env.sh");
        assert!(env.contains("NICEMU_PREFIX='/opt/nicemu'"), "{env}");
        for (var, dir) in [
            ("PATH", "bin"),
            ("LD_LIBRARY_PATH", "lib"),
            ("FI_PROVIDER_PATH", "lib/libfabric"),
            ("PKG_CONFIG_PATH", "lib/pkgconfig"),
        ] {
            let line = format!("{var}=\"$NICEMU_PREFIX/{dir}${{{var}:+:${var}}}\"");
            assert!(env.contains(&line), "{line} not in\n{env}");
        }
        let pc = file("/opt/nicemu", "lib/pkgconfig/nicemu-mpi.pc");
        assert!(pc.starts_with("prefix=/opt/nicemu\n"), "{pc}");
        assert!(pc.contains("-lmpi_abi"), "{pc}");
    }

    #[test]
    fn a_prefix_with_a_quote_stays_one_shell_word() {
        let env = file("/tmp/it's here", "share/nicemu/env.sh");
        assert!(env.contains(r"NICEMU_PREFIX='/tmp/it'\''s here'"), "{env}");
    }

    #[test]
    fn a_missing_part_names_the_build_command_and_installs_nothing() {
        let from =
            std::env::temp_dir().join(format!("nicemu-install-empty-{}", std::process::id()));
        let empty = from.join("release");
        std::fs::create_dir_all(&empty).unwrap();
        let prefix = from.join("prefix");
        let args = InstallArgs {
            prefix: prefix.clone(),
            from: Some(empty.clone()),
        };
        let err = run(args, &mut Vec::new()).unwrap_err().to_string();
        assert!(
            err.contains("cargo build --release -p nicemu -p mpi-abi -p ofi-provider"),
            "{err}"
        );
        assert!(err.contains("libnicemu_fi.so"), "{err}");
        assert!(!prefix.exists());
        std::fs::remove_dir_all(&from).unwrap();
    }
}
