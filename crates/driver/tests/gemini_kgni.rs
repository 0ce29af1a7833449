//! kgni client services on emulated Gemini NICs: ptag/cookie checks, ownership, cleanup on
//! close, exhaustion, registration errors.

use std::sync::Arc;

use driver::gemini::{
    CdmId, CqId, EpId, FreeCounts, JobConfig, Kgni, KgniClient, KgniConfig, KgniError, MapKind,
    Mapping, MmapToken, Object, Request, Resource, Response,
};
use driver::mem::UserMemory;
use emu_core::mmio::MmioError;
use firmware_spec::gemini::gni::{
    CdmMode, CqEventMode, CqMode, JobLimits, MemFlags, PostType, ReturnCode, job_create_cookie,
};
use firmware_spec::gemini::limits;
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;
use platform::gemini::GeminiCluster;

fn cluster() -> GeminiCluster {
    GeminiCluster::builder().build().unwrap()
}

fn attach(c: &GeminiCluster, client: &KgniClient, inst: u32) -> CdmId {
    let job = c.job();
    let cdm = client.cdm_create(inst, job.ptag, job.cookie, 0).unwrap();
    client.cdm_attach(cdm).unwrap();
    cdm
}

/// One of everything a client can own.
struct Everything {
    cdm: CdmId,
    cq: CqId,
    ep: EpId,
    handle: MemHandle,
    _buf: UserMemory,
}

fn one_of_everything(c: &GeminiCluster, client: &KgniClient, inst: u32) -> Everything {
    let cdm = attach(c, client, inst);
    let cq = client.cq_create(cdm, 64, 1, CqMode::BLOCKING).unwrap().cq;
    let rcq = client.cq_create(cdm, 64, 0, CqMode::NOBLOCK).unwrap().cq;
    client
        .request(Request::FmaSetCq { cdm, cq: Some(cq) })
        .unwrap();
    let buf = client.space().alloc(3 * 4096).unwrap();
    let handle = client
        .mem_register(cdm, buf.va() + 100, 8000, Some(rcq), MemFlags::READWRITE)
        .unwrap();
    let ep = client.ep_create(cdm, Some(cq)).unwrap();
    client.ep_bind(ep, 1, 7).unwrap();
    let wild = client.ep_create(cdm, Some(cq)).unwrap();
    client.post_data(wild, Some(5), b"hi", 16).unwrap();
    Everything {
        cdm,
        cq,
        ep,
        handle,
        _buf: buf,
    }
}

#[test]
fn ptag_cookie_and_mode_checks() {
    let c = cluster();
    let node = &c.nodes()[0];
    let u = node.open();
    let job = c.job().clone();
    // Unknown CDM mode bits, contradictory modes, ptag 0, reserved ptags.
    for (modes, want) in [
        (0x800, KgniError::InvalidParam("unknown CDM mode bits")),
        (
            (CdmMode::FMA_SHARED | CdmMode::FMA_DEDICATED).bits(),
            KgniError::InvalidParam("FMA_DEDICATED with FMA_SHARED"),
        ),
        (
            (CdmMode::FORK_NOCOPY | CdmMode::FORK_FULLCOPY).bits(),
            KgniError::InvalidParam("more than one FORK mode"),
        ),
    ] {
        assert_eq!(u.cdm_create(0, job.ptag, job.cookie, modes), Err(want));
    }
    assert!(matches!(
        u.cdm_create(0, 0, job.cookie, 0),
        Err(KgniError::InvalidParam(_))
    ));
    let e = u.cdm_create(0, 1, 0, 0).unwrap_err();
    assert_eq!(
        e.gni_rc(),
        ReturnCode::PermissionError,
        "LND ptag is reserved"
    );

    // Wrong cookie or a ptag without a job: refused at attach.
    let bad = u.cdm_create(0, job.ptag, job.cookie ^ 0x10000, 0).unwrap();
    let e = u.cdm_attach(bad).unwrap_err();
    assert_eq!(e.gni_rc(), ReturnCode::PermissionError);
    let nojob = u.cdm_create(0, job.ptag + 1, job.cookie, 0).unwrap();
    assert!(matches!(u.cdm_attach(nojob), Err(KgniError::Permission(_))));

    // Right pair: attached once; twice is INVALID_STATE; another device id is refused.
    let cdm = u.cdm_create(0, job.ptag, job.cookie, 0).unwrap();
    assert!(matches!(
        u.request(Request::CdmAttach { cdm, device_id: 3 }),
        Err(KgniError::InvalidParam(_))
    ));
    let info = u.cdm_attach(cdm).unwrap();
    assert_eq!(info.nic_addr, node.pe());
    assert_eq!(
        info.ntt,
        Some((0, 2)),
        "the default job has an NTT of both nodes"
    );
    assert_eq!(info.window_size, 1 << 30);
    assert_eq!(
        u.cdm_attach(cdm).unwrap_err().gni_rc(),
        ReturnCode::InvalidState
    );
    // Same inst_id in the same domain on the same NIC: refused.
    let dup = u.cdm_create(0, job.ptag, job.cookie, 0).unwrap();
    assert!(matches!(u.cdm_attach(dup), Err(KgniError::InvalidParam(_))));

    // Only a privileged client configures jobs.
    let j2 = JobConfig {
        ptag: 40,
        cookie: job_create_cookie(0x1000, 0),
        limits: JobLimits::default(),
        ntt: vec![],
    };
    assert!(matches!(
        u.configure_job(j2.clone()),
        Err(KgniError::Permission(_))
    ));
    let admin = node.kgni().open_with(true, Some(u.space().clone()));
    admin.configure_job(j2.clone()).unwrap();
    assert!(matches!(
        admin.configure_job(j2.clone()),
        Err(KgniError::Busy(_))
    ));
    let cdm2 = u.cdm_create(9, 40, j2.cookie, 0).unwrap();
    u.cdm_attach(cdm2).unwrap();
    // A job with attached CDMs cannot be released.
    assert!(matches!(
        admin.request(Request::ReleaseJob {
            ptag: 40,
            cookie: j2.cookie
        }),
        Err(KgniError::Busy(_))
    ));
    u.request(Request::CdmDestroy { cdm: cdm2 }).unwrap();
    admin
        .request(Request::ReleaseJob {
            ptag: 40,
            cookie: j2.cookie,
        })
        .unwrap();
    assert!(matches!(
        u.cdm_attach(cdm2),
        Err(KgniError::NoSuchHandle { .. })
    ));
}

#[test]
fn foreign_handles_are_refused_never_a_panic() {
    let c = cluster();
    let node = &c.nodes()[0];
    let a = node.open();
    let b = node.open();
    let ea = one_of_everything(&c, &a, 1);
    let cdm_b = attach(&c, &b, 2);
    let not_owner = |r: Result<Response, KgniError>, kind: Object| match r {
        Err(KgniError::NotOwner { kind: k, .. }) if k == kind => {}
        other => panic!("expected NotOwner({kind}), got {other:?}"),
    };
    not_owner(b.request(Request::CqDestroy { cq: ea.cq }), Object::Cq);
    not_owner(
        b.request(Request::CqWait {
            cq: ea.cq,
            timeout: Some(std::time::Duration::ZERO),
        }),
        Object::Cq,
    );
    not_owner(
        b.request(Request::Mmap {
            token: MmapToken::new(MapKind::CqRing, ea.cq.0),
        }),
        Object::Cq,
    );
    not_owner(
        b.request(Request::FmaSetCq {
            cdm: cdm_b,
            cq: Some(ea.cq),
        }),
        Object::Cq,
    );
    not_owner(
        b.request(Request::EpCreate {
            cdm: cdm_b,
            cq: Some(ea.cq),
        }),
        Object::Cq,
    );
    not_owner(
        b.request(Request::MemRegister {
            cdm: cdm_b,
            addr: 0,
            len: 1,
            dst_cq: Some(ea.cq),
            flags: 0,
        }),
        Object::Cq,
    );
    not_owner(b.request(Request::CdmDestroy { cdm: ea.cdm }), Object::Cdm);
    not_owner(
        b.request(Request::CdmAttach {
            cdm: ea.cdm,
            device_id: -1,
        }),
        Object::Cdm,
    );
    not_owner(
        b.request(Request::EpDestroy { ep: ea.ep }),
        Object::Endpoint,
    );
    not_owner(
        b.request(Request::EpBind {
            ep: ea.ep,
            remote_addr: 0,
            remote_id: 0,
        }),
        Object::Endpoint,
    );
    not_owner(
        b.request(Request::EpPostData {
            ep: ea.ep,
            id: None,
            data: vec![],
            out_len: 0,
        }),
        Object::Endpoint,
    );
    not_owner(
        b.request(Request::PostDataTest { ep: ea.ep }),
        Object::Endpoint,
    );
    not_owner(
        b.request(Request::PostDataCancel { ep: ea.ep }),
        Object::Endpoint,
    );
    // Memory handle: deregister and use as the local side of a post.
    not_owner(
        b.request(Request::MemDeregister {
            cdm: cdm_b,
            handle: ea.handle,
        }),
        Object::MemHandle,
    );
    let cq_b = b.cq_create(cdm_b, 8, 0, CqMode::NOBLOCK).unwrap().cq;
    let ep_b = b.ep_create(cdm_b, Some(cq_b)).unwrap();
    b.ep_bind(ep_b, 1, 0).unwrap();
    let mut d = PostDescriptor::new(PostType::RdmaPut);
    d.local_mem_hndl = ea.handle;
    d.local_addr = 0;
    d.remote_mem_hndl = ea.handle;
    d.length = 8;
    not_owner(
        b.request(Request::PostRdma {
            ep: ep_b,
            desc: Box::new(d),
        }),
        Object::MemHandle,
    );
    // FMA descriptor windows of A.
    let fma_a = a.cdm_attach(ea.cdm).unwrap_err();
    assert_eq!(fma_a.gni_rc(), ReturnCode::InvalidState);
    for kind in [
        MapKind::FmaUserPage,
        MapKind::FmaPutWc,
        MapKind::FmaGet,
        MapKind::FmaPutUc,
    ] {
        // A's descriptor is 0 (the first user descriptor handed out); B owns 1.
        not_owner(
            b.request(Request::Mmap {
                token: MmapToken::new(kind, 0),
            }),
            Object::Fma,
        );
    }
    // Handles that do not exist at all.
    assert!(matches!(
        b.request(Request::CqDestroy { cq: CqId(999) }),
        Err(KgniError::NoSuchHandle { .. })
    ));
    assert!(matches!(
        b.request(Request::Mmap {
            token: MmapToken(0xdead_beef_dead)
        }),
        Err(KgniError::NoSuchHandle {
            kind: Object::MmapToken,
            ..
        })
    ));
    // A still owns and uses everything.
    a.request(Request::PostDataCancel {
        ep: EpId(ea.ep.0 + 1),
    })
    .unwrap();
    a.request(Request::EpDestroy { ep: ea.ep }).unwrap();
}

fn counts(k: &Kgni) -> FreeCounts {
    k.free_counts()
}

#[test]
fn closing_a_client_returns_every_allocator_to_its_initial_count() {
    let c = cluster();
    let node = &c.nodes()[0];
    let k = node.kgni();
    let initial = counts(k);
    let mem_before = node.memory().free_bytes();
    assert_eq!(initial.fma, 64);
    assert_eq!(initial.fma_os, 4);
    assert_eq!(initial.mdd, 4096);
    assert_eq!(initial.mrt, 16384);
    assert_eq!(
        initial.cq, 1022,
        "1023 CQs (CQ 0 is never used) minus the kernel's"
    );
    assert_eq!(
        initial.ntt,
        8192 - 1,
        "the default job's NTT takes one entry"
    );
    {
        let a = node.open();
        let b = node.open();
        let _ea = one_of_everything(&c, &a, 1);
        let _eb = one_of_everything(&c, &b, 2);
        let now = counts(k);
        assert_eq!(now.fma, 62);
        assert_eq!(now.cq, 1022 - 4);
        assert_eq!(now.mdd, 4094);
        assert_eq!(now.endpoint, initial.endpoint - 4);
        assert_eq!(now.cdm, initial.cdm - 2);
        assert_eq!(now.datagram_posts, 2);
        assert_eq!(k.open_clients(), 3, "two clients and the launcher");
        drop(a);
        let half = counts(k);
        assert_eq!(half.fma, 63);
        assert_eq!(half.cq, 1022 - 2);
        assert_eq!(half.datagram_posts, 1);
    }
    assert_eq!(counts(k), initial);
    assert_eq!(k.open_clients(), 1);
    assert_eq!(
        node.memory().free_bytes(),
        mem_before,
        "CQ rings and pinned buffers returned"
    );
    // The hardware agrees: no MDD valid, no user CQ enabled, FMA descriptors disabled.
    for i in 0..limits::MDD_ENTRIES as u32 {
        assert!(!k.hw().mdd_is_valid(i).unwrap(), "MDD {i}");
    }
    for i in 2..limits::CQ_DESCRIPTORS as u32 {
        assert!(!k.hw().cq_is_enabled(i).unwrap(), "CQ {i}");
    }
    assert!(!k.hw().fma_enabled(0).unwrap());
}

#[test]
fn mappings_are_revoked_when_the_object_goes() {
    let c = cluster();
    let node = &c.nodes()[0];
    let a = node.open();
    let cdm = attach(&c, &a, 1);
    let info = a.cdm_attach(cdm).err();
    assert!(info.is_some());
    let cq = a.cq_create(cdm, 16, 0, CqMode::NOBLOCK).unwrap();
    let Mapping::Memory(ring) = a.mmap(cq.ring).unwrap() else {
        panic!("a CQ ring is memory")
    };
    assert_eq!(ring.len(), 17 * 8);
    assert_eq!(ring.read_u64(0).unwrap(), 0);
    let Mapping::Mmio(alias) = a.mmap(cq.alias).unwrap() else {
        panic!("a CQ alias is MMIO")
    };
    use emu_core::mmio::Mmio;
    assert_eq!(alias.read_u64(0x10).unwrap(), 0, "WR_INDEX");
    assert!(matches!(
        alias.read_u64(4096),
        Err(MmioError::OutOfRange { .. })
    ));
    a.request(Request::CqDestroy { cq: cq.cq }).unwrap();
    assert!(ring.read_u64(0).is_err());
    assert_eq!(alias.read_u64(0), Err(MmioError::DeviceGone));
    let fma_page = MmapToken::new(MapKind::FmaUserPage, 0);
    let Mapping::Mmio(page) = a.mmap(fma_page).unwrap() else {
        panic!("an FMA page is MMIO")
    };
    page.read_u64(0).unwrap();
    drop(a);
    assert_eq!(page.read_u64(0), Err(MmioError::DeviceGone));
}

#[test]
fn exhaustion_gives_clean_errors() {
    let c = GeminiCluster::builder()
        .kgni_config(KgniConfig {
            max_endpoints: 100,
            ..KgniConfig::default()
        })
        .build()
        .unwrap();
    let node = &c.nodes()[0];
    let k = Arc::clone(node.kgni());
    let initial = k.free_counts();
    let job = c.job().clone();
    {
        let a = node.open();
        // FMA descriptors: 64 dedicated CDMs, the 65th fails with ERROR_RESOURCE.
        let mut cdms = Vec::new();
        for i in 0..64 {
            cdms.push(attach(&c, &a, i));
        }
        let extra = a.cdm_create(64, job.ptag, job.cookie, 0).unwrap();
        let e = a.cdm_attach(extra).unwrap_err();
        assert_eq!(e, KgniError::NoResource(Resource::Fma));
        assert_eq!(e.gni_rc(), ReturnCode::ErrorResource);
        // FMA_SHARED CDMs share one descriptor of the client.
        let shared = a
            .cdm_create(65, job.ptag, job.cookie, CdmMode::FMA_SHARED.bits())
            .unwrap();
        a.cdm_attach(shared).unwrap();
        // CQs: 1022 left.
        let cdm = cdms[0];
        let mut n = 0;
        loop {
            match a.cq_create(cdm, 1, 0, CqMode::NOBLOCK) {
                Ok(_) => n += 1,
                Err(e) => {
                    assert_eq!(e, KgniError::NoResource(Resource::Cq));
                    break;
                }
            }
        }
        assert_eq!(n, 1022);
        // Endpoints (limit 100 here).
        let mut eps = 0;
        while a.ep_create(cdm, None).is_ok() {
            eps += 1;
        }
        assert_eq!(eps, 100);
        // MDDs: 4096.
        let buf = a.space().alloc(4096).unwrap();
        let mut regs = 0;
        let err = loop {
            match a.mem_register(cdm, buf.va(), 64, None, MemFlags::READ_ONLY) {
                Ok(_) => regs += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(regs, 4096);
        assert_eq!(err, KgniError::NoResource(Resource::Mdd));
    }
    assert_eq!(k.free_counts(), initial);
}

#[test]
fn job_limits_are_enforced() {
    let c = cluster();
    let node = &c.nodes()[0];
    let admin = node.launcher().unwrap();
    let cookie = job_create_cookie(0x2000, 0);
    admin
        .configure_job(JobConfig {
            ptag: 50,
            cookie,
            limits: JobLimits {
                fma_limit: 1,
                cq_limit: 2,
                mdd_limit: 3,
                ..JobLimits::default()
            },
            ntt: vec![],
        })
        .unwrap();
    let a = node.open();
    let cdm = a.cdm_create(0, 50, cookie, 0).unwrap();
    let info = a.cdm_attach(cdm).unwrap();
    assert_eq!(info.ntt, None);
    let cdm2 = a.cdm_create(1, 50, cookie, 0).unwrap();
    assert_eq!(a.cdm_attach(cdm2), Err(KgniError::JobLimit(Resource::Fma)));
    a.cq_create(cdm, 4, 0, CqMode::NOBLOCK).unwrap();
    a.cq_create(cdm, 4, 0, CqMode::NOBLOCK).unwrap();
    assert_eq!(
        a.cq_create(cdm, 4, 0, CqMode::NOBLOCK).unwrap_err(),
        KgniError::JobLimit(Resource::Cq)
    );
    let buf = a.space().alloc(4096).unwrap();
    for _ in 0..3 {
        a.mem_register(cdm, buf.va(), 8, None, MemFlags::READWRITE)
            .unwrap();
    }
    let e = a
        .mem_register(cdm, buf.va(), 8, None, MemFlags::READWRITE)
        .unwrap_err();
    assert_eq!(e, KgniError::JobLimit(Resource::Mdd));
    assert_eq!(e.gni_rc(), ReturnCode::ErrorResource);
}

#[test]
fn registration_errors_are_clean() {
    let c = cluster();
    let node = &c.nodes()[0];
    let a = node.open();
    let cdm = attach(&c, &a, 1);
    let buf = a.space().alloc(2 * 4096).unwrap();
    let va = buf.va();
    // Zero length, wrap-around, outside the client's memory, unknown and unsupported flags.
    assert!(matches!(
        a.mem_register(cdm, va, 0, None, MemFlags::READWRITE),
        Err(KgniError::InvalidParam(_))
    ));
    assert!(matches!(
        a.mem_register(cdm, u64::MAX - 10, 100, None, MemFlags::READWRITE),
        Err(KgniError::InvalidParam(_))
    ));
    assert!(matches!(
        a.mem_register(cdm, va + 4096, 4097, None, MemFlags::READWRITE),
        Err(KgniError::Fault(_))
    ));
    assert!(matches!(
        a.mem_register(cdm, 0x10, 8, None, MemFlags::READWRITE),
        Err(KgniError::Fault(_))
    ));
    assert!(matches!(
        a.request(Request::MemRegister {
            cdm,
            addr: va,
            len: 8,
            dst_cq: None,
            flags: 0x8000_0000
        }),
        Err(KgniError::InvalidParam(_))
    ));
    assert!(matches!(
        a.mem_register(cdm, va, 8, None, MemFlags::USE_VMDH),
        Err(KgniError::Unsupported(_))
    ));
    // A registration, its handle checked, deregistered once; the second time fails.
    let h = a
        .mem_register(cdm, va + 10, 5000, None, MemFlags::READWRITE)
        .unwrap();
    let info = h.decode().unwrap();
    assert_eq!(info.va, va);
    assert_eq!(info.npages, 2);
    let mdd = node.kgni().hw().read_mdd(u32::from(info.mdh)).unwrap();
    assert!(mdd.is_valid() && mdd.is_writable());
    assert_eq!(mdd.ptag, u64::from(c.job().ptag));
    assert_eq!(
        mdd.mem_base << 12,
        va,
        "bus address = RAM address (passthrough)"
    );
    assert_eq!(mdd.max_base << 12, va + 4096);
    // A forged handle (CRC broken) and a stale copy (same MDD, other entropy) are refused.
    let forged = MemHandle {
        qword1: h.qword1 ^ 0x1000,
        ..h
    };
    assert!(matches!(
        a.mem_deregister(cdm, forged),
        Err(KgniError::InvalidParam(_))
    ));
    a.mem_deregister(cdm, h).unwrap();
    assert!(!node.kgni().hw().mdd_is_valid(u32::from(info.mdh)).unwrap());
    let again = a.mem_deregister(cdm, h).unwrap_err();
    assert!(matches!(
        again,
        KgniError::NoSuchHandle {
            kind: Object::MemHandle,
            ..
        }
    ));
    let h2 = a
        .mem_register(cdm, va, 8, None, MemFlags::READ_ONLY)
        .unwrap();
    assert_eq!(h2.decode().unwrap().mdh, info.mdh, "the MDD is reused");
    assert!(
        a.mem_deregister(cdm, h).is_err(),
        "a stale handle does not free the new registration"
    );
    assert!(
        !node
            .kgni()
            .hw()
            .read_mdd(u32::from(info.mdh))
            .unwrap()
            .is_writable()
    );
    a.mem_deregister(cdm, h2).unwrap();
    // A CQ that a registration names can be destroyed (only endpoints hold a CQ, as in
    // Cray's GNI_CqDestroy); the registration's MDD then names no CQ, and the registration
    // stays valid until it is deregistered.
    let cq = a.cq_create(cdm, 8, 0, CqMode::NOBLOCK).unwrap().cq;
    let h3 = a
        .mem_register(cdm, va, 8, Some(cq), MemFlags::READWRITE)
        .unwrap();
    let mdh3 = u32::from(h3.decode().unwrap().mdh);
    assert_eq!(
        node.kgni().hw().read_mdd(mdh3).unwrap().cqh,
        u64::from(cq.0)
    );
    a.request(Request::CqDestroy { cq }).unwrap();
    let mdd = node.kgni().hw().read_mdd(mdh3).unwrap();
    assert_eq!(mdd.cqh, 0, "the MDD lost the destroyed CQ");
    assert!(mdd.is_valid() && mdd.is_writable());
    a.mem_deregister(cdm, h3).unwrap();
    // An endpoint does hold its CQ.
    let cq = a.cq_create(cdm, 8, 0, CqMode::NOBLOCK).unwrap().cq;
    let ep = a.ep_create(cdm, Some(cq)).unwrap();
    assert!(matches!(
        a.request(Request::CqDestroy { cq }),
        Err(KgniError::Busy(_))
    ));
    a.request(Request::EpDestroy { ep }).unwrap();
    a.request(Request::CqDestroy { cq }).unwrap();
}

#[test]
fn mrt_registrations_take_and_return_mrt_entries() {
    let c = GeminiCluster::builder()
        .kgni_config(KgniConfig {
            use_mrt: true,
            ..KgniConfig::default()
        })
        .build()
        .unwrap();
    let node = &c.nodes()[0];
    let k = node.kgni();
    let a = node.open();
    let cdm = attach(&c, &a, 1);
    let before = k.free_counts().mrt;
    let buf = a.space().alloc(3 << 20).unwrap();
    let h = a
        .mem_register(cdm, buf.va(), 3 << 20, None, MemFlags::READWRITE)
        .unwrap();
    let info = h.decode().unwrap();
    let used = before - k.free_counts().mrt;
    assert!(
        (2..=3).contains(&used),
        "3 MiB spans 2 or 3 MRT pages of 2 MiB"
    );
    let mdd = k.hw().read_mdd(u32::from(info.mdh)).unwrap();
    assert_eq!(mdd.mrt_enable, 1);
    // The MRT entry of the first page points at the 2 MiB page holding the buffer.
    let first = (mdd.mem_base << 12) >> 21;
    let e = k.hw().read_mrt(first as u32).unwrap();
    assert_eq!(e.valid, 1);
    assert_eq!(e.addr(), buf.va() & !((2 << 20) - 1));
    a.mem_deregister(cdm, h).unwrap();
    assert_eq!(k.free_counts().mrt, before);
    assert_eq!(k.hw().read_mrt(first as u32).unwrap().valid, 0);
}

#[test]
fn bte_queue_depth_is_bounded() {
    let c = cluster();
    let node = &c.nodes()[0];
    let k = node.kgni();
    let a = node.open();
    let cdm = attach(&c, &a, 1);
    let cq = a.cq_create(cdm, 2048, 0, CqMode::NOBLOCK).unwrap().cq;
    let buf = a.space().alloc(4096).unwrap();
    let h = a
        .mem_register(cdm, buf.va(), 4096, None, MemFlags::READWRITE)
        .unwrap();
    let ep = a.ep_create(cdm, Some(cq)).unwrap();
    a.ep_bind(ep, 1, 2).unwrap();
    let put = |len: u64| {
        let mut d = PostDescriptor::new(PostType::RdmaPut);
        d.local_addr = buf.va();
        d.local_mem_hndl = h;
        d.remote_addr = buf.va();
        d.remote_mem_hndl = h;
        d.length = len;
        d.cq_mode = CqEventMode::LOCAL_EVENT;
        d
    };
    // Nothing makes the engine progress here, so posted TXDs stay queued: three user
    // channels of 255 each.
    let mut posted = 0;
    let err = loop {
        match a.post_rdma(ep, put(64)) {
            Ok(p) => {
                assert!(p.channel < 3, "user RDMA never uses the datagram channel");
                posted += 1;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(posted, 3 * 255);
    assert_eq!(err, KgniError::NoResource(Resource::BteSlot));
    assert_eq!(k.free_counts().bte[..3], [0, 0, 0]);
    // Once the engine runs, the slots come back.
    c.run(u64::MAX);
    assert_eq!(k.free_counts().bte, [255, 255, 255, 254]);
    // Bad posts are refused before the NIC: GET alignment, type, length, DUAL events.
    let mut g = put(6);
    g.post_type = PostType::RdmaGet;
    assert_eq!(
        a.post_rdma(ep, g).unwrap_err(),
        KgniError::Post(ReturnCode::AlignmentError)
    );
    let mut f = put(8);
    f.post_type = PostType::FmaPut;
    assert_eq!(
        a.post_rdma(ep, f).unwrap_err(),
        KgniError::Post(ReturnCode::IllegalOp)
    );
    let mut dual = put(8);
    dual.cq_mode = CqEventMode::DUAL_EVENTS;
    assert_eq!(
        a.post_rdma(ep, dual).unwrap_err().gni_rc(),
        ReturnCode::InvalidParam
    );
    assert!(matches!(
        a.post_rdma(ep, put(8192)),
        Err(KgniError::InvalidParam(_))
    ));
    let unbound = a.ep_create(cdm, Some(cq)).unwrap();
    assert_eq!(
        a.post_rdma(unbound, put(8)).unwrap_err().gni_rc(),
        ReturnCode::InvalidState
    );
}

#[test]
fn resources_in_flight_are_not_reused_before_the_hardware_is_done() {
    let c = cluster();
    let n0 = &c.nodes()[0];
    let k = n0.kgni();
    let a = n0.open();
    let b = n0.open();
    let peer = c.nodes()[1].open();
    let cp = attach(&c, &peer, 3);
    let pbuf = peer.space().alloc(64 * 1024).unwrap();
    pbuf.fill(0, 64 * 1024, 0x77).unwrap();
    let ph = peer
        .mem_register(cp, pbuf.va(), 64 * 1024, None, MemFlags::READWRITE)
        .unwrap();
    let initial = k.free_counts();

    let ca = attach(&c, &a, 1);
    let cq_a = a.cq_create(ca, 16, 0, CqMode::NOBLOCK).unwrap().cq;
    let abuf = a.space().alloc(64 * 1024).unwrap();
    let ah = a
        .mem_register(ca, abuf.va(), 64 * 1024, None, MemFlags::READWRITE)
        .unwrap();
    let ep = a.ep_create(ca, Some(cq_a)).unwrap();
    a.ep_bind(ep, 1, 3).unwrap();
    let mut d = PostDescriptor::new(PostType::RdmaGet);
    d.local_addr = abuf.va();
    d.local_mem_hndl = ah;
    d.remote_addr = pbuf.va();
    d.remote_mem_hndl = ph;
    d.length = 64 * 1024;
    d.cq_mode = CqEventMode::GLOBAL_EVENT;
    a.post_rdma(ep, d).unwrap();
    // The GET is queued (nothing ran yet). A frees its memory and CQ at once.
    a.mem_deregister(ca, ah).unwrap();
    a.request(Request::EpDestroy { ep }).unwrap();
    a.request(Request::CqDestroy { cq: cq_a }).unwrap();
    let held = k.free_counts();
    assert_eq!(
        held.mdd,
        initial.mdd - 1,
        "the MDD stays held while the TXD names it"
    );
    assert_eq!(held.cq, initial.cq - 1, "so does the CQ");
    // Another client of the same job gets other numbers.
    let cb = attach(&c, &b, 2);
    let cq_b = b.cq_create(cb, 16, 0, CqMode::NOBLOCK).unwrap();
    assert_ne!(cq_b.cq, cq_a);
    let bbuf = b.space().alloc(64 * 1024).unwrap();
    let bh = b
        .mem_register(cb, bbuf.va(), 64 * 1024, Some(cq_b.cq), MemFlags::READWRITE)
        .unwrap();
    assert_ne!(bh.decode().unwrap().mdh, ah.decode().unwrap().mdh);
    c.run(u64::MAX);
    // The GET found its MDD invalid: neither A's old pages nor B's were written, and B's CQ
    // saw nothing.
    let mut x = vec![0u8; 64 * 1024];
    bbuf.read(0, &mut x).unwrap();
    assert!(x.iter().all(|v| *v == 0));
    abuf.read(0, &mut x).unwrap();
    assert!(x.iter().all(|v| *v == 0));
    let Mapping::Memory(ring) = b.mmap(cq_b.ring).unwrap() else {
        panic!("ring is memory")
    };
    assert_eq!(ring.read_u64(0).unwrap(), 0);
    // Now everything of A is back.
    drop(a);
    let after = k.free_counts();
    assert_eq!(after.mdd, initial.mdd - 1, "only B's registration is out");
    assert_eq!(after.cq, initial.cq - 1, "only B's CQ is out");
    drop(b);
    assert_eq!(k.free_counts(), initial);
}

#[test]
fn an_idle_state_restored_with_the_machine_replays_a_client_exactly() {
    let c = cluster();
    let det = c.deterministic().unwrap();
    let nodes = c.nodes();
    let saved: Vec<_> = nodes
        .iter()
        .map(|n| n.kgni().save_idle_state().expect("no client objects yet"))
        .collect();
    let engine = det.snapshot().unwrap();
    let rams: Vec<_> = nodes.iter().map(|n| n.ram().snapshot()).collect();
    let k = nodes[0].kgni();
    let initial = k.free_counts();
    let session = || {
        let client = nodes[0].open();
        let e = one_of_everything(&c, &client, 1);
        let ids = format!("{:?}", (e.cdm, e.cq, e.ep, e.handle));
        (client, e, ids)
    };
    let (client, e, ids) = session();
    assert!(k.save_idle_state().is_none(), "a client's objects exist");
    assert!(
        k.restore_idle_state(&saved[0]).is_err(),
        "a client opened since the save is open"
    );
    drop(e);
    drop(client);
    c.run(u64::MAX);
    let first = (det.trace_digest(), det.now(), k.refused_requests());

    for ((n, s), r) in nodes.iter().zip(&saved).zip(&rams) {
        n.kgni().restore_idle_state(s).unwrap();
        n.ram().restore(r).unwrap();
    }
    det.restore(&engine).unwrap();
    assert_eq!(k.free_counts(), initial);
    let (client, e, again) = session();
    assert_eq!(again, ids, "the same handles");
    drop(e);
    drop(client);
    c.run(u64::MAX);
    assert_eq!((det.trace_digest(), det.now(), k.refused_requests()), first);
    assert!(
        nodes[1].kgni().restore_idle_state(&saved[0]).is_err(),
        "a state of another device"
    );
}
