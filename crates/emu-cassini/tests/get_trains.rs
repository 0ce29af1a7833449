//! Get replies as trains (emu_core::fabric::Train): on the threaded engine, the REPLY frames
//! a target sends back to an initiator of the same process go as one packet per window's
//! room, standing for the frames that follow it; the initiator copies their payload straight
//! from the target's host memory. The Get must land every byte at any size and offset, post
//! the same REPLY and target events and counting events, count its frames as the
//! frame-by-frame path counts them (the deterministic engine), fail as frame by frame when
//! the landing range goes bad under it, and go frame by frame when a fault profile or a
//! capture hook needs the bytes. The target's GET event (for a rendezvous source: "the send
//! is complete") must not come before the bytes were read.

mod common;
use common::*;
use emu_core::engine::threaded::ThreadedConfig;
use emu_core::fabric::{CaptureBuffer, FaultConfig};
use emu_core::nic_faults::NicFaults;
use emu_core::time::SimDuration;
use firmware_spec::cassini::tgt::TargetCmd;

const FRAME: usize = 2048;
const MIB: usize = 1 << 20;
/// Counting events of the initiator (REPLY) and of the target's list entry (GET).
const CT_INIT: u16 = 3;
const CT_TGT: u16 = 4;

/// Counters (node, view, name) that a Get's own frames move on its initiator or its target.
const GET_COUNTERS: &[(usize, &str, &str)] = &[
    (INIT, "c1_oxe_cntrs", "ptl_tx_get_msgs_tsc"),
    (TGT, "c_pct_cntrs", "ptls_response"),
    (INIT, "c_pct_cntrs", "responses_received"),
    (INIT, "c_ixe_cntrs", "rx_ptl_response_pkt"),
    (INIT, "c_atu_cntrs", "cache_hit_base_page_size"),
    (INIT, "c_atu_cntrs", "cache_miss"),
    (TGT, "c_atu_cntrs", "cache_hit_base_page_size"),
    (TGT, "c_atu_cntrs", "cache_miss"),
];

/// A Get of `len` bytes at offset `remote` of the target's list entry into offset `local`
/// of the initiator's landing buffer.
#[derive(Debug, Clone, Copy)]
struct Case {
    len: usize,
    remote: usize,
    local: usize,
}

/// What a Get left behind.
#[derive(Debug, PartialEq, Eq)]
struct Got {
    /// (type, rc, mlength, user_ptr) of the REPLY event.
    reply: (EventType, ReturnCode, u32, u64),
    /// (type, rc, length) of the target's GET event (a short event: the length saturates
    /// at 20 bits).
    get: (EventType, ReturnCode, u64),
    /// (success, failure) of the initiator's and of the target's counting event.
    ct_init: (u64, u64),
    ct_tgt: (u64, u64),
    /// The differences of [`GET_COUNTERS`].
    counters: Vec<u64>,
    /// The initiator's whole landing buffer afterwards (guard bytes included).
    landed: Vec<u8>,
}

/// Everything a Get needs, set up on `p`.
struct Setup {
    src: Md,
    landing: Md,
    ct_init: Ct,
    ct_tgt: Ct,
}

/// The target's list entry (non-matching PtlTE, OP_GET, counting bytes on `CT_TGT`) over a
/// buffer of `remote + len` pattern bytes; the initiator's landing buffer of
/// `local + len + 4096` bytes filled with 0xEE; both counting events with write-backs.
fn setup(p: &mut Pair, c: Case) -> Setup {
    let src = p.c.nodes[TGT]
        .map((c.remote + c.len) as u64, true, true)
        .unwrap();
    p.tgt()
        .write_host(src.host, &pattern(c.remote + c.len, 0x47))
        .unwrap();
    let landing = p.c.nodes[INIT]
        .map((c.local + c.len + 4096) as u64, true, true)
        .unwrap();
    p.init()
        .write_host(landing.host, &vec![0xEE; landing.len as usize])
        .unwrap();
    let wb_init = p.c.nodes[INIT].map(64, true, true).unwrap();
    let ct_init = p.init().alloc_ct(CT_INIT, Some(&wb_init)).unwrap();
    let wb_tgt = p.c.nodes[TGT].map(64, true, true).unwrap();
    let ct_tgt = p.tgt().alloc_ct(CT_TGT, Some(&wb_tgt)).unwrap();
    let mut le = TargetCmd {
        opcode: TgtOp::Append,
        ptl_list: PtlList::Priority,
        ptlte_index: PT_NOMATCH,
        buffer_id: 8,
        start: src.iova,
        length: src.len,
        match_id: u32::MAX,
        ct: CT_TGT,
        ..TargetCmd::default()
    };
    le.set_opts(LeFlags::OP_GET | LeFlags::EVENT_CT_COMM | LeFlags::EVENT_CT_BYTES);
    p.target_cmd(&le.encode());
    assert_eq!(tgt_fields(&p.wait_tgt()).0, EventType::Link);
    Setup {
        src,
        landing,
        ct_init,
        ct_tgt,
    }
}

/// The Get command of case `c` (counting the reply's bytes on `CT_INIT`).
fn get_cmd(p: &Pair, s: &Setup, c: Case) -> [u8; 64] {
    let (dfa, ext) = p.dfa(1);
    FullDma {
        opcode: DmaOp::Get,
        index_ext: ext,
        lac: 0,
        dfa,
        remote_offset: c.remote as u64,
        local_addr: s.landing.iova + c.local as u64,
        request_len: c.len as u32,
        eq: EQ_TX,
        ct: CT_INIT,
        user_ptr: 0x6e7,
        initiator: p.initiator(),
        flags: DmaFlags {
            event_ct_reply: true,
            event_ct_bytes: true,
            ..DmaFlags::default()
        },
        ..FullDma::default()
    }
    .encode()
}

fn read_counters(p: &Pair) -> Vec<u64> {
    GET_COUNTERS
        .iter()
        .map(|&(node, view, name)| p.c.nodes[node].counter(view, name).unwrap())
        .collect()
}

/// Run the Get of case `c` on `p`, calling `between` after the doorbell (before anything is
/// delivered on an engine that moves only when asked). Returns what it left and the packets
/// handed to the NICs.
fn run(p: &mut Pair, c: Case, between: impl FnOnce(&Pair, &Setup)) -> (Got, u64) {
    run_on(p, c, between, true)
}

/// [`run`]; `settle`: wait for the engine to go idle (not on an engine without threads,
/// which moves only in the waits and is never idle with timers armed).
fn run_on(p: &mut Pair, c: Case, between: impl FnOnce(&Pair, &Setup), settle: bool) -> (Got, u64) {
    let s = setup(p, c);
    let before = read_counters(p);
    let fabric_before = p.c.engine.fabric_counters();
    let packets = p.c.engine.counters().packets;
    p.tx(&[&get_cmd(p, &s, c)]);
    between(p, &s);
    if settle {
        p.c.settle();
    }
    let r = init_fields(&p.wait_tx());
    let g = tgt_fields(&p.wait_tgt());
    if settle {
        p.c.settle();
    }
    let packets = p.c.engine.counters().packets - packets;
    let fabric = p.c.engine.fabric_counters();
    assert_eq!(
        fabric.delivered - fabric_before.delivered,
        fabric.injected - fabric_before.injected,
        "every frame injected was delivered"
    );
    let ct = |ct: &Ct, node: usize| {
        let w = ct.writeback(&p.c.nodes[node]).unwrap();
        (w.ct_success, u64::from(w.ct_failure))
    };
    let got = Got {
        reply: (r.0, r.1, r.2, r.3),
        get: (g.0, g.1, g.3),
        ct_init: ct(&s.ct_init, INIT),
        ct_tgt: ct(&s.ct_tgt, TGT),
        counters: read_counters(p)
            .into_iter()
            .zip(before)
            .map(|(a, b)| a - b)
            .collect(),
        landed: p
            .init()
            .read_host(s.landing.host, s.landing.len as usize)
            .unwrap(),
    };
    let _ = s.src;
    (got, packets)
}

/// The landing buffer of a Get of case `c` that succeeded.
fn expected(c: Case) -> Vec<u8> {
    let mut v = vec![0xEE; c.local + c.len + 4096];
    v[c.local..c.local + c.len].copy_from_slice(&pattern(c.remote + c.len, 0x47)[c.remote..]);
    v
}

/// A threaded pair whose engine moves only when the test makes progress (no engine thread,
/// no inline deliveries).
fn stepped() -> Pair {
    let cfg = ThreadedConfig {
        workers: 0,
        inline_budget: 0,
        ..ThreadedConfig::default()
    };
    Pair::with_tgt_eq(Cluster::threaded_with(2, cfg).unwrap(), EqOpts::default())
}

/// Sizes and offsets: two frames (the second of one byte), unaligned on both sides, a
/// window and a bit, and several windows (8 MiB: four windows of the PCT).
const CASES: &[Case] = &[
    Case {
        len: FRAME + 1,
        remote: 0,
        local: 0,
    },
    Case {
        len: 6 * FRAME + 5,
        remote: 3,
        local: 1001,
    },
    Case {
        len: 2 * MIB + 17,
        remote: 4095,
        local: 7,
    },
    Case {
        len: 8 * MIB + 3,
        remote: FRAME,
        local: 4096 + 9,
    },
];

#[test]
fn get_replies_go_as_trains_land_every_byte_and_count_as_their_frames() {
    for &c in CASES {
        let frames = c.len.div_ceil(FRAME) as u64;
        let (by_frame, det_packets) = run(&mut Pair::deterministic(), c, |_, _| {});
        assert!(
            det_packets > frames,
            "{c:?}: {det_packets} packets on the deterministic engine"
        );
        let (train, packets) = run(&mut Pair::threaded(), c, |_, _| {});
        // The request, one train per window's room with its acknowledgement, the
        // acknowledgement of the request's own; far below the frames.
        let windows = frames.div_ceil(1024);
        assert!(
            packets <= 8 + 4 * windows,
            "{c:?}: {packets} packets handed to the NICs for {frames} frames: not trains"
        );
        let len = c.len as u32;
        assert_eq!(
            train.reply,
            (EventType::Reply, ReturnCode::Ok, len, 0x6e7),
            "{c:?}"
        );
        let short = u64::from(len).min(0xF_FFFF);
        assert_eq!(train.get, (EventType::Get, ReturnCode::Ok, short));
        assert_eq!(train.ct_init, (u64::from(len), 0), "{c:?}: REPLY counting");
        assert_eq!(train.ct_tgt, (u64::from(len), 0), "{c:?}: GET counting");
        assert!(train.landed == expected(c), "{c:?}: bytes landed wrong");
        // The Get's frames counted as frame by frame.
        assert_eq!(train.counters[1], frames, "{c:?}: ptls_response");
        assert_eq!(train.counters[3], frames, "{c:?}: rx_ptl_response_pkt");
        assert_eq!(train, by_frame, "{c:?}: trains and frames differ");
    }
}

#[test]
fn with_a_fault_profile_or_a_capture_hook_replies_go_frame_by_frame() {
    let c = Case {
        len: 4 * MIB,
        remote: 0,
        local: 0,
    };
    let frames = (c.len / FRAME) as u64;
    let (by_frame, _) = run(&mut Pair::deterministic(), c, |_, _| {});

    // A NIC fault profile (a site a Cassini never draws: nothing else changes).
    let mut p = Pair::threaded();
    p.c.engine.set_nic_faults(NicFaults {
        smsg_starve: 1.0,
        smsg_starve_time: SimDuration::from_us(1),
        ..NicFaults::none()
    });
    let (got, packets) = run(&mut p, c, |_, _| {});
    assert!(
        packets > frames,
        "{packets} packets with a NIC fault profile"
    );
    assert_eq!(got, by_frame);

    // A fabric fault site (reordering, whose delays the immediate fabric ignores).
    let mut p = Pair::threaded();
    p.c.engine.set_faults(FaultConfig {
        reorder: 0.5,
        reorder_max_delay: SimDuration::from_ns(1),
        ..FaultConfig::none()
    });
    let (got, packets) = run(&mut p, c, |_, _| {});
    assert!(
        packets > frames,
        "{packets} packets with a fabric fault site"
    );
    assert_eq!(got, by_frame);

    // A capture hook sees every frame with its bytes.
    let mut p = Pair::threaded();
    let buf = CaptureBuffer::new();
    let t = p.c.threaded_engine().unwrap().clone();
    t.with_fabric(|f| f.set_capture(Some(buf.clone())));
    let (got, packets) = run(&mut p, c, |_, _| {});
    assert!(packets > frames, "{packets} packets under capture");
    let seen = buf.take();
    assert!(seen.iter().all(|(_, pkt)| pkt.train.is_none()));
    assert!(seen.len() as u64 > frames);
    assert_eq!(got, by_frame);
}

/// The target's GET event says its buffer has been read (for the MPI layer's rendezvous
/// source: the send is complete, the buffer may be reused). With trains the initiator reads
/// it when the train lands: the event must wait for that. Stepping an engine that moves only
/// when asked, the target's GET event and counting event are never seen before every byte
/// has landed.
#[test]
fn the_target_s_get_event_follows_the_copy() {
    let c = Case {
        len: 4 * MIB + 1,
        remote: 1,
        local: 2,
    };
    let mut p = stepped();
    let s = setup(&mut p, c);
    let packets = p.c.engine.counters().packets;
    p.tx(&[&get_cmd(&p, &s, c)]);
    let want = expected(c);
    let mut steps = 0u32;
    let ev = loop {
        if let Some(ev) = p.poll_tgt() {
            break ev;
        }
        let w = s.ct_tgt.writeback(p.tgt()).unwrap();
        assert_eq!(w.ct_success, 0, "the GET counted before its event");
        p.c.progress();
        steps += 1;
        assert!(steps < 1_000_000, "no GET event");
    };
    let landed = p
        .init()
        .read_host(s.landing.host, s.landing.len as usize)
        .unwrap();
    assert!(landed == want, "GET event before every byte was read");
    assert_eq!(
        (tgt_fields(&ev).0, tgt_fields(&ev).1),
        (EventType::Get, ReturnCode::Ok)
    );
    let r = init_fields(&p.wait_tx());
    assert_eq!(
        (r.0, r.1, r.2),
        (EventType::Reply, ReturnCode::Ok, c.len as u32)
    );
    assert!(
        p.c.engine.counters().packets - packets < 32,
        "the reply did not go as trains"
    );
}

/// The initiator's landing range goes bad after the Get was launched (a page unmapped, or
/// made read-only, under the transfer): the frames before the first one that touches it
/// land, that frame's ATU error is the REPLY's, nothing lands after it, the target's GET
/// succeeds; the same as frame by frame, counters included.
#[test]
fn a_landing_that_fails_fails_as_frame_by_frame() {
    let c = Case {
        len: 3 * MIB,
        remote: 0,
        local: 0,
    };
    // The page at 1 MiB + 8 KiB of the landing buffer: frames 516 and 517.
    let bad = MIB + 8192;
    for (present, rc) in [
        (false, ReturnCode::NoTranslation),
        (true, ReturnCode::PagePermError),
    ] {
        let spoil = |p: &Pair, s: &Setup| {
            p.init()
                .protect(&s.landing, bad as u64, 1, present, true, false)
                .unwrap();
        };
        let (by_frame, _) = run(&mut Pair::deterministic(), c, spoil);
        let (train, packets) = run_on(&mut stepped(), c, spoil, false);
        assert!(
            packets < 32,
            "{packets} packets: the reply did not go as trains"
        );
        assert_eq!(train.reply, (EventType::Reply, rc, c.len as u32, 0x6e7));
        assert_eq!((train.get.0, train.get.1), (EventType::Get, ReturnCode::Ok));
        assert_eq!(train.ct_init, (0, 1), "a failed REPLY counts a failure");
        let mut want = vec![0xEE; c.len + 4096];
        want[..bad].copy_from_slice(&pattern(c.len, 0x47)[..bad]);
        assert!(train.landed == want, "{rc:?}: wrong bytes landed");
        assert_eq!(train, by_frame, "{rc:?}: trains and frames differ");
    }
}

/// A reply stream reads its frames as the window lets them out (the hardware streams a reply
/// from host memory; it does not stage it). The target's source page at 3 MiB is unmapped
/// once the first train (2 MiB) has left: the second train stops before the frame that does
/// not translate, that frame ends the reply with NO_TRANSLATION, the bytes before it have
/// landed and none after, and the target's GET event and counting event report the failure.
#[test]
fn a_reply_whose_source_goes_bad_ends_with_the_error() {
    let c = Case {
        len: 4 * MIB,
        remote: 0,
        local: 0,
    };
    let bad = 3 * MIB;
    let mut p = stepped();
    let s = setup(&mut p, c);
    let sent = p.tgt().counter("c_pct_cntrs", "ptls_response").unwrap();
    p.tx(&[&get_cmd(&p, &s, c)]);
    let mut steps = 0u32;
    while p.tgt().counter("c_pct_cntrs", "ptls_response").unwrap() - sent < 1024 {
        p.c.progress();
        steps += 1;
        assert!(steps < 1_000_000, "the first train never left");
    }
    p.tgt()
        .protect(&s.src, bad as u64, 1, false, false, false)
        .unwrap();
    let r = init_fields(&p.wait_tx());
    assert_eq!(
        (r.0, r.1, r.2, r.3),
        (EventType::Reply, ReturnCode::NoTranslation, 0, 0x6e7)
    );
    let g = tgt_fields(&p.wait_tgt());
    assert_eq!((g.0, g.1), (EventType::Get, ReturnCode::NoTranslation));
    let landed = p
        .init()
        .read_host(s.landing.host, s.landing.len as usize)
        .unwrap();
    let mut want = vec![0xEE; c.len + 4096];
    want[..bad].copy_from_slice(&pattern(c.len, 0x47)[..bad]);
    assert!(landed == want, "wrong bytes landed");
    let ct = |ct: &Ct, node: usize| {
        let w = ct.writeback(&p.c.nodes[node]).unwrap();
        (w.ct_success, u64::from(w.ct_failure))
    };
    assert_eq!(ct(&s.ct_init, INIT), (0, 1));
    assert_eq!(ct(&s.ct_tgt, TGT), (0, 1));
    // The first train, the second up to the bad frame, and the frame carrying the error.
    let frames = (bad / FRAME) as u64 + 1;
    let now = p.tgt().counter("c_pct_cntrs", "ptls_response").unwrap();
    assert_eq!(now - sent, frames, "REPLY frames sent");
}
