//! Isolation campaign: adversarial processes against the emulated Cassini and Gemini,
//! through the driver and the user libraries only. Every attempt must be refused with the
//! error the hardware or driver gives for it, counted where the hardware keeps a counter,
//! deliver nothing, and change nothing in any victim's memory: every victim buffer (data
//! and event rings) is hashed before and after each attack.
//!
//! Counters used (all hardware counters, read through the CSR window or the Gemini
//! counter block): Cassini `c_rmu_cntrs.ptl_invld_vni_cntr` (request on a VNI the target
//! does not have), `c_cq_cntrs.num_tx_cmd_perm_errors` / `num_tgt_cmd_perm_errors` (a command
//! naming an EQ, CT or PtlTE of another resource group), `c_cq_cntrs.num_tx_cmd_op_errors`
//! / `num_tx_cmd_arg_errors` (malformed commands), `c_oxe`-side `err_no_translation`-style
//! ATU refusals show as the initiator event's return code; Gemini `REMOTE_REJECTS` (requests
//! the target refused: ptag, bounds, permissions).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use driver::cassini::Errno;
use driver::cassini::uapi::{AtuUnmapCmd, CqFreeCmd, EqFreeCmd, PteFreeCmd};
use driver::mem::UserMemory;
use firmware_spec::cassini::cmd::{CState, DmaFlags, DmaOp, FullDma, IdcMsg, Payload, TargetCmd};
use firmware_spec::cassini::dfa::{C_PID_ANY, CXI_MATCH_ID_ANY, PidBits, build_dfa, match_id};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{
    LeFlags, MapFlags, PtAllocOpts, PtlList, PtlteState, TcType, TrafficClass,
};
use firmware_spec::cassini::rc::ReturnCode;
use platform::{Cluster, EngineKind};
use userlib::cxi::{
    CXI_DEFAULT_SVC_ID, CmdQueue, Cp, CqOptions, Device, Domain, EqOptions, EventQueue, Lni, Md,
    OpenOptions, Pte, PteMap, open_device, open_device_with,
};

const VNI: u32 = 10;
/// The other VNI of the default service (module parameter `default_vnis` {1, 10}).
const OTHER_VNI: u32 = 1;
const T: Option<Duration> = Some(Duration::from_secs(20));

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn hash_mem(m: &UserMemory) -> u64 {
    let mut v = vec![0u8; m.len() as usize];
    m.read(0, &mut v).expect("read");
    hash(&v)
}

/// One process: an endpoint on a node (LNI, domain on `VNI`, profile, EQ, queues, buffer).
struct Proc {
    dev: Device,
    lni: Lni,
    domain: Domain,
    cp: Cp,
    _eq_md: Md,
    eq: EventQueue,
    txq: CmdQueue,
    tgq: CmdQueue,
    buf: UserMemory,
    md: Md,
    nid: u32,
    pid_bits: PidBits,
}

impl Proc {
    fn new(c: &Cluster, node: usize) -> Proc {
        let devs = c.node(node).expect("node").cxi_devices();
        let dev = open_device(&devs, 0).expect("open");
        let nid = dev.info().nid;
        let pid_bits = dev.info().pid_bits().expect("pid bits");
        let lni = dev.alloc_lni(CXI_DEFAULT_SVC_ID).expect("lni");
        let domain = lni.alloc_domain(VNI, C_PID_ANY).expect("domain");
        let cp = lni
            .alloc_cp(VNI, TrafficClass::BestEffort, TcType::Default)
            .expect("cp");
        let eq_buf = dev.alloc_buffer(4 * 4096).expect("eq buffer");
        let eq_md = lni
            .map_buffer(&eq_buf, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN)
            .expect("eq md");
        let eq = lni
            .alloc_evtq(&eq_buf, Some(&eq_md), &EqOptions::default(), None, None)
            .expect("eq");
        let txq = lni
            .alloc_cmdq(Some(&eq), &CqOptions::transmit(256, &cp))
            .expect("txq");
        let tgq = lni
            .alloc_cmdq(Some(&eq), &CqOptions::target(256))
            .expect("tgq");
        let buf = dev.alloc_buffer(64 << 10).expect("buffer");
        let md = lni
            .map_buffer(&buf, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN)
            .expect("md");
        Proc {
            dev,
            lni,
            domain,
            cp,
            _eq_md: eq_md,
            eq,
            txq,
            tgq,
            buf,
            md,
            nid,
            pid_bits,
        }
    }

    fn initiator(&self) -> u32 {
        match_id(self.pid_bits, self.domain.pid(), self.nid)
    }

    /// Every event now in the EQ (acknowledged).
    fn drain(&mut self) -> Vec<Event> {
        let mut v = Vec::new();
        while let Some(e) = self.eq.get_event().expect("eq") {
            v.push(e);
        }
        self.eq.ack().expect("ack");
        v
    }

    #[track_caller]
    fn wait(&mut self, ty: EventType) -> Event {
        loop {
            let e = match self.eq.poll(T) {
                Ok(e) => e,
                Err(err) => panic!("no {ty:?} event: {err}"),
            };
            self.eq.ack().expect("ack");
            if e.event_type() == ty {
                return e;
            }
        }
    }

    /// A matching PtlTE at `index`, enabled, with one persistent LE over the whole buffer.
    fn portal(&mut self, index: u32) -> (Pte, PteMap) {
        let pte = self
            .lni
            .alloc_pte(Some(&self.eq), PtAllocOpts::IS_MATCHING)
            .expect("pte");
        let map = pte.map(&self.domain, index, false).expect("map");
        self.tgq
            .emit_set_state(&pte.set_state_cmd(PtlteState::Enabled, 0))
            .expect("setstate");
        self.tgq.ring().expect("ring");
        assert_eq!(
            self.wait(EventType::StateChange).return_code(),
            ReturnCode::Ok
        );
        let mut le = TargetCmd {
            opcode: firmware_spec::cassini::cmd::TgtOp::Append,
            ptl_list: PtlList::Priority,
            ptlte_index: pte.index(),
            buffer_id: 1,
            lac: self.md.lac(),
            start: self.md.iova_of(&self.buf, 0).expect("iova"),
            length: self.buf.len(),
            match_id: CXI_MATCH_ID_ANY,
            ..TargetCmd::default()
        };
        le.set_opts(LeFlags::OP_PUT | LeFlags::OP_GET);
        self.tgq.emit_target(&le).expect("append");
        self.tgq.ring().expect("ring");
        assert_eq!(self.wait(EventType::Link).return_code(), ReturnCode::Ok);
        (pte, map)
    }

    fn cstate(&self, to: &Proc, index: u32, eq: u32) -> CState {
        let (_, ext) = build_dfa(to.nid, to.domain.pid(), to.pid_bits, index);
        CState {
            write_lac: self.md.lac(),
            flags: DmaFlags::default(),
            initiator: self.initiator(),
            index_ext: ext,
            user_ptr: 0xA77AC4,
            ct: 0,
            eq: eq as u16,
        }
    }

    fn idc(&mut self, cq: &mut CmdQueue, cs: &CState, to: &Proc, index: u32) {
        let (dfa, _) = build_dfa(to.nid, to.domain.pid(), to.pid_bits, index);
        let msg = IdcMsg {
            dfa,
            match_bits: 0,
            header_data: 0,
            user_ptr: 0xA77AC4,
            payload: Payload::new(b"attacker payload").expect("payload"),
        };
        cq.emit_idc_msg(cs, &msg).expect("emit");
        cq.ring().expect("ring");
    }
}

/// Hashes of everything a victim owns that a peer could write: its data buffer and its EQ
/// ring.
fn victim_state(v: &Proc) -> (u64, u64) {
    (hash_mem(&v.buf), hash_mem(v.eq.buffer()))
}

fn counter(admin: &Device, name: &str) -> u64 {
    admin
        .map_csr()
        .expect("csr window")
        .read_cntr(name)
        .expect("counter")
}

fn command_failure(ev: &Event) -> Option<ReturnCode> {
    match ev {
        Event::CommandFailure(f) => Some(f.return_code),
        _ => None,
    }
}

#[test]
fn cassini_adversarial_clients_are_refused_counted_and_change_nothing() {
    let c = Cluster::builder()
        .nics(2)
        .engine(EngineKind::Deterministic { seed: 15 })
        .memory_per_node(128 << 20)
        .build()
        .expect("cluster");
    let admin1 = open_device_with(
        &c.node(1).expect("node").cxi_devices(),
        0,
        OpenOptions {
            admin: true,
            space: None,
        },
    )
    .expect("admin");
    // Victim on node 1; attacker A on node 0, attacker B beside the victim on node 1.
    let mut v = Proc::new(&c, 1);
    let mut a = Proc::new(&c, 0);
    let mut b = Proc::new(&c, 1);
    v.buf.fill(0, v.buf.len(), 0x5A).expect("fill");
    let (v_pte, _v_map) = v.portal(0);
    v.drain();
    let before = victim_state(&v);

    // 1. Foreign VNI: A's profile on the service's other VNI reaches no PtlTE of the
    //    victim's node (VNI_NOT_FOUND at the target's RMU, counted there).
    let invld_vni = counter(&admin1, "c_rmu_cntrs.ptl_invld_vni_cntr");
    let cp1 = a
        .lni
        .alloc_cp(OTHER_VNI, TrafficClass::BestEffort, TcType::Default)
        .expect("cp on the other VNI");
    let mut q1 = a
        .lni
        .alloc_cmdq(Some(&a.eq), &CqOptions::transmit(64, &cp1))
        .expect("txq");
    let cs = a.cstate(&v, 0, a.eq.eqn());
    a.idc(&mut q1, &cs, &v, 0);
    let ack = a.wait(EventType::Ack);
    assert_eq!(ack.return_code(), ReturnCode::VniNotFound);
    assert_eq!(
        counter(&admin1, "c_rmu_cntrs.ptl_invld_vni_cntr"),
        invld_vni + 1
    );
    // A VNI outside the service is refused by the driver outright.
    assert!(
        a.lni
            .alloc_cp(77, TrafficClass::BestEffort, TcType::Default)
            .is_err()
    );
    c.run(u64::MAX);
    assert!(v.drain().is_empty(), "nothing delivered to the victim");
    assert_eq!(victim_state(&v), before);

    // 2. Forged or out-of-range IOVA: a PUT whose source is not mapped in A's context (just
    //    past A's last mapping, and far beyond) fails at A's ATU; nothing is sent. (IOVAs are
    //    per context: the same number in the victim's context means nothing to A's.)
    let (dfa, ext) = build_dfa(v.nid, v.domain.pid(), v.pid_bits, 0);
    for iova in [a.md.iova() + a.md.len() + (1 << 20), 0x7FFF_FFFF_F000] {
        let put = FullDma {
            opcode: DmaOp::Put,
            index_ext: ext,
            lac: a.md.lac(),
            dfa,
            local_addr: iova,
            request_len: 4096,
            eq: a.eq.eqn() as u16,
            user_ptr: 0xF0F0,
            initiator: a.initiator(),
            ..FullDma::default()
        };
        a.txq.emit_dma(&put).expect("emit");
        a.txq.ring().expect("ring");
        c.run(u64::MAX);
        let evs = a.drain();
        let rcs: Vec<_> = evs.iter().map(Event::return_code).collect();
        assert!(
            !rcs.is_empty() && rcs.iter().all(|rc| *rc != ReturnCode::Ok),
            "the forged read is refused: {evs:?}"
        );
    }
    c.run(u64::MAX);
    assert!(v.drain().is_empty());
    assert_eq!(victim_state(&v), before);

    // 3. Another client's handles through the uAPI: B names the victim's EQ, CQ, PtlTE and
    //    MD; the driver finds none of them among B's objects.
    let bc = b.dev.client();
    let refused = [
        bc.call(&EqFreeCmd {
            eq: v.eq.eqn(),
            ..Default::default()
        })
        .err(),
        bc.call(&CqFreeCmd {
            cq: v.txq.handle(),
            ..Default::default()
        })
        .err(),
        bc.call(&PteFreeCmd {
            pte_number: v_pte.number(),
            ..Default::default()
        })
        .err(),
        bc.call(&AtuUnmapCmd {
            id: v.md.id(),
            ..Default::default()
        })
        .err(),
    ];
    for r in refused {
        assert!(
            matches!(r, Some(Errno::Einval | Errno::Enoent | Errno::Ebadf)),
            "{r:?}"
        );
    }
    // An mmap offset B was never given (the victim's objects are in another file).
    assert!(bc.mmap(0x7000_0000, 4096).is_err());

    // 4. Commands naming the victim's objects by their hardware numbers: an event to the
    //    victim's EQ, a SETSTATE of the victim's PtlTE. The CQ block refuses both
    //    (PERM_VIOLATION, the resource groups differ) and counts them.
    let tx_perm = counter(&admin1, "c_cq_cntrs.num_tx_cmd_perm_errors");
    let tgt_perm = counter(&admin1, "c_cq_cntrs.num_tgt_cmd_perm_errors");
    let cs = b.cstate(&b, 0, v.eq.eqn());
    let mut bq = std::mem::replace(
        &mut b.txq,
        b.lni
            .alloc_cmdq(Some(&b.eq), &CqOptions::transmit(64, &b.cp))
            .expect("txq"),
    );
    let (bdfa, _) = build_dfa(v.nid, v.domain.pid(), v.pid_bits, 0);
    bq.emit_idc_msg(
        &cs,
        &IdcMsg {
            dfa: bdfa,
            match_bits: 0,
            header_data: 0,
            user_ptr: 1,
            payload: Payload::new(b"x").expect("payload"),
        },
    )
    .expect("emit");
    bq.ring().expect("ring");
    let f = b.wait(EventType::CommandFailure);
    assert_eq!(command_failure(&f), Some(ReturnCode::PermViolation));
    assert_eq!(
        bq.status().expect("status").return_code,
        ReturnCode::PermViolation
    );
    b.tgq
        .emit_set_state(&v_pte.set_state_cmd(PtlteState::Disabled, 0))
        .expect("emit");
    b.tgq.ring().expect("ring");
    let f = b.wait(EventType::CommandFailure);
    assert_eq!(command_failure(&f), Some(ReturnCode::PermViolation));
    assert_eq!(
        counter(&admin1, "c_cq_cntrs.num_tx_cmd_perm_errors"),
        tx_perm + 1
    );
    assert_eq!(
        counter(&admin1, "c_cq_cntrs.num_tgt_cmd_perm_errors"),
        tgt_perm + 1
    );
    assert_eq!(v_pte.status().expect("status").state, PtlteState::Enabled);
    c.run(u64::MAX);
    assert!(v.drain().is_empty(), "no event reached the victim's EQ");
    assert_eq!(victim_state(&v), before);

    // 5. A command through a profile slot B was never given (LCID 15 of its resource group
    //    holds no communication profile): refused as an invalid argument, counted, nothing
    //    leaves the node. (Arbitrary ring contents are the `cassini_cq` fuzz target's job.)
    let arg_errs = counter(&admin1, "c_cq_cntrs.num_tx_cmd_arg_errors");
    let mut bad = b
        .lni
        .alloc_cmdq(Some(&b.eq), &CqOptions::transmit(64, &b.cp))
        .expect("txq");
    bad.emit_cq_lcid(15).expect("lcid");
    let cs = b.cstate(&v, 0, b.eq.eqn());
    b.idc(&mut bad, &cs, &v, 0);
    let f = b.wait(EventType::CommandFailure);
    assert_eq!(command_failure(&f), Some(ReturnCode::CmdInvalidArg));
    assert_eq!(
        counter(&admin1, "c_cq_cntrs.num_tx_cmd_arg_errors"),
        arg_errs + 1
    );
    c.run(u64::MAX);
    assert!(v.drain().is_empty());
    assert_eq!(victim_state(&v), before);

    // The victim still works: a legitimate message from A lands.
    let cs = a.cstate(&v, 0, a.eq.eqn());
    let mut aq = std::mem::replace(
        &mut a.txq,
        a.lni
            .alloc_cmdq(Some(&a.eq), &CqOptions::transmit(64, &a.cp))
            .expect("txq"),
    );
    a.idc(&mut aq, &cs, &v, 0);
    assert_eq!(a.wait(EventType::Ack).return_code(), ReturnCode::Ok);
    assert_eq!(v.wait(EventType::Put).return_code(), ReturnCode::Ok);
}

mod gemini {
    use super::*;
    use driver::gemini::{CqId, JobConfig, KgniClient, Request};
    use firmware_spec::gemini::gni::{JobLimits, job_create_cookie};
    use platform::gemini::GeminiCluster;
    use std::sync::Arc;
    use userlib::gni::amo;
    use userlib::gni::post::put_desc;
    use userlib::gni::{
        Cdm, CdmMode, Cq, CqEventMode, CqMode, Ep, MemFlags, MemHandle, Nic, PostType, ReturnCode,
    };

    /// The NIC's counter of request packets the target refused (ptag, bounds, permission):
    /// index 15 of the counter block (`emu_gemini::regs::counter::REMOTE_REJECTS`). Every
    /// attack below is one 64-byte (or one AMO) request, so one count each.
    const REMOTE_REJECTS: u32 = 15;

    struct Side {
        pe: u32,
        inst: u32,
        buf: UserMemory,
        mh: MemHandle,
        ro: UserMemory,
        ro_mh: MemHandle,
        tx: Cq,
        rx: Cq,
        nic: Nic,
        _cdm: Cdm,
        client: Arc<KgniClient>,
    }

    fn side(c: &GeminiCluster, pe: usize, inst: u32, ptag: u8, cookie: u32) -> Side {
        let client = Arc::new(c.node(pe).expect("node").open());
        let cdm = Cdm::create(&client, inst, ptag, cookie, CdmMode::empty()).expect("cdm");
        let nic = cdm.attach(-1).expect("attach");
        let tx = nic.cq_create(64, 1, CqMode::NOBLOCK).expect("tx cq");
        let rx = nic.cq_create(64, 1, CqMode::NOBLOCK).expect("rx cq");
        let buf = nic.space().alloc(64 << 10).expect("buffer");
        buf.fill(0, buf.len(), 0x5A).expect("fill");
        let mh = nic
            .mem_register(buf.va(), buf.len(), Some(&rx), MemFlags::READWRITE)
            .expect("register");
        let ro = nic.space().alloc(4096).expect("buffer");
        ro.fill(0, ro.len(), 0xC3).expect("fill");
        let ro_mh = nic
            .mem_register(ro.va(), ro.len(), Some(&rx), MemFlags::READ_ONLY)
            .expect("register read-only");
        Side {
            pe: pe as u32,
            inst,
            buf,
            mh,
            ro,
            ro_mh,
            tx,
            rx,
            nic,
            _cdm: cdm,
            client,
        }
    }

    fn bound(a: &Side, b: &Side) -> Ep {
        let ep = a.nic.ep_create(Some(&a.tx)).expect("ep");
        ep.bind(b.pe, b.inst).expect("bind");
        ep
    }

    fn state(v: &Side) -> (u64, u64) {
        (hash_mem(&v.buf), hash_mem(&v.ro))
    }

    fn rejects(c: &GeminiCluster, pe: usize) -> u64 {
        c.node(pe)
            .expect("node")
            .kgni()
            .hw()
            .counter(REMOTE_REJECTS)
            .expect("counter")
    }

    /// The post's local completion: an error, never success.
    fn refused(c: &GeminiCluster, a: &Side) {
        c.run(u64::MAX);
        let ev = a.tx.poll_event(T).expect("a completion");
        assert_ne!(ev.rc, ReturnCode::Success, "{:?}", ev.cqe);
    }

    #[test]
    fn gemini_adversarial_clients_are_refused_counted_and_change_nothing() {
        let c = GeminiCluster::builder().build().expect("cluster");
        let job = c.job().clone();
        let v = side(&c, 1, 20, job.ptag, job.cookie);
        let a = side(&c, 0, 10, job.ptag, job.cookie);
        let before = state(&v);

        // 1. Wrong cookie, or a ptag with no job: the CDM never attaches.
        let client = Arc::new(c.node(0).expect("node").open());
        for (ptag, cookie) in [(job.ptag, job.cookie ^ 0x1_0000), (77, job.cookie)] {
            let attached = Cdm::create(&client, 3, ptag, cookie, CdmMode::empty())
                .and_then(|cdm| cdm.attach(-1).map(|_| ()));
            assert!(attached.is_err(), "ptag {ptag} cookie {cookie:#x} attached");
        }

        // 2. Another job (its own ptag) writing the victim's memory: the target's MDD check
        //    refuses the foreign ptag.
        let other = JobConfig {
            ptag: 50,
            cookie: job_create_cookie(0x3000, 0),
            limits: JobLimits::default(),
            ntt: vec![],
        };
        c.node(0)
            .expect("node")
            .launcher()
            .expect("launcher")
            .configure_job(other.clone())
            .expect("second job");
        let e = side(&c, 0, 30, other.ptag, other.cookie);
        let r0 = rejects(&c, 1);
        let ep = bound(&e, &v);
        let mut d = put_desc(PostType::FmaPut, e.buf.va(), e.mh, v.buf.va(), v.mh, 64);
        d.cq_mode = CqEventMode::GLOBAL_EVENT | CqEventMode::REMOTE_EVENT;
        ep.post_fma(&d).expect("post");
        refused(&c, &e);
        assert_eq!(rejects(&c, 1), r0 + 1);

        // 3. An AMO on the victim's read-only region, and 4. a PUT running past the end of
        //    its registration: refused by the target, counted.
        let ep = bound(&a, &v);
        let mut d = amo::add(v.ro.va(), v.ro_mh, 1);
        d.local_mem_hndl = a.mh;
        ep.post_fma(&d).expect("post");
        refused(&c, &a);
        assert_eq!(rejects(&c, 1), r0 + 2);
        let d = put_desc(
            PostType::FmaPut,
            a.buf.va(),
            a.mh,
            v.buf.va() + v.buf.len() - 8,
            v.mh,
            64,
        );
        ep.post_fma(&d).expect("post");
        refused(&c, &a);
        assert_eq!(rejects(&c, 1), r0 + 3);

        // 5. Another client's handles: a process beside the victim names the victim's CQ and
        //    memory handle; kgni finds neither among its objects.
        let b = side(&c, 1, 40, job.ptag, job.cookie);
        assert!(
            b.client
                .request(Request::CqDestroy {
                    cq: CqId(v.rx.id())
                })
                .is_err()
        );
        assert!(b.nic.mem_deregister(&v.mh).is_err());
        assert!(
            b.client
                .request(Request::CqWait {
                    cq: CqId(v.tx.id()),
                    timeout: Some(Duration::ZERO),
                })
                .is_err()
        );

        c.run(u64::MAX);
        assert!(
            v.rx.poll_event(Some(Duration::ZERO)).is_err(),
            "no remote event reached the victim"
        );
        assert_eq!(state(&v), before, "the victim's memory is untouched");
        drop(b);
        drop(client);
    }
}
