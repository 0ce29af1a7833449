//! `userlib::cxi` control path and fast-path details, end to end on emulated Cassinis:
//! device list, object lifetimes, low-latency launch, CQ_LCID, CSR and counter reads, wait
//! objects, EQ drops, PtlTE states, command failures.

mod cxi_common;

use std::time::Duration;

use cxi_common::{Ep, TIMEOUT, VNI, cluster};
use firmware_spec::cassini::cmd::{
    CState, Command, CqCmd, CqOp, DmaFlags, IdcMsg, IdcPut, Payload,
};
use firmware_spec::cassini::event::{Event, EventType};
use firmware_spec::cassini::le::{
    LeFlags, MapFlags, PtAllocOpts, PtlList, PtlteState, TcType, TrafficClass, TrigCp,
};
use firmware_spec::cassini::rc::ReturnCode;
use platform::EngineKind;
use userlib::cxi::{
    CqOptions, CxiError, EqOptions, OpenOptions, get_device_list, open_device, open_device_with,
};

const DET: EngineKind = EngineKind::Deterministic { seed: 11 };

#[test]
fn device_list_and_open() {
    let c = cluster(DET);
    for (i, node) in c.nodes().iter().enumerate() {
        let devs = node.cxi_devices();
        let list = get_device_list(&devs).unwrap();
        assert_eq!(list.len(), 1);
        let d = &list[0];
        assert_eq!(d.device_name, "cxi0");
        assert_eq!(d.nid, node.nid());
        assert_eq!((d.vendor_id, d.device_id), (0x17db, 0x0501));
        assert_eq!(d.device_platform, 1, "NETSIM platform");
        assert_eq!((d.pid_bits, d.pid_granule), (9, 256));
        assert_eq!((d.num_eqs, d.num_cts, d.num_ptes), (2047, 2047, 2047));
        assert!(!d.is_vf);
        let dev = open_device(&devs, 0).unwrap();
        assert_eq!(dev.info(), d, "node {i}");
        assert!(!dev.rh_running());
        assert!(matches!(open_device(&devs, 1), Err(CxiError::NoDevice(1))));
    }
}

#[test]
fn dropping_every_object_returns_every_resource() {
    let c = cluster(DET);
    let dev = c.node(0).unwrap().cxi(0).unwrap();
    let initial = dev.free_counts();
    {
        let mut a = Ep::new(&c, 0, 1 << 16);
        let p = a.portal(3, PtAllocOpts::IS_MATCHING);
        let wb = a.dev.alloc_buffer(4096).unwrap();
        let _ct = a.lni.alloc_ct(&wb, 0).unwrap();
        let _w = a.lni.alloc_wait_obj().unwrap();
        assert_ne!(dev.free_counts(), initial);
        drop(p);
    }
    assert_eq!(dev.free_counts(), initial);
}

#[test]
fn low_latency_launch_and_cq_lcid() {
    let c = cluster(EngineKind::Threaded);
    let mut a = Ep::new(&c, 0, 1 << 16);
    let mut b = Ep::new(&c, 1, 1 << 16);
    let rx = b.portal(0, PtAllocOpts::IS_MATCHING);
    for i in 0..4u16 {
        b.append(
            &rx,
            PtlList::Priority,
            u64::from(i) * 256,
            256,
            LeFlags::OP_PUT | LeFlags::USE_ONCE,
            u64::from(i),
            i,
            0,
        );
    }
    let (dfa, index_ext) = b.dfa(0);
    let cstate = CState {
        initiator: a.match_id(),
        index_ext,
        eq: a.eq.eqn() as u16,
        ..CState::default()
    };
    let msg = |tag: u64, data: &[u8]| IdcMsg {
        dfa,
        match_bits: tag,
        header_data: 0,
        user_ptr: tag,
        payload: Payload::new(data).unwrap(),
    };
    // C_STATE (32 B) + a 64 B message: the C_STATE goes with a normal doorbell, then a lone
    // 64 B message through the ll_64 window.
    a.txq.emit_c_state(&cstate).unwrap();
    a.txq.ring().unwrap();
    a.txq.emit_idc_msg(&cstate, &msg(0, b"ll-64")).unwrap();
    assert_eq!(a.txq.ring_state().pending_slots(), 1);
    a.txq.ll_ring().unwrap();
    assert_eq!(a.event_of(EventType::Ack).return_code(), ReturnCode::Ok);
    // A 128 B message (96 B payload).
    a.txq.emit_idc_msg(&cstate, &msg(1, &[7u8; 96])).unwrap();
    a.txq.ll_ring().unwrap();
    assert_eq!(a.event_of(EventType::Ack).return_code(), ReturnCode::Ok);
    // Switch to a second profile with CQ_LCID, and send on it.
    let cp2 = a
        .lni
        .alloc_cp(VNI, TrafficClass::LowLatency, TcType::Default)
        .unwrap();
    a.txq.emit_cq_lcid(cp2.lcid() as u8).unwrap();
    a.txq.emit_cq_cmd(CqOp::CqFence).unwrap();
    a.txq.emit_idc_msg(&cstate, &msg(2, b"after lcid")).unwrap();
    a.txq.ring().unwrap();
    assert_eq!(a.event_of(EventType::Ack).return_code(), ReturnCode::Ok);
    let mut tags = Vec::new();
    for _ in 0..3 {
        match b.event_of(EventType::Put) {
            Event::TargetLong(t) => tags.push((t.match_bits, t.mlength)),
            e => panic!("{e:?}"),
        }
    }
    assert_eq!(tags, vec![(0, 5), (1, 96), (2, 10)]);
    let mut got = [0u8; 96];
    b.buf.read(256, &mut got).unwrap();
    assert_eq!(got, [7u8; 96]);
}

#[test]
fn csr_and_counter_reads_need_a_privileged_open() {
    let c = cluster(DET);
    let devs = c.node(0).unwrap().cxi_devices();
    let user = open_device(&devs, 0).unwrap();
    assert!(matches!(
        user.map_csr(),
        Err(CxiError::Driver(driver::cassini::Errno::Eperm))
    ));
    let admin = open_device_with(
        &devs,
        0,
        OpenOptions {
            admin: true,
            space: None,
        },
    )
    .unwrap();
    let csrs = admin.map_csr().unwrap();
    assert_eq!(
        csrs.read_field("c_mb_sts_rev", 0, "vendor_id").unwrap(),
        0x17db
    );
    assert_eq!(
        csrs.read_field("c_mb_sts_rev", 0, "device_id").unwrap(),
        0x0501
    );
    let before = csrs.read_cntr("success_tx_cntr").unwrap();
    let mut a = Ep::new(&c, 0, 1 << 16);
    let _b = Ep::new(&c, 1, 1 << 16);
    // Two commands through a transmit queue: a CQ NOOP and a FENCE.
    a.txq.emit_cq_cmd(CqOp::CqNoop).unwrap();
    a.txq.emit_cq_cmd(CqOp::CqFence).unwrap();
    a.txq.ring().unwrap();
    a.txq.wait_empty(TIMEOUT).unwrap();
    let after = csrs.read_cntr("c_cq_cntrs.success_tx_cntr").unwrap();
    assert_eq!(after - before, 2);
    assert!(csrs.read_cntr("no_such_counter").is_err());
}

#[test]
fn event_queue_wait_object_blocks_until_the_interrupt() {
    let c = cluster(EngineKind::Threaded);
    let mut a = Ep::new(&c, 0, 1 << 16);
    let mut b = Ep::new(&c, 1, 1 << 16);
    let mr = b.portal(20, PtAllocOpts::empty());
    b.append(&mr, PtlList::Priority, 0, 4096, LeFlags::OP_PUT, 0, 1, 0);
    // A second EQ with an event wait object for the initiator events.
    let w = a.lni.alloc_wait_obj().unwrap();
    let qbuf = a.dev.alloc_buffer(4096).unwrap();
    let qmd = a
        .lni
        .map_buffer(&qbuf, MapFlags::READ | MapFlags::WRITE)
        .unwrap();
    let mut eq = a
        .lni
        .alloc_evtq(&qbuf, Some(&qmd), &EqOptions::default(), Some(&w), None)
        .unwrap();
    assert!(matches!(
        eq.wait(Some(Duration::from_millis(20))),
        Err(CxiError::Timeout)
    ));
    let (dfa, index_ext) = b.dfa(20);
    let cstate = CState {
        initiator: a.match_id(),
        index_ext,
        eq: eq.eqn() as u16,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        ..CState::default()
    };
    a.txq
        .emit_idc_put(
            &cstate,
            &IdcPut {
                dfa,
                remote_offset: 8,
                payload: Payload::new(&[1, 2, 3]).unwrap(),
            },
        )
        .unwrap();
    a.txq.ring().unwrap();
    let ev = eq.wait(TIMEOUT).unwrap();
    assert_eq!(ev.event_type(), EventType::Ack);
    eq.ack().unwrap();
    assert!(
        w.interrupts() >= 1,
        "the event raised the wait object's interrupt"
    );
    let mut got = [0u8; 3];
    b.buf.read(8, &mut got).unwrap();
    assert_eq!(got, [1, 2, 3]);
}

#[test]
fn counter_blocking_wait_uses_a_triggered_event() {
    let c = cluster(EngineKind::Threaded);
    let a = Ep::new(&c, 0, 4096);
    let wb = a.dev.alloc_buffer(4096).unwrap();
    let ct = a.lni.alloc_ct(&wb, 0).unwrap();
    let tcp = a
        .lni
        .alloc_trig_cp(
            VNI,
            TrafficClass::BestEffort,
            TcType::Default,
            TrigCp::TrigLcid,
        )
        .unwrap();
    let mut tq = a
        .lni
        .alloc_cmdq(None, &CqOptions::trigger(64, &tcp))
        .unwrap();
    let w = a.lni.alloc_wait_obj().unwrap();
    let qbuf = a.dev.alloc_buffer(4096).unwrap();
    let qmd = a
        .lni
        .map_buffer(&qbuf, MapFlags::READ | MapFlags::WRITE)
        .unwrap();
    let mut eq = a
        .lni
        .alloc_evtq(&qbuf, Some(&qmd), &EqOptions::default(), Some(&w), None)
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            ct.inc_success(2).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            ct.inc_success(2).unwrap();
        });
        let got = ct.wait_blocking(4, &mut tq, &mut eq, TIMEOUT).unwrap();
        assert_eq!(got.ct_success, 4);
    });
    assert!(w.interrupts() >= 1, "woken by the TRIGGERED_OP interrupt");
}

#[test]
fn dropped_events_are_reported_and_acknowledged() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 1 << 16);
    let mut b = Ep::new(&c, 1, 1 << 16);
    let mr = b.portal(21, PtAllocOpts::empty());
    b.append(&mr, PtlList::Priority, 0, 4096, LeFlags::OP_PUT, 0, 1, 0);
    // A one-page EQ: 63 slots of 64 B; 16 B ACKs, never acknowledged.
    let qbuf = a.dev.alloc_buffer(4096).unwrap();
    let qmd = a
        .lni
        .map_buffer(&qbuf, MapFlags::READ | MapFlags::WRITE)
        .unwrap();
    let mut eq = a
        .lni
        .alloc_evtq(&qbuf, Some(&qmd), &EqOptions::default(), None, None)
        .unwrap();
    let (dfa, index_ext) = b.dfa(21);
    let cstate = CState {
        initiator: a.match_id(),
        index_ext,
        eq: eq.eqn() as u16,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        ..CState::default()
    };
    let put = IdcPut {
        dfa,
        remote_offset: 0,
        payload: Payload::new(&[9u8; 8]).unwrap(),
    };
    for _ in 0..300 {
        loop {
            match a.txq.emit_idc_put(&cstate, &put) {
                Ok(()) => break,
                Err(CxiError::Again) => {
                    a.txq.ring().unwrap();
                    a.dev.progress();
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    a.txq.ring().unwrap();
    a.txq.wait_empty(TIMEOUT).unwrap();
    while a.dev.progress() {}
    assert!(eq.drops().unwrap(), "a full EQ drops events");
    let mut n = 0;
    while let Some(ev) = eq.get_event().unwrap() {
        assert_eq!(ev.event_type(), EventType::Ack);
        n += 1;
    }
    assert!(n > 0 && n < 300, "{n} events kept");
    eq.ack().unwrap();
    assert!(eq.ack_drops().unwrap());
    assert!(!eq.drops().unwrap());
    // New events flow again.
    a.txq.emit_idc_put(&cstate, &put).unwrap();
    a.txq.ring().unwrap();
    assert_eq!(eq.poll(TIMEOUT).unwrap().event_type(), EventType::Ack);
}

#[test]
fn ptlte_states_and_status() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 4096);
    let pte = a
        .lni
        .alloc_pte(Some(&a.eq), PtAllocOpts::IS_MATCHING)
        .unwrap();
    let st = pte.status().unwrap();
    assert_eq!((st.state, st.drop_count), (PtlteState::Disabled, 0));
    assert!(matches!(
        pte.transition_sm(5),
        Err(CxiError::Driver(driver::cassini::Errno::Eagain))
    ));
    pte.transition_sm(0).unwrap();
    assert_eq!(pte.status().unwrap().state, PtlteState::SoftwareManaged);
    assert!(pte.transition_sm(0).is_err(), "only from DISABLED");
    let p = a.portal(4, PtAllocOpts::empty());
    p.pte.le_invalidate(1, PtlList::Priority).unwrap();
    assert_eq!(
        p.pte.status_with_ules(4).unwrap().ule_offsets,
        Vec::<u64>::new()
    );
}

#[test]
fn a_bad_command_fails_the_queue_with_an_event() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 4096);
    // A target command on a transmit queue is refused by the library...
    let cmd = firmware_spec::cassini::cmd::TargetCmd::default();
    assert!(matches!(a.txq.emit_target(&cmd), Err(CxiError::Invalid(_))));
    // ...but a CQ_LCID emitted as a plain 64 B command after a NOOP reaches the device
    // misaligned (it must be 128 B aligned), and fails the queue.
    a.txq.emit_cq_cmd(CqOp::CqNoop).unwrap();
    a.txq
        .emit(&Command::Cq(CqCmd {
            opcode: CqOp::CqLcid,
            lcid: a.cp.lcid() as u8,
        }))
        .unwrap();
    a.txq.ring().unwrap();
    match a.txq.wait_empty(TIMEOUT) {
        Err(CxiError::Device(rc)) => assert_eq!(rc, ReturnCode::CmdAlignError),
        other => panic!("{other:?}"),
    }
    match a.next_event() {
        Event::CommandFailure(f) => {
            assert_eq!(f.return_code, ReturnCode::CmdAlignError);
            assert_eq!(u32::from(f.cq_id), a.txq.cqn());
            assert_eq!(f.fail_loc, 5, "the LCID command's slot");
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn alloc_md_filled_by_update_and_c_state_emitted_once() {
    let c = cluster(DET);
    let mut a = Ep::new(&c, 0, 4096);
    let mut b = Ep::new(&c, 1, 4096);
    // An IOVA range reserved with ALLOC_MD, filled later with cxil_update_md.
    let late = b.dev.alloc_buffer(8192).unwrap();
    let md = b
        .lni
        .map(
            late.va(),
            late.len(),
            MapFlags::ALLOC_MD | MapFlags::READ | MapFlags::WRITE,
        )
        .unwrap();
    assert!(md.contains(late.va(), late.len()));
    assert_eq!(md.va_to_iova(late.va() + 100).unwrap(), md.iova() + 100);
    assert_eq!(md.iova_to_va(md.iova() + 4096).unwrap(), late.va() + 4096);
    assert!(md.va_to_iova(late.va() + late.len()).is_err());
    md.update(late.va(), late.len(), MapFlags::READ | MapFlags::WRITE)
        .unwrap();
    let mr = b.portal(22, PtAllocOpts::empty());
    let mut le = firmware_spec::cassini::cmd::TargetCmd {
        opcode: firmware_spec::cassini::cmd::TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: mr.pte.index(),
        buffer_id: 5,
        lac: md.lac(),
        start: md.iova(),
        length: late.len(),
        match_id: firmware_spec::cassini::dfa::CXI_MATCH_ID_ANY,
        ..Default::default()
    };
    le.set_opts(LeFlags::OP_PUT);
    b.tgq.emit_target(&le).unwrap();
    b.tgq.ring().unwrap();
    assert_eq!(b.event_of(EventType::Link).return_code(), ReturnCode::Ok);

    let (dfa, index_ext) = b.dfa(22);
    let cstate = CState {
        initiator: a.match_id(),
        index_ext,
        eq: a.eq.eqn() as u16,
        flags: DmaFlags {
            event_send_disable: true,
            ..DmaFlags::default()
        },
        ..CState::default()
    };
    let put = |off: u64, v: u8| IdcPut {
        dfa,
        remote_offset: off,
        payload: Payload::new(&[v; 8]).unwrap(),
    };
    let w0 = a.txq.ring_state().wp32();
    a.txq.emit_idc_put(&cstate, &put(4096, 0xa1)).unwrap();
    // C_STATE (32 B) + the put (32 B).
    assert_eq!(a.txq.ring_state().wp32(), w0 + 2);
    a.txq.emit_idc_put(&cstate, &put(4104, 0xa2)).unwrap();
    // Same C_STATE: only the put.
    assert_eq!(a.txq.ring_state().wp32(), w0 + 3);
    a.txq.ring().unwrap();
    for _ in 0..2 {
        assert_eq!(a.event_of(EventType::Ack).return_code(), ReturnCode::Ok);
    }
    assert_eq!(late.read_u64(4096).unwrap(), u64::from_le_bytes([0xa1; 8]));
    assert_eq!(late.read_u64(4104).unwrap(), u64::from_le_bytes([0xa2; 8]));
}
