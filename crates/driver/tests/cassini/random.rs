//! Property: random uAPI request sequences from interleaved clients (valid and invalid
//! requests, handles of any client or made up, raw byte strings, mmaps, closes, a reset)
//! never panic, and once every client has closed every allocator is back to its initial free
//! count and every host page is back.

use driver::cassini::uapi::*;
use driver::cassini::{Client, CxiDevice, Errno, Mapping, Opcode};
use driver::mem::UserMemory;
use firmware_spec::cassini::dfa::C_PID_ANY;
use firmware_spec::cassini::le::{CqAllocFlags, EqFlags, MapFlags, PtAllocOpts};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Arc;

use crate::common::*;

/// A handle argument: one of the caller's own of the right kind, anyone's of the right kind,
/// one of any kind, zero, or made up.
#[derive(Clone, Copy, Debug)]
enum H {
    Own(usize),
    Any(usize),
    AnyKind(usize),
    Zero,
    Raw(u32),
}

/// Kinds of handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum K {
    Lni,
    Dom,
    Cp,
    Cq,
    Eq,
    Md,
    Pte,
    Map,
    Wait,
    Ct,
}

#[derive(Clone, Debug)]
enum Act {
    Close(usize),
    Lni(usize),
    LniFree(usize, H),
    Domain(usize, H, bool, u32),
    Reserve(usize, H, u32, u32),
    DomainFree(usize, H),
    Cp(usize, H, u32, u32, bool),
    CpFree(usize, H),
    Cq(usize, H, H, u32, u32),
    CqFree(usize, H),
    CqAck(usize, H),
    Mem(usize, u64),
    Map(usize, H, usize, u64, u64, u32),
    Unmap(usize, H),
    Update(usize, H, usize, u64, u64),
    Eq(usize, H, usize, H, H, bool, u32),
    EqFree(usize, H),
    EqAdjust(usize, H, i32),
    Pte(usize, H, H, u64),
    PteFree(usize, H),
    PteMap(usize, H, H, u32, bool),
    PteUnmap(usize, H),
    PteStatus(usize, H, usize),
    PteSm(usize, H, u32),
    Wait(usize, H),
    WaitFree(usize, H),
    Ct(usize, H, usize, u64),
    CtWb(usize, H, usize, u64),
    CtFree(usize, H),
    Mmap(usize, usize, bool),
    Unmmap(usize),
    Raw(usize, u32, Vec<u8>, usize),
    Build(usize),
    Reset,
}

fn h() -> impl Strategy<Value = H> {
    prop_oneof![
        8 => any::<usize>().prop_map(H::Own),
        3 => any::<usize>().prop_map(H::Any),
        1 => any::<usize>().prop_map(H::AnyKind),
        1 => Just(H::Zero),
        1 => prop_oneof![0u32..3000, any::<u32>()].prop_map(H::Raw),
    ]
}

/// An offset into a buffer: mostly aligned and inside, sometimes neither.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        3 => (0u64..2048).prop_map(|k| k * 8),
        1 => 0u64..20_000,
    ]
}

fn act() -> impl Strategy<Value = Act> {
    let c = 0usize..3;
    prop_oneof![
        1 => c.clone().prop_map(Act::Close),
        12 => c.clone().prop_map(Act::Lni),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::LniFree(c, h)),
        3 => (c.clone(), h(), any::<bool>(), 0u32..600).prop_map(|(c, h, any, p)| Act::Domain(c, h, any, p)),
        1 => (c.clone(), h(), 0u32..600, 0u32..20).prop_map(|(c, h, p, n)| Act::Reserve(c, h, p, n)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::DomainFree(c, h)),
        2 => (c.clone(), h(), 0u32..6, 0u32..4, any::<bool>()).prop_map(|(c, h, tc, t, trig)| Act::Cp(c, h, tc, t, trig)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::CpFree(c, h)),
        3 => (c.clone(), h(), h(), prop_oneof![Just(0u32), Just(2), Just(10), 0u32..16], prop_oneof![3 => 1u32..2000, 1 => any::<u32>()])
            .prop_map(|(c, l, e, f, n)| Act::Cq(c, l, e, f, n)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::CqFree(c, h)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::CqAck(c, h)),
        8 => (c.clone(), 0u64..5).prop_map(|(c, p)| Act::Mem(c, p)),
        4 => (c.clone(), h(), any::<usize>(), offset(), prop_oneof![4 => 1u64..12_000, 1 => any::<u64>()], prop_oneof![Just(13u32), Just(8), 0u32..32])
            .prop_map(|(c, l, m, o, n, f)| Act::Map(c, l, m, o, n, f)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::Unmap(c, h)),
        1 => (c.clone(), h(), any::<usize>(), offset(), 0u64..12_000).prop_map(|(c, h, m, o, n)| Act::Update(c, h, m, o, n)),
        3 => (c.clone(), h(), any::<usize>(), h(), h(), any::<bool>(), 0u32..80)
            .prop_map(|(c, l, m, md, w, pt, r)| Act::Eq(c, l, m, md, w, pt, r)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::EqFree(c, h)),
        1 => (c.clone(), h(), -70i32..70).prop_map(|(c, h, v)| Act::EqAdjust(c, h, v)),
        3 => (c.clone(), h(), h(), prop_oneof![0u64..(1 << 11), any::<u64>()]).prop_map(|(c, l, e, o)| Act::Pte(c, l, e, o)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::PteFree(c, h)),
        2 => (c.clone(), h(), h(), prop_oneof![0u32..300, any::<u32>()], any::<bool>()).prop_map(|(c, p, d, i, m)| Act::PteMap(c, p, d, i, m)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::PteUnmap(c, h)),
        1 => (c.clone(), h(), any::<usize>()).prop_map(|(c, h, m)| Act::PteStatus(c, h, m)),
        1 => (c.clone(), h(), 0u32..3).prop_map(|(c, h, d)| Act::PteSm(c, h, d)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::Wait(c, h)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::WaitFree(c, h)),
        2 => (c.clone(), h(), any::<usize>(), offset()).prop_map(|(c, l, m, o)| Act::Ct(c, l, m, o)),
        1 => (c.clone(), h(), any::<usize>(), offset()).prop_map(|(c, h, m, o)| Act::CtWb(c, h, m, o)),
        1 => (c.clone(), h()).prop_map(|(c, h)| Act::CtFree(c, h)),
        2 => (c.clone(), any::<usize>(), any::<bool>()).prop_map(|(c, t, exact)| Act::Mmap(c, t, exact)),
        1 => any::<usize>().prop_map(Act::Unmmap),
        2 => (c.clone(), 0u32..115, prop::collection::vec(any::<u8>(), 0..96), 0usize..140)
            .prop_map(|(c, op, b, r)| Act::Raw(c, op, b, r)),
        3 => c.clone().prop_map(Act::Build),
        1 => Just(Act::Reset),
    ]
}

struct World<'a> {
    dev: &'a Arc<CxiDevice>,
    clients: Vec<Option<Client>>,
    handles: Vec<(K, usize, u32)>,
    mem: Vec<(usize, UserMemory)>,
    tokens: Vec<MmInfo>,
    maps: Vec<Mapping>,
    resets: u32,
    ok: u64,
}

impl World<'_> {
    fn client(&mut self, i: usize) -> &Client {
        let dev = self.dev;
        self.clients[i].get_or_insert_with(|| dev.open())
    }

    fn pick(&self, i: usize, keep: impl Fn(&(K, usize, u32)) -> bool) -> u32 {
        let v: Vec<u32> = self
            .handles
            .iter()
            .filter(|x| keep(x))
            .map(|x| x.2)
            .collect();
        if v.is_empty() { 0 } else { v[i % v.len()] }
    }

    /// Client `c` goes away (close, or its process restarts): its handles and buffers with it.
    fn forget(&mut self, c: usize) {
        self.clients[c] = None;
        self.handles.retain(|x| x.1 != c);
        self.mem.retain(|m| m.0 != c);
    }

    fn h(&self, c: usize, k: K, h: H) -> u32 {
        match h {
            H::Own(i) => self.pick(i, |x| x.0 == k && x.1 == c),
            H::Any(i) => self.pick(i, |x| x.0 == k),
            H::AnyKind(i) => self.pick(i, |_| true),
            H::Zero => 0,
            H::Raw(v) => v,
        }
    }

    /// A buffer: usually one of client `c`'s own, sometimes anyone's.
    fn mem(&self, c: usize, i: usize) -> Option<&UserMemory> {
        let own: Vec<&UserMemory> = self.mem.iter().filter(|m| m.0 == c).map(|m| &m.1).collect();
        if !i.is_multiple_of(4) && !own.is_empty() {
            return Some(own[i / 4 % own.len()]);
        }
        (!self.mem.is_empty()).then(|| &self.mem[i % self.mem.len()].1)
    }

    fn va(&self, c: usize, i: usize, off: u64) -> u64 {
        self.mem(c, i).map_or(off, |m| m.va().wrapping_add(off))
    }

    fn seen(&mut self, c: usize, k: K, v: u32) {
        if self.handles.len() < 512 {
            self.handles.push((k, c, v));
        }
    }

    fn call<R: Request>(&mut self, c: usize, req: R) -> Option<R::Resp> {
        let r = self.client(c).call(&req);
        self.ok += u64::from(r.is_ok());
        if matches!(r, Err(Errno::Eio)) {
            // The device was reset under this process: it reopens the device.
            self.forget(c);
        }
        r.ok()
    }

    /// A client builds a working set of objects the usual way (what a library does at
    /// start-up), so the other actions find valid handles of every kind. Steps that fail are
    /// skipped.
    fn build(&mut self, c: usize) {
        let Some(lni) = self
            .call(
                c,
                LniAllocCmd {
                    svc_id: 1,
                    ..Default::default()
                },
            )
            .map(|r| r.lni)
        else {
            return;
        };
        self.seen(c, K::Lni, lni);
        if let Some(r) = self.call(
            c,
            DomainAllocCmd {
                lni,
                vni: VNI,
                pid: C_PID_ANY,
                ..Default::default()
            },
        ) {
            self.seen(c, K::Dom, r.domain);
        }
        if let Some(r) = self.call(
            c,
            CpAllocCmd {
                lni,
                vni: VNI,
                tc: 2,
                ..Default::default()
            },
        ) {
            self.seen(c, K::Cp, r.cp_hndl);
        }
        let wait = self
            .call(
                c,
                WaitAllocCmd {
                    lni,
                    ..Default::default()
                },
            )
            .map(|r| r.wait);
        if let Some(w) = wait {
            self.seen(c, K::Wait, w);
        }
        let Ok(buf) = self.client(c).alloc_user_memory(2 * 4096) else {
            return;
        };
        let (va, len) = (buf.va(), buf.len());
        self.mem.push((c, buf));
        let flags = (MapFlags::READ | MapFlags::WRITE).bits();
        let Some(md) = self.call(
            c,
            AtuMapCmd {
                lni,
                va,
                len,
                flags,
                ..Default::default()
            },
        ) else {
            return;
        };
        self.seen(c, K::Md, md.id);
        let attr = EqAttr {
            queue: va,
            queue_len: len,
            ..Default::default()
        };
        let req = EqAllocCmd {
            lni,
            queue_md: md.id,
            event_wait: wait.unwrap_or(0),
            attr,
            ..Default::default()
        };
        let eq = self.call(c, req).map(|r| {
            self.tokens.push(r.csr);
            r.eq
        });
        if let Some(eq) = eq {
            self.seen(c, K::Eq, eq);
        }
        let eq = eq.unwrap_or(0);
        for tx in [true, false] {
            let flags = if tx { CqAllocFlags::IS_TX.bits() } else { 0 };
            let opts = CqAllocOpts {
                count: 64,
                flags,
                ..Default::default()
            };
            if let Some(r) = self.call(
                c,
                CqAllocCmd {
                    lni,
                    eq,
                    opts,
                    ..Default::default()
                },
            ) {
                self.seen(c, K::Cq, r.cq);
                self.tokens.extend([r.cmds, r.wp_addr]);
            }
        }
        let opts = PtAllocOpts::IS_MATCHING.bits();
        if let Some(r) = self.call(
            c,
            PteAllocCmd {
                lni_hndl: lni,
                evtq_hndl: eq,
                opts,
                ..Default::default()
            },
        ) {
            self.seen(c, K::Pte, r.pte_number);
        }
        if let Some(r) = self.call(
            c,
            CtAllocCmd {
                lni,
                wb: va,
                ..Default::default()
            },
        ) {
            self.seen(c, K::Ct, r.ctn);
            self.tokens.push(r.doorbell);
        }
    }

    fn apply(&mut self, a: Act) {
        match a {
            Act::Close(c) => self.forget(c),
            Act::Lni(c) => {
                if let Some(r) = self.call(
                    c,
                    LniAllocCmd {
                        svc_id: 1,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Lni, r.lni);
                }
            }
            Act::LniFree(c, l) => {
                let lni = self.h(c, K::Lni, l);
                let _ = self.call(
                    c,
                    LniFreeCmd {
                        lni,
                        ..Default::default()
                    },
                );
            }
            Act::Domain(c, l, any, pid) => {
                let lni = self.h(c, K::Lni, l);
                let pid = if any { C_PID_ANY } else { pid };
                if let Some(r) = self.call(
                    c,
                    DomainAllocCmd {
                        lni,
                        vni: VNI,
                        pid,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Dom, r.domain);
                }
            }
            Act::Reserve(c, l, pid, count) => {
                let lni = self.h(c, K::Lni, l);
                let _ = self.call(
                    c,
                    DomainReserveCmd {
                        lni,
                        vni: VNI,
                        pid,
                        count,
                        ..Default::default()
                    },
                );
            }
            Act::DomainFree(c, d) => {
                let domain = self.h(c, K::Dom, d);
                let _ = self.call(
                    c,
                    DomainFreeCmd {
                        domain,
                        ..Default::default()
                    },
                );
            }
            Act::Cp(c, l, tc, tc_type, trig) => {
                let lni = self.h(c, K::Lni, l);
                let r = if trig {
                    self.call(
                        c,
                        TrigCpAllocCmd {
                            lni,
                            vni: VNI,
                            tc,
                            tc_type,
                            cp_type: tc_type % 3,
                            ..Default::default()
                        },
                    )
                } else {
                    self.call(
                        c,
                        CpAllocCmd {
                            lni,
                            vni: VNI,
                            tc,
                            tc_type,
                            ..Default::default()
                        },
                    )
                };
                if let Some(r) = r {
                    self.seen(c, K::Cp, r.cp_hndl);
                }
            }
            Act::CpFree(c, h) => {
                let cp_hndl = self.h(c, K::Cp, h);
                let _ = self.call(
                    c,
                    CpFreeCmd {
                        cp_hndl,
                        ..Default::default()
                    },
                );
            }
            Act::Cq(c, l, e, flags, count) => {
                let (lni, eq) = (self.h(c, K::Lni, l), self.h(c, K::Eq, e));
                let flags = CqAllocFlags(flags).bits();
                let opts = CqAllocOpts {
                    count,
                    flags,
                    lcid: count % 17,
                    ..Default::default()
                };
                if let Some(r) = self.call(
                    c,
                    CqAllocCmd {
                        lni,
                        eq,
                        opts,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Cq, r.cq);
                    self.tokens.extend([r.cmds, r.wp_addr]);
                }
            }
            Act::CqFree(c, h) => {
                let cq = self.h(c, K::Cq, h);
                let _ = self.call(
                    c,
                    CqFreeCmd {
                        cq,
                        ..Default::default()
                    },
                );
            }
            Act::CqAck(c, h) => {
                let cq = self.h(c, K::Cq, h);
                let _ = self.call(
                    c,
                    CqAckCounterCmd {
                        cq,
                        ..Default::default()
                    },
                );
            }
            Act::Mem(c, pages) => {
                if let Ok(m) = self.client(c).alloc_user_memory(pages * 4096) {
                    self.mem.push((c, m));
                }
            }
            Act::Map(c, l, m, off, len, flags) => {
                let lni = self.h(c, K::Lni, l);
                let va = self.va(c, m, off);
                let flags = MapFlags(flags).bits() | MapFlags::READ.bits();
                if let Some(r) = self.call(
                    c,
                    AtuMapCmd {
                        lni,
                        va,
                        len,
                        flags,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Md, r.id);
                }
            }
            Act::Unmap(c, h) => {
                let id = self.h(c, K::Md, h);
                let _ = self.call(
                    c,
                    AtuUnmapCmd {
                        id,
                        ..Default::default()
                    },
                );
            }
            Act::Update(c, h, m, off, len) => {
                let id = self.h(c, K::Md, h);
                let va = self.va(c, m, off);
                let flags = (MapFlags::READ | MapFlags::WRITE).bits();
                let _ = self.call(
                    c,
                    AtuUpdateMdCmd {
                        id,
                        va,
                        len,
                        flags,
                        ..Default::default()
                    },
                );
            }
            Act::Eq(c, l, m, md, w, passthrough, reserved) => {
                let (lni, queue_md, event_wait) = (
                    self.h(c, K::Lni, l),
                    self.h(c, K::Md, md),
                    self.h(c, K::Wait, w),
                );
                let (queue, queue_len) = self.mem(c, m).map_or((4096, 4096), |u| (u.va(), u.len()));
                let flags = if passthrough {
                    EqFlags::PASSTHROUGH.bits()
                } else {
                    0
                };
                let attr = EqAttr {
                    queue,
                    queue_len,
                    flags,
                    reserved_slots: reserved,
                    ..Default::default()
                };
                if let Some(r) = self.call(
                    c,
                    EqAllocCmd {
                        lni,
                        queue_md,
                        event_wait,
                        attr,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Eq, r.eq);
                    self.tokens.push(r.csr);
                }
            }
            Act::EqFree(c, h) => {
                let eq = self.h(c, K::Eq, h);
                let _ = self.call(
                    c,
                    EqFreeCmd {
                        eq,
                        ..Default::default()
                    },
                );
            }
            Act::EqAdjust(c, h, value) => {
                let eq_hndl = self.h(c, K::Eq, h);
                let _ = self.call(
                    c,
                    EqAdjustReservedFcCmd {
                        eq_hndl,
                        value,
                        ..Default::default()
                    },
                );
            }
            Act::Pte(c, l, e, opts) => {
                let (lni_hndl, evtq_hndl) = (self.h(c, K::Lni, l), self.h(c, K::Eq, e));
                let opts = opts & !PtAllocOpts::ETHERNET.bits() | PtAllocOpts::IS_MATCHING.bits();
                if let Some(r) = self.call(
                    c,
                    PteAllocCmd {
                        lni_hndl,
                        evtq_hndl,
                        opts,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Pte, r.pte_number);
                }
            }
            Act::PteFree(c, h) => {
                let pte_number = self.h(c, K::Pte, h);
                let _ = self.call(
                    c,
                    PteFreeCmd {
                        pte_number,
                        ..Default::default()
                    },
                );
            }
            Act::PteMap(c, p, d, idx, mcast) => {
                let (pte_number, domain_hndl) = (self.h(c, K::Pte, p), self.h(c, K::Dom, d));
                let req = PteMapCmd {
                    pte_number,
                    domain_hndl,
                    pid_offset: idx,
                    is_multicast: u8::from(mcast),
                    ..Default::default()
                };
                if let Some(r) = self.call(c, req) {
                    self.seen(c, K::Map, r.pte_index);
                }
            }
            Act::PteUnmap(c, h) => {
                let pte_index = self.h(c, K::Map, h);
                let _ = self.call(
                    c,
                    PteUnmapCmd {
                        pte_index,
                        ..Default::default()
                    },
                );
            }
            Act::PteStatus(c, h, m) => {
                let pte_index = self.h(c, K::Pte, h);
                let mut st = PteStatus {
                    ule_offsets: self.va(c, m, 0),
                    ule_count: 4,
                    ..Default::default()
                };
                let req = PteStatusCmd {
                    pte_index,
                    ..Default::default()
                };
                let _ = self.client(c).call_inout(&req, &mut st);
            }
            Act::PteSm(c, h, drop_count) => {
                let pte_index = self.h(c, K::Pte, h);
                let _ = self.call(
                    c,
                    PteTransitionSmCmd {
                        pte_index,
                        drop_count,
                        ..Default::default()
                    },
                );
            }
            Act::Wait(c, l) => {
                let lni = self.h(c, K::Lni, l);
                if let Some(r) = self.call(
                    c,
                    WaitAllocCmd {
                        lni,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Wait, r.wait);
                }
            }
            Act::WaitFree(c, h) => {
                let wait = self.h(c, K::Wait, h);
                let _ = self.call(
                    c,
                    WaitFreeCmd {
                        wait,
                        ..Default::default()
                    },
                );
            }
            Act::Ct(c, l, m, off) => {
                let lni = self.h(c, K::Lni, l);
                let wb = self.va(c, m, off);
                if let Some(r) = self.call(
                    c,
                    CtAllocCmd {
                        lni,
                        wb,
                        ..Default::default()
                    },
                ) {
                    self.seen(c, K::Ct, r.ctn);
                    self.tokens.push(r.doorbell);
                }
            }
            Act::CtWb(c, h, m, off) => {
                let ctn = self.h(c, K::Ct, h);
                let wb = self.va(c, m, off);
                let _ = self.call(
                    c,
                    CtWbUpdateCmd {
                        ctn,
                        wb,
                        ..Default::default()
                    },
                );
            }
            Act::CtFree(c, h) => {
                let ctn = self.h(c, K::Ct, h);
                let _ = self.call(
                    c,
                    CtFreeCmd {
                        ctn,
                        ..Default::default()
                    },
                );
            }
            Act::Mmap(c, t, exact) => {
                if self.tokens.is_empty() {
                    return;
                }
                let tok = self.tokens[t % self.tokens.len()];
                let size = if exact { tok.size } else { tok.size / 2 };
                if let Ok(m) = self.client(c).mmap(tok.offset, size) {
                    // Touch it: a revoked or foreign mapping must fail cleanly, not panic.
                    if let Some(w) = m.memory() {
                        let _ = w.read_u64(0);
                    }
                    if self.maps.len() < 16 {
                        self.maps.push(m);
                    }
                }
            }
            Act::Unmmap(i) => {
                if !self.maps.is_empty() {
                    let i = i % self.maps.len();
                    self.maps.swap_remove(i);
                }
            }
            Act::Raw(c, op, mut bytes, resp_len) => {
                if bytes.len() >= 4 {
                    bytes[..4].copy_from_slice(&op.to_le_bytes());
                }
                // Right-sized requests of a random opcode reach the handlers with random fields.
                if let Some(info) = Opcode::from_u32(op).and_then(Opcode::info)
                    && bytes.len().is_multiple_of(2)
                {
                    bytes.resize(info.req_size.max(4), 0);
                    bytes[..4].copy_from_slice(&op.to_le_bytes());
                }
                let mut resp = vec![0u8; resp_len];
                let _ = self.client(c).write(&bytes, &mut resp);
            }
            Act::Build(c) => self.build(c),
            Act::Reset => {
                // Rare: at most once per sequence.
                if self.resets == 0 {
                    self.resets += 1;
                    self.dev.reset().unwrap();
                }
            }
        }
    }
}

#[test]
fn random_request_sequences_never_panic_or_leak() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let initial = d.initial_free_counts();
    let host = d.memory().free_bytes();
    let successes = std::cell::Cell::new(0u64);
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&prop::collection::vec(act(), 20..160), |acts| {
        let mut w = World {
            dev: &d,
            clients: vec![None, None, None],
            handles: Vec::new(),
            mem: Vec::new(),
            tokens: Vec::new(),
            maps: Vec::new(),
            resets: 0,
            ok: 0,
        };
        for a in acts {
            w.apply(a);
            let now = d.free_counts();
            prop_assert!(
                now.txqs <= initial.txqs && now.eqs <= initial.eqs && now.ptes <= initial.ptes
            );
        }
        successes.set(successes.get() + w.ok);
        let World {
            clients, mem, maps, ..
        } = w;
        drop(maps);
        drop(clients);
        drop(mem);
        prop_assert_eq!(d.client_count(), 0);
        prop_assert_eq!(d.free_counts(), initial);
        prop_assert_eq!(d.memory().free_bytes(), host);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The sequences reached the handlers' success paths, not just their checks.
    assert!(
        successes.get() > 2000,
        "{} successful requests",
        successes.get()
    );
    // The device still works after all that.
    let c = d.open();
    let e = everything(&c);
    drop(e);
    drop(c);
    assert_eq!(d.free_counts(), initial);
}
