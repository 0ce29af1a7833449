//! What HPE's libcxi sends that the driver's first uAPI did not take, with the real driver's
//! checks and errnos: `write()` of a request by address (`Client::write_user`: the header
//! first, responses through the `resp` pointer, undone when it faults), CQ_ALLOC_BUF, the
//! VNI range, exclusive-CP and netns service operations, a second MAP_CSRS, a token mapped
//! twice.

use std::cell::RefCell;
use std::collections::BTreeMap;

use driver::cassini::uapi::*;
use driver::cassini::{Errno, Opcode, UserAccess};
use firmware_spec::cassini::le::CqAllocFlags;
use zerocopy::{FromBytes, IntoBytes};

use crate::common::*;

/// A process's memory as a few mapped ranges: anything else is `EFAULT`, as
/// `copy_from_user`/`copy_to_user` of an unmapped address.
#[derive(Default)]
struct FakeMemory {
    ranges: RefCell<BTreeMap<u64, Vec<u8>>>,
}

impl FakeMemory {
    fn map(&self, addr: u64, bytes: &[u8]) {
        self.ranges.borrow_mut().insert(addr, bytes.to_vec());
    }
    fn get(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.copy_from_user(addr, &mut v).unwrap();
        v
    }
    fn with<R>(&self, addr: u64, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, Errno> {
        let mut r = self.ranges.borrow_mut();
        let (base, bytes) = r.range_mut(..=addr).next_back().ok_or(Errno::Efault)?;
        let off = (addr - base) as usize;
        let slice = bytes.get_mut(off..off + len).ok_or(Errno::Efault)?;
        Ok(f(slice))
    }
}

impl UserAccess for FakeMemory {
    fn copy_from_user(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.with(addr, buf.len(), |s| buf.copy_from_slice(s))
    }
    fn copy_to_user(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        self.with(addr, data.len(), |s| s.copy_from_slice(data))
    }
}

const REQ: u64 = 0x10_0000;
const RESP: u64 = 0x20_0000;
const LIST: u64 = 0x30_0000;

#[test]
fn write_by_address_checks_the_header_first_and_answers_through_resp() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let m = FakeMemory::default();
    // The header is read whatever the length: an unmapped buffer is EFAULT even with
    // count 0 (libcxi test lni/null_buf); a zeroed one with count 0 is EINVAL (null_len).
    assert_eq!(c.write_user(&m, 0, 24), Err(Errno::Efault));
    m.map(REQ, &[0u8; 16]);
    assert_eq!(c.write_user(&m, REQ, 0), Err(Errno::Einval));
    let req = LniAllocCmd {
        op: Opcode::LniAlloc as u32,
        resp: RESP,
        svc_id: DEFAULT_SVC,
        ..Default::default()
    };
    m.map(REQ, req.as_bytes());
    // Exact length (the header fits, the rest is refused before it is read).
    assert_eq!(c.write_user(&m, REQ, 23), Err(Errno::Einval));
    assert_eq!(c.write_user(&m, REQ, 25), Err(Errno::Einval));
    // No response buffer: EFAULT, and the LNI made is released again.
    let before = d.free_counts();
    assert_eq!(c.write_user(&m, REQ, 24), Err(Errno::Efault));
    assert_eq!(d.free_counts(), before, "the LNI was undone");
    m.map(RESP, &[0u8; 64]);
    assert_eq!(c.write_user(&m, REQ, 24), Ok(24));
    let lni = u32::from_le_bytes(m.get(RESP, 4).try_into().unwrap());
    assert!(lni > 0);
    assert_eq!(d.free_counts().rgids, before.rgids - 1);
    // A list named by address goes to that address (SVC_LIST_GET); the count is always
    // written, the list only when it fits.
    let list = SvcListGetCmd {
        op: Opcode::SvcListGet as u32,
        resp: RESP,
        count: 0,
        list: LIST,
        ..Default::default()
    };
    m.map(REQ, list.as_bytes());
    assert_eq!(c.write_user(&m, REQ, 32), Ok(32));
    assert_eq!(m.get(RESP, 4), 1u32.to_le_bytes());
    let list = SvcListGetCmd { count: 1, ..list };
    m.map(REQ, list.as_bytes());
    assert_eq!(
        c.write_user(&m, REQ, 32),
        Err(Errno::Efault),
        "list unmapped"
    );
    m.map(LIST, &[0u8; 68]);
    assert_eq!(c.write_user(&m, REQ, 32), Ok(32));
    let desc = SvcDesc::read_from_bytes(&m.get(LIST, 68)).unwrap();
    assert_eq!(desc.svc_id, DEFAULT_SVC);
}

#[test]
fn the_default_service_is_the_real_drivers() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let s = c
        .call(&As::<{ Opcode::SvcGet as u32 }, _>(SvcIdCmd {
            svc_id: DEFAULT_SVC,
            ..Default::default()
        }))
        .unwrap();
    // cass_svc.c: restricted to the default VNIs, resource limits, enabled (as loaded with
    // disable_default_svc=0), not a system service (libfabric skips system services), the
    // four traffic classes but not Ethernet.
    assert_eq!(s.bits, 0b1_1010);
    assert_eq!(s.tcs, [1, 1, 1, 1, 0]);
    assert_eq!((s.num_vld_vnis, s.vnis[0], s.vnis[1]), (2, 1, 10));
    assert_eq!((s.limits[6].res, s.limits[6].max), (512, 512));
    let admin = d.open_admin();
    assert_eq!(
        admin.call(&SvcDestroyCmd {
            svc_id: DEFAULT_SVC,
            ..Default::default()
        }),
        Err(Errno::Einval)
    );
}

fn cq_buf(
    c: &driver::cassini::Client,
    lni: u32,
    opts: CqAllocOptsBuf,
) -> Result<CqAllocResp, Errno> {
    c.call(&CqAllocBufCmd {
        lni,
        opts,
        ..Default::default()
    })
}

#[test]
fn cq_alloc_buf_is_cxi_cq_alloc_buf() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let tx = |count: u32, lcid: u32, flags: CqAllocFlags| CqAllocOptsBuf {
        opts: CqAllocOpts {
            count,
            lcid,
            flags: (CqAllocFlags::IS_TX | flags).bits(),
            ..Default::default()
        },
        ..Default::default()
    };
    // A transmit CQ needs a communication profile at its LCID.
    assert_eq!(
        cq_buf(&c, l, tx(64, 0, CqAllocFlags::empty())).unwrap_err(),
        Errno::Einval
    );
    let cp = cp(&c, l).unwrap();
    // Fewer than 64 commands (even 0) is 64; the ring is a power-of-two number of pages.
    let q = cq_buf(&c, l, tx(0, cp.lcid, CqAllocFlags::empty())).unwrap();
    assert_eq!((q.count, q.cmds.size, q.wp_addr.size), (64, 4096, 4096));
    let q2 = cq_buf(&c, l, tx(1000, cp.lcid, CqAllocFlags::empty())).unwrap();
    assert_eq!(q2.count, 1024);
    // More than CXI_MAX_CQ_COUNT after rounding: E2BIG.
    assert_eq!(
        cq_buf(&c, l, tx(65537, cp.lcid, CqAllocFlags::empty())).unwrap_err(),
        Errno::E2big
    );
    // Triggered queues use LCID 0 only; policy 0..3; an unaligned ring.
    assert_eq!(
        cq_buf(&c, l, tx(64, 1, CqAllocFlags::TX_WITH_TRIG_CMDS)).unwrap_err(),
        Errno::Einval
    );
    let mut bad = tx(64, cp.lcid, CqAllocFlags::empty());
    bad.opts.policy = 4;
    assert_eq!(cq_buf(&c, l, bad).unwrap_err(), Errno::Einval);
    let mut user = tx(64, cp.lcid, CqAllocFlags::empty());
    user.buf = 0x1000_0010;
    user.is_host_mem = 1;
    assert_eq!(cq_buf(&c, l, user).unwrap_err(), Errno::Einval);
    // A target CQ needs no profile.
    let tgt = CqAllocOptsBuf {
        opts: CqAllocOpts {
            count: 64,
            ..Default::default()
        },
        ..Default::default()
    };
    let t = cq_buf(&c, l, tgt).unwrap();
    assert!(t.cq >= 1024);
    // A token maps once.
    let _ring = c.mmap_token(&q.cmds).unwrap();
    assert_eq!(c.mmap_token(&q.cmds).unwrap_err(), Errno::Einval);
}

#[test]
fn vni_ranges_exclusive_cp_and_netns_are_service_operations() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let admin = d.open_admin();
    let user = d.open();
    let range = |op: Opcode, svc_id: u32, lo: u32, hi: u32| SvcVniRangeCmd {
        op: op as u32,
        svc_id,
        vni_min: lo,
        vni_max: hi,
        ..Default::default()
    };
    let set = |svc: u32, lo: u32, hi: u32| {
        admin.call(&As::<{ Opcode::SvcSetVniRange as u32 }, _>(range(
            Opcode::SvcSetVniRange,
            svc,
            lo,
            hi,
        )))
    };
    let get = |svc: u32| {
        admin.call(&As::<{ Opcode::SvcGetVniRange as u32 }, _>(range(
            Opcode::SvcGetVniRange,
            svc,
            0,
            0,
        )))
    };
    // Admin only.
    assert_eq!(
        user.call(&As::<{ Opcode::SvcSetVniRange as u32 }, _>(range(
            Opcode::SvcSetVniRange,
            1,
            64,
            127
        ))),
        Err(Errno::Eperm)
    );
    // Not for a service with restricted VNIs (the default one).
    assert_eq!(set(DEFAULT_SVC, 64, 127), Err(Errno::Einval));
    assert_eq!(get(DEFAULT_SVC), Err(Errno::Einval));
    let svc = admin
        .call(&SvcAllocCmd {
            svc_desc: SvcDesc {
                bits: 1 << 4, // enable: ignored without restricted VNIs
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap()
        .svc_id;
    // Starts disabled, with no range yet.
    let desc = |id: u32| {
        admin
            .call(&As::<{ Opcode::SvcGet as u32 }, _>(SvcIdCmd {
                svc_id: id,
                ..Default::default()
            }))
            .unwrap()
    };
    assert_eq!(desc(svc).bits & (1 << 4), 0);
    assert_eq!(lni_on(&user, svc), Err(Errno::Ekeyrevoked));
    let excl_get = |id: u32| {
        admin.call(&As::<{ Opcode::SvcGetExclusiveCp as u32 }, _>(SvcIdCmd {
            svc_id: id,
            ..Default::default()
        }))
    };
    assert_eq!(excl_get(svc), Err(Errno::Enoent));
    // Bad ranges: VNI 0, above 16 bits, reversed, not a power of two, not aligned.
    for (lo, hi) in [(0, 63), (64, 0x1_0000), (127, 64), (64, 126), (32, 95)] {
        assert_eq!(set(svc, lo, hi), Err(Errno::Einval), "[{lo}, {hi}]");
    }
    // A range over the default service's VNI 10 overlaps it.
    assert_eq!(set(svc, 8, 15), Err(Errno::Eexist));
    set(svc, 64, 127).unwrap();
    assert_eq!(
        get(svc).unwrap(),
        SvcGetVniRangeResp {
            vni_min: 64,
            vni_max: 127
        }
    );
    assert_eq!(excl_get(svc).unwrap().exclusive_cp, 0);
    let excl = |v: u8| {
        admin.call(&SvcSetExclusiveCpCmd {
            svc_id: svc,
            exclusive_cp: v,
            ..Default::default()
        })
    };
    excl(1).unwrap();
    assert_eq!(excl_get(svc).unwrap().exclusive_cp, 1);
    admin
        .call(&SvcEnableCmd {
            svc_id: svc,
            enable: 1,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(excl(0), Err(Errno::Ebusy), "not while enabled");
    // The range decides which VNIs the service's LNIs may use.
    let l = lni_on(&user, svc).unwrap();
    let dom = |vni: u32| {
        user.call(&DomainAllocCmd {
            lni: l,
            vni,
            pid: firmware_spec::cassini::dfa::C_PID_ANY,
            ..Default::default()
        })
    };
    assert!(dom(100).is_ok());
    assert_eq!(
        dom(300).unwrap_err(),
        Errno::Einval,
        "no service holds VNI 300"
    );
    // netns: only a service with restricted members and no uid/gid member takes one.
    let netns_get = |id: u32| {
        admin.call(&As::<{ Opcode::SvcGetNetns as u32 }, _>(SvcIdCmd {
            svc_id: id,
            ..Default::default()
        }))
    };
    let netns_set = |id: u32, ns: u32| {
        admin.call(&SvcSetNetnsCmd {
            svc_id: id,
            netns: ns,
            ..Default::default()
        })
    };
    assert_eq!(netns_get(svc), Err(Errno::Einval));
    assert_eq!(netns_set(svc, 7), Err(Errno::Eexist), "open service");
    let mut members = SvcDesc {
        bits: 0b1_0011, // restricted members and VNIs, enable
        num_vld_vnis: 1,
        ..Default::default()
    };
    members.vnis[0] = 1;
    let ns_svc = admin
        .call(&SvcAllocCmd {
            svc_desc: members,
            ..Default::default()
        })
        .unwrap()
        .svc_id;
    netns_set(ns_svc, 7).unwrap();
    assert_eq!(netns_get(ns_svc).unwrap().value, 7);
    assert_eq!(netns_set(999, 7), Err(Errno::Einval));
}

#[test]
fn members_are_checked_at_every_request_without_an_admin_bypass() {
    use driver::cassini::Credentials;
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let admin = d.open_admin();
    let mut desc = SvcDesc {
        bits: 0b1_0011, // restricted members and VNIs, enable
        num_vld_vnis: 1,
        ..Default::default()
    };
    desc.vnis[0] = 8;
    desc.members[0] = SvcMember {
        value: 200,
        kind: 1, // CXI_SVC_MEMBER_UID
    };
    let svc = admin
        .call(&SvcAllocCmd {
            svc_desc: desc,
            ..Default::default()
        })
        .unwrap()
        .svc_id;
    // cxi_rgroup_valid_user: CAP_SYS_ADMIN is no membership.
    assert_eq!(lni_on(&admin, svc), Err(Errno::Eperm));
    // The uid is the one of the write (seteuid between requests counts).
    admin.set_credentials(Credentials {
        uid: 200,
        admin: true,
        ..Credentials::default()
    });
    let l = lni_on(&admin, svc).unwrap();
    let dom = |c: &driver::cassini::Client, lni: u32, vni: u32| {
        c.call(&DomainAllocCmd {
            lni,
            vni,
            pid: firmware_spec::cassini::dfa::C_PID_ANY,
            ..Default::default()
        })
    };
    assert!(dom(&admin, l, 8).is_ok());
    // Another user's LNI on the open default service may not use VNI 8.
    let user = d.open();
    let ul = lni(&user).unwrap();
    assert_eq!(dom(&user, ul, 8).unwrap_err(), Errno::Eperm);
    assert!(dom(&user, ul, 1).is_ok());
}

fn lni_on(c: &driver::cassini::Client, svc_id: u32) -> Result<u32, Errno> {
    c.call(&LniAllocCmd {
        svc_id,
        ..Default::default()
    })
    .map(|r| r.lni)
}

#[test]
fn csrs_map_once_per_client() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let admin = d.open_admin();
    let map = || admin.call(&As::<{ Opcode::MapCsrs as u32 }, _>(NoArgCmd::default()));
    map().unwrap();
    assert_eq!(map().unwrap_err(), Errno::Ealready);
    // Another client has its own.
    let other = d.open_admin();
    assert!(
        other
            .call(&As::<{ Opcode::MapCsrs as u32 }, _>(NoArgCmd::default()))
            .is_ok()
    );
}

#[test]
fn services_reserving_les_get_one_of_the_sixteen_le_pools() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let admin = d.open_admin();
    let svc = |res: u16, vni: u16| {
        let mut desc = SvcDesc {
            bits: 0b1_1010, // resource_limits, enable, restricted VNIs
            num_vld_vnis: 1,
            ..Default::default()
        };
        desc.vnis[0] = vni;
        desc.limits[5] = Limits { max: 16384, res }; // CXI_RSRC_TYPE_LE
        admin.call(&SvcAllocCmd {
            svc_desc: desc,
            ..Default::default()
        })
    };
    // Pool 0 is the default service's and every service's that reserves no LEs: 15 left.
    let mut ids = Vec::new();
    for i in 0..15 {
        ids.push(svc(1092, 11 + i).unwrap().svc_id);
    }
    assert_eq!(svc(1092, 40).unwrap_err(), Errno::Enospc);
    let unreserved = svc(0, 41).unwrap().svc_id;
    let hw = d.hw();
    use firmware_spec::cassini::csr::{self, fields as f};
    let reserved = hw
        .read_field(
            csr::C_LPE_CFG_PE_LE_POOLS,
            1,
            f::c_lpe_cfg_pe_le_pools::NUM_RESERVED,
        )
        .unwrap();
    assert_eq!(reserved, 1092, "pool 1 of PE 0");
    admin
        .call(&SvcDestroyCmd {
            svc_id: ids[0],
            ..Default::default()
        })
        .unwrap();
    assert!(
        svc(1092, 42).is_ok(),
        "a destroyed service's pool is free again"
    );
    // Whether a service has resource limits cannot change (cxi_svc_update).
    let mut desc = admin
        .call(&As::<{ Opcode::SvcGet as u32 }, _>(SvcIdCmd {
            svc_id: unreserved,
            ..Default::default()
        }))
        .unwrap();
    desc.bits &= !(1 << 3);
    assert_eq!(
        admin
            .call(&SvcUpdateCmd {
                svc_desc: desc,
                ..Default::default()
            })
            .unwrap_err(),
        Errno::Einval
    );
}
