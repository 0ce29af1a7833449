//! Data movement through the Gemini driver: the OS-mediated BTE path (`PostRdma`), FMA
//! through a mapped user window after kgni's privileged configuration, CQ rings and waits,
//! and the ptag protection the driver programs into MDDs and FMA descriptors.

use std::time::Duration;

use driver::gemini::{AttachInfo, CdmId, CqInfo, KgniClient, KgniError, Mapping, Request};
use driver::mem::{MemWindow, UserMemory};
use emu_core::mmio::Mmio;
use firmware_spec::gemini::cqe::{Cqe, CqeSource, HwStatus};
use firmware_spec::gemini::fma::{self, FmaDescriptor, SyncType};
use firmware_spec::gemini::gni::{
    CqEventMode, CqMode, JobLimits, MemFlags, PostType, job_create_cookie,
};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;
use platform::gemini::GeminiCluster;

struct Side {
    client: KgniClient,
    cdm: CdmId,
    attach: AttachInfo,
    cq: CqInfo,
    ring: MemWindow,
    rd: u64,
    buf: UserMemory,
    handle: MemHandle,
}

fn side(c: &GeminiCluster, pe: usize, inst: u32, ptag: u8, cookie: u32) -> Side {
    let client = c.node(pe).unwrap().open();
    let cdm = client.cdm_create(inst, ptag, cookie, 0).unwrap();
    let attach = client.cdm_attach(cdm).unwrap();
    let cq = client.cq_create(cdm, 64, 1, CqMode::BLOCKING).unwrap();
    let Mapping::Memory(ring) = client.mmap(cq.ring).unwrap() else {
        panic!("ring is memory")
    };
    let buf = client.space().alloc(64 * 1024).unwrap();
    let handle = client
        .mem_register(cdm, buf.va(), 64 * 1024, Some(cq.cq), MemFlags::READWRITE)
        .unwrap();
    Side {
        client,
        cdm,
        attach,
        cq,
        ring,
        rd: 0,
        buf,
        handle,
    }
}

impl Side {
    /// The next event of the side's CQ, consumed as uGNI does (zero the slot, store RD_INDEX).
    fn next_event(&mut self) -> Option<Cqe> {
        let n = u64::from(self.cq.ring_entries);
        let v = self.ring.load_u64_acquire(8 * self.rd).unwrap();
        let e = Cqe::from_u64(v);
        if !e.is_ready() {
            return None;
        }
        self.ring.store_u64_release(8 * self.rd, 0).unwrap();
        self.rd = (self.rd + 1) % n;
        let Mapping::Mmio(alias) = self.client.mmap(self.cq.alias).unwrap() else {
            panic!("alias is MMIO")
        };
        alias.write_u64(0, self.rd).unwrap();
        Some(e)
    }
}

fn rdma(ty: PostType, local: &Side, remote: &Side, off: u64, len: u64) -> PostDescriptor {
    let mut d = PostDescriptor::new(ty);
    d.local_addr = local.buf.va() + off;
    d.local_mem_hndl = local.handle;
    d.remote_addr = remote.buf.va() + off;
    d.remote_mem_hndl = remote.handle;
    d.length = len;
    d.cq_mode = CqEventMode::GLOBAL_EVENT;
    d
}

#[test]
fn bte_put_and_get_between_nodes_with_local_and_remote_events() {
    let c = GeminiCluster::builder().build().unwrap();
    let job = c.job().clone();
    let mut a = side(&c, 0, 10, job.ptag, job.cookie);
    let mut b = side(&c, 1, 20, job.ptag, job.cookie);
    let pattern: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + 3) as u8).collect();
    a.buf.write(0, &pattern).unwrap();
    let ep = a.client.ep_create(a.cdm, Some(a.cq.cq)).unwrap();
    // Logical PE 1 through the job's NTT is node 1.
    a.client.ep_bind(ep, 1, 20).unwrap();
    let p = a
        .client
        .post_rdma(ep, rdma(PostType::RdmaPut, &a, &b, 0, 40_000))
        .unwrap();
    assert!(p.channel < 3);
    c.run(u64::MAX);
    let mut got = vec![0u8; 40_000];
    b.buf.read(0, &mut got).unwrap();
    assert_eq!(got, pattern, "PUT data landed");
    let e = a.next_event().expect("global event");
    assert_eq!(e.source().unwrap(), CqeSource::Bte);
    assert_eq!(e.status().unwrap(), HwStatus::Ok);
    assert_eq!(
        e.inst_id(),
        10,
        "global events carry the local inst id (uGNI's default event data)"
    );
    assert!(a.next_event().is_none());
    let r = b.next_event().expect("remote event at the target's dst_cq");
    assert_eq!(r.source().unwrap(), CqeSource::RmtDreq);
    assert_eq!(
        r.inst_id(),
        10,
        "remote events carry the initiator's inst id"
    );

    // GET back into another part of A's buffer, 4-byte aligned.
    b.buf.write(48_000, b"0123456789abcdef").unwrap();
    let mut g = rdma(PostType::RdmaGet, &a, &b, 48_000, 16);
    g.cq_mode = CqEventMode::LOCAL_EVENT;
    a.client
        .request(Request::EpSetEventData {
            ep,
            local: 0xABCD,
            remote: 1,
        })
        .unwrap();
    a.client.post_rdma(ep, g).unwrap();
    c.run(u64::MAX);
    let mut back = [0u8; 16];
    a.buf.read(48_000, &mut back).unwrap();
    assert_eq!(&back, b"0123456789abcdef");
    let e = a.next_event().expect("local event");
    assert_eq!(
        e.inst_id(),
        0xABCD,
        "EpSetEventData overrides the local data"
    );
    assert!(e.status_ok());
}

#[test]
fn blocking_cq_wait_returns_when_an_event_lands_and_times_out_otherwise() {
    let c = GeminiCluster::builder().build().unwrap();
    let job = c.job().clone();
    let mut a = side(&c, 0, 1, job.ptag, job.cookie);
    let b = side(&c, 1, 2, job.ptag, job.cookie);
    // Nothing pending: with the deterministic engine idle, the wait ends with TIMEOUT.
    assert!(matches!(
        a.client.request(Request::CqWait {
            cq: a.cq.cq,
            timeout: Some(Duration::from_secs(5))
        }),
        Err(KgniError::Timeout)
    ));
    let nb = a.client.cq_create(a.cdm, 4, 0, CqMode::NOBLOCK).unwrap();
    assert!(matches!(
        a.client.request(Request::CqWait {
            cq: nb.cq,
            timeout: None
        }),
        Err(KgniError::InvalidParam(_))
    ));
    let ep = a.client.ep_create(a.cdm, Some(a.cq.cq)).unwrap();
    a.client.ep_bind(ep, 1, 2).unwrap();
    a.client
        .post_rdma(ep, rdma(PostType::RdmaPut, &a, &b, 0, 4096))
        .unwrap();
    // The wait drives the engine until the event is in the ring.
    a.client
        .request(Request::CqWait {
            cq: a.cq.cq,
            timeout: None,
        })
        .unwrap();
    let e = a.next_event().unwrap();
    assert!(e.status_ok());
    let vector = a.cq.vector;
    let irqs = c.node(0).unwrap().kgni().interrupts().clone();
    assert!(
        irqs.vector(vector).unwrap().signal_count() <= 1,
        "one-shot interrupt"
    );
}

#[test]
fn fma_through_the_mapped_user_window_after_privileged_setup() {
    let c = GeminiCluster::builder().build().unwrap();
    let job = c.job().clone();
    let mut a = side(&c, 0, 1, job.ptag, job.cookie);
    let mut b = side(&c, 1, 2, job.ptag, job.cookie);
    let fma_id = a.attach.fma.0;
    a.client
        .request(Request::FmaSetCq {
            cdm: a.cdm,
            cq: Some(a.cq.cq),
        })
        .unwrap();
    let hw = c.node(0).unwrap().kgni().hw().clone();
    let d = hw.fma_read(fma_id).unwrap();
    assert_eq!(d.cq_hndl, u64::from(a.cq.cq.0));
    assert_eq!(d.src_ptag, u64::from(job.ptag));
    assert_eq!(
        (d.pe_base, d.num_pes, d.mode3),
        (0, 2, 1),
        "NTT group of the job"
    );

    let Mapping::Mmio(page) = a.client.mmap(a.attach.fma_page).unwrap() else {
        panic!("an FMA page is MMIO")
    };
    let Mapping::Mmio(win) = a.client.mmap(a.attach.put_uc).unwrap() else {
        panic!("an FMA window is MMIO")
    };
    // The user cannot change the ptag or CQ handle: PRVMASK keeps QW3 privileged.
    let evil = FmaDescriptor {
        src_ptag: 99,
        dest_ptag: 99,
        cq_hndl: 5,
        ..d
    };
    let img = evil.encode().unwrap();
    page.write_u64(
        fma::reg::QW3,
        u64::from_le_bytes(img[16..24].try_into().unwrap()),
    )
    .unwrap();
    let after = hw.fma_read(fma_id).unwrap();
    assert_eq!(after.src_ptag, u64::from(job.ptag));
    assert_eq!(after.cq_hndl, u64::from(a.cq.cq.0));

    // PUT 8 bytes to B's buffer at offset 256 through the uncached window.
    let rinfo = b.handle.decode().unwrap();
    let linfo = a.handle.decode().unwrap();
    let qw2 = FmaDescriptor {
        command: 0,
        rem_mem_dh: u64::from(rinfo.mdh),
        src_mem_dh: u64::from(linfo.mdh),
        mode2: u64::from(fma::FmaMode2::FMA_ENABLE.bits()),
        ..FmaDescriptor::default()
    };
    let img = qw2.encode().unwrap();
    page.write_u64(
        fma::reg::QW2,
        u64::from_le_bytes(img[8..16].try_into().unwrap()),
    )
    .unwrap();
    let remote_off = b.buf.va() + 256 - rinfo.va;
    page.write_u64(
        fma::reg::BASE_OFFSET,
        fma::compose_base_offset(0, 1, remote_off),
    )
    .unwrap();
    win.write_u64(0, 0x1122_3344_5566_7788).unwrap();
    page.write_u64(
        fma::reg::SYNC_COMPLETE,
        fma::sync_complete_word(SyncType::LOCAL_EVENT | SyncType::REMOTE_EVENT, 0x77),
    )
    .unwrap();
    c.run(u64::MAX);
    assert_eq!(b.buf.read_u64(256).unwrap(), 0x1122_3344_5566_7788);
    let e = a.next_event().expect("FMA local event");
    assert_eq!(e.source().unwrap(), CqeSource::SsidSreq);
    assert_eq!(e.data(), 0x77);
    let r = b.next_event().expect("FMA remote event");
    assert_eq!(r.data(), 0x77);
    // Windows cannot reach past their size.
    assert!(win.write_u64(1 << 30, 0).is_err());
}

#[test]
fn another_jobs_memory_is_protected_by_ptag() {
    let c = GeminiCluster::builder().build().unwrap();
    let job = c.job().clone();
    // A second job on both nodes.
    let cookie = job_create_cookie(0x3000, 0);
    for n in c.nodes() {
        n.launcher()
            .unwrap()
            .configure_job(driver::gemini::JobConfig {
                ptag: 77,
                cookie,
                limits: JobLimits::default(),
                ntt: vec![0, 1],
            })
            .unwrap();
    }
    let mut a = side(&c, 0, 1, 77, cookie);
    let b = side(&c, 1, 2, job.ptag, job.cookie);
    b.buf.write(0, &[0xEE; 64]).unwrap();
    let ep = a.client.ep_create(a.cdm, Some(a.cq.cq)).unwrap();
    a.client.ep_bind(ep, 1, 2).unwrap();
    a.client
        .post_rdma(ep, rdma(PostType::RdmaPut, &a, &b, 0, 64))
        .unwrap();
    c.run(u64::MAX);
    let e = a.next_event().expect("error event");
    assert_eq!(e.status().unwrap(), HwStatus::ProtectionViolation);
    let mut got = [0u8; 64];
    b.buf.read(0, &mut got).unwrap();
    assert_eq!(got, [0xEE; 64], "a violation never touches memory");
}

#[test]
fn threaded_engine_cq_wait_wakes_on_the_interrupt() {
    use platform::EngineKind;
    let c = GeminiCluster::builder()
        .engine(EngineKind::Threaded)
        .build()
        .unwrap();
    let job = c.job().clone();
    let mut a = side(&c, 0, 1, job.ptag, job.cookie);
    let b = side(&c, 1, 2, job.ptag, job.cookie);
    a.buf.write(0, &[0x5A; 4096]).unwrap();
    let ep = a.client.ep_create(a.cdm, Some(a.cq.cq)).unwrap();
    a.client.ep_bind(ep, 1, 2).unwrap();
    for round in 0..4u64 {
        a.client
            .post_rdma(ep, rdma(PostType::RdmaPut, &a, &b, 0, 4096))
            .unwrap();
        a.client
            .request(Request::CqWait {
                cq: a.cq.cq,
                timeout: Some(Duration::from_secs(20)),
            })
            .unwrap();
        let e = a.next_event().expect("the wait returns with an event");
        assert!(e.status_ok(), "round {round}");
    }
    let mut got = [0u8; 4096];
    b.buf.read(0, &mut got).unwrap();
    assert_eq!(got, [0x5A; 4096]);
}
