//! Writes the seed corpora of the fuzz targets into `seeds/<target>/`, built from real
//! commands and frames: `cargo +nightly run --example seeds` in `fuzz/` (a few files of a few
//! hundred bytes each; they are committed, so run it again only when a format changes).
//!
//! Handles and addresses in the seeds are the ones the fixtures get (they are
//! deterministic), so the seeds reach past the first lookup of each request.

use std::fs;
use std::path::Path;

use driver::cassini::Opcode;
use driver::cassini::uapi::*;
use firmware_spec::cassini::cmd::{
    CmdHeader, CmdSize, CmdType, DmaFlags, DmaOp, FullDma, IdcMsg, Payload, TargetCmd, TgtOp,
};
use firmware_spec::cassini::dfa::{C_PID_ANY, PidBits, build_dfa};
use firmware_spec::cassini::le::{CqAllocFlags, EqFlags, LeFlags, MapFlags, PtlList, PtlteState};
use firmware_spec::gemini::bte::TxdMode1;
use firmware_spec::gemini::fma::{self, FmaDescriptor, SyncType, WindowKind, reg};
use firmware_spec::gemini::gni::PostType;
use firmware_spec::gemini::post::PostDescriptor;
use nicemu_fuzz::cassini::{self, Pair};
use nicemu_fuzz::gemini::{self, Rig};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("seeds").join(target);
    fs::create_dir_all(&dir).expect("mkdir");
    assert!(
        bytes.len() < 1024,
        "{target}/{name}: seeds stay under 1 KiB"
    );
    fs::write(dir.join(name), bytes).expect("write");
}

/// A frame record of the receive targets.
fn frame(out: &mut Vec<u8>, port: u32, tc: u8, data: &[u8]) {
    out.push((port as u8 & 1) | (tc << 1));
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(data);
}

fn cassini_seeds() {
    let p = Pair::new().expect("fixture");
    let (dfa, ext) = p.dfa(0);
    let (dfa_rma, _) = p.dfa(1);
    let idc = IdcMsg {
        dfa,
        match_bits: 0x42,
        header_data: 0xDA7A,
        user_ptr: 0xFEED,
        payload: Payload::new(b"hello, cassini!!").expect("payload"),
    }
    .encode()
    .expect("idc");
    let put = FullDma {
        opcode: DmaOp::Put,
        index_ext: ext,
        dfa: dfa_rma,
        local_addr: p.src.iova,
        request_len: 256,
        remote_offset: 64,
        eq: cassini::EQ_TX,
        user_ptr: 0x1111,
        flags: DmaFlags::default(),
        ..FullDma::default()
    }
    .encode();
    let get = FullDma {
        opcode: DmaOp::Get,
        dfa: dfa_rma,
        local_addr: p.src.iova,
        request_len: 128,
        eq: cassini::EQ_TX,
        ..FullDma::default()
    }
    .encode();
    // Transmit ring with a C_STATE first (flag bit 1), then an IDC message.
    let mut s = vec![2u8];
    s.extend_from_slice(&idc);
    write("cassini_cq", "tx-idc", &s);
    let mut s = vec![0u8];
    s.extend_from_slice(&put);
    s.extend_from_slice(&get);
    write("cassini_cq", "tx-dma-put-get", &s);
    // A CQ NOOP followed by a bad command byte (stops the queue).
    let mut s = vec![0u8];
    let mut noop = [0u8; 64];
    noop[0] = CmdHeader::new(CmdType::Cq, CmdSize::B64, 0).to_byte();
    s.extend_from_slice(&noop);
    s.extend_from_slice(&[0xFF; 64]);
    write("cassini_cq", "tx-noop-then-garbage", &s);
    // Target ring: append, search, unlink, disable.
    let mut t = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: cassini::PT_MATCH,
        buffer_id: 9,
        start: p.dst.iova,
        length: 512,
        match_id: u32::MAX,
        match_bits: 7,
        ..TargetCmd::default()
    };
    t.set_opts(LeFlags::OP_PUT | LeFlags::USE_ONCE);
    let mut s = vec![1u8];
    s.extend_from_slice(&t.encode());
    let mut u = t;
    u.opcode = TgtOp::Unlink;
    s.extend_from_slice(&u.encode());
    s.extend_from_slice(&cassini::set_state(
        cassini::PT_NOMATCH,
        PtlteState::Disabled,
    ));
    write("cassini_cq", "tgt-append-unlink-disable", &s);

    // Receive: real request frames, recorded at the spare port, and the target's answers.
    let mut p = Pair::new().expect("fixture");
    let (dfa2, _) = (build_dfa(2, cassini::PID, PidBits::DEFAULT, 0), ());
    let to2 = IdcMsg {
        dfa: dfa2.0,
        match_bits: 0x42,
        header_data: 1,
        user_ptr: 2,
        payload: Payload::new(b"0123456789abcdef").expect("payload"),
    }
    .encode()
    .expect("idc");
    let mut ring = p.cstate(0).to_vec();
    ring.extend_from_slice(&[0u8; 32]);
    ring.extend_from_slice(&to2);
    p.raw_commands(false, &ring).expect("ring");
    p.c.settle();
    let sent: Vec<_> = p.received.lock().expect("lock").drain(..).collect();
    assert!(!sent.is_empty(), "the initiator sent to port 2");
    let mut s = Vec::new();
    for (tc, f) in &sent {
        frame(&mut s, 1, tc.0, f);
    }
    write("cassini_rx", "idc-request-to-target", &s);
    // Replay them to the target: its answers come back to port 2.
    for (tc, f) in sent {
        p.inject(1, tc.0, f).expect("inject");
    }
    p.c.settle();
    let answers: Vec<_> = p.received.lock().expect("lock").drain(..).collect();
    let mut s = Vec::new();
    for (tc, f) in &answers {
        frame(&mut s, 0, tc.0, f);
    }
    if !s.is_empty() {
        write("cassini_rx", "answers-to-initiator", &s);
    }
    let mut s = Vec::new();
    frame(&mut s, 1, 0, &[0u8; 40]);
    frame(&mut s, 0, 1, &[0xFF; 16]);
    write("cassini_rx", "short-and-garbage", &s);
}

fn gemini_seeds() {
    let rig = Rig::new().expect("fixture");
    let qw = |reg: u64, v: u64| {
        let mut s = vec![0u8, (reg / 8) as u8];
        s.extend_from_slice(&v.to_le_bytes());
        s
    };
    let window = |kind: u8, off: u32, v: u64| {
        let mut s = vec![1u8, kind, 3];
        s.extend_from_slice(&off.to_le_bytes());
        s.extend_from_slice(&v.to_le_bytes());
        s
    };
    let target = |command: u64, pe: u64, mdh: u16, src_mdh: u16, off: u64| {
        let d = FmaDescriptor {
            command,
            rem_mem_dh: u64::from(mdh),
            src_mem_dh: u64::from(src_mdh),
            ..Default::default()
        };
        let b = d.encode().expect("fma");
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[8..16]);
        let mut s = qw(reg::QW2, u64::from_le_bytes(w));
        s.extend(qw(reg::BASE_OFFSET, fma::compose_base_offset(0, pe, off)));
        s
    };
    // FMA PUT of 16 bytes to PE 1's data region, then SYNC_COMPLETE.
    let mut s = target(0, 1, gemini::BUF_MDH, 0, 128);
    s.extend(qw(reg::ALLOC_SYNCID, fma::ALLOC_SEQID_DOORBELL));
    s.extend(window(0, 0, 0x1122_3344_5566_7788));
    s.extend(window(0, 8, 0x99AA_BBCC_DDEE_FF00));
    s.extend(qw(
        reg::SYNC_COMPLETE,
        fma::sync_complete_word(SyncType::LOCAL_EVENT, 5),
    ));
    s.extend([4u8, 200]);
    write("gemini_fma_bte", "fma-put", &s);
    // FMA PUT into PE 1's read-only region (refused).
    let mut s = target(0, 1, gemini::RO_MDH, 0, 0);
    s.extend(qw(reg::ALLOC_SYNCID, fma::ALLOC_SEQID_DOORBELL));
    s.extend(window(2, 0, u64::MAX));
    s.extend(qw(
        reg::SYNC_COMPLETE,
        fma::sync_complete_word(SyncType::LOCAL_EVENT, 6),
    ));
    write("gemini_fma_bte", "fma-put-read-only", &s);
    // FMA GET of 64 bytes into the local result region.
    let mut s = target(0, 1, gemini::BUF_MDH, gemini::RES_MDH, 0);
    s.extend(qw(reg::ALLOC_SYNCID, fma::ALLOC_SEQID_DOORBELL));
    let gcw = fma::GetControlWord {
        local_offset: 0,
        count: fma::GetControlWord::count_for(64).expect("count"),
        gb: 0,
        cmd: 0,
    };
    s.extend(window(1, 0, gcw.to_u64().expect("gcw")));
    s.extend(qw(
        reg::SYNC_COMPLETE,
        fma::sync_complete_word(SyncType::LOCAL_EVENT, 7),
    ));
    write("gemini_fma_bte", "fma-get", &s);
    // BTE PUT from the local data region to PE 1.
    let side = &rig.sides[0];
    let txd = emu_gemini::host::rdma_txd(
        TxdMode1::PUT,
        gemini::PTAG,
        emu_gemini::host::Local {
            mdh: side.buf.mdh,
            offset: 0,
        },
        emu_gemini::host::Remote {
            pe: 1,
            mdh: gemini::BUF_MDH,
            offset: 4096,
        },
        512,
        1,
        TxdMode1::CQ_LOCAL | TxdMode1::CQ_GLOBAL,
        0x21,
        0x22,
    );
    let mut s = vec![3u8];
    s.extend_from_slice(&txd.encode().expect("txd"));
    s.extend([4u8, 255]);
    write("gemini_fma_bte", "bte-put", &s);
    let _ = WindowKind::Get;

    // Receive: the FMA PUT sent to PE 2 (the spare port), recorded.
    let mut rig = Rig::new().expect("fixture");
    let n = &rig.sides[0].nic;
    let f = rig.sides[0].fma;
    n.fma_put(
        f,
        emu_gemini::host::Remote {
            pe: 2,
            mdh: gemini::BUF_MDH,
            offset: 64,
        },
        b"0123456789abcdef",
        emu_gemini::host::PostOpts::default(),
    )
    .expect("put");
    rig.settle();
    let sent: Vec<_> = rig.received.lock().expect("lock").drain(..).collect();
    assert!(!sent.is_empty(), "PE 0 sent to port 2");
    let mut s = Vec::new();
    for (tc, f) in &sent {
        frame(&mut s, 1, tc.0, f);
    }
    write("gemini_rx", "fma-put-request", &s);
    for (tc, f) in sent {
        rig.inject(1, tc.0, f).expect("inject");
    }
    rig.settle();
    let answers: Vec<_> = rig.received.lock().expect("lock").drain(..).collect();
    let mut s = Vec::new();
    for (tc, f) in &answers {
        frame(&mut s, 0, tc.0, f);
    }
    if !s.is_empty() {
        write("gemini_rx", "answers", &s);
    }
    let _ = rig.drain();
}

/// A request record of `cxi_uapi`.
fn cxi<R: Request>(out: &mut Vec<u8>, r: &R) {
    let sel = Opcode::ALL
        .iter()
        .position(|o| *o == R::OP)
        .expect("opcode") as u8;
    out.push(sel);
    out.extend_from_slice(&r.as_bytes()[4..]);
    out.push(0);
}

fn cxi_seeds() {
    // The fixture's client gets LNI 1, its user memory starts where the space starts.
    let cl = platform::Cluster::builder()
        .nics(1)
        .engine(platform::EngineKind::Deterministic { seed: 1 })
        .memory_per_node(32 << 20)
        .build()
        .expect("cluster");
    let d = cl.node(0).and_then(|n| n.cxi(0)).expect("device");
    let c = d.open();
    let mem = c.alloc_user_memory(64 << 10).expect("memory");
    let va = mem.va();
    let mut s = Vec::new();
    let lni = LniAllocCmd {
        svc_id: 1,
        ..Default::default()
    };
    cxi(&mut s, &lni);
    let l = c.call(&lni).expect("lni").lni;
    let dom = DomainAllocCmd {
        lni: l,
        vni: 10,
        pid: C_PID_ANY,
        ..Default::default()
    };
    cxi(&mut s, &dom);
    let cp = CpAllocCmd {
        lni: l,
        vni: 10,
        tc: 2,
        ..Default::default()
    };
    cxi(&mut s, &cp);
    let map = AtuMapCmd {
        lni: l,
        va,
        len: 16 << 10,
        flags: (MapFlags::PIN | MapFlags::READ | MapFlags::WRITE).bits(),
        ..Default::default()
    };
    cxi(&mut s, &map);
    let eq = EqAllocCmd {
        lni: l,
        attr: EqAttr {
            queue: va + (32 << 10),
            queue_len: 16 << 10,
            flags: EqFlags::PASSTHROUGH.bits(),
            ..Default::default()
        },
        ..Default::default()
    };
    cxi(&mut s, &eq);
    let e = c.call(&eq).expect("eq").eq;
    let cq = CqAllocCmd {
        lni: l,
        eq: e,
        opts: CqAllocOpts {
            count: 64,
            flags: CqAllocFlags::IS_TX.bits(),
            ..Default::default()
        },
        ..Default::default()
    };
    cxi(&mut s, &cq);
    write("cxi_uapi", "lni-domain-cp-map-eq-cq", &s);
    let mut s = Vec::new();
    cxi(&mut s, &lni);
    cxi(
        &mut s,
        &PteAllocCmd {
            lni_hndl: l,
            evtq_hndl: 0,
            ..Default::default()
        },
    );
    cxi(
        &mut s,
        &CtAllocCmd {
            lni: l,
            wb: va,
            ..Default::default()
        },
    );
    cxi(
        &mut s,
        &LniFreeCmd {
            lni: l,
            ..Default::default()
        },
    );
    s.extend([255u8, 3, 0, 1, 2, 3, 0]);
    write("cxi_uapi", "pte-ct-free-raw", &s);
}

fn kgni_seeds() {
    let c = platform::gemini::GeminiCluster::builder()
        .build()
        .expect("cluster");
    let job = c.job().clone();
    let client = c.nodes()[0].open();
    let buf = client.space().alloc(64 << 10).expect("memory");
    let _ = buf;
    // The first CDM of a fresh device is 1, its first CQ and endpoint come next: the
    // fuzz target's fixture is the same machine, so these numbers are the ones it sees.
    let cdm = client.cdm_create(1, job.ptag, job.cookie, 0).expect("cdm");
    client.cdm_attach(cdm).expect("attach");
    let cq = client
        .cq_create(cdm, 64, 0, firmware_spec::gemini::gni::CqMode::NOBLOCK)
        .expect("cq")
        .cq;
    let mut s = Vec::new();
    let u32s = |s: &mut Vec<u8>, v: &[u32]| {
        for x in v {
            s.extend_from_slice(&x.to_le_bytes());
        }
    };
    // CdmCreate (job's ptag/cookie), CdmAttach, CqCreate, MemRegister, EpCreate, EpBind.
    s.extend([0u8, 0]);
    u32s(&mut s, &[1, 0]);
    s.extend([1u8]);
    u32s(&mut s, &[cdm.0]);
    s.extend([2u8]);
    u32s(&mut s, &[cdm.0, u32::MAX]);
    s.extend([4u8]);
    u32s(&mut s, &[cdm.0, 64, 0, 0]);
    s.extend([7u8]);
    u32s(&mut s, &[cdm.0]);
    s.extend_from_slice(&0u64.to_le_bytes());
    s.extend_from_slice(&8192u64.to_le_bytes());
    u32s(&mut s, &[cq.0, 0]);
    s.extend([9u8]);
    u32s(&mut s, &[cdm.0, cq.0]);
    s.extend([10u8]);
    u32s(&mut s, &[1, 1, 7]);
    // PostRdma of a PUT with the registered handle and addresses in the buffer.
    s.extend([14u8]);
    u32s(&mut s, &[1]);
    s.push(3);
    let mut d = PostDescriptor::new(PostType::RdmaPut);
    d.length = 64;
    s.extend_from_slice(&d.to_c_bytes());
    s.extend([16u8]);
    u32s(&mut s, &[1]);
    write("kgni_uapi", "attach-cq-register-ep-post", &s);
    let mut s = Vec::new();
    s.extend([0u8, 1, 10]);
    u32s(&mut s, &[0xDEAD, 3, 0]);
    s.extend([21u8]);
    s.extend_from_slice(&(1u64 << 32 | 5).to_le_bytes());
    write("kgni_uapi", "foreign-ptag-and-bad-token", &s);
}

fn main() {
    cassini_seeds();
    gemini_seeds();
    cxi_seeds();
    kgni_seeds();
    println!("seeds written under seeds/");
}
