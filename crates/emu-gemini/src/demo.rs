//! A short FMA/BTE/AMO exchange on a small Gemini torus, printed as a transcript
//! (`nicemu demo gemini` calls [`run`]).

use crate::cluster::{Cluster, ClusterConfig, ClusterError};
use crate::host::{Amo, HostError, Local, PostOpts, Remote, rdma_txd};
use crate::regs::counter;
use firmware_spec::gemini::amo::AmoCmd;
use firmware_spec::gemini::bte::TxdMode1;
use firmware_spec::gemini::cqe::Cqe;
use firmware_spec::gemini::fma::SyncType;
use firmware_spec::gemini::gni::ReturnCode;
use std::io::Write;
use thiserror::Error;

/// Why the demo failed.
#[derive(Debug, Error)]
pub enum DemoError {
    /// Writing the transcript failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The cluster could not be built.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A NIC operation failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The NICs produced a wrong result.
    #[error("check failed: {0}")]
    Check(String),
}

fn check(ok: bool, what: &str) -> Result<(), DemoError> {
    if ok {
        Ok(())
    } else {
        Err(DemoError::Check(what.to_string()))
    }
}

fn ev(e: &Cqe) -> String {
    let src = e
        .source()
        .map_or_else(|_| "?".to_string(), |s| format!("{s:?}"));
    let st = e
        .status()
        .map_or_else(|_| "?".to_string(), |s| format!("{s:?}"));
    format!("{src} {st} data={:#x}", e.data())
}

/// Build a 2x2x1 torus (4 routers, 8 NICs) on the deterministic engine and run: an FMA PUT
/// and GET across the torus, fetch-adds from every NIC into one word, a compare-and-swap, a
/// CQ write, a misaligned GET (rejected), and a 4 MiB BTE PUT. Prints what happens, with
/// virtual times.
pub fn run(out: &mut dyn Write) -> Result<(), DemoError> {
    const PTAG: u8 = 7;
    let c = Cluster::new(ClusterConfig::deterministic([2, 2, 1], 2024))?;
    let n = c.nics.len();
    writeln!(
        out,
        "Gemini demo: 2x2x1 torus, {n} NICs (2 per router), PCI {:04x}:{:04x}, deterministic engine",
        firmware_spec::gemini::pci::VENDOR_ID,
        firmware_spec::gemini::pci::DEVICE_ID
    )?;
    c.setup_ntt()?;
    let mut cqs = Vec::new();
    let mut bufs = Vec::new();
    let mut res = Vec::new();
    let mut fmas = Vec::new();
    for nic in &c.nics {
        cqs.push((nic.cq_create(1, 256)?, nic.cq_create(2, 256)?));
        let a = nic.alloc(8 << 20)?;
        bufs.push(nic.register(1, PTAG, a, 8 << 20, true, Some(2))?);
        let r = nic.alloc(4096)?;
        res.push(nic.register(2, PTAG, r, 4096, true, None)?);
        fmas.push(nic.fma_alloc(0, PTAG, 1, None)?);
    }
    writeln!(
        out,
        "  each NIC: NTT identity, CQ 1 (local) + CQ 2 (remote), 8 MiB buffer as MDD 1 (dst CQ 2), FMA descriptor 0"
    )?;
    let (a, b) = (0usize, n - 1);
    let na = c.nics[a].clone();
    let nb = c.nics[b].clone();
    let at = |pe: usize, byte: u64| Remote {
        pe: pe as u32,
        mdh: 1,
        offset: bufs[pe].off(byte),
    };

    // FMA PUT with a remote event.
    let msg = b"hello from PE 0 through the FMA PUT window, 64 bytes long.......";
    let t0 = c.now();
    let o = PostOpts {
        sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
        data: 0x11,
        ..PostOpts::default()
    };
    na.fma_put(fmas[a], at(b, 0), msg, o)?;
    let e = na.cq_wait(&mut cqs[a].0)?;
    let r = nb.cq_wait(&mut cqs[b].1)?;
    let mut got = [0u8; 64];
    nb.read_mem(bufs[b].addr, &mut got)?;
    check(&got == msg, "PUT data")?;
    writeln!(
        out,
        "FMA PUT  PE{a} -> PE{b}: 64 B, local event [{}] after {} ns; remote event at PE{b} [{}]",
        ev(&e),
        c.now().since(t0).as_ns(),
        ev(&r)
    )?;

    // FMA GET.
    let t0 = c.now();
    let into = Local {
        mdh: 2,
        offset: res[a].off(0),
    };
    na.fma_get(
        fmas[a],
        at(b, 0),
        into,
        64,
        PostOpts {
            data: 0x12,
            ..PostOpts::default()
        },
    )?;
    let e = na.cq_wait(&mut cqs[a].0)?;
    let mut back = [0u8; 64];
    na.read_mem(res[a].addr, &mut back)?;
    check(back == got, "GET data")?;
    writeln!(
        out,
        "FMA GET  PE{a} <- PE{b}: 64 B in {} ns [{}]: \"{}\"",
        c.now().since(t0).as_ns(),
        ev(&e),
        String::from_utf8_lossy(&back[..15])
    )?;

    // Fetch-adds from every NIC into one word of PE 3.
    let target = 3usize;
    let word = 4096u64;
    for (i, nic) in c.nics.iter().enumerate() {
        let into = Local {
            mdh: 2,
            offset: res[i].off(8),
        };
        nic.fma_amo(
            fmas[i],
            at(target, word),
            Amo::new(AmoCmd::Fadd, (i + 1) as u64, 0),
            Some(into),
            PostOpts::default(),
        )?;
    }
    let mut olds = Vec::new();
    for (i, nic) in c.nics.iter().enumerate() {
        nic.cq_wait(&mut cqs[i].0)?;
        olds.push(nic.read_u64(res[i].addr + 8)?);
    }
    let sum = c.nics[target].read_u64(bufs[target].addr + word)?;
    let want = (n * (n + 1) / 2) as u64;
    check(sum == want, "FADD sum")?;
    writeln!(
        out,
        "AMO FADD {n} NICs -> PE{target} word: final {sum} (= 1+..+{n}); old values seen {olds:?}"
    )?;

    // Compare-and-swap: one hit, one miss.
    let into = Local {
        mdh: 2,
        offset: res[a].off(16),
    };
    for (cmp, swap) in [(want, 1000u64), (want, 2000)] {
        na.fma_amo(
            fmas[a],
            at(target, word),
            Amo::new(AmoCmd::Cswap, cmp, swap),
            Some(into),
            PostOpts::default(),
        )?;
        na.cq_wait(&mut cqs[a].0)?;
        let old = na.read_u64(res[a].addr + 16)?;
        let now = c.nics[target].read_u64(bufs[target].addr + word)?;
        writeln!(
            out,
            "AMO CSWAP compare {cmp} swap {swap}: old {old}, word now {now}"
        )?;
    }

    // CQ write.
    na.fma_cq_write(fmas[a], at(b, 0), 0xCAFE_F00D_1234, PostOpts::default())?;
    na.cq_wait(&mut cqs[a].0)?;
    let w = nb.cq_wait(&mut cqs[b].1)?;
    check(w.data() == 0xCAFE_F00D_1234, "CQ write")?;
    writeln!(out, "CQ write PE{a} -> PE{b}: remote CQE [{}]", ev(&w))?;

    // Misaligned GET.
    na.fma_get(fmas[a], at(b, 2), into, 8, PostOpts::default())?;
    let e = na.cq_wait(&mut cqs[a].0)?;
    let rc = na.fma_err_rc(fmas[a])?;
    check(rc == ReturnCode::AlignmentError.code(), "alignment error")?;
    writeln!(
        out,
        "FMA GET  at remote offset +2: rejected, ERR_RC = {} ({}), event [{}]",
        rc,
        ReturnCode::AlignmentError.name(),
        ev(&e)
    )?;
    na.fma_clear_status(fmas[a])?;

    // BTE PUT of 4 MiB.
    let len = 4u64 << 20;
    let pattern: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    na.write_mem(bufs[a].addr, &pattern)?;
    let mut ch = na.bte_enable(0, 0, 16, 0, false)?;
    let txd = rdma_txd(
        TxdMode1::PUT,
        PTAG,
        Local {
            mdh: 1,
            offset: bufs[a].off(0),
        },
        at(b, 0),
        len,
        1,
        TxdMode1::CQ_LOCAL | TxdMode1::CQ_GLOBAL,
        0x21,
        0x22,
    );
    let t0 = c.now();
    na.bte_post(&mut ch, &txd)?;
    let l = na.cq_wait(&mut cqs[a].0)?;
    let tl = c.now().since(t0);
    let g = na.cq_wait(&mut cqs[a].0)?;
    let tg = c.now().since(t0);
    let mut got = vec![0u8; len as usize];
    nb.read_mem(bufs[b].addr, &mut got)?;
    check(got == pattern, "BTE data")?;
    let gbps = len as f64 / (tg.as_ps() as f64 / 1e12) / 1e9;
    writeln!(
        out,
        "BTE PUT  PE{a} -> PE{b}: 4 MiB, local event at {} us [{}], global at {} us [{}], {gbps:.2} GB/s modelled, every byte right",
        tl.as_ns() / 1000,
        ev(&l),
        tg.as_ns() / 1000,
        ev(&g)
    )?;
    writeln!(
        out,
        "counters PE{a}: {} packets out, {} FMA PUT requests, {} AMOs, {} BTE TXDs, {} CQ events; virtual time {} us",
        na.counter(counter::PACKETS_TX)?,
        na.counter(counter::FMA_PUTS)?,
        na.counter(counter::AMOS)?,
        na.counter(counter::BTE_TXDS)?,
        na.counter(counter::CQ_EVENTS)?,
        c.now().as_ns() / 1000
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn demo_prints_a_transcript() {
        let mut out = Vec::new();
        super::run(&mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("FMA PUT"), "{s}");
        assert!(s.contains("final 36"), "{s}");
        assert!(s.contains("ALIGNMENT_ERROR"), "{s}");
        assert!(s.contains("every byte right"), "{s}");
    }
}
