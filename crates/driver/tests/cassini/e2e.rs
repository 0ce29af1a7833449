//! End to end through the uAPI and the emulated device: a command written into an mmapped
//! ring, the doorbell rung through the mmapped launch page, the event read from the EQ in
//! user memory (translated by the ATU through the MD), the interrupt in the wait object; and
//! a CT doorbell whose write-back lands in user memory.

use driver::cassini::uapi::*;
use firmware_spec::cassini::event::{EventType, event_header};
use firmware_spec::cassini::layout::Layout;
use firmware_spec::cassini::le::PtlteState;
use firmware_spec::cassini::rc::ReturnCode;
use firmware_spec::cassini::status::{C_CQ_CMD_SIZE, C_CQ_FIRST_WR_PTR, CT_INC_SUCCESS_OFFSET};
use firmware_spec::cassini::tgt::SetStateCmd;

use crate::common::*;

#[test]
fn setstate_command_through_mmapped_ring_and_doorbell_gives_an_event() {
    setstate_end_to_end(&cluster(1));
}

#[test]
fn the_same_on_the_threaded_engine() {
    let cl = platform::Cluster::builder()
        .nics(1)
        .engine(platform::EngineKind::Threaded)
        .memory_per_node(16 << 20)
        .build()
        .unwrap();
    setstate_end_to_end(&cl);
}

fn setstate_end_to_end(cl: &platform::Cluster) {
    let d = dev(cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let w = wait(&c, l).unwrap();
    let eq_buf = c.alloc_user_memory(2 * 4096).unwrap();
    let md = map(&c, l, eq_buf.va(), eq_buf.len()).unwrap();
    let eq = eq_md(&c, l, &eq_buf, md.id, w).unwrap();
    let tgq = cq(&c, l, eq.eq, false, 64).unwrap();
    let pt = pte(&c, l, eq.eq).unwrap();

    let ring = c.mmap_token(&tgq.cmds).unwrap();
    let ring = ring.memory().unwrap().clone();
    let launch = c.mmap_token(&tgq.wp_addr).unwrap().mmio().unwrap();
    assert_eq!(launch.size(), 4096);
    assert_eq!(ring.len(), u64::from(tgq.count) * 64);

    let cmd = SetStateCmd {
        ptlte_state: PtlteState::Enabled,
        ptlte_index: pt as u16,
        current_addr: 0,
        drop_count: 0,
    };
    ring.write(C_CQ_FIRST_WR_PTR * C_CQ_CMD_SIZE as u64, &cmd.to_vec())
        .unwrap();
    // Commands must be visible before the write pointer (64 B slots) is stored.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    launch.write_u64(0, C_CQ_FIRST_WR_PTR + 1).unwrap();

    // Poll the event ring, letting the engine progress (bounded in real time for the
    // threaded engine, whose work may run on its own threads).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut event = None;
    while std::time::Instant::now() < deadline {
        let mut b = [0u8; 64];
        eq_buf.read(64, &mut b).unwrap();
        if let Some(h) = event_header(&b) {
            event = Some(h);
            break;
        }
        if !d.progress() {
            std::thread::yield_now();
        }
    }
    let (_, ty, rc) = event.expect("an event in the EQ");
    assert_eq!(ty, EventType::StateChange);
    assert_eq!(rc, ReturnCode::Ok);
    // The device read the ring: its read pointer moved past the command.
    let rd = ring.load_u64_acquire(0).unwrap() & 0xffff;
    assert_eq!(rd, C_CQ_FIRST_WR_PTR + 1, "c_cq_status.rd_ptr");
    let st = c
        .call(&PteStatusCmd {
            pte_index: pt,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(st.state, u8::from(PtlteState::Enabled));
    // The EQ's interrupt reached the wait object.
    let wobj = c.wait_object(w).unwrap();
    let fired = wobj.wait(Some(std::time::Duration::from_secs(20)));
    assert!(fired.is_some_and(|n| n >= 1), "interrupt delivered");

    // Now SOFTWARE_MANAGED is refused (not DISABLED), with the right errno.
    let sm = c.call(&PteTransitionSmCmd {
        pte_index: pt,
        drop_count: 0,
        ..Default::default()
    });
    assert_eq!(sm.unwrap_err(), driver::cassini::Errno::Einval);

    drop((ring, launch));
    let initial = d.initial_free_counts();
    drop(eq_buf);
    c.close();
    assert_eq!(d.free_counts(), initial);
}

#[test]
fn ct_doorbell_writes_back_to_user_memory() {
    let cl = cluster(1);
    let d = dev(&cl, 0);
    let c = d.open();
    let l = lni(&c).unwrap();
    let wb = c.alloc_user_memory(4096).unwrap();
    let ct = ct(&c, l, wb.va() + 8).unwrap();
    let bell = c.mmap_token(&ct.doorbell).unwrap().mmio().unwrap();
    bell.write_u64(CT_INC_SUCCESS_OFFSET as u64, 5).unwrap();
    while d.progress() {}
    let v = wb.load_u64_acquire(8).unwrap();
    assert_eq!(v & ((1 << 48) - 1), 5, "ct_success written back");
    assert_eq!(v >> 63, 1, "ct_writeback set");
    // After the CT is freed (client closed) the doorbell mapping is dead.
    drop(c);
    assert!(bell.write_u64(0, 1).is_err());
}
