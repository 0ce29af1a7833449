//! The emulated pair the tools run over: node 0 is the client (it initiates), node 1 the
//! server (passive targets: a matching PtlTE for sends and a non-matching one for RMA, each
//! with one persistent LE over the server buffer, communication events disabled).

use driver::mem::UserMemory;
use firmware_spec::cassini::cmd::{TargetCmd, TgtOp};
use firmware_spec::cassini::dfa::{C_PID_ANY, CXI_MATCH_ID_ANY, PidBits, build_dfa, match_id};
use firmware_spec::cassini::event::EventType;
use firmware_spec::cassini::le::{
    LeFlags, MapFlags, PtAllocOpts, PtlList, PtlteState, TcType, TrafficClass,
};
use firmware_spec::cassini::rc::ReturnCode;
use platform::{Cluster, EngineKind};

use super::{OP_TIMEOUT, ToolError, ToolResult};
use userlib::cxi::{
    CXI_DEFAULT_SVC_ID, CmdQueue, Cp, CqOptions, Device, Domain, EqOptions, EventQueue, Lni, Md,
    Pte, PteMap, open_device,
};

/// The VNI of the default service.
pub(crate) const VNI: u32 = 10;
/// PtlTE index of the server's matching (send) portal.
pub(crate) const MSG_INDEX: u32 = 0;
/// PtlTE index of the server's non-matching (RMA) portal.
pub(crate) const RMA_INDEX: u32 = 1;

/// One side: an open device and the objects a benchmark uses.
pub(crate) struct Side {
    pub(crate) dev: Device,
    pub(crate) lni: Lni,
    pub(crate) domain: Domain,
    pub(crate) _cp: Cp,
    pub(crate) eq: EventQueue,
    pub(crate) _eq_md: Md,
    pub(crate) txq: CmdQueue,
    pub(crate) tgq: CmdQueue,
    pub(crate) buf: UserMemory,
    pub(crate) md: Md,
    pub(crate) nid: u32,
    pub(crate) pid_bits: PidBits,
}

impl Side {
    fn new(cluster: &Cluster, node: usize, buf_len: u64, cq_slots: u32) -> ToolResult<Side> {
        let devs = cluster
            .node(node)
            .ok_or_else(|| ToolError::Option(format!("no node {node}")))?
            .cxi_devices();
        let dev = open_device(&devs, 0)?;
        let nid = dev.info().nid;
        let pid_bits = dev.info().pid_bits()?;
        let lni = dev.alloc_lni(CXI_DEFAULT_SVC_ID)?;
        let domain = lni.alloc_domain(VNI, C_PID_ANY)?;
        let cp = lni.alloc_cp(VNI, TrafficClass::BestEffort, TcType::Default)?;
        let eq_buf = dev.alloc_buffer(16 * 4096)?;
        let eq_md = lni.map_buffer(&eq_buf, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN)?;
        let eq = lni.alloc_evtq(&eq_buf, Some(&eq_md), &EqOptions::default(), None, None)?;
        let txq = lni.alloc_cmdq(Some(&eq), &CqOptions::transmit(cq_slots, &cp))?;
        let tgq = lni.alloc_cmdq(Some(&eq), &CqOptions::target(64))?;
        let buf = dev.alloc_buffer(buf_len)?;
        let md = lni.map_buffer(&buf, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN)?;
        Ok(Side {
            dev,
            lni,
            domain,
            _cp: cp,
            eq,
            _eq_md: eq_md,
            txq,
            tgq,
            buf,
            md,
            nid,
            pid_bits,
        })
    }

    /// Source match id.
    pub(crate) fn match_id(&self) -> u32 {
        match_id(self.pid_bits, self.domain.pid(), self.nid)
    }

    /// (DFA, index_ext) of PtlTE index `index` here.
    pub(crate) fn dfa(&self, index: u32) -> (u32, u8) {
        build_dfa(self.nid, self.domain.pid(), self.pid_bits, index)
    }

    /// Wait for an event of type `ty` with return code OK (other events are skipped).
    fn expect_event(&mut self, ty: EventType, what: &'static str) -> ToolResult<()> {
        loop {
            let ev = self.eq.poll(OP_TIMEOUT)?;
            self.eq.ack()?;
            if ev.event_type() == ty {
                if ev.return_code() != ReturnCode::Ok {
                    return Err(ToolError::Completion {
                        op: what,
                        rc: ev.return_code(),
                    });
                }
                return Ok(());
            }
            if ev.event_type() == EventType::CommandFailure {
                return Err(ToolError::Completion {
                    op: "a command",
                    rc: ev.return_code(),
                });
            }
        }
    }

    /// A PtlTE at `index`, enabled, with one persistent LE over the whole buffer.
    fn portal(&mut self, index: u32, opts: PtAllocOpts, le: LeFlags) -> ToolResult<(Pte, PteMap)> {
        let pte = self.lni.alloc_pte(Some(&self.eq), opts)?;
        let map = pte.map(&self.domain, index, false)?;
        self.tgq
            .emit_set_state(&pte.set_state_cmd(PtlteState::Enabled, 0))?;
        self.tgq.ring()?;
        self.expect_event(EventType::StateChange, "PtlTE enable")?;
        let mut cmd = TargetCmd {
            opcode: TgtOp::Append,
            ptl_list: PtlList::Priority,
            ptlte_index: pte.index(),
            buffer_id: index as u16,
            lac: self.md.lac(),
            start: self.md.iova(),
            length: self.buf.len(),
            match_id: CXI_MATCH_ID_ANY,
            match_bits: 0,
            ignore_bits: u64::MAX,
            ..TargetCmd::default()
        };
        cmd.set_opts(le);
        self.tgq.emit_target(&cmd)?;
        self.tgq.ring()?;
        self.expect_event(EventType::Link, "LE append")?;
        Ok((pte, map))
    }
}

/// Client, server and the cluster under them (dropped last).
pub(crate) struct Pair {
    pub(crate) client: Side,
    pub(crate) server: Side,
    _portals: Vec<(PteMap, Pte)>,
    /// Last: the engine shuts down after every object above was freed.
    _cluster: Cluster,
}

impl Pair {
    /// Build the pair on `engine` with data buffers of `buf_len` bytes and a client transmit
    /// queue of `cq_slots` slots.
    pub(crate) fn new(engine: &EngineKind, buf_len: u64, cq_slots: u32) -> ToolResult<Pair> {
        let memory = (2 * buf_len + (64 << 20)).max(256 << 20);
        let cluster = Cluster::builder()
            .nics(2)
            .engine(engine.clone())
            .memory_per_node(memory)
            .build()?;
        let client = Side::new(&cluster, 0, buf_len, cq_slots)?;
        let mut server = Side::new(&cluster, 1, buf_len, 64)?;
        let quiet = LeFlags::EVENT_COMM_DISABLE | LeFlags::EVENT_UNLINK_DISABLE;
        let (msg_pte, msg_map) =
            server.portal(MSG_INDEX, PtAllocOpts::IS_MATCHING, LeFlags::OP_PUT | quiet)?;
        let (rma_pte, rma_map) = server.portal(
            RMA_INDEX,
            PtAllocOpts::empty(),
            LeFlags::OP_PUT | LeFlags::OP_GET | quiet,
        )?;
        Ok(Pair {
            client,
            server,
            _portals: vec![(msg_map, msg_pte), (rma_map, rma_pte)],
            _cluster: cluster,
        })
    }

    /// The emulated cluster (engine counters, for tests).
    #[cfg(test)]
    pub(crate) fn cluster(&self) -> &Cluster {
        &self._cluster
    }
}
