//! Arbitrary requests to the kgni driver (what uGNI passes to `/dev/kgni0`), from an
//! unprivileged client of node 0 of a two-node Gemini machine.
//!
//! Input: a sequence of requests, a selector byte then the request's fields, little-endian.
//! Handles are 32-bit values (small ones name real objects); ptag and cookie are the job's
//! when a flag bit says so, else arbitrary; a POST_RDMA descriptor is decoded from 184 raw
//! bytes with `PostDescriptor::from_c_bytes` (the C `gni_post_descriptor_t`), its addresses
//! biased into the client's buffer when a flag bit says so. Waits get a zero timeout.
//!
//! The driver must answer every request with a result or an error, never panic, and once
//! the client closes and the machine is idle every allocator is back to its initial count.
//!
//! The machine is built once per process and restored before every input
//! ([`nicemu_fuzz::uapi::KgniRig`]); one input in `FRESH_EVERY` also runs on a machine built
//! from scratch, and the answers and the machine's digest must be the same.
#![no_main]

use std::time::Duration;

use driver::gemini::{CdmId, CqId, EpId, JobConfig, Mapping, MmapToken, Request, Response};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::{C_SIZE, PostDescriptor};
use libfuzzer_sys::fuzz_target;
use nicemu_fuzz::uapi::KgniRig;
use nicemu_fuzz::{Bytes, Reused, digest, run_reused};

fn request(b: &mut Bytes<'_>, job: &JobConfig, va: u64, handles: &[MemHandle]) -> Request {
    let cdm = |b: &mut Bytes<'_>| CdmId(b.u32());
    let cq = |b: &mut Bytes<'_>| CqId(b.u32());
    let ep = |b: &mut Bytes<'_>| EpId(b.u32());
    let opt_cq = |b: &mut Bytes<'_>| {
        let v = b.u32();
        (v != u32::MAX).then_some(CqId(v))
    };
    let addr = |b: &mut Bytes<'_>| {
        let v = b.u64();
        if v >> 63 == 0 { va + (v & 0xFFFF) } else { v }
    };
    let handle = |b: &mut Bytes<'_>| {
        let i = usize::from(b.u8());
        handles.get(i).copied().unwrap_or_else(|| {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(&[b.u64().to_le_bytes(), b.u64().to_le_bytes()].concat());
            MemHandle::from_bytes(&raw).unwrap_or_default()
        })
    };
    match b.u8() % 22 {
        0 => {
            let own = b.u8() & 1 == 0;
            let (ptag, cookie) = if own {
                (job.ptag, job.cookie)
            } else {
                (b.u8(), b.u32())
            };
            Request::CdmCreate {
                inst_id: b.u32(),
                ptag,
                cookie,
                modes: b.u32(),
            }
        }
        1 => Request::CdmDestroy { cdm: cdm(b) },
        2 => Request::CdmAttach {
            cdm: cdm(b),
            device_id: b.u32() as i32,
        },
        3 => Request::FmaSetCq {
            cdm: cdm(b),
            cq: opt_cq(b),
        },
        4 => Request::CqCreate {
            cdm: cdm(b),
            entry_count: b.u32() % 4096,
            delay_count: b.u32(),
            mode: b.u32(),
        },
        5 => Request::CqDestroy { cq: cq(b) },
        6 => Request::CqWait {
            cq: cq(b),
            timeout: Some(Duration::ZERO),
        },
        7 => Request::MemRegister {
            cdm: cdm(b),
            addr: addr(b),
            len: b.u64() % (1 << 20),
            dst_cq: opt_cq(b),
            flags: b.u32(),
        },
        8 => Request::MemDeregister {
            cdm: cdm(b),
            handle: handle(b),
        },
        9 => Request::EpCreate {
            cdm: cdm(b),
            cq: opt_cq(b),
        },
        10 => Request::EpBind {
            ep: ep(b),
            remote_addr: b.u32(),
            remote_id: b.u32(),
        },
        11 => Request::EpUnbind { ep: ep(b) },
        12 => Request::EpDestroy { ep: ep(b) },
        13 => Request::EpSetEventData {
            ep: ep(b),
            local: b.u32(),
            remote: b.u32(),
        },
        14 => {
            let e = ep(b);
            let flags = b.u8();
            let mut raw = b.take(C_SIZE).to_vec();
            raw.resize(C_SIZE, 0);
            let mut d = PostDescriptor::from_c_bytes(&raw).unwrap_or_else(|_| {
                PostDescriptor::new(firmware_spec::gemini::gni::PostType::RdmaPut)
            });
            if flags & 1 != 0 {
                d.local_addr = va + (d.local_addr & 0xFFFF);
                d.remote_addr = va + (d.remote_addr & 0xFFFF);
                d.length &= 0xFFFF;
            }
            if flags & 2 != 0
                && let Some(h) = handles.first()
            {
                d.local_mem_hndl = *h;
                d.remote_mem_hndl = *h;
            }
            Request::PostRdma {
                ep: e,
                desc: Box::new(d),
            }
        }
        15 => {
            let e = ep(b);
            let id = b.u64();
            let len = usize::from(b.u8());
            Request::EpPostData {
                ep: e,
                id: (id & 1 == 0).then_some(id >> 1),
                data: b.take(len).to_vec(),
                out_len: usize::from(b.u8()),
            }
        }
        16 => Request::PostDataTest { ep: ep(b) },
        17 => Request::PostDataWait {
            ep: ep(b),
            timeout: Some(Duration::ZERO),
        },
        18 => Request::PostDataProbe { cdm: cdm(b) },
        19 => Request::PostDataCancel { ep: ep(b) },
        20 => Request::PostDataCancelById {
            cdm: cdm(b),
            id: b.u64(),
        },
        _ => Request::Mmap {
            token: MmapToken(b.u64()),
        },
    }
}

thread_local! {
    static RIG: Reused<KgniRig> = Reused::default();
}

/// A comparable account of one answer (a mapping by kind only: it holds handles whose
/// `Debug` is no business of the comparison).
fn outcome(r: &Result<Response, driver::gemini::KgniError>) -> u64 {
    match r {
        Ok(Response::Mapping(Mapping::Mmio(_))) => digest("mapping: mmio"),
        Ok(Response::Mapping(Mapping::Memory(_))) => digest("mapping: memory"),
        r => digest(format!("{r:?}")),
    }
}

/// Run `data` on the rig; returns a digest of every answer (compared with a fresh rig's
/// now and then, see `run_reused`).
fn run(rig: &mut KgniRig, data: &[u8]) -> Vec<u64> {
    let mut b = Bytes(data);
    let c = &rig.c;
    let node = &c.nodes()[0];
    let k = node.kgni();
    let initial = k.free_counts();
    let job = c.job().clone();
    let client = node.open();
    let buf = client.space().alloc(64 << 10).expect("user memory");
    let va = buf.va();
    let mut handles = Vec::new();
    let mut out = Vec::new();
    let mut n = 0;
    while !b.is_empty() && n < 64 {
        n += 1;
        let req = request(&mut b, &job, va, &handles);
        let r = client.request(req);
        out.push(outcome(&r));
        if let Ok(Response::MemHandle(h)) = r {
            handles.push(h);
        }
        c.run(10_000);
    }
    drop(buf);
    drop(client);
    c.run(u64::MAX);
    k.service();
    assert_eq!(
        k.free_counts(),
        initial,
        "every allocator is back to its initial count"
    );
    out
}

fuzz_target!(|data: &[u8]| {
    run_reused(&RIG, data, run);
});
