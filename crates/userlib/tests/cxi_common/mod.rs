//! Shared setup of the `cxi` end-to-end tests: an emulated cluster from the driver's builder
//! and, on each node, an endpoint built only with `userlib::cxi` calls.
#![allow(dead_code)]

use std::time::Duration;

use driver::mem::UserMemory;
use firmware_spec::cassini::cmd::TargetCmd;
use firmware_spec::cassini::dfa::{C_PID_ANY, CXI_MATCH_ID_ANY, PidBits, build_dfa, match_id};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{
    LeFlags, MapFlags, PtAllocOpts, PtlList, PtlteState, TcType, TrafficClass,
};
use firmware_spec::cassini::rc::ReturnCode;
use platform::{Cluster, EngineKind};
use userlib::cxi::{
    CXI_DEFAULT_SVC_ID, CmdQueue, Cp, CqOptions, Device, Domain, EqOptions, EventQueue, Lni, Md,
    Pte, PteMap, open_device,
};

/// The VNI of the default service the tests use.
pub const VNI: u32 = 10;
/// Generous: a wait that takes this long has failed.
pub const TIMEOUT: Option<Duration> = Some(Duration::from_secs(20));

/// A two-node cluster on `engine`.
pub fn cluster(engine: EngineKind) -> Cluster {
    Cluster::builder()
        .nics(2)
        .engine(engine)
        .memory_per_node(128 << 20)
        .build()
        .expect("cluster")
}

/// A PtlTE on an endpoint, mapped at an index of its domain, enabled.
pub struct Portal {
    pub pte: Pte,
    pub map: PteMap,
    pub index: u32,
}

/// One process's endpoint on a node: device, LNI, domain, profile, an EQ for everything,
/// a transmit and a target queue, and a mapped data buffer.
pub struct Ep {
    pub dev: Device,
    pub lni: Lni,
    pub domain: Domain,
    pub cp: Cp,
    pub eq_md: Md,
    pub eq: EventQueue,
    pub txq: CmdQueue,
    pub tgq: CmdQueue,
    pub buf: UserMemory,
    pub md: Md,
    pub nid: u32,
    pub pid_bits: PidBits,
}

impl Ep {
    /// Open `cxi0` of `node` and build the endpoint, with a data buffer of `buf_len` bytes.
    pub fn new(cluster: &Cluster, node: usize, buf_len: u64) -> Ep {
        Ep::with_buffers(cluster, node, |dev| {
            (
                dev.alloc_buffer(4 * 4096).expect("eq buffer"),
                dev.alloc_buffer(buf_len).expect("buffer"),
            )
        })
    }

    /// Open `cxi0` of `node` and build the endpoint around the (EQ buffer, data buffer) that
    /// `buffers` gives for the device.
    pub fn with_buffers(
        cluster: &Cluster,
        node: usize,
        buffers: impl FnOnce(&Device) -> (UserMemory, UserMemory),
    ) -> Ep {
        let devs = cluster.node(node).expect("node").cxi_devices();
        let dev = open_device(&devs, 0).expect("open cxi0");
        let (eq_buf, buf) = buffers(&dev);
        let nid = dev.info().nid;
        let pid_bits = dev.info().pid_bits().expect("pid bits");
        let lni = dev.alloc_lni(CXI_DEFAULT_SVC_ID).expect("lni");
        let domain = lni.alloc_domain(VNI, C_PID_ANY).expect("domain");
        let cp = lni
            .alloc_cp(VNI, TrafficClass::BestEffort, TcType::Default)
            .expect("cp");
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
        let md = lni
            .map_buffer(&buf, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN)
            .expect("md");
        Ep {
            dev,
            lni,
            domain,
            cp,
            eq_md,
            eq,
            txq,
            tgq,
            buf,
            md,
            nid,
            pid_bits,
        }
    }

    /// This endpoint's source match id.
    pub fn match_id(&self) -> u32 {
        match_id(self.pid_bits, self.domain.pid(), self.nid)
    }

    /// (DFA, index_ext) of PtlTE index `index` of this endpoint.
    pub fn dfa(&self, index: u32) -> (u32, u8) {
        build_dfa(self.nid, self.domain.pid(), self.pid_bits, index)
    }

    /// The next event, acknowledged.
    pub fn next_event(&mut self) -> Event {
        let ev = self.eq.poll(TIMEOUT).expect("an event");
        self.eq.ack().expect("ack");
        ev
    }

    /// Events until one of `ty` arrives; that one.
    pub fn event_of(&mut self, ty: EventType) -> Event {
        loop {
            let ev = self.next_event();
            if ev.event_type() == ty {
                return ev;
            }
            assert_ne!(
                ev.event_type(),
                EventType::CommandFailure,
                "a command failed: {ev:?}"
            );
        }
    }

    /// A PtlTE with `opts` (long target events added) mapped at `index`, enabled by a
    /// SETSTATE on the target queue.
    pub fn portal(&mut self, index: u32, opts: PtAllocOpts) -> Portal {
        let pte = self
            .lni
            .alloc_pte(Some(&self.eq), opts | PtAllocOpts::USE_LONG_EVENT)
            .expect("pte");
        let map = pte.map(&self.domain, index, false).expect("map pte");
        self.tgq
            .emit_set_state(&pte.set_state_cmd(PtlteState::Enabled, 0))
            .expect("setstate");
        self.tgq.ring().expect("ring");
        let ev = self.event_of(EventType::StateChange);
        assert_eq!(ev.return_code(), ReturnCode::Ok, "{ev:?}");
        assert_eq!(pte.status().expect("status").state, PtlteState::Enabled);
        Portal { pte, map, index }
    }

    /// Append an LE over `[offset, offset + len)` of the data buffer to `list` of `portal`.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        portal: &Portal,
        list: PtlList,
        offset: u64,
        len: u64,
        flags: LeFlags,
        match_bits: u64,
        buffer_id: u16,
        ct: u16,
    ) {
        let start = self.md.iova_of(&self.buf, offset).expect("iova");
        let cmd = TargetCmd {
            opcode: firmware_spec::cassini::cmd::TgtOp::Append,
            ptl_list: list,
            ptlte_index: portal.pte.index(),
            buffer_id,
            lac: self.md.lac(),
            start,
            length: len,
            match_id: CXI_MATCH_ID_ANY,
            match_bits,
            ignore_bits: 0,
            ct,
            ..TargetCmd::default()
        };
        let mut cmd = cmd;
        cmd.set_opts(flags);
        self.tgq.emit_target(&cmd).expect("append");
        self.tgq.ring().expect("ring");
        let ev = self.event_of(EventType::Link);
        assert_eq!(ev.return_code(), ReturnCode::Ok, "{ev:?}");
    }
}
