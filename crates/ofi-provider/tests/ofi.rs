//! The provider as libfabric sees it: structure layouts against the C headers, `fi_info -p
//! nicemu`, and the C program `tests/c/two_endpoints.c` linked with `-lfabric`. Each test
//! prints why and returns early when gcc, libfabric-dev or libfabric-bin is missing.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use nicemu_fi::ffi::types::*;

fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// Why the C side cannot be built here, if it cannot.
fn missing_c_toolchain() -> Option<String> {
    if Command::new("gcc").arg("--version").output().is_err() {
        return Some("gcc not found".into());
    }
    if !Path::new("/usr/include/rdma/fabric.h").exists() {
        return Some("libfabric headers not found (apt-get install libfabric-dev)".into());
    }
    None
}

/// A directory holding the provider as `libnicemu-fi.so` (libfabric's naming), for
/// `FI_PROVIDER_PATH`.
fn provider_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The test binary is target/<profile>/deps/ofi-*. `cargo build` puts the cdylib in
        // target/<profile>/; a bare `cargo test` leaves it in target/<profile>/deps/ only:
        // take the newest of the two.
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
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-provider");
        std::fs::create_dir_all(&dir).expect("creating the provider directory");
        let link = dir.join("libnicemu-fi.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).expect("linking the provider");
        dir
    })
}

fn gcc(src: &str, out: &Path, libs: &[&str]) {
    let o = Command::new("gcc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(out)
        .arg(c_dir().join(src))
        .args(libs)
        .output()
        .expect("running gcc");
    assert!(
        o.status.success(),
        "compiling {src} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn layouts_match_the_c_headers() {
    if let Some(why) = missing_c_toolchain() {
        eprintln!("skipped: {why}");
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-layouts");
    gcc("layouts.c", &exe, &[]);
    let out = Command::new(&exe).output().expect("running layouts");
    assert!(out.status.success(), "{}", text(&out));
    let c: std::collections::HashMap<String, usize> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect();
    let rust: Vec<(&str, usize)> = vec![
        ("fi_info", size_of::<fi_info>()),
        ("fi_tx_attr", size_of::<fi_tx_attr>()),
        ("fi_rx_attr", size_of::<fi_rx_attr>()),
        ("fi_ep_attr", size_of::<fi_ep_attr>()),
        ("fi_domain_attr", size_of::<fi_domain_attr>()),
        ("fi_fabric_attr", size_of::<fi_fabric_attr>()),
        ("fi_provider", size_of::<fi_provider>()),
        ("fid", size_of::<fid>()),
        ("fi_ops", size_of::<fi_ops>()),
        ("fid_fabric", size_of::<fid_fabric>()),
        ("fid_domain", size_of::<fid_domain>()),
        ("fid_av", size_of::<fid_av>()),
        ("fid_cq", size_of::<fid_cq>()),
        ("fid_ep", size_of::<fid_ep>()),
        ("fi_ops_fabric", size_of::<fi_ops_fabric>()),
        ("fi_ops_domain", size_of::<fi_ops_domain>()),
        ("fi_ops_av", size_of::<fi_ops_av>()),
        ("fi_ops_cq", size_of::<fi_ops_cq>()),
        ("fi_ops_ep", size_of::<fi_ops_ep>()),
        ("fi_ops_cm", size_of::<fi_ops_cm>()),
        ("fi_ops_msg", size_of::<fi_ops_msg>()),
        ("fi_ops_tagged", size_of::<fi_ops_tagged>()),
        ("fi_av_attr", size_of::<fi_av_attr>()),
        ("fi_cq_attr", size_of::<fi_cq_attr>()),
        ("fi_cq_tagged_entry", size_of::<fi_cq_tagged_entry>()),
        ("fi_cq_err_entry", size_of::<fi_cq_err_entry>()),
        ("fi_msg", size_of::<fi_msg>()),
        ("fi_msg_tagged", size_of::<fi_msg_tagged>()),
        ("fi_eq_attr", size_of::<fi_eq_attr>()),
        ("fi_eq_err_entry", size_of::<fi_eq_err_entry>()),
        ("fid_eq", size_of::<fid_eq>()),
        ("fi_ops_eq", size_of::<fi_ops_eq>()),
        ("fi_info.nic", offset_of!(fi_info, nic)),
        ("fi_info.fabric_attr", offset_of!(fi_info, fabric_attr)),
        ("fi_domain_attr.tclass", offset_of!(fi_domain_attr, tclass)),
        (
            "fi_domain_attr.mr_mode",
            offset_of!(fi_domain_attr, mr_mode),
        ),
        (
            "fi_ep_attr.mem_tag_format",
            offset_of!(fi_ep_attr, mem_tag_format),
        ),
        ("fi_provider.getinfo", offset_of!(fi_provider, getinfo)),
        ("fi_provider.cleanup", offset_of!(fi_provider, cleanup)),
        (
            "fi_ops_domain.query_collective",
            offset_of!(fi_ops_domain, query_collective),
        ),
        ("fid_ep.collective", offset_of!(fid_ep, collective)),
        (
            "fi_cq_err_entry.err_data_size",
            offset_of!(fi_cq_err_entry, err_data_size),
        ),
        ("fi_msg_tagged.data", offset_of!(fi_msg_tagged, data)),
        ("fi_cntr_attr", size_of::<fi_cntr_attr>()),
        ("fid_cntr", size_of::<fid_cntr>()),
        ("fi_ops_cntr", size_of::<fi_ops_cntr>()),
        ("fi_cntr_attr.flags", offset_of!(fi_cntr_attr, flags)),
        ("fi_ops_cntr.seterr", offset_of!(fi_ops_cntr, seterr)),
        ("fi_wait_attr", size_of::<fi_wait_attr>()),
        ("fid_wait", size_of::<fid_wait>()),
        ("fi_ops_wait", size_of::<fi_ops_wait>()),
    ];
    for (name, r) in rust {
        assert_eq!(c.get(name), Some(&r), "{name}: C vs Rust");
    }
}

#[test]
fn fi_info_lists_the_provider() {
    if Command::new("fi_info").arg("--version").output().is_err() {
        eprintln!("skipped: fi_info not found (apt-get install libfabric-bin)");
        return;
    }
    let out = Command::new("fi_info")
        .args(["-p", "nicemu"])
        .env("FI_PROVIDER_PATH", provider_dir())
        .env_remove("FI_PROVIDER")
        .output()
        .expect("running fi_info");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("provider: nicemu"), "{t}");
    assert!(s.contains("fabric: nicemu"), "{t}");
    assert!(s.contains("domain: cxi0"), "{t}");
    assert!(s.contains("FI_EP_RDM"), "{t}");
    // What it does not implement, it does not offer.
    for (flag, what) in [("-c", "FI_MULTI_RECV"), ("-t", "FI_EP_MSG")] {
        let out = Command::new("fi_info")
            .args(["-p", "nicemu", flag, what])
            .env("FI_PROVIDER_PATH", provider_dir())
            .output()
            .expect("running fi_info");
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(
            !s.contains("provider: nicemu"),
            "{what} offered:\n{}",
            text(&out)
        );
        assert!(s.contains("-61") || !out.status.success(), "{}", text(&out));
    }
    // RMA and atomics when asked for.
    let out = Command::new("fi_info")
        .args(["-p", "nicemu", "-c", "FI_RMA|FI_ATOMIC", "-v"])
        .env("FI_PROVIDER_PATH", provider_dir())
        .output()
        .expect("running fi_info");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("FI_RMA") && s.contains("FI_ATOMIC") && s.contains("FI_REMOTE_WRITE"),
        "{}",
        text(&out)
    );
    // Without the path, libfabric does not know the provider.
    let out = Command::new("fi_info")
        .args(["-p", "nicemu"])
        .env_remove("FI_PROVIDER_PATH")
        .output()
        .expect("running fi_info");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("provider: nicemu"),
        "{}",
        text(&out)
    );
}

#[test]
fn two_endpoints_exchange_tagged_and_untagged_messages_from_c() {
    if let Some(why) = missing_c_toolchain() {
        eprintln!("skipped: {why}");
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-two-endpoints");
    gcc("two_endpoints.c", &exe, &["-lfabric"]);
    let out = Command::new(&exe)
        .env("FI_PROVIDER_PATH", provider_dir())
        .env("FI_PROVIDER", "nicemu")
        .output()
        .expect("running two_endpoints");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("two_endpoints: ok (32 tagged exchanges up to 4194304 B)"),
        "{t}"
    );
}

/// Build `tests/c/<name>.c` with `-lfabric`, run it with the provider, and check that it
/// printed `<name>: ok`. Returns early (printing why) without gcc or libfabric-dev.
fn run_c_check(name: &str) {
    if let Some(why) = missing_c_toolchain() {
        eprintln!("skipped: {why}");
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ofi-{name}"));
    gcc(&format!("{name}.c"), &exe, &["-lfabric"]);
    let out = Command::new(&exe)
        .env("FI_PROVIDER_PATH", provider_dir())
        .env("FI_PROVIDER", "nicemu")
        .env_remove("NICEMU_OFI_RANK")
        .env_remove("NICEMU_OFI_SIZE")
        .output()
        .unwrap_or_else(|e| panic!("running {name}: {e}"));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("{name}: ok")),
        "{t}"
    );
}

/// A send the provider has no room for returns `-FI_EAGAIN` rather than blocking (256
/// unreceived 64 KiB sends hold every rendezvous id), and closing a domain or fabric whose
/// objects are open returns `-FI_EBUSY` (`tests/c/busy_and_backlog.c`).
#[test]
fn a_send_without_room_says_eagain_and_objects_in_use_do_not_close() {
    run_c_check("busy_and_backlog");
}

/// Poll sets and wait sets with a descriptor are refused with `-FI_ENOSYS`, not a call through a
/// null table entry (`tests/c/refused_objects.c`; fabtests' `fi_eq_test` crashed on it).
#[test]
fn objects_the_provider_lacks_are_refused_not_crashed_on() {
    run_c_check("refused_objects");
}

/// `fi_getinfo` as fabtests' `fi_getinfo_test` checks it: source and destination
/// addresses, the capabilities asked for and no more, `-FI_ENODATA` for what cannot be met
/// (`tests/c/getinfo.c`).
#[test]
fn getinfo_gives_addresses_and_only_what_was_asked() {
    run_c_check("getinfo");
}

/// Event queues: write, read, peek, a full queue, a timed-out blocking read, no error
/// events, `fi_trywait`, and the EQ bound to a domain, an AV and an endpoint
/// (`tests/c/event_queue.c`; fabtests' common setup needs them).
#[test]
fn event_queues_carry_written_events_and_bind() {
    run_c_check("event_queue");
}

/// A window of 72 posted 4 MiB receives (osu_bw's window is 64) fits an emulated node of
/// 512 MiB (`NICEMU_NODE_MEMORY_MIB`): the 8 bytes of room for remote CQ data must not
/// double a receive's staging buffer to the next power of two (`tests/c/recv_window.c`).
/// With half the node, 72 receives no longer fit: `fi_trecv` answers `-FI_ENOMEM`.
#[test]
fn a_window_of_4_mib_receives_fits_the_node_memory() {
    if let Some(why) = missing_c_toolchain() {
        eprintln!("skipped: {why}");
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-recv-window");
    gcc("recv_window.c", &exe, &["-lfabric"]);
    let run = |mib: &str| {
        Command::new(&exe)
            .env("FI_PROVIDER_PATH", provider_dir())
            .env("FI_PROVIDER", "nicemu")
            .env("NICEMU_NODE_MEMORY_MIB", mib)
            .env_remove("NICEMU_OFI_RANK")
            .env_remove("NICEMU_OFI_SIZE")
            .output()
            .expect("running recv_window")
    };
    let out = run("512");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("recv_window: ok (72 receives of 4194304 B)"),
        "{t}"
    );
    let out = run("256");
    let t = text(&out);
    assert!(!out.status.success(), "72 x 4 MiB fit 256 MiB: {t}");
    assert!(t.contains("fi_trecv") && t.contains("= -12"), "{t}");
}

/// Stock Open MPI (`--mca pml cm --mca mtl ofi`) on the provider, one rank without a
/// launcher (the provider builds its one-node machine in the process).
#[test]
fn open_mpi_runs_one_rank_over_the_mtl_ofi() {
    if Command::new("mpicc.openmpi")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: mpicc.openmpi not found (apt-get install openmpi-bin libopenmpi-dev)");
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-mpi-self");
    let o = Command::new("mpicc.openmpi")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(c_dir().join("mpi_self.c"))
        .output()
        .expect("running mpicc.openmpi");
    assert!(o.status.success(), "{}", text(&o));
    // Run as a singleton (no mpirun: no daemons, nothing left behind), selecting the MTL
    // through the environment as `--mca` would.
    let out = Command::new(&exe)
        .env("FI_PROVIDER_PATH", provider_dir())
        .env("OMPI_MCA_pml", "cm")
        .env("OMPI_MCA_mtl", "ofi")
        .env("OMPI_MCA_mtl_ofi_provider_include", "nicemu")
        .env("OMPI_MCA_mtl_base_verbose", "100")
        .output()
        .expect("running the MPI program");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("mpi_self: ok (rank 0 of 1)"),
        "{t}"
    );
    // The OFI MTL was selected, and on this provider (it names the domain).
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mtl:ofi:provider: cxi0"), "{t}");
}

/// Whether Open MPI is here; outside CI a missing one skips with the reason, under `CI=true`
/// it fails (`.ci/run` installs openmpi-bin and libopenmpi-dev).
fn open_mpi_present() -> bool {
    let missing = ["mpicc.openmpi", "mpirun.openmpi"]
        .into_iter()
        .find(|tool| Command::new(tool).arg("--version").output().is_err());
    match missing {
        None => true,
        Some(tool) => {
            let why = format!("{tool} not found (apt-get install openmpi-bin libopenmpi-dev)");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// The values of `name=value` pairs in a counter line of `NICEMU_OFI_COUNTER_REPORT`.
fn counter(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// Four Open MPI ranks, each its own process hosting its own emulated NIC, started by
/// `mpirun` with the MTL on the provider: tagged messages of 0 B to 4 MiB around a ring, any
/// source, and allreduces (`tests/c/mpi_ranks.c`), with the traffic seen in every NIC's
/// hardware counters and the fabric between processes (`NICEMU_OFI_COUNTER_REPORT`).
#[test]
fn open_mpi_runs_four_ranks_in_four_processes_over_the_mtl_ofi() {
    if !open_mpi_present() {
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-mpi-ranks");
    let o = Command::new("mpicc.openmpi")
        .args(["-Wall", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(c_dir().join("mpi_ranks.c"))
        .output()
        .expect("running mpicc.openmpi");
    assert!(o.status.success(), "{}", text(&o));
    let mut cmd = Command::new("mpirun.openmpi");
    cmd.args(["-np", "4", "--oversubscribe", "--bind-to", "none"])
        .args(["--mca", "pml", "cm", "--mca", "mtl", "ofi"])
        .args(["--mca", "mtl_ofi_provider_include", "nicemu"])
        .args(["-x", "FI_PROVIDER_PATH", "-x", "NICEMU_OFI_COUNTER_REPORT"])
        .arg(&exe)
        .env("FI_PROVIDER_PATH", provider_dir())
        .env("NICEMU_OFI_COUNTER_REPORT", "1")
        .env_remove("FI_PROVIDER");
    // Open MPI refuses to run as root unless told (CI containers run as root); for other
    // users these variables change nothing.
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = cmd.output().expect("running mpirun.openmpi");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Every ring message, 0 B to 4 MiB.
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
        let prefix = format!("nicemu-ofi: rank {rank} of 4: ");
        let line = stderr
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no counter line of rank {rank}:\n{t}"));
        // Each rank's NIC sent its ring messages (and its share of the allreduces) to
        // other processes: the 4 MiB message alone is more than 4 MiB of fabric payload.
        assert!(counter(line, "fabric.bytes_sent") > ring, "{line}");
        assert!(counter(line, "fabric.bytes_received") > ring, "{line}");
        assert_eq!(counter(line, "fabric.network_timeouts"), 0, "{line}");
        // The NIC itself did the work: commands completed, messages matched on its PtlTEs,
        // and rendezvous data pulled with Gets.
        assert!(counter(line, "c_cq_cntrs.success_tx_cntr") >= 9, "{line}");
        assert!(counter(line, "c_rmu_cntrs.ptl_success_cntr") >= 9, "{line}");
        assert!(counter(line, "c_lpe_cntrs.get_cmds") >= 1, "{line}");
    }
}

/// Counters: set/add/err values, a timed-out wait, and counters bound to two endpoints
/// counting sends, injects and receives (IDC, eager, rendezvous) without CQ entries, a
/// truncated and a cancelled receive as errors (`tests/c/counters.c`).
#[test]
fn counters_count_what_the_endpoints_complete() {
    run_c_check("counters");
}

/// `fi_trecvmsg` with `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD`: `FI_ENOMSG` for nothing, a peek
/// that leaves the message, a claimed rendezvous message only its claim receives, both
/// discards (`tests/c/peek.c`).
#[test]
fn peek_claim_and_discard_find_unexpected_messages() {
    run_c_check("peek");
}

/// `FI_WAIT_FD`: the descriptors of an EQ, a CQ and a counter from `fi_control(FI_GETWAIT)`
/// are readable exactly while there is something to read; `fi_trywait` refuses sleep while a
/// receive is in flight (`tests/c/wait_fd.c`).
#[test]
fn file_descriptor_wait_objects_follow_their_queues() {
    run_c_check("wait_fd");
}

/// Wait sets: an EQ, a CQ and a counter joined to one; `fi_wait` times out with nothing to
/// read and returns for an event, a counter change and an arriving message
/// (`tests/c/wait_set.c`).
#[test]
fn wait_sets_wake_for_any_member() {
    run_c_check("wait_set");
}

/// Memory registration, RMA and atomics between two endpoints (`tests/c/rma.c`): writes
/// and reads of 1 B to 512 KiB, remote CQ data, injects, atomics over 8- to 64-bit
/// integers and doubles, `fi_query_atomic`/`fi_atomicvalid`, accesses outside a region,
/// with a wrong key or to a read-only or closed region ending in `FI_EACCES` error
/// completions, and the application's own keys without `FI_MR_PROV_KEY`.
#[test]
fn rma_and_atomics_reach_registered_memory_and_bad_accesses_fail() {
    run_c_check("rma");
}

/// The memory registration, RMA and atomic structures (`src/ffi/rma_types.rs`) against
/// gcc's (`tests/c/layouts.c`).
#[test]
fn rma_layouts_match_the_c_headers() {
    use nicemu_fi::ffi::rma_types::*;
    if let Some(why) = missing_c_toolchain() {
        eprintln!("skipped: {why}");
        return;
    }
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-layouts-rma");
    gcc("layouts.c", &exe, &[]);
    let out = Command::new(&exe).output().expect("running layouts");
    assert!(out.status.success(), "{}", text(&out));
    let c: std::collections::HashMap<String, usize> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect();
    let rust: Vec<(&str, usize)> = vec![
        ("fid_mr", size_of::<fid_mr>()),
        ("fi_mr_attr", size_of::<fi_mr_attr>()),
        ("fi_ops_mr", size_of::<fi_ops_mr>()),
        ("fi_rma_iov", size_of::<fi_rma_iov>()),
        ("fi_msg_rma", size_of::<fi_msg_rma>()),
        ("fi_ops_rma", size_of::<fi_ops_rma>()),
        ("fi_ioc", size_of::<fi_ioc>()),
        ("fi_rma_ioc", size_of::<fi_rma_ioc>()),
        ("fi_msg_atomic", size_of::<fi_msg_atomic>()),
        ("fi_atomic_attr", size_of::<fi_atomic_attr>()),
        ("fi_ops_atomic", size_of::<fi_ops_atomic>()),
        ("fid_mr.key", offset_of!(fid_mr, key)),
        (
            "fi_mr_attr.requested_key",
            offset_of!(fi_mr_attr, requested_key),
        ),
        ("fi_mr_attr.iface", offset_of!(fi_mr_attr, iface)),
        ("fi_msg_rma.data", offset_of!(fi_msg_rma, data)),
        ("fi_msg_atomic.op", offset_of!(fi_msg_atomic, op)),
        ("fi_msg_atomic.data", offset_of!(fi_msg_atomic, data)),
        (
            "fi_ops_atomic.compwritevalid",
            offset_of!(fi_ops_atomic, compwritevalid),
        ),
        ("fi_ops_rma.injectdata", offset_of!(fi_ops_rma, injectdata)),
        (
            "fi_ops_domain.query_atomic",
            offset_of!(nicemu_fi::ffi::types::fi_ops_domain, query_atomic),
        ),
    ];
    for (name, r) in rust {
        assert_eq!(c.get(name), Some(&r), "{name}: C vs Rust");
    }
}
