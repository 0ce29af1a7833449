//! Model-based property test of the emulated Cassini's matching path.
//!
//! The reference state machine is [`tests::portals::PtlTe`]; the system under test is a
//! three-node emulated cluster (deterministic engine) driven only as an application drives a
//! real NIC: `userlib::cxi` objects, commands written into rings, doorbells, events read from
//! event-queue rings, data read from registered buffers. One target endpoint (node 0) owns a
//! matching PtlTE; three initiators (one on node 0 beside the target, one on each other node)
//! send Puts and Gets to it. Every transition runs the engine until it is idle, then every
//! event of every EQ is compared with what the model says, field by field, and the bytes the
//! operation may have written are compared with the model's memory.

use driver::mem::UserMemory;
use firmware_spec::cassini::cmd::{
    CState, DmaFlags, DmaOp, FullDma, IdcMsg, Payload, TargetCmd, TgtOp,
};
use firmware_spec::cassini::dfa::{
    C_NID_ANY, C_PID_ANY, CXI_MATCH_ID_ANY, PidBits, build_dfa, match_id,
};
use firmware_spec::cassini::event::{Event, EventType, TargetLong};
use firmware_spec::cassini::le::{
    LeFlags, MapFlags, PtAllocOpts, PtlList, PtlteState, TcType, TrafficClass,
};
use firmware_spec::cassini::rc::ReturnCode;
use platform::{Cluster, EngineKind};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use tests::portals::{Effects, InitiatorEvent, Le, Op, PtlTe, Request, Search, TargetEvent};
use userlib::cxi::{
    CXI_DEFAULT_SVC_ID, CmdQueue, Cp, CqOptions, Device, Domain, EqOptions, EventQueue, Lni, Md,
    Pte, PteMap, open_device,
};

/// VNI of the default service.
const VNI: u32 = 10;
/// Driver default.
const PID_BITS: PidBits = PidBits::DEFAULT;
/// The target endpoint: node 0, PID 3, PtlTE index 0 of its PID granule.
const TARGET_NODE: usize = 0;
const TARGET_PID: u32 = 3;
const PT_INDEX: u32 = 0;
/// The initiators (node = NID, PID). Two share PID 4 and two share node 0, so that the PID
/// and NID wildcards of an LE's match id select different subsets.
const INITIATORS: [(usize, u32); 3] = [(0, 4), (1, 4), (2, 9)];
/// Size of the target buffer the LEs carve up (and of the model's memory).
const TARGET_MEM: u64 = 512 << 10;
/// Initiator buffer: Put payloads at 0, Get replies land at `LANDING`.
const INIT_BUF: u64 = 64 << 10;
const LANDING: u64 = 32 << 10;
/// Byte the Get landing zone is filled with before each Get.
const SENTINEL: u8 = 0xEE;
/// Largest Put payload carried by an IDC small message (`C_MAX_IDC_PAYLOAD_UNR`).
const IDC_MAX: u64 = 192;
/// Engine steps after which a transition is declared hung.
const MAX_STEPS: u64 = 1_000_000;

/// Match id of initiator `i`.
fn initiator_id(i: usize) -> u32 {
    let (node, pid) = INITIATORS[i];
    match_id(PID_BITS, pid, node as u32)
}

/// How an LE or a search names the initiators it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdSel {
    /// `CXI_MATCH_ID_ANY`.
    Any,
    /// Exactly initiator i.
    Exact(usize),
    /// Initiator i's NID, any PID.
    AnyPid(usize),
    /// Initiator i's PID, any NID.
    AnyNid(usize),
}

impl IdSel {
    fn match_id(self) -> u32 {
        match self {
            IdSel::Any => CXI_MATCH_ID_ANY,
            IdSel::Exact(i) => initiator_id(i),
            IdSel::AnyPid(i) => match_id(PID_BITS, C_PID_ANY, INITIATORS[i].0 as u32),
            IdSel::AnyNid(i) => match_id(PID_BITS, INITIATORS[i].1, C_NID_ANY),
        }
    }
}

/// One transition.
#[derive(Clone, Debug)]
enum Step {
    /// APPEND an LE.
    Append {
        list: PtlList,
        length: u64,
        match_bits: u64,
        ignore_bits: u64,
        id: IdSel,
        flags: LeFlags,
        min_free: u64,
    },
    /// A Put from initiator `from` (DMA, or an IDC small message when `idc`).
    Put {
        from: usize,
        match_bits: u64,
        len: u64,
        remote_offset: u64,
        idc: bool,
    },
    /// A DMA Get from initiator `from`.
    Get {
        from: usize,
        match_bits: u64,
        len: u64,
        remote_offset: u64,
    },
    /// UNLINK.
    Unlink { list: PtlList, buffer_id: u16 },
    /// SEARCH or SEARCH_AND_DELETE on the UNEXPECTED list.
    Search {
        match_bits: u64,
        ignore_bits: u64,
        id: IdSel,
        delete: bool,
    },
}

/// What the model did for the last transition, for the SUT side to replay and compare.
#[derive(Clone, Debug)]
enum Applied {
    Append {
        le: Le,
        fx: Effects,
    },
    Request {
        from: usize,
        req: Request,
        user_ptr: u64,
        idc: bool,
        fx: Effects,
    },
    Unlink {
        list: PtlList,
        buffer_id: u16,
        fx: Effects,
    },
    Search {
        search: Search,
        fx: Effects,
    },
}

/// The reference state: the model PtlTE and the bookkeeping that turns a [`Step`] into
/// concrete values (buffer ids, buffer placement, payloads).
#[derive(Clone, Debug)]
struct RefState {
    /// Seed of the deterministic engine of this case.
    seed: u64,
    pte: PtlTe,
    next_buffer_id: u16,
    /// Next free offset of the target buffer.
    next_mem: u64,
    /// Requests sent so far (payload pattern, header data, user_ptr).
    seq: u64,
    /// Every LE appended (list, buffer id), for UNLINK.
    appended: Vec<(PtlList, u16)>,
    last: Option<Applied>,
}

impl RefState {
    /// The empty model of a case whose engine runs with `seed`.
    fn new(seed: u64) -> RefState {
        RefState {
            seed,
            pte: PtlTe::new(PID_BITS, TARGET_MEM as usize),
            next_buffer_id: 1,
            next_mem: 0,
            seq: 0,
            appended: Vec::new(),
            last: None,
        }
    }

    /// The next request (numbered `seq + 1`) from initiator `from`.
    fn request(
        &self,
        op: Op,
        from: usize,
        match_bits: u64,
        len: u64,
        remote_offset: u64,
    ) -> Request {
        let seq = self.seq + 1;
        Request {
            op,
            initiator: initiator_id(from),
            match_bits,
            header_data: 0x4844_0000_0000_0000 | seq,
            remote_offset,
            rlength: len,
            payload: if op == Op::Put {
                payload(seq, len)
            } else {
                Vec::new()
            },
        }
    }
}

/// Payload of request `seq`: never zero, varying with the request and the position.
fn payload(seq: u64, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((seq.wrapping_mul(37) + i * 7) % 251) as u8 + 1)
        .collect()
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// The small set match bits are drawn from, so that matches happen.
const MATCH_BITS: [u64; 6] = [0, 1, 2, 3, 0x10, 0xFFFF_0000_0000_0001];

fn match_bits_strategy() -> BoxedStrategy<u64> {
    prop::sample::select(MATCH_BITS.to_vec()).boxed()
}

/// Match bits biased towards `known` (bits of linked entries or of unexpected headers), so
/// that most requests and searches find something.
fn biased_bits(known: Vec<u64>) -> BoxedStrategy<u64> {
    if known.is_empty() {
        return match_bits_strategy();
    }
    prop_oneof![1 => match_bits_strategy(), 3 => prop::sample::select(known)].boxed()
}

fn ignore_bits_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => Just(0u64),
        1 => Just(1),
        1 => Just(0xF),
        1 => Just(0xFFFF_0000_0000_0000),
        1 => Just(u64::MAX),
    ]
}

fn id_strategy() -> impl Strategy<Value = IdSel> {
    prop_oneof![
        4 => Just(IdSel::Any),
        2 => (0..INITIATORS.len()).prop_map(IdSel::Exact),
        1 => (0..INITIATORS.len()).prop_map(IdSel::AnyPid),
        1 => (0..INITIATORS.len()).prop_map(IdSel::AnyNid),
    ]
}

fn flags_strategy() -> impl Strategy<Value = LeFlags> {
    (
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.4),
        prop::bool::weighted(0.35),
        prop::bool::weighted(0.35),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.08),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(put, get, once, local, no_trunc, no_link, no_unlink, no_comm, no_success, no_uh)| {
                LeFlags::empty()
                    .with(LeFlags::OP_PUT, put)
                    .with(LeFlags::OP_GET, get)
                    .with(LeFlags::USE_ONCE, once)
                    .with(LeFlags::MANAGE_LOCAL, local)
                    .with(LeFlags::NO_TRUNCATE, no_trunc)
                    .with(LeFlags::EVENT_LINK_DISABLE, no_link)
                    .with(LeFlags::EVENT_UNLINK_DISABLE, no_unlink)
                    .with(LeFlags::EVENT_COMM_DISABLE, no_comm)
                    .with(LeFlags::EVENT_SUCCESS_DISABLE, no_success)
                    .with(LeFlags::UNEXPECTED_HDR_DISABLE, no_uh)
            },
        )
}

fn remote_offset_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![3 => Just(0u64), 1 => Just(8), 1 => Just(40)]
}

fn put_len_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0u64),
        3 => 1..=16u64,
        4 => 17..=128u64,
        2 => 129..=600u64,
        1 => 2000..=4500u64,
    ]
}

/// The reference state machine.
struct Model;

impl ReferenceStateMachine for Model {
    type State = RefState;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<RefState> {
        any::<u64>().prop_map(RefState::new).boxed()
    }

    fn transitions(state: &RefState) -> BoxedStrategy<Step> {
        let pte = &state.pte;
        let le_bits: Vec<u64> = pte
            .priority()
            .iter()
            .chain(pte.overflow())
            .map(|le| le.match_bits)
            .collect();
        let ule_bits: Vec<u64> = pte.unexpected().iter().map(|u| u.match_bits).collect();
        let append = (
            prop_oneof![3 => Just(PtlList::Priority), 2 => Just(PtlList::Overflow)],
            prop::sample::select(vec![0u64, 8, 32, 64, 64, 100, 256, 256, 4096]),
            match_bits_strategy(),
            ignore_bits_strategy(),
            id_strategy(),
            flags_strategy(),
            prop::sample::select(vec![0u64, 0, 1, 16, 64, 200]),
        )
            .prop_map(
                |(list, length, match_bits, ignore_bits, id, flags, min_free)| Step::Append {
                    list,
                    length,
                    match_bits,
                    ignore_bits,
                    id,
                    flags,
                    min_free,
                },
            );
        let put = (
            0..INITIATORS.len(),
            biased_bits(le_bits.clone()),
            put_len_strategy(),
            remote_offset_strategy(),
            any::<bool>(),
        )
            .prop_map(|(from, match_bits, len, remote_offset, idc)| {
                let idc = idc && len <= IDC_MAX;
                Step::Put {
                    from,
                    match_bits,
                    len,
                    remote_offset: if idc { 0 } else { remote_offset },
                    idc,
                }
            });
        let get = (
            0..INITIATORS.len(),
            biased_bits(le_bits),
            0..=300u64,
            remote_offset_strategy(),
        )
            .prop_map(|(from, match_bits, len, remote_offset)| Step::Get {
                from,
                match_bits,
                len,
                remote_offset,
            });
        let unlink = if state.appended.is_empty() {
            (
                prop_oneof![Just(PtlList::Priority), Just(PtlList::Overflow)],
                1..8u16,
            )
                .prop_map(|(list, buffer_id)| Step::Unlink { list, buffer_id })
                .boxed()
        } else {
            (
                prop::sample::select(state.appended.clone()),
                prop::bool::weighted(0.15),
            )
                .prop_map(|((list, buffer_id), other_list)| Step::Unlink {
                    list: match (list, other_list) {
                        (PtlList::Priority, true) => PtlList::Overflow,
                        (PtlList::Overflow, true) => PtlList::Priority,
                        (l, _) => l,
                    },
                    buffer_id,
                })
                .boxed()
        };
        let search = (
            biased_bits(ule_bits),
            ignore_bits_strategy(),
            id_strategy(),
            any::<bool>(),
        )
            .prop_map(|(match_bits, ignore_bits, id, delete)| Step::Search {
                match_bits,
                ignore_bits,
                id,
                delete,
            });
        prop_oneof![
            4 => append,
            6 => put,
            1 => get,
            1 => unlink,
            1 => search,
        ]
        .boxed()
    }

    fn preconditions(state: &RefState, step: &Step) -> bool {
        match step {
            Step::Append { length, .. } => {
                state.next_mem + round_up(*length, 64) + 64 <= TARGET_MEM
            }
            Step::Put {
                len,
                idc,
                remote_offset,
                ..
            } => !*idc || (*len <= IDC_MAX && *remote_offset == 0),
            // A Get that an OVERFLOW entry could take is outside this test (the NIC cannot
            // serve it from the overflow buffer; see docs/testing.md).
            Step::Get {
                from,
                match_bits,
                len,
                remote_offset,
            } => {
                let req = state.request(Op::Get, *from, *match_bits, *len, *remote_offset);
                !state.pte.overflow_accepts(&req)
            }
            Step::Unlink { .. } | Step::Search { .. } => true,
        }
    }

    fn apply(mut state: RefState, step: &Step) -> RefState {
        let applied = match step {
            Step::Append {
                list,
                length,
                match_bits,
                ignore_bits,
                id,
                flags,
                min_free,
            } => {
                let le = Le {
                    buffer_id: state.next_buffer_id,
                    list: *list,
                    start: state.next_mem,
                    length: *length,
                    match_bits: *match_bits,
                    ignore_bits: *ignore_bits,
                    match_id: id.match_id(),
                    flags: *flags,
                    min_free: *min_free,
                    local_offset: 0,
                };
                state.next_buffer_id += 1;
                state.next_mem += round_up(*length, 64) + 64;
                state.appended.push((*list, le.buffer_id));
                let fx = state
                    .pte
                    .append(le.clone())
                    .expect("the model accepts a generated append");
                Applied::Append { le, fx }
            }
            Step::Put {
                from,
                match_bits,
                len,
                remote_offset,
                idc,
            } => {
                let req = state.request(Op::Put, *from, *match_bits, *len, *remote_offset);
                state.seq += 1;
                let fx = state
                    .pte
                    .incoming(&req)
                    .expect("the model accepts a generated put");
                Applied::Request {
                    from: *from,
                    req,
                    user_ptr: 0x5550_0000 + state.seq,
                    idc: *idc,
                    fx,
                }
            }
            Step::Get {
                from,
                match_bits,
                len,
                remote_offset,
            } => {
                let req = state.request(Op::Get, *from, *match_bits, *len, *remote_offset);
                state.seq += 1;
                let fx = state
                    .pte
                    .incoming(&req)
                    .expect("the model accepts a generated get");
                Applied::Request {
                    from: *from,
                    req,
                    user_ptr: 0x5550_0000 + state.seq,
                    idc: false,
                    fx,
                }
            }
            Step::Unlink { list, buffer_id } => Applied::Unlink {
                list: *list,
                buffer_id: *buffer_id,
                fx: state.pte.unlink(*list, *buffer_id),
            },
            Step::Search {
                match_bits,
                ignore_bits,
                id,
                delete,
            } => {
                let search = Search {
                    buffer_id: state.next_buffer_id,
                    match_bits: *match_bits,
                    ignore_bits: *ignore_bits,
                    match_id: id.match_id(),
                    delete: *delete,
                };
                state.next_buffer_id += 1;
                let fx = state.pte.search(&search);
                Applied::Search { search, fx }
            }
        };
        state.last = Some(applied);
        state
    }
}

/// One process's endpoint: device, LNI, domain, profile, EQ, transmit queue, a buffer.
struct Endpoint {
    _dev: Device,
    lni: Lni,
    domain: Domain,
    /// Kept: the transmit queue sends with this profile.
    _cp: Cp,
    eq: EventQueue,
    txq: CmdQueue,
    buf: UserMemory,
    md: Md,
    _eq_md: Md,
}

impl Endpoint {
    fn new(cluster: &Cluster, node: usize, pid: u32, buf_len: u64) -> Endpoint {
        let devs = cluster.node(node).expect("node").cxi_devices();
        let dev = open_device(&devs, 0).expect("open cxi0");
        assert_eq!(dev.info().nid, node as u32, "NID = node index");
        assert_eq!(dev.info().pid_bits().expect("pid bits"), PID_BITS);
        let lni = dev.alloc_lni(CXI_DEFAULT_SVC_ID).expect("lni");
        let domain = lni.alloc_domain(VNI, pid).expect("domain");
        assert_eq!(domain.pid(), pid);
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
            .alloc_cmdq(Some(&eq), &CqOptions::transmit(64, &cp))
            .expect("txq");
        let buf = dev.alloc_buffer(buf_len).expect("buffer");
        let md = lni
            .map_buffer(&buf, MapFlags::READ | MapFlags::WRITE | MapFlags::PIN)
            .expect("md");
        Endpoint {
            _dev: dev,
            lni,
            domain,
            _cp: cp,
            eq,
            txq,
            buf,
            md,
            _eq_md: eq_md,
        }
    }

    /// Every event waiting in the EQ, consumed and acknowledged.
    fn drain(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(ev) = self.eq.get_event().expect("read the EQ") {
            out.push(ev);
        }
        self.eq.ack().expect("ack the EQ");
        out
    }

    fn iova(&self, offset: u64) -> u64 {
        self.md.iova_of(&self.buf, offset).expect("iova")
    }
}

/// The system under test.
struct Sut {
    target: Endpoint,
    tgq: CmdQueue,
    pte: Pte,
    _map: PteMap,
    initiators: Vec<Endpoint>,
    /// Last: dropped after everything that uses it.
    cluster: Cluster,
}

impl Sut {
    fn new(seed: u64) -> Sut {
        let cluster = Cluster::builder()
            .nics(3)
            .engine(EngineKind::Deterministic { seed })
            .memory_per_node(16 << 20)
            .build()
            .expect("cluster");
        let mut target = Endpoint::new(&cluster, TARGET_NODE, TARGET_PID, TARGET_MEM);
        let mut tgq = target
            .lni
            .alloc_cmdq(Some(&target.eq), &CqOptions::target(64))
            .expect("target queue");
        let pte = target
            .lni
            .alloc_pte(
                Some(&target.eq),
                PtAllocOpts::IS_MATCHING | PtAllocOpts::USE_LONG_EVENT,
            )
            .expect("pte");
        let map = pte.map(&target.domain, PT_INDEX, false).expect("map pte");
        tgq.emit_set_state(&pte.set_state_cmd(PtlteState::Enabled, 0))
            .expect("setstate");
        tgq.ring().expect("ring");
        let initiators = INITIATORS
            .iter()
            .map(|&(node, pid)| Endpoint::new(&cluster, node, pid, INIT_BUF))
            .collect();
        let steps = cluster.run(MAX_STEPS);
        assert!(steps < MAX_STEPS, "setup did not go idle");
        let evs = target.drain();
        assert!(
            matches!(evs.as_slice(), [ev] if ev.event_type() == EventType::StateChange && ev.return_code() == ReturnCode::Ok),
            "enabling the PtlTE: {evs:?}"
        );
        Sut {
            target,
            tgq,
            pte,
            _map: map,
            initiators,
            cluster,
        }
    }

    fn run_until_idle(&self, what: &str) {
        let steps = self.cluster.run(MAX_STEPS);
        assert!(steps < MAX_STEPS, "{what}: the engine did not go idle");
    }

    fn target_cmd(&mut self, cmd: &TargetCmd) {
        self.tgq.emit_target(cmd).expect("emit target command");
        self.tgq.ring().expect("ring target queue");
    }

    fn apply(&mut self, applied: &Applied) {
        match applied {
            Applied::Append { le, .. } => {
                let mut cmd = TargetCmd {
                    opcode: TgtOp::Append,
                    ptl_list: le.list,
                    ptlte_index: self.pte.index(),
                    buffer_id: le.buffer_id,
                    lac: self.target.md.lac(),
                    start: self.target.iova(le.start),
                    length: le.length,
                    min_free: u32::try_from(le.min_free).expect("min_free fits"),
                    match_id: le.match_id,
                    match_bits: le.match_bits,
                    ignore_bits: le.ignore_bits,
                    ..TargetCmd::default()
                };
                cmd.set_opts(le.flags);
                self.target_cmd(&cmd);
            }
            Applied::Unlink {
                list, buffer_id, ..
            } => {
                let cmd = TargetCmd {
                    opcode: TgtOp::Unlink,
                    ptl_list: *list,
                    ptlte_index: self.pte.index(),
                    buffer_id: *buffer_id,
                    ..TargetCmd::default()
                };
                self.target_cmd(&cmd);
            }
            Applied::Search { search, .. } => {
                let cmd = TargetCmd {
                    opcode: if search.delete {
                        TgtOp::SearchAndDelete
                    } else {
                        TgtOp::Search
                    },
                    ptl_list: PtlList::Unexpected,
                    ptlte_index: self.pte.index(),
                    buffer_id: search.buffer_id,
                    length: (1 << 56) - 1,
                    // Permits every header, whichever way permissions apply to searches.
                    flags: LeFlags::OP_PUT | LeFlags::OP_GET,
                    match_id: search.match_id,
                    match_bits: search.match_bits,
                    ignore_bits: search.ignore_bits,
                    ..TargetCmd::default()
                };
                self.target_cmd(&cmd);
            }
            Applied::Request {
                from,
                req,
                user_ptr,
                idc,
                ..
            } => self.send(*from, req, *user_ptr, *idc),
        }
    }

    fn send(&mut self, from: usize, req: &Request, user_ptr: u64, idc: bool) {
        let (dfa, index_ext) = build_dfa(TARGET_NODE as u32, TARGET_PID, PID_BITS, PT_INDEX);
        let ep = &mut self.initiators[from];
        let len = u32::try_from(req.rlength).expect("length fits");
        match req.op {
            Op::Put => {
                ep.buf.write(0, &req.payload).expect("write payload");
                if idc {
                    let cstate = CState {
                        initiator: req.initiator,
                        index_ext,
                        eq: ep.eq.eqn() as u16,
                        user_ptr,
                        flags: DmaFlags {
                            event_send_disable: true,
                            ..DmaFlags::default()
                        },
                        ..CState::default()
                    };
                    let msg = IdcMsg {
                        dfa,
                        match_bits: req.match_bits,
                        header_data: req.header_data,
                        user_ptr,
                        payload: Payload::new(&req.payload).expect("IDC payload"),
                    };
                    ep.txq.emit_idc_msg(&cstate, &msg).expect("emit IDC msg");
                } else {
                    let cmd = FullDma {
                        opcode: DmaOp::Put,
                        index_ext,
                        lac: ep.md.lac(),
                        flags: DmaFlags {
                            event_send_disable: true,
                            ..DmaFlags::default()
                        },
                        dfa,
                        remote_offset: req.remote_offset,
                        local_addr: ep.iova(0),
                        request_len: len,
                        eq: ep.eq.eqn() as u16,
                        initiator: req.initiator,
                        match_bits: req.match_bits,
                        header_data: req.header_data,
                        user_ptr,
                        ..FullDma::default()
                    };
                    ep.txq.emit_dma(&cmd).expect("emit put");
                }
            }
            Op::Get => {
                ep.buf
                    .fill(LANDING, req.rlength + 64, SENTINEL)
                    .expect("fill landing zone");
                let cmd = FullDma {
                    opcode: DmaOp::Get,
                    index_ext,
                    lac: ep.md.lac(),
                    flags: DmaFlags {
                        event_send_disable: true,
                        ..DmaFlags::default()
                    },
                    dfa,
                    remote_offset: req.remote_offset,
                    local_addr: ep.iova(LANDING),
                    request_len: len,
                    eq: ep.eq.eqn() as u16,
                    initiator: req.initiator,
                    match_bits: req.match_bits,
                    user_ptr,
                    ..FullDma::default()
                };
                ep.txq.emit_dma(&cmd).expect("emit get");
            }
        }
        ep.txq.ring().expect("ring");
    }
}

/// The long target event `ev` is, if it is one (the PtlTE asks for long events).
fn target_event(ev: &Event) -> Option<TargetLong> {
    match ev {
        Event::TargetLong(t) => Some(*t),
        _ => None,
    }
}

fn fmt_target(t: &TargetLong, iova0: u64) -> String {
    format!(
        "{}/{} buf {} list {:?} init {:#x} mb {:#x} hd {:#x} m {} r {} start {:+} ro {} au {}",
        t.event_type.name(),
        t.return_code.name(),
        t.buffer_id,
        t.ptl_list,
        t.initiator,
        t.match_bits,
        t.header_data,
        t.mlength,
        t.rlength,
        t.start as i64 - iova0 as i64,
        t.remote_offset,
        t.auto_unlinked,
    )
}

/// The first field of `got` that differs from `want`, or `None`.
fn target_mismatch(
    want: &TargetEvent,
    got: &TargetLong,
    iova0: u64,
    ptlte_index: u16,
) -> Option<String> {
    macro_rules! check {
        ($name:literal, $want:expr, $got:expr) => {
            if $want != $got {
                return Some(format!("{}: want {:?}, got {:?}", $name, $want, $got));
            }
        };
    }
    macro_rules! check_opt {
        ($name:literal, $want:expr, $got:expr) => {
            if let Some(w) = $want {
                check!($name, w, $got);
            }
        };
    }
    check!("event_type", want.event_type, got.event_type);
    check!("return_code", want.return_code, got.return_code);
    check!("buffer_id", want.buffer_id, got.buffer_id);
    check!("ptlte_index", ptlte_index, got.ptlte_index);
    check_opt!("ptl_list", want.ptl_list, got.ptl_list);
    check_opt!("initiator", want.initiator, got.initiator);
    check_opt!("match_bits", want.match_bits, got.match_bits);
    check_opt!("header_data", want.header_data, got.header_data);
    check_opt!("mlength", want.mlength, u64::from(got.mlength));
    check_opt!("rlength", want.rlength, u64::from(got.rlength));
    check_opt!("start", want.start.map(|s| s + iova0), got.start);
    check_opt!("remote_offset", want.remote_offset, got.remote_offset);
    check_opt!("auto_unlinked", want.auto_unlinked, got.auto_unlinked);
    None
}

fn check_target_events(
    ctx: &str,
    want: &[TargetEvent],
    got: &[Event],
    iova0: u64,
    ptlte_index: u16,
) {
    let decoded: Vec<Option<TargetLong>> = got.iter().map(target_event).collect();
    let shown: Vec<String> = got
        .iter()
        .zip(&decoded)
        .map(|(ev, t)| match t {
            Some(t) => fmt_target(t, iova0),
            None => format!("{ev:?}"),
        })
        .collect();
    assert_eq!(
        want.len(),
        got.len(),
        "{ctx}: target EQ holds {} events, the model expects {}\n want: {want:#?}\n got: {shown:#?}",
        got.len(),
        want.len(),
    );
    for (i, (w, t)) in want.iter().zip(&decoded).enumerate() {
        let Some(t) = t else {
            panic!(
                "{ctx}: target event {i} is not a long target event: {:?}",
                got[i]
            );
        };
        if let Some(why) = target_mismatch(w, t, iova0, ptlte_index) {
            panic!("{ctx}: target event {i}: {why}\n want: {w:#?}\n got: {shown:#?}");
        }
    }
}

fn check_initiator_event(ctx: &str, want: &InitiatorEvent, user_ptr: u64, got: &[Event]) {
    let [ev] = got else {
        panic!("{ctx}: initiator EQ should hold exactly one event ({want:?}), got {got:?}");
    };
    let (ty, rc, up, mlength, list) = match ev {
        Event::InitiatorShort(i) => (
            i.event_type,
            i.return_code,
            i.user_ptr,
            i.mlength,
            i.ptl_list,
        ),
        Event::InitiatorLong(i) => (
            i.event_type,
            i.return_code,
            i.user_ptr,
            i.mlength,
            i.ptl_list,
        ),
        other => panic!("{ctx}: not an initiator event: {other:?} (want {want:?})"),
    };
    let fail =
        |what: &str| -> ! { panic!("{ctx}: initiator event {what}: want {want:?}, got {ev:?}") };
    if ty != want.event_type {
        fail("type");
    }
    if rc != want.return_code {
        fail("return code");
    }
    if up != user_ptr {
        fail("user_ptr");
    }
    if want.mlength.is_some_and(|m| m != u64::from(mlength)) {
        fail("mlength");
    }
    if want.ptl_list.is_some_and(|l| l != list) {
        fail("ptl_list");
    }
}

fn effects(applied: &Applied) -> &Effects {
    match applied {
        Applied::Append { fx, .. }
        | Applied::Request { fx, .. }
        | Applied::Unlink { fx, .. }
        | Applied::Search { fx, .. } => fx,
    }
}

/// Compare the SUT's target buffer over `[offset, offset + len)` with the model's memory.
fn check_memory(ctx: &str, sut: &Sut, model: &PtlTe, offset: u64, len: u64) {
    let want = model.memory().slice(offset, len);
    let mut got = vec![0u8; want.len()];
    sut.target
        .buf
        .read(offset, &mut got)
        .expect("read target buffer");
    if let Some(i) = want.iter().zip(&got).position(|(a, b)| a != b) {
        panic!(
            "{ctx}: target memory differs at offset {} (want {:#04x}, got {:#04x})",
            offset + i as u64,
            want[i],
            got[i]
        );
    }
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = Model;

    fn init_test(state: &RefState) -> Sut {
        Sut::new(state.seed)
    }

    fn apply(mut sut: Sut, state: &RefState, step: Step) -> Sut {
        let applied = state.last.as_ref().expect("the model recorded the step");
        let ctx = format!("{step:?}");
        sut.apply(applied);
        sut.run_until_idle(&ctx);
        let fx = effects(applied);
        let iova0 = sut.target.iova(0);
        let ptlte_index = sut.pte.index();
        let target_events = sut.target.drain();
        let initiator_events: Vec<Vec<Event>> =
            sut.initiators.iter_mut().map(Endpoint::drain).collect();
        let ctx = format!("{ctx}\n initiator events: {initiator_events:?}");
        check_target_events(&ctx, &fx.target, &target_events, iova0, ptlte_index);
        for (i, got) in initiator_events.iter().enumerate() {
            match applied {
                Applied::Request {
                    from,
                    user_ptr,
                    req,
                    ..
                } if *from == i => {
                    let want = fx
                        .initiator
                        .as_ref()
                        .expect("a request has an initiator event");
                    check_initiator_event(&ctx, want, *user_ptr, got);
                    if req.op == Op::Get {
                        let reply = fx.reply.as_deref().unwrap_or(&[]);
                        let mut landed = vec![0u8; (req.rlength + 64) as usize];
                        sut.initiators[i]
                            .buf
                            .read(LANDING, &mut landed)
                            .expect("read landing zone");
                        assert_eq!(&landed[..reply.len()], reply, "{ctx}: Get reply bytes");
                        assert!(
                            landed[reply.len()..].iter().all(|b| *b == SENTINEL),
                            "{ctx}: a Get wrote past its mlength ({})",
                            reply.len()
                        );
                    }
                }
                _ => assert!(
                    got.is_empty(),
                    "{ctx}: unexpected events on initiator {i}: {got:?}"
                ),
            }
        }
        for &(off, len) in &fx.touched {
            check_memory(&ctx, &sut, &state.pte, off, len);
        }
        sut
    }

    fn check_invariants(sut: &Sut, _state: &RefState) {
        // No flow control: nothing ever disables the PtlTE or drops a request.
        let status = sut.pte.status().expect("pte status");
        assert_eq!(status.state, PtlteState::Enabled, "the PtlTE stays enabled");
        assert_eq!(
            status.drop_count, 0,
            "no request is dropped by a disabled PtlTE"
        );
    }

    fn teardown(sut: Sut, state: RefState) {
        check_memory("teardown", &sut, &state.pte, 0, TARGET_MEM);
    }
}

/// 1,000 cases by default. proptest applies `PROPTEST_CASES` on top of this config, so the
/// variable sets the count either way (`PROPTEST_CASES=10` for a quick run, `=10000` for a
/// long one).
fn config() -> Config {
    Config {
        cases: 1000,
        max_shrink_iters: 2048,
        // Failing cases are saved beside this file
        // (`portals_emulated.proptest-regressions`) and replayed first on the next run.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

prop_state_machine! {
    #![proptest_config(config())]

    /// Random appends, puts, gets, unlinks and searches on one matching PtlTE, every event
    /// and every written byte compared with the reference model.
    #[test]
    fn emulated_matching_follows_the_reference_model(sequential 1..64 => Sut);
}

/// Run `steps` through the model and the emulated NIC exactly as the property test does
/// (the steps must satisfy the generator's preconditions).
fn run_case(seed: u64, steps: &[Step]) -> (Sut, RefState) {
    run_steps(seed, steps, true)
}

fn run_steps(seed: u64, steps: &[Step], enforce_preconditions: bool) -> (Sut, RefState) {
    let mut state = RefState::new(seed);
    let mut sut = <Sut as StateMachineTest>::init_test(&state);
    for step in steps {
        assert!(
            !enforce_preconditions || <Model as ReferenceStateMachine>::preconditions(&state, step),
            "scenario step violates the generator's preconditions: {step:?}"
        );
        state = <Model as ReferenceStateMachine>::apply(state, step);
        sut = <Sut as StateMachineTest>::apply(sut, &state, step.clone());
        <Sut as StateMachineTest>::check_invariants(&sut, &state);
    }
    check_memory("end of scenario", &sut, &state.pte, 0, TARGET_MEM);
    (sut, state)
}

fn append(list: PtlList, length: u64, match_bits: u64, id: IdSel, flags: LeFlags) -> Step {
    Step::Append {
        list,
        length,
        match_bits,
        ignore_bits: 0,
        id,
        flags,
        min_free: 0,
    }
}

/// A 4 KiB OVERFLOW entry that takes every request.
fn catch_all(flags: LeFlags) -> Step {
    Step::Append {
        list: PtlList::Overflow,
        length: 4096,
        match_bits: 0,
        ignore_bits: u64::MAX,
        id: IdSel::Any,
        flags,
        min_free: 0,
    }
}

fn put(from: usize, match_bits: u64, len: u64) -> Step {
    Step::Put {
        from,
        match_bits,
        len,
        remote_offset: 0,
        idc: false,
    }
}

/// The events the model expected for the last step.
fn last_events(state: &RefState) -> Vec<(EventType, ReturnCode)> {
    let applied = state.last.as_ref().expect("a step ran");
    effects(applied)
        .target
        .iter()
        .map(|e| (e.event_type, e.return_code))
        .collect()
}

#[test]
fn scenario_unexpected_send_is_claimed_by_a_later_receive() {
    let oflow = LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL;
    let recv = LeFlags::OP_PUT | LeFlags::USE_ONCE;
    let (_, state) = run_case(
        11,
        &[
            append(PtlList::Overflow, 4096, 0, IdSel::Any, oflow),
            catch_all(oflow),
            put(1, 0x3, 100),
            put(2, 0x2, 2500),
            put(0, 0x3, 7),
            append(PtlList::Priority, 64, 0x3, IdSel::Exact(0), recv),
        ],
    );
    assert_eq!(
        last_events(&state),
        [
            (EventType::PutOverflow, ReturnCode::Ok),
            (EventType::Unlink, ReturnCode::Ok)
        ],
        "the receive takes initiator 0's header and is never linked"
    );
    assert_eq!(state.pte.unexpected().len(), 2);
    assert!(state.pte.priority().is_empty());
}

#[test]
fn scenario_locally_managed_buffer_packs_messages_from_every_initiator() {
    let (_, state) = run_case(
        12,
        &[
            Step::Append {
                list: PtlList::Priority,
                length: 256,
                match_bits: 0x10,
                ignore_bits: 0,
                id: IdSel::Any,
                flags: LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL,
                min_free: 64,
            },
            put(0, 0x10, 60),
            put(1, 0x10, 70),
            Step::Put {
                from: 2,
                match_bits: 0x10,
                len: 90,
                remote_offset: 0,
                idc: true,
            },
        ],
    );
    // 256 - 220 = 36 < 64: the third message unlinked the buffer, at match time, so its
    // UNLINK event comes before the message's PUT (libfabric's CXI provider allows for it:
    // a request buffer's unlink may be seen before the PUTs that filled it).
    assert_eq!(
        last_events(&state),
        [
            (EventType::Unlink, ReturnCode::Ok),
            (EventType::Put, ReturnCode::Ok)
        ]
    );
}

#[test]
fn scenario_match_id_wildcards_select_initiators() {
    let flags = LeFlags::OP_PUT;
    let (_, state) = run_case(
        13,
        &[
            // Any PID on initiator 0's NID (node 0), then PID 4 on any NID.
            append(PtlList::Priority, 64, 1, IdSel::AnyPid(0), flags),
            append(PtlList::Priority, 64, 1, IdSel::AnyNid(1), flags),
            put(2, 1, 8),
            put(1, 1, 8),
            put(0, 1, 8),
        ],
    );
    assert_eq!(last_events(&state), [(EventType::Put, ReturnCode::Ok)]);
}

#[test]
fn scenario_search_and_delete_removes_matching_headers() {
    let (_, state) = run_case(
        14,
        &[
            catch_all(LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL),
            put(0, 1, 10),
            put(1, 2, 20),
            put(2, 1, 30),
            Step::Search {
                match_bits: 1,
                ignore_bits: 0,
                id: IdSel::Any,
                delete: false,
            },
            Step::Search {
                match_bits: 1,
                ignore_bits: 0,
                id: IdSel::Any,
                delete: true,
            },
        ],
    );
    assert_eq!(
        last_events(&state),
        [
            (EventType::PutOverflow, ReturnCode::Ok),
            (EventType::PutOverflow, ReturnCode::Ok),
            (EventType::Search, ReturnCode::Ok)
        ]
    );
    assert_eq!(state.pte.unexpected().len(), 1);
}

/// Portals generates LINK and AUTO_UNLINK unless LINK_DISABLE / UNLINK_DISABLE
/// (`ptl_le.c: le_append_pt, le_unlink`), and libcxi's utilities and libfabric's MR code
/// wait for the LINK of an entry appended with EVENT_SUCCESS_DISABLE.
#[test]
fn success_disable_keeps_link_and_unlink_events() {
    run_case(
        15,
        &[
            append(
                PtlList::Priority,
                64,
                0,
                IdSel::Any,
                LeFlags::OP_PUT | LeFlags::USE_ONCE | LeFlags::EVENT_SUCCESS_DISABLE,
            ),
            put(0, 0, 8),
        ],
    );
}

/// KNOWN GAP: NO_TRUNCATE is part of the match (`ptl_tgt.c: check_match`) for every
/// operation; a Get that does not fit an OVERFLOW entry must not match it.
#[test]
fn no_truncate_applies_to_a_get_on_the_overflow_list() {
    run_steps(
        16,
        &[
            append(
                PtlList::Overflow,
                8,
                0,
                IdSel::Any,
                LeFlags::OP_PUT | LeFlags::NO_TRUNCATE,
            ),
            Step::Get {
                from: 0,
                match_bits: 0,
                len: 9,
                remote_offset: 0,
            },
        ],
        false,
    );
}

/// KNOWN GAP: `cxil_pte_status` reports the PtlTE's pool use and, for its unexpected headers,
/// oldest first, where their eager data landed (the remote offset only for rendezvous). The driver reads them from
/// `c_lpe_sts_pe_le_alloc` and the list-entry RAM (`c_lpe_sts_list_entries` from the
/// `unexp_head` of `c_lpe_cfg_ptl_table`), which the emulated device does not fill in.
#[test]
fn pte_status_reports_pool_use_and_unexpected_headers() {
    let (sut, state) = run_case(
        17,
        &[
            append(
                PtlList::Overflow,
                4096,
                0,
                IdSel::Any,
                LeFlags::OP_PUT | LeFlags::MANAGE_LOCAL,
            ),
            Step::Put {
                from: 0,
                match_bits: 0,
                len: 10,
                remote_offset: 40,
                idc: false,
            },
            Step::Put {
                from: 1,
                match_bits: 0,
                len: 10,
                remote_offset: 8,
                idc: false,
            },
        ],
    );
    let status = sut.pte.status_with_ules(16).expect("pte status");
    let pte = &state.pte;
    // For eager data the value is where it landed in the overflow buffer (HPE's libcxi test
    // `pte/pte_status` expects the buffer's IOVA), oldest first: the two headers lie as far
    // apart as the model placed their data; not the requests' remote offsets (40, 8).
    let ules = pte.unexpected();
    assert_eq!(status.ule_offsets.len(), 2);
    assert_eq!(
        status.ule_offsets[1].wrapping_sub(status.ule_offsets[0]),
        ules[1].start.wrapping_sub(ules[0].start)
    );
    assert_ne!(status.ule_offsets, [40, 8]);
    assert_eq!(
        usize::from(status.les_allocated),
        pte.priority().len() + pte.overflow().len() + pte.unexpected().len()
    );
}
