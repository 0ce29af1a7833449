//! Helpers: a cluster, and typed wrappers over the uAPI that the tests use to build objects.

use std::sync::Arc;

use driver::cassini::uapi::*;
use driver::cassini::{Client, CxiDevice, DriverConfig};
use driver::mem::UserMemory;
use firmware_spec::cassini::dfa::C_PID_ANY;
use firmware_spec::cassini::le::{CqAllocFlags, EqFlags, MapFlags, PtAllocOpts};
use platform::{Cluster, EngineKind};

pub const DEFAULT_SVC: u32 = 1;
pub const VNI: u32 = 10;

pub fn cluster(nics: usize) -> Cluster {
    Cluster::builder()
        .nics(nics)
        .engine(EngineKind::Deterministic { seed: 1 })
        .memory_per_node(64 << 20)
        .build()
        .unwrap()
}

pub fn cluster_with(config: DriverConfig) -> Cluster {
    Cluster::builder()
        .nics(1)
        .engine(EngineKind::Deterministic { seed: 1 })
        .memory_per_node(64 << 20)
        .driver_config(config)
        .build()
        .unwrap()
}

pub fn dev(c: &Cluster, node: usize) -> Arc<CxiDevice> {
    c.node(node).unwrap().cxi(0).unwrap()
}

pub fn lni(c: &Client) -> Result<u32, Errno> {
    c.call(&LniAllocCmd {
        svc_id: DEFAULT_SVC,
        ..Default::default()
    })
    .map(|r| r.lni)
}

pub fn domain(c: &Client, lni: u32, pid: u32) -> Result<DomainAllocResp, Errno> {
    c.call(&DomainAllocCmd {
        lni,
        vni: VNI,
        pid,
        ..Default::default()
    })
}

pub fn any_domain(c: &Client, lni: u32) -> Result<DomainAllocResp, Errno> {
    domain(c, lni, C_PID_ANY)
}

pub fn cp(c: &Client, lni: u32) -> Result<CpAllocResp, Errno> {
    c.call(&CpAllocCmd {
        lni,
        vni: VNI,
        tc: 2,
        tc_type: 0,
        ..Default::default()
    })
}

/// A CQ of `count` commands. A transmit CQ needs a communication profile at its LCID
/// (`cass_cp_find`): one is made at LCID 0 of `lni` first if there is none (on the test VNI,
/// or on VNI 77, the one service the tests make with other VNIs).
pub fn cq(c: &Client, lni: u32, eq: u32, tx: bool, count: u32) -> Result<CqAllocResp, Errno> {
    let mut flags = CqAllocFlags::empty();
    if tx {
        flags |= CqAllocFlags::IS_TX;
        for vni in [VNI, 77] {
            let r = c.call(&TrigCpAllocCmd {
                lni,
                vni,
                tc: 2,
                cp_type: 0,
                ..Default::default()
            });
            if r.is_ok() {
                break;
            }
        }
    }
    c.call(&CqAllocCmd {
        lni,
        eq,
        opts: CqAllocOpts {
            count,
            flags: flags.bits(),
            ..Default::default()
        },
        ..Default::default()
    })
}

pub fn map(c: &Client, lni: u32, va: u64, len: u64) -> Result<AtuMapResp, Errno> {
    c.call(&AtuMapCmd {
        lni,
        va,
        len,
        flags: (MapFlags::PIN | MapFlags::READ | MapFlags::WRITE).bits(),
        ..Default::default()
    })
}

pub fn eq_md(
    c: &Client,
    lni: u32,
    buf: &UserMemory,
    md: u32,
    wait: u32,
) -> Result<EqAllocResp, Errno> {
    c.call(&EqAllocCmd {
        lni,
        queue_md: md,
        event_wait: wait,
        attr: EqAttr {
            queue: buf.va(),
            queue_len: buf.len(),
            ..Default::default()
        },
        ..Default::default()
    })
}

pub fn eq_passthrough(c: &Client, lni: u32, buf: &UserMemory) -> Result<EqAllocResp, Errno> {
    c.call(&EqAllocCmd {
        lni,
        attr: EqAttr {
            queue: buf.va(),
            queue_len: buf.len(),
            flags: EqFlags::PASSTHROUGH.bits(),
            ..Default::default()
        },
        ..Default::default()
    })
}

pub fn pte(c: &Client, lni: u32, eq: u32) -> Result<u32, Errno> {
    c.call(&PteAllocCmd {
        lni_hndl: lni,
        evtq_hndl: eq,
        opts: (PtAllocOpts::IS_MATCHING | PtAllocOpts::EN_FLOWCTRL).bits(),
        ..Default::default()
    })
    .map(|r| r.pte_number)
}

pub fn pte_map(c: &Client, pte: u32, domain: u32, idx: u32) -> Result<u32, Errno> {
    c.call(&PteMapCmd {
        pte_number: pte,
        domain_hndl: domain,
        pid_offset: idx,
        ..Default::default()
    })
    .map(|r| r.pte_index)
}

pub fn ct(c: &Client, lni: u32, wb: u64) -> Result<CtAllocResp, Errno> {
    c.call(&CtAllocCmd {
        lni,
        wb,
        ..Default::default()
    })
}

pub fn wait(c: &Client, lni: u32) -> Result<u32, Errno> {
    c.call(&WaitAllocCmd {
        lni,
        ..Default::default()
    })
    .map(|r| r.wait)
}

/// One of every object a client can hold.
#[allow(dead_code)]
pub struct Everything {
    pub lni: u32,
    pub domain: u32,
    pub reserved_pid: u32,
    pub cp: u32,
    pub trig_cp: u32,
    pub wait: u32,
    pub eq_buf: UserMemory,
    pub md: AtuMapResp,
    pub eq: EqAllocResp,
    pub pt_eq_buf: UserMemory,
    pub pt_eq: EqAllocResp,
    pub txq: CqAllocResp,
    pub tgq: CqAllocResp,
    pub trigq: CqAllocResp,
    pub pte: u32,
    pub map: u32,
    pub ct_wb: UserMemory,
    pub ct: CtAllocResp,
    pub data: UserMemory,
    pub data_md: AtuMapResp,
}

pub fn everything(c: &Client) -> Everything {
    let lni = lni(c).unwrap();
    let domain = any_domain(c, lni).unwrap().domain;
    let reserved_pid = c
        .call(&DomainReserveCmd {
            lni,
            vni: VNI,
            pid: C_PID_ANY,
            count: 4,
            ..Default::default()
        })
        .unwrap()
        .pid;
    let cp = cp(c, lni).unwrap().cp_hndl;
    let trig_cp = c
        .call(&TrigCpAllocCmd {
            lni,
            vni: VNI,
            tc: 2,
            cp_type: 0,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(trig_cp.lcid, 0, "a trigger CP gets LCID 0");
    let wait = wait(c, lni).unwrap();
    let eq_buf = c.alloc_user_memory(8192).unwrap();
    let md = map(c, lni, eq_buf.va(), eq_buf.len()).unwrap();
    let eq = eq_md(c, lni, &eq_buf, md.id, wait).unwrap();
    let pt_eq_buf = c.alloc_user_memory(4096).unwrap();
    let pt_eq = eq_passthrough(c, lni, &pt_eq_buf).unwrap();
    let txq = cq(c, lni, eq.eq, true, 100).unwrap();
    let tgq = cq(c, lni, eq.eq, false, 64).unwrap();
    let trigq = c
        .call(&CqAllocCmd {
            lni,
            eq: eq.eq,
            opts: CqAllocOpts {
                count: 64,
                flags: (CqAllocFlags::IS_TX | CqAllocFlags::TX_WITH_TRIG_CMDS).bits(),
                lcid: 0,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    let pte = pte(c, lni, pt_eq.eq).unwrap();
    let map = pte_map(c, pte, domain, 0).unwrap();
    let ct_wb = c.alloc_user_memory(4096).unwrap();
    let ct = ct(c, lni, ct_wb.va()).unwrap();
    let data = c.alloc_user_memory(64 << 10).unwrap();
    let data_md = crate::common::map(c, lni, data.va() + 100, 20_000).unwrap();
    Everything {
        lni,
        domain,
        reserved_pid,
        cp,
        trig_cp: trig_cp.cp_hndl,
        wait,
        eq_buf,
        md,
        eq,
        pt_eq_buf,
        pt_eq,
        txq,
        tgq,
        trigq,
        pte,
        map,
        ct_wb,
        ct,
        data,
        data_md,
    }
}
