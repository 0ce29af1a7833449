//! Two "hosts" on one machine: two network namespaces made by the test (a veth pair between
//! them, addresses of its own), two ranks of `nicemu mpi-check` in each, started by hydra's
//! `mpiexec` (its PMI_FD sockets are inherited across `ip netns exec`). The ranks are told to
//! use the TCP fabric (`NICEMU_FABRIC=tcp`) and to publish their namespace's address
//! (`NICEMU_FABRIC_IP`); ranks in different namespaces can only reach each other through the
//! veth pair, whose byte counters the test reads afterwards. Skipped, with the reason printed,
//! where namespaces cannot be made (not root, no `ip`, no CAP_SYS_ADMIN) or hydra is absent.
//! The namespaces (and with them the veth pair) are deleted whatever happens.

use std::path::Path;
use std::process::Command;

const NICEMU: &str = env!("CARGO_BIN_EXE_nicemu");
const MPIEXEC: &str = "/usr/bin/mpiexec.hydra";

/// Two namespaces joined by a veth pair; deleted on drop.
struct Hosts {
    ns: [String; 2],
    ip: [String; 2],
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    fn make() -> Result<Hosts, String> {
        let id = std::process::id();
        let net = 1 + id % 250;
        let hosts = Hosts {
            ns: [format!("nicemu{id}a"), format!("nicemu{id}b")],
            ip: [format!("10.213.{net}.1"), format!("10.213.{net}.2")],
        };
        let veth = [format!("nmv{id}a"), format!("nmv{id}b")];
        for ns in &hosts.ns {
            ip(&["netns", "add", ns])?;
        }
        ip(&[
            "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
        ])?;
        for (i, dev) in veth.iter().enumerate() {
            let ns = &hosts.ns[i];
            ip(&["link", "set", dev, "netns", ns])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", hosts.ip[i]),
                "dev",
                dev,
            ])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// Bytes the namespace's veth end sent.
    fn tx_bytes(&self, i: usize) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], "cat"])
            .arg(format!(
                "/sys/class/net/nmv{}{}/statistics/tx_bytes",
                std::process::id(),
                ["a", "b"][i]
            ))
            .output()
            .expect("reading the veth counters");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

#[test]
fn four_ranks_on_two_namespaces_over_the_tcp_fabric() {
    if !Path::new(MPIEXEC).exists() {
        eprintln!("skipped: {MPIEXEC} is absent (Debian's mpich package provides it)");
        return;
    }
    let hosts = match Hosts::make() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("skipped: cannot make network namespaces here ({e})");
            return;
        }
    };
    for nic in ["cassini", "gemini"] {
        let before = [hosts.tx_bytes(0), hosts.tx_bytes(1)];
        let mut cmd = Command::new(MPIEXEC);
        for v in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE"] {
            cmd.env_remove(v);
        }
        for i in 0..2 {
            if i == 1 {
                cmd.arg(":");
            }
            cmd.args(["-n", "2", "ip", "netns", "exec", &hosts.ns[i], "env"])
                .arg("NICEMU_FABRIC=tcp")
                .arg(format!("NICEMU_FABRIC_IP={}", hosts.ip[i]))
                .arg(format!("NICEMU_NIC={nic}"))
                .args([NICEMU, "mpi-check"]);
        }
        let out = cmd.output().expect("running mpiexec");
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{nic}: {err}\n{text}");
        for r in 0..4 {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("rank {r}/4 "))
                    && l.contains("13 messages 0..4194304 B ok")
                    && l.contains("allreduce of 4096 u64 ok")),
                "{nic}: rank {r}:\n{text}\n{err}"
            );
        }
        // Rank 1 sent 4 MiB to rank 2 and rank 3 to rank 0, across the veth pair.
        for (i, was) in before.iter().enumerate() {
            let sent = hosts.tx_bytes(i) - was;
            assert!(
                sent > 4 << 20,
                "{nic}: namespace {i} sent {sent} bytes over the veth"
            );
        }
    }
}
