//! Random kgni request sequences from interleaved clients on two emulated Gemini nodes:
//! valid and invalid requests, foreign and stale handles, clients closing mid-way. Nothing
//! panics, every error maps to a `gni_return_t`, and once every client has closed each
//! allocator is back to its initial free count and every page of host memory is back.

use std::time::Duration;

use driver::gemini::{
    CdmId, CqId, EpId, KgniClient, KgniError, MapKind, MmapToken, Request, Response,
};
use driver::mem::UserMemory;
use firmware_spec::gemini::gni::{CdmMode, CqEventMode, PostType};
use firmware_spec::gemini::mdd::MemHandle;
use firmware_spec::gemini::post::PostDescriptor;
use platform::gemini::GeminiCluster;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    CdmCreate {
        c: u8,
        inst: u8,
        job: bool,
        modes: u8,
    },
    CdmAttach {
        c: u8,
        cdm: u16,
    },
    CdmDestroy {
        c: u8,
        cdm: u16,
    },
    CqCreate {
        c: u8,
        cdm: u16,
        entries: u16,
        blocking: bool,
    },
    CqDestroy {
        c: u8,
        cq: u16,
    },
    CqWait {
        c: u8,
        cq: u16,
    },
    FmaSetCq {
        c: u8,
        cdm: u16,
        cq: Option<u16>,
    },
    Register {
        c: u8,
        cdm: u16,
        off: u16,
        len: u32,
        dst_cq: Option<u16>,
        ro: bool,
    },
    Deregister {
        c: u8,
        cdm: u16,
        h: u16,
    },
    EpCreate {
        c: u8,
        cdm: u16,
        cq: Option<u16>,
    },
    EpBind {
        c: u8,
        ep: u16,
        addr: u8,
        id: u8,
    },
    EpUnbind {
        c: u8,
        ep: u16,
    },
    EpDestroy {
        c: u8,
        ep: u16,
    },
    PostRdma {
        c: u8,
        ep: u16,
        lh: u16,
        rh: u16,
        get: bool,
        len: u16,
        events: u8,
    },
    PostData {
        c: u8,
        ep: u16,
        id: Option<u8>,
        len: u8,
        out: u8,
    },
    DataTest {
        c: u8,
        ep: u16,
    },
    DataWait {
        c: u8,
        ep: u16,
    },
    DataCancel {
        c: u8,
        ep: u16,
    },
    Probe {
        c: u8,
        cdm: u16,
    },
    Mmap {
        c: u8,
        kind: u8,
        index: u16,
    },
    Run {
        steps: u16,
    },
    Reopen {
        c: u8,
    },
}

const CLIENTS: u8 = 4;

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CLIENTS;
    let h = any::<u16>();
    prop_oneof![
        3 => (c.clone(), 0u8..6, prop::bool::weighted(0.9), 0u8..4)
            .prop_map(|(c, inst, job, modes)| Op::CdmCreate { c, inst, job, modes }),
        3 => (c.clone(), h).prop_map(|(c, cdm)| Op::CdmAttach { c, cdm }),
        1 => (c.clone(), h).prop_map(|(c, cdm)| Op::CdmDestroy { c, cdm }),
        3 => (c.clone(), h, 0u16..300, any::<bool>())
            .prop_map(|(c, cdm, entries, blocking)| Op::CqCreate { c, cdm, entries, blocking }),
        1 => (c.clone(), h).prop_map(|(c, cq)| Op::CqDestroy { c, cq }),
        1 => (c.clone(), h).prop_map(|(c, cq)| Op::CqWait { c, cq }),
        1 => (c.clone(), h, prop::option::of(h))
            .prop_map(|(c, cdm, cq)| Op::FmaSetCq { c, cdm, cq }),
        3 => (c.clone(), h, 0u16..20_000, 0u32..70_000, prop::option::of(h), any::<bool>())
            .prop_map(|(c, cdm, off, len, dst_cq, ro)| Op::Register { c, cdm, off, len, dst_cq, ro }),
        1 => (c.clone(), h, h).prop_map(|(c, cdm, h)| Op::Deregister { c, cdm, h }),
        3 => (c.clone(), h, prop::option::of(h))
            .prop_map(|(c, cdm, cq)| Op::EpCreate { c, cdm, cq }),
        2 => (c.clone(), h, 0u8..3, 0u8..6)
            .prop_map(|(c, ep, addr, id)| Op::EpBind { c, ep, addr, id }),
        1 => (c.clone(), h).prop_map(|(c, ep)| Op::EpUnbind { c, ep }),
        1 => (c.clone(), h).prop_map(|(c, ep)| Op::EpDestroy { c, ep }),
        3 => (c.clone(), h, h, h, any::<bool>(), 0u16..5000, 0u8..8)
            .prop_map(|(c, ep, lh, rh, get, len, events)| Op::PostRdma { c, ep, lh, rh, get, len, events }),
        3 => (c.clone(), h, prop::option::of(0u8..4), 0u8..140, 0u8..140)
            .prop_map(|(c, ep, id, len, out)| Op::PostData { c, ep, id, len, out }),
        2 => (c.clone(), h).prop_map(|(c, ep)| Op::DataTest { c, ep }),
        1 => (c.clone(), h).prop_map(|(c, ep)| Op::DataWait { c, ep }),
        1 => (c.clone(), h).prop_map(|(c, ep)| Op::DataCancel { c, ep }),
        1 => (c.clone(), h).prop_map(|(c, cdm)| Op::Probe { c, cdm }),
        1 => (c.clone(), 0u8..7, h).prop_map(|(c, kind, index)| Op::Mmap { c, kind, index }),
        2 => (0u16..400).prop_map(|steps| Op::Run { steps }),
        1 => c.prop_map(|c| Op::Reopen { c }),
    ]
}

/// Handles given out: requests mostly pick one the client itself was given, sometimes one any
/// client was ever given (another client's, or stale), sometimes a made-up one.
#[derive(Default, Clone)]
struct Pools {
    cdms: Vec<CdmId>,
    cqs: Vec<CqId>,
    eps: Vec<EpId>,
    handles: Vec<MemHandle>,
}

fn pick<T: Copy>(own: &[T], all: &[T], sel: u16, made_up: impl FnOnce(u16) -> T) -> T {
    let pool = if sel % 4 == 3 || own.is_empty() {
        all
    } else {
        own
    };
    if pool.is_empty() || sel % 16 == 15 {
        return made_up(sel);
    }
    // Recent handles are the likely live ones: favour the end of the pool.
    let back = usize::from(sel / 16) % pool.len().min(4);
    pool[pool.len() - 1 - back]
}

struct Client {
    client: KgniClient,
    buf: UserMemory,
}

fn open(c: &GeminiCluster, i: u8) -> Client {
    // Clients 0..3 on node 0, client 3 on node 1.
    let node = c.node(usize::from(i == CLIENTS - 1)).unwrap();
    let client = node.open();
    let buf = client.space().alloc(64 * 1024).unwrap();
    Client { client, buf }
}

fn run_ops(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let c = GeminiCluster::builder().build().unwrap();
    let initial: Vec<_> = c.nodes().iter().map(|n| n.kgni().free_counts()).collect();
    let mem: Vec<_> = c.nodes().iter().map(|n| n.memory().free_bytes()).collect();
    let job = c.job().clone();
    let mut clients: Vec<Option<Client>> = (0..CLIENTS).map(|i| Some(open(&c, i))).collect();
    let mut p = Pools::default();
    let mut own: Vec<Pools> = vec![Pools::default(); usize::from(CLIENTS)];
    for op in ops {
        let ci = match &op {
            Op::Run { steps } => {
                for _ in 0..*steps {
                    if !c.progress().progress() {
                        break;
                    }
                }
                continue;
            }
            Op::Reopen { c: i } => {
                clients[usize::from(*i)] = None;
                clients[usize::from(*i)] = Some(open(&c, *i));
                own[usize::from(*i)] = Pools::default();
                continue;
            }
            Op::CdmCreate { c, .. }
            | Op::CdmAttach { c, .. }
            | Op::CdmDestroy { c, .. }
            | Op::CqCreate { c, .. }
            | Op::CqDestroy { c, .. }
            | Op::CqWait { c, .. }
            | Op::FmaSetCq { c, .. }
            | Op::Register { c, .. }
            | Op::Deregister { c, .. }
            | Op::EpCreate { c, .. }
            | Op::EpBind { c, .. }
            | Op::EpUnbind { c, .. }
            | Op::EpDestroy { c, .. }
            | Op::PostRdma { c, .. }
            | Op::PostData { c, .. }
            | Op::DataTest { c, .. }
            | Op::DataWait { c, .. }
            | Op::DataCancel { c, .. }
            | Op::Probe { c, .. }
            | Op::Mmap { c, .. } => usize::from(*c),
        };
        let Some(cl) = clients[ci].as_ref() else {
            continue;
        };
        let o = &own[ci];
        let cdm = |s: u16| pick(&o.cdms, &p.cdms, s, |x| CdmId(u32::from(x)));
        let cq = |s: u16| pick(&o.cqs, &p.cqs, s, |x| CqId(u32::from(x)));
        let ep = |s: u16| pick(&o.eps, &p.eps, s, |x| EpId(u32::from(x)));
        let mh = |s: u16| {
            pick(&o.handles, &p.handles, s, |x| MemHandle {
                qword1: u64::from(x) << 12,
                qword2: u64::from(x),
            })
        };
        let req = match op {
            Op::CdmCreate {
                inst,
                job: ok,
                modes,
                ..
            } => Request::CdmCreate {
                inst_id: u32::from(inst),
                ptag: if ok { job.ptag } else { job.ptag + 1 },
                cookie: job.cookie,
                modes: match modes {
                    0 => 0,
                    1 => CdmMode::FMA_SHARED.bits(),
                    2 => (CdmMode::FMA_SHARED | CdmMode::FMA_DEDICATED).bits(),
                    _ => (CdmMode::BTE_SINGLE_CHANNEL | CdmMode::FMA_SMALL_WINDOW).bits(),
                },
            },
            Op::CdmAttach { cdm: s, .. } => Request::CdmAttach {
                cdm: cdm(s),
                device_id: -1,
            },
            Op::CdmDestroy { cdm: s, .. } => Request::CdmDestroy { cdm: cdm(s) },
            Op::CqCreate {
                cdm: s,
                entries,
                blocking,
                ..
            } => Request::CqCreate {
                cdm: cdm(s),
                entry_count: u32::from(entries),
                delay_count: 1,
                mode: u32::from(blocking),
            },
            Op::CqDestroy { cq: s, .. } => Request::CqDestroy { cq: cq(s) },
            Op::CqWait { cq: s, .. } => Request::CqWait {
                cq: cq(s),
                timeout: Some(Duration::ZERO),
            },
            Op::FmaSetCq { cdm: s, cq: q, .. } => Request::FmaSetCq {
                cdm: cdm(s),
                cq: q.map(cq),
            },
            Op::Register {
                cdm: s,
                off,
                len,
                dst_cq,
                ro,
                ..
            } => Request::MemRegister {
                cdm: cdm(s),
                addr: cl.buf.va() + u64::from(off),
                len: u64::from(len),
                dst_cq: dst_cq.map(cq),
                flags: u32::from(ro),
            },
            Op::Deregister { cdm: s, h, .. } => Request::MemDeregister {
                cdm: cdm(s),
                handle: mh(h),
            },
            Op::EpCreate { cdm: s, cq: q, .. } => Request::EpCreate {
                cdm: cdm(s),
                cq: q.map(cq),
            },
            Op::EpBind {
                ep: s, addr, id, ..
            } => Request::EpBind {
                ep: ep(s),
                remote_addr: u32::from(addr),
                remote_id: u32::from(id),
            },
            Op::EpUnbind { ep: s, .. } => Request::EpUnbind { ep: ep(s) },
            Op::EpDestroy { ep: s, .. } => Request::EpDestroy { ep: ep(s) },
            Op::PostRdma {
                ep: s,
                lh,
                rh,
                get,
                len,
                events,
                ..
            } => {
                let mut d = PostDescriptor::new(if get {
                    PostType::RdmaGet
                } else {
                    PostType::RdmaPut
                });
                d.local_mem_hndl = mh(lh);
                d.remote_mem_hndl = mh(rh);
                let lva = d.local_mem_hndl.decode().map_or(0, |i| i.va);
                let rva = d.remote_mem_hndl.decode().map_or(0, |i| i.va);
                d.local_addr = lva + u64::from(len % 64) * 4;
                d.remote_addr = rva + u64::from(len % 16) * 4;
                d.length = u64::from(len);
                d.cq_mode =
                    CqEventMode::from_bits(u16::from(events & 7)).unwrap_or(CqEventMode::SILENT);
                Request::PostRdma {
                    ep: ep(s),
                    desc: Box::new(d),
                }
            }
            Op::PostData {
                ep: s,
                id,
                len,
                out,
                ..
            } => Request::EpPostData {
                ep: ep(s),
                id: id.map(u64::from),
                data: vec![len; usize::from(len)],
                out_len: usize::from(out),
            },
            Op::DataTest { ep: s, .. } => Request::PostDataTest { ep: ep(s) },
            Op::DataWait { ep: s, .. } => Request::PostDataWait {
                ep: ep(s),
                timeout: Some(Duration::ZERO),
            },
            Op::DataCancel { ep: s, .. } => Request::PostDataCancel { ep: ep(s) },
            Op::Probe { cdm: s, .. } => Request::PostDataProbe { cdm: cdm(s) },
            Op::Mmap { kind, index, .. } => {
                let kinds = [
                    MapKind::FmaUserPage,
                    MapKind::FmaPutWc,
                    MapKind::FmaGet,
                    MapKind::FmaPutUc,
                    MapKind::CqAlias,
                    MapKind::CqRing,
                ];
                let token = match kinds.get(usize::from(kind)) {
                    Some(k @ (MapKind::CqAlias | MapKind::CqRing)) => {
                        MmapToken::new(*k, cq(index).0)
                    }
                    Some(k) => MmapToken::new(*k, u32::from(index % 8)),
                    None => MmapToken(u64::from(index) << 40),
                };
                Request::Mmap { token }
            }
            Op::Run { .. } | Op::Reopen { .. } => continue,
        };
        let o = &mut own[ci];
        match cl.client.request(req) {
            Ok(Response::Cdm(x)) => {
                p.cdms.push(x);
                o.cdms.push(x);
            }
            Ok(Response::Cq(x)) => {
                p.cqs.push(x.cq);
                o.cqs.push(x.cq);
            }
            Ok(Response::Ep(x)) => {
                p.eps.push(x);
                o.eps.push(x);
            }
            Ok(Response::MemHandle(x)) => {
                p.handles.push(x);
                o.handles.push(x);
            }
            Ok(_) => {}
            Err(e) => {
                // Every error is a return code and an errno.
                prop_assert!(e.errno() > 0);
                let _ = e.gni_rc();
                prop_assert!(!matches!(e, KgniError::Hw(_)), "hardware error: {e}");
            }
        }
    }
    drop(clients);
    c.run(u64::MAX);
    for (i, n) in c.nodes().iter().enumerate() {
        prop_assert_eq!(&n.kgni().free_counts(), &initial[i], "node {} leaked", i);
        prop_assert_eq!(n.kgni().open_clients(), 1);
        prop_assert_eq!(n.memory().free_bytes(), mem[i], "node {} leaked memory", i);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_requests_never_panic_and_never_leak(ops in prop::collection::vec(op(), 1..120)) {
        // Every client starts with one of everything, so random requests find live handles.
        let mut all = setup(0);
        all.extend(ops);
        run_ops(all)?;
    }
}

/// Each client: a CDM attached, a CQ, a registration, an endpoint bound to node 1, an RDMA
/// PUT into the latest registration of any client, and a datagram. Handle selector 0 is the
/// client's own latest handle, 3 the latest handle of any client.
fn setup(round: u16) -> Vec<Op> {
    let mut ops = Vec::new();
    for c in 0..CLIENTS {
        ops.extend([
            Op::CdmCreate {
                c,
                inst: c,
                job: true,
                modes: 0,
            },
            Op::CdmAttach { c, cdm: 0 },
            Op::CqCreate {
                c,
                cdm: 0,
                entries: 16,
                blocking: true,
            },
            Op::Register {
                c,
                cdm: 0,
                off: 8,
                len: 5000,
                dst_cq: Some(0),
                ro: false,
            },
            Op::EpCreate {
                c,
                cdm: 0,
                cq: Some(0),
            },
            Op::EpBind {
                c,
                ep: 0,
                addr: 1,
                id: 3,
            },
            Op::PostRdma {
                c,
                ep: 0,
                lh: 0,
                rh: 3,
                get: false,
                len: 256,
                events: 2,
            },
            Op::PostData {
                c,
                ep: 0,
                id: None,
                len: 10,
                out: 10,
            },
            Op::Run { steps: 100 + round },
            Op::DataTest { c, ep: 0 },
        ]);
    }
    ops
}

#[test]
fn a_long_fixed_sequence() {
    // Everything once against fresh handles, then again after a client reopened (its old
    // handles are stale in the shared pool).
    let mut ops = setup(0);
    ops.push(Op::Reopen { c: 0 });
    ops.extend(setup(1));
    run_ops(ops).unwrap();
}
