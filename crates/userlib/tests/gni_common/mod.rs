//! Setup shared by the gni tests: an emulated Gemini cluster from the driver's builder, and
//! on each node a process that uses only the user library.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use driver::gemini::KgniClient;
use driver::mem::UserMemory;
use platform::EngineKind;
use platform::gemini::GeminiCluster;
use userlib::gni::{Cdm, CdmMode, Cq, CqEvent, CqMode, MemFlags, MemHandle, Nic, ReturnCode};

/// How long a test waits for anything.
pub const T: Option<Duration> = Some(Duration::from_secs(20));

/// One process on one node: a CDM attached to the node's NIC, a CQ for local events, a CQ
/// for remote events, and a registered buffer whose remote events go to `rx`.
pub struct Side {
    pub pe: u32,
    pub inst: u32,
    pub buf: UserMemory,
    pub mh: MemHandle,
    pub tx: Cq,
    pub rx: Cq,
    pub nic: Nic,
    pub cdm: Cdm,
    pub client: Arc<KgniClient>,
}

pub fn cluster(engine: EngineKind) -> GeminiCluster {
    GeminiCluster::builder()
        .engine(engine)
        .memory_per_node(32 << 20)
        .build()
        .expect("cluster")
}

pub fn side_with(
    c: &GeminiCluster,
    pe: usize,
    inst: u32,
    buf_len: u64,
    modes: CdmMode,
    cq_entries: u32,
) -> Side {
    side_on(c, pe, inst, modes, cq_entries, |nic| {
        nic.space().alloc(buf_len).expect("buffer")
    })
}

/// [`side_with`] with the registered buffer `buf` gives for the NIC.
pub fn side_on(
    c: &GeminiCluster,
    pe: usize,
    inst: u32,
    modes: CdmMode,
    cq_entries: u32,
    buf: impl FnOnce(&Nic) -> UserMemory,
) -> Side {
    let job = c.job().clone();
    let client = Arc::new(c.node(pe).expect("node").open());
    let cdm = Cdm::create(&client, inst, job.ptag, job.cookie, modes).expect("CdmCreate");
    let nic = cdm.attach(-1).expect("CdmAttach");
    let tx = nic
        .cq_create(cq_entries, 1, CqMode::NOBLOCK)
        .expect("tx CQ");
    let rx = nic
        .cq_create(cq_entries, 1, CqMode::NOBLOCK)
        .expect("rx CQ");
    let buf = buf(&nic);
    let mh = nic
        .mem_register(buf.va(), buf.len(), Some(&rx), MemFlags::READWRITE)
        .expect("MemRegister");
    Side {
        pe: pe as u32,
        inst,
        buf,
        mh,
        tx,
        rx,
        nic,
        cdm,
        client,
    }
}

pub fn side(c: &GeminiCluster, pe: usize, inst: u32) -> Side {
    side_with(c, pe, inst, 64 * 1024, CdmMode::empty(), 256)
}

/// The next event of `cq`, asserting `GNI_RC_SUCCESS`.
pub fn next_ok(cq: &Cq) -> CqEvent {
    let e = cq.poll_event(T).expect("an event");
    assert_eq!(e.rc, ReturnCode::Success, "event {:?}", e.cqe);
    e
}

/// Run the engine until nothing is left (deterministic engine).
pub fn settle(c: &GeminiCluster) {
    c.run(u64::MAX);
}

/// A byte pattern that differs at every offset of a long buffer.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}
