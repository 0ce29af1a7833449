//! FMA over the fabric: PUT, GET, every Gemini AMO, CQ writes, remote events, alignment and
//! protection errors, between emulated NICs on a deterministic 3D torus.

mod common;

use common::*;
use emu_gemini::host::{Amo, Local, PostOpts, Remote};
use emu_gemini::regs::counter;
use firmware_spec::gemini::amo::AmoCmd;
use firmware_spec::gemini::cqe::{CqeSource, HwStatus};
use firmware_spec::gemini::fma::{FmaFlags, SyncType};
use firmware_spec::gemini::gni::ReturnCode;

fn remote(j: &Job, pe: usize, byte: u64) -> Remote {
    Remote {
        pe: pe as u32,
        mdh: BUF_MDH,
        offset: j.nodes[pe].buf.off(byte),
    }
}

fn opts(data: u64) -> PostOpts {
    PostOpts {
        data,
        ..PostOpts::default()
    }
}

#[test]
fn put_then_get_across_the_torus() {
    // 2x2x1 routers, 8 NICs; PE 0 and PE 7 sit on different routers.
    let mut j = job(det([2, 2, 1], 1));
    let data: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    let n0 = j.nic(0).clone();
    let f = j.nodes[0].fma;
    n0.fma_put(f, remote(&j, 7, 13), &data, opts(0xAB)).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::Ok));
    assert_eq!(e.source(), Ok(CqeSource::SsidSreq));
    assert_eq!(e.data(), 0xAB);
    let mut got = vec![0u8; 200];
    j.nic(7)
        .read_mem(j.nodes[7].buf.addr + 13, &mut got)
        .unwrap();
    assert_eq!(got, data);
    // Write combining: 200 bytes at an odd offset took a handful of requests, not 200 stores.
    let puts = n0.counter(counter::FMA_PUTS).unwrap();
    assert!((4..=8).contains(&puts), "{puts} PUT requests");

    // GET it back into node 0's result buffer (aligned offsets and length).
    let into = Local {
        mdh: RES_MDH,
        offset: j.nodes[0].res.off(0),
    };
    n0.fma_get(f, remote(&j, 7, 16), into, 192, opts(0xCD))
        .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 0xCD));
    assert_eq!(e.source(), Ok(CqeSource::SsidSrsp));
    let mut back = vec![0u8; 192];
    n0.read_mem(j.nodes[0].res.addr, &mut back).unwrap();
    assert_eq!(&back[..], &data[3..195]);
    assert!(j.c.now().as_ns() > 500, "the torus has latency");
}

#[test]
fn every_amo_command() {
    let mut j = job(det([2, 1, 1], 2));
    let (a, b) = (0usize, 3usize);
    let f = j.nodes[a].fma;
    let na = j.nic(a).clone();
    let nb = j.nic(b).clone();
    for (i, cmd) in AmoCmd::ALL.iter().enumerate() {
        let word = 8 * i as u64;
        let init = 0x0123_4567_89AB_CDEFu64;
        let (op1, op2) = if cmd.op() == firmware_spec::gemini::amo::AmoOp::CompareSwap {
            (init, 0x5555)
        } else {
            (0x00FF_00FF_F0F0_1111, 0x1234)
        };
        nb.write_mem(j.nodes[b].buf.addr + word, &init.to_le_bytes())
            .unwrap();
        let res = Local {
            mdh: RES_MDH,
            offset: j.nodes[a].res.off(word),
        };
        na.fma_amo(
            f,
            remote(&j, b, word),
            Amo::new(*cmd, op1, op2),
            Some(res),
            opts(i as u64),
        )
        .unwrap();
        let e = na.cq_wait(&mut j.nodes[a].local_cq).unwrap();
        assert_eq!(
            (e.status(), e.data()),
            (Ok(HwStatus::Ok), i as u64),
            "{cmd:?}"
        );
        let now = nb.read_u64(j.nodes[b].buf.addr + word).unwrap();
        assert_eq!(now, cmd.apply(init, op1, op2), "{cmd:?}");
        if cmd.is_fetching() {
            let old = na.read_u64(j.nodes[a].res.addr + word).unwrap();
            assert_eq!(old, init, "{cmd:?} returns the old value");
        }
    }
    assert_eq!(na.counter(counter::AMOS).unwrap(), AmoCmd::ALL.len() as u64);
}

#[test]
fn misaligned_get_and_amo_are_rejected_with_alignment_error() {
    let mut j = job(det([2, 1, 1], 3));
    let n0 = j.nic(0).clone();
    let f = j.nodes[0].fma;
    let sent = n0.counter(counter::PACKETS_TX).unwrap();
    let into = Local {
        mdh: RES_MDH,
        offset: j.nodes[0].res.off(0),
    };
    // Remote address not a multiple of 4.
    n0.fma_get(f, remote(&j, 1, 2), into, 8, opts(1)).unwrap();
    assert_eq!(n0.fma_err_rc(f).unwrap(), ReturnCode::AlignmentError.code());
    let status = n0.fma_status(f).unwrap();
    assert_ne!((status >> 48) & u64::from(FmaFlags::HT_REQ_ERROR.bits()), 0);
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::InvCmd));
    assert_eq!(e.data(), 1);
    assert_eq!(
        n0.counter(counter::PACKETS_TX).unwrap(),
        sent,
        "nothing went on the wire"
    );
    // Local address not a multiple of 4.
    n0.fma_clear_status(f).unwrap();
    let odd = Local {
        mdh: RES_MDH,
        offset: j.nodes[0].res.off(6),
    };
    n0.fma_get(f, remote(&j, 1, 0), odd, 8, opts(2)).unwrap();
    assert_eq!(n0.fma_err_rc(f).unwrap(), ReturnCode::AlignmentError.code());
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::InvCmd)
    );
    // AMO target not 8-byte aligned.
    n0.fma_clear_status(f).unwrap();
    n0.fma_amo(
        f,
        remote(&j, 1, 4),
        Amo::new(AmoCmd::Add, 1, 0),
        None,
        opts(3),
    )
    .unwrap();
    assert_eq!(n0.fma_err_rc(f).unwrap(), ReturnCode::AlignmentError.code());
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::InvCmd)
    );
    // A well-formed GET right after still works.
    n0.fma_clear_status(f).unwrap();
    n0.fma_get(f, remote(&j, 1, 0), into, 8, opts(4)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    assert_eq!(n0.fma_err_rc(f).unwrap(), 0);
}

#[test]
fn out_of_bounds_and_protection_are_rejected_without_touching_memory() {
    let mut j = job(det([2, 1, 1], 4));
    let n0 = j.nic(0).clone();
    let n2 = j.nic(2).clone();
    let f = j.nodes[0].fma;
    // Mark the byte after node 2's buffer: it must stay as it is.
    let past = j.nodes[2].buf.addr + BUF_LEN;
    n2.write_mem(past, &[0x5A; 16]).unwrap();
    // PUT that runs past the end of the registration (page granular: the buffer is
    // page aligned and a whole number of pages).
    n0.fma_put(f, remote(&j, 2, BUF_LEN - 8), &[1u8; 16], opts(1))
        .unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::MemBoundsErr));
    assert_eq!(e.get_event_rc(), ReturnCode::TransactionError);
    let mut b = [0u8; 16];
    n2.read_mem(past, &mut b).unwrap();
    assert_eq!(b, [0x5A; 16]);
    // GET past the end.
    let into = Local {
        mdh: RES_MDH,
        offset: j.nodes[0].res.off(0),
    };
    n0.fma_get(f, remote(&j, 2, BUF_LEN - 4), into, 8, opts(2))
        .unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::MemBoundsErr)
    );
    // AMO past the end.
    n0.fma_amo(
        f,
        remote(&j, 2, BUF_LEN),
        Amo::new(AmoCmd::Add, 1, 0),
        None,
        opts(3),
    )
    .unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::MemBoundsErr)
    );
    // An unregistered MDD.
    let bad = Remote {
        pe: 2,
        mdh: 99,
        offset: 0,
    };
    n0.fma_put(f, bad, &[1u8; 8], opts(4)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::MddInv)
    );
    // A read-only registration rejects writes but serves reads.
    let ro = n2
        .register(5, PTAG, j.nodes[2].buf.addr, 4096, false, None)
        .unwrap();
    let ro_at = Remote {
        pe: 2,
        mdh: ro.mdh,
        offset: ro.off(0),
    };
    n0.fma_put(f, ro_at, &[9u8; 8], opts(5)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::ProtectionViolation)
    );
    n0.fma_get(f, ro_at, into, 8, opts(6)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    // A registration of another ptag.
    let other = n2
        .register(6, PTAG + 1, j.nodes[2].buf.addr, 4096, true, None)
        .unwrap();
    let other_at = Remote {
        pe: 2,
        mdh: other.mdh,
        offset: 0,
    };
    n0.fma_put(f, other_at, &[9u8; 8], opts(7)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::ProtectionViolation)
    );
    assert_eq!(n2.read_u64(j.nodes[2].buf.addr).unwrap(), 0);
    assert!(n2.counter(counter::REMOTE_REJECTS).unwrap() >= 5);
}

#[test]
fn remote_events_and_cq_writes_reach_the_destination_cq() {
    let mut j = job(det([1, 1, 1], 5));
    let n0 = j.nic(0).clone();
    let n1 = j.nic(1).clone();
    let f = j.nodes[0].fma;
    let o = PostOpts {
        sync: SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT,
        data: 0x77,
        ..PostOpts::default()
    };
    n0.fma_put(f, remote(&j, 1, 64), &[3u8; 40], o).unwrap();
    let local = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!((local.status(), local.data()), (Ok(HwStatus::Ok), 0x77));
    let r = n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!(r.source(), Ok(CqeSource::RmtDreq));
    assert_eq!((r.status(), r.data()), (Ok(HwStatus::Ok), 0x77));
    // The event came after the data.
    let mut b = [0u8; 40];
    n1.read_mem(j.nodes[1].buf.addr + 64, &mut b).unwrap();
    assert_eq!(b, [3u8; 40]);
    // A PUT without REMOTE_EVENT raises nothing remotely.
    n0.fma_put(f, remote(&j, 1, 0), &[1u8; 8], opts(1)).unwrap();
    n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(n1.cq_poll(&mut j.nodes[1].remote_cq).unwrap(), None);
    // CQ write: 48 bits arrive.
    n0.fma_cq_write(f, remote(&j, 1, 0), 0xFFFF_1234_5678_9ABC, opts(2))
        .unwrap();
    assert_eq!(n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().data(), 2);
    let w = n1.cq_wait(&mut j.nodes[1].remote_cq).unwrap();
    assert_eq!(w.source(), Ok(CqeSource::RmtSreq));
    assert_eq!(w.data(), 0x1234_5678_9ABC);
    // CQ write into a domain without a CQ fails at the sender.
    let res_at = Remote {
        pe: 1,
        mdh: RES_MDH,
        offset: 0,
    };
    n0.fma_cq_write(f, res_at, 5, opts(3)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::InvCmd)
    );
    // Sync flag: the flag word lands after the data.
    let o = PostOpts {
        flag: Some((0xF1A6, j.nodes[1].buf.off(1024))),
        data: 9,
        ..PostOpts::default()
    };
    n0.fma_put(f, remote(&j, 1, 512), &[8u8; 24], o).unwrap();
    assert_eq!(n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().data(), 9);
    assert_eq!(n1.read_u64(j.nodes[1].buf.addr + 1024).unwrap(), 0xF1A6);
}

#[test]
fn unknown_ntt_entry_and_pe_outside_the_group_are_local_errors() {
    let mut j = job(det([1, 1, 1], 6));
    let n0 = j.nic(0).clone();
    // Descriptor 1 uses the NTT: group of 4 logical PEs from 2; only 0..2 are programmed.
    let f = n0.fma_alloc(1, PTAG, LOCAL_CQ, Some((0, 4))).unwrap();
    let to = |pe| Remote {
        pe,
        mdh: BUF_MDH,
        offset: 0,
    };
    n0.fma_put(f, to(1), &[1u8; 8], opts(1)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    assert_eq!(j.nic(1).read_mem_u8(j.nodes[1].buf.addr), 1);
    n0.fma_put(f, to(3), &[1u8; 8], opts(2)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::UncorrectableTranslationErr)
    );
    assert_eq!(n0.fma_err_rc(f).unwrap(), ReturnCode::InvalidParam.code());
    n0.fma_clear_status(f).unwrap();
    n0.fma_put(f, to(4), &[1u8; 8], opts(3)).unwrap();
    let e = n0.cq_wait(&mut j.nodes[0].local_cq).unwrap();
    assert_eq!(e.status(), Ok(HwStatus::InvCmd));
    let status = n0.fma_status(f).unwrap();
    assert_ne!((status >> 48) & u64::from(FmaFlags::NPES_ERROR.bits()), 0);
}

#[test]
fn mrt_translated_domain_splits_across_pages() {
    use firmware_spec::gemini::map;
    use firmware_spec::gemini::mdd::{MddDescriptor, MddModes, MrtEntry};
    let mut j = job(det([1, 1, 1], 7));
    let n1 = j.nic(1).clone();
    // 128 KiB MRT pages (code 0); MRT-space pages 0 and 1 map to two separate host ranges,
    // the second one below the first.
    n1.bar0.write_u64(map::MRT_PAGESIZE_OFFSET, 0).unwrap();
    let hi = n1.mem.alloc(256 << 10, 128 << 10).unwrap().start.0;
    let lo = n1.mem.alloc(256 << 10, 128 << 10).unwrap().start.0;
    let (p0, p1) = (hi.max(lo), hi.min(lo));
    for (i, p) in [(0u64, p0), (1, p1)] {
        let e = MrtEntry::for_addr(p).unwrap().to_u32().unwrap();
        n1.bar0.write_u32(map::MRT_BASE + 4 * i, e).unwrap();
    }
    let d = MddDescriptor {
        ptag: u64::from(PTAG),
        mem_base: 0,
        mrt_enable: 1,
        modes: u64::from((MddModes::VALID | MddModes::WRITABLE).bits()),
        max_base: ((256 << 10) - 1) >> 12,
        cqh: 0,
    };
    let b = d.encode().unwrap();
    let at = map::MDD_BASE + 16 * 40;
    n1.bar0
        .write_u64(at, u64::from_le_bytes(b[..8].try_into().unwrap()))
        .unwrap();
    n1.bar0
        .write_u64(at + 8, u64::from_le_bytes(b[8..].try_into().unwrap()))
        .unwrap();
    let data: Vec<u8> = (0..64u8).collect();
    let to = Remote {
        pe: 1,
        mdh: 40,
        offset: (128 << 10) - 32,
    };
    let n0 = j.nic(0).clone();
    n0.fma_put(j.nodes[0].fma, to, &data, opts(1)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::Ok)
    );
    let mut a = [0u8; 32];
    let mut b = [0u8; 32];
    n1.read_mem(p0 + (128 << 10) - 32, &mut a).unwrap();
    n1.read_mem(p1, &mut b).unwrap();
    assert_eq!(&a[..], &data[..32]);
    assert_eq!(&b[..], &data[32..]);
    // MRT page 2 has no entry: translation error, nothing written.
    let to = Remote {
        pe: 1,
        mdh: 40,
        offset: 256 << 10,
    };
    n0.fma_put(j.nodes[0].fma, to, &data, opts(2)).unwrap();
    assert_eq!(
        n0.cq_wait(&mut j.nodes[0].local_cq).unwrap().status(),
        Ok(HwStatus::MemBoundsErr)
    );
}

#[test]
fn last_entries_of_every_table_work() {
    use firmware_spec::gemini::limits;
    let j = job(det([1, 1, 1], 8));
    let (n0, n1) = (j.nic(0).clone(), j.nic(1).clone());
    // CQ 1023, MDD 4095, the last OS FMA descriptor (67, OS windows), NTT logical 16383.
    let last_cq = (limits::CQ_DESCRIPTORS - 1) as u16;
    let mut cq = n0.cq_create(last_cq, 16).unwrap();
    let last_mdd = (limits::MDD_ENTRIES - 1) as u16;
    let r = n1
        .register(last_mdd, PTAG, j.nodes[1].buf.addr, 4096, true, None)
        .unwrap();
    let last_logical = 2 * limits::NTT_ENTRIES - 1;
    n0.ntt_set(last_logical, 1).unwrap();
    let f = n0
        .fma_alloc(
            (limits::FMA_TOTAL_DESCRIPTORS - 1) as u8,
            PTAG,
            last_cq,
            Some((last_logical, 1)),
        )
        .unwrap();
    let to = Remote {
        pe: 0, // logical PE 0 of the group = NTT entry 16383
        mdh: r.mdh,
        offset: r.off(8),
    };
    n0.fma_put(f, to, &0xE4D_u64.to_le_bytes(), opts(0x67))
        .unwrap();
    let e = n0.cq_wait(&mut cq).unwrap();
    assert_eq!((e.status(), e.data()), (Ok(HwStatus::Ok), 0x67));
    assert_eq!(n1.read_u64(j.nodes[1].buf.addr + 8).unwrap(), 0xE4D);
    // Past the tables: the next block, or nothing.
    use emu_gemini::regs::{Target, decode};
    use firmware_spec::gemini::map;
    assert_eq!(
        decode(map::CQ_BASE + 32 * limits::CQ_DESCRIPTORS),
        Target::Unmapped
    );
    assert_eq!(
        decode(map::FMA_DESC_BASE + 4096 * limits::FMA_TOTAL_DESCRIPTORS),
        Target::Unmapped
    );
    assert_eq!(
        emu_gemini::regs::decode(firmware_spec::gemini::map::MDD_BASE + 16 * limits::MDD_ENTRIES),
        emu_gemini::regs::Target::Vmdh(0)
    );
    assert_eq!(
        decode(map::NTT_BASE + 8 * limits::NTT_ENTRIES),
        Target::Ntt { bank: 1, index: 0 }
    );
}
